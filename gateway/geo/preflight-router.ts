/**
 * Preflight on the request path: the router the listeners ask, around the routing core's. For a
 * project whose `location_preflight` is `report`, `retry` or `reject`, each upstream the core
 * chooses is checked (preflight-check.ts) after the choice and before anything is relayed; a
 * project with preflight `off` goes straight to the core, at no cost.
 *
 * What a mismatch does, by mode:
 * - `report`: logged at debug (mismatches are routine where vendors drift) and counted; the
 *   request goes through the proxy anyway;
 * - `retry`: the proxy is let go and the core chooses again without the proxies that failed, up
 *   to 3 attempts in all, then 502; a request with a `-sessid-` is never moved off its proxy,
 *   and gets the 502 at once;
 * - `reject`: 502 on the first mismatch.
 * The 502 is `Exit location mismatch: requested GB, observed US (exit 203.0.113.7)`, the failure
 * kind `preflight_mismatch`. Under `retry` and `reject` a vendor session slot whose exit
 * contradicts its own claim is retired on this isolate for 30 s (retired-slots.ts), until the
 * worker's delete of it reaches the feed. A check that fails for want of an answer lets the
 * request go on: preflight never blocks traffic it could not judge.
 */
import type { FeedProject } from "../../shared/feed/models.ts";
import type { IpAddress } from "../../shared/net/ip.ts";
import {
  type Allocation,
  type AuthResult,
  type Client,
  FailurePhase,
  isRefusal,
  type MaybePromise,
  type Refusal,
  RejectionReason,
  type Router,
  type Target,
} from "../../shared/routing/contract.ts";
import type { CoreRouter } from "../../shared/routing/router.ts";
import type { Logger } from "../base/log.ts";
import type { PreflightChecker, Verdict } from "./preflight-check.ts";
import type { PreflightCounters } from "./preflight-counters.ts";
import type { RetiredSlots } from "./retired-slots.ts";

/** Proxies a `retry` request is tried on at most (the reference's preflight_max_attempts). */
export const PREFLIGHT_MAX_ATTEMPTS = 3;

export const PreflightMode = {
  off: "off",
  report: "report",
  retry: "retry",
  reject: "reject",
} as const;
export type PreflightMode = (typeof PreflightMode)[keyof typeof PreflightMode];

type Mismatch = Extract<Verdict, { result: "mismatch" }>;

/** The answer to a request whose exit is elsewhere than it requires. */
export function mismatchRefusal(mismatch: Mismatch): Refusal {
  return {
    status: 502,
    proxyStatus: "destination_unavailable",
    reason: `Exit location mismatch: requested ${mismatch.requirement}, observed ` +
      `${mismatch.observed} (exit ${mismatch.ip ?? "unknown"})`,
    rejection: RejectionReason.preflightMismatch,
  };
}

/** A location mismatch says nothing of the proxy's health: its release records no outcome. */
const NOT_THE_PROXYS_FAULT = { ok: false, phase: FailurePhase.client } as const;

export interface PreflightRouterOptions {
  core: Pick<CoreRouter, "ready" | "authenticate" | "acquire" | "project" | "snapshot">;
  checker: PreflightChecker;
  retired: RetiredSlots;
  counters: PreflightCounters;
  /** OCTOPROX_CONNECT_TIMEOUT: an echo's deadline, or the project's shorter one. */
  connectTimeoutMs: number;
  logger: Pick<Logger, "debug">;
}

function modeOf(project: FeedProject | undefined): PreflightMode {
  const mode = project?.location_preflight;
  return mode === "report" || mode === "retry" || mode === "reject" ? mode : PreflightMode.off;
}

export class PreflightRouter implements Router {
  readonly #o: PreflightRouterOptions;

  constructor(options: PreflightRouterOptions) {
    this.#o = options;
  }

  get ready(): boolean {
    return this.#o.core.ready;
  }

  authenticate(proxyAuthorization: string | null, clientIp?: IpAddress): MaybePromise<AuthResult> {
    return this.#o.core.authenticate(proxyAuthorization, clientIp);
  }

  acquire(
    client: Client,
    target: Target,
    exclude: ReadonlySet<string>,
  ): MaybePromise<Allocation | Refusal> {
    const project = this.#o.core.project(client.projectId)?.project;
    const mode = modeOf(project);
    if (mode === PreflightMode.off) return this.#o.core.acquire(client, target, exclude);
    return this.#checked(client, target, exclude, project!, mode);
  }

  async #checked(
    client: Client,
    target: Target,
    exclude: ReadonlySet<string>,
    project: FeedProject,
    mode: PreflightMode,
  ): Promise<Allocation | Refusal> {
    const { core, checker, retired, counters } = this.#o;
    // A session's client expects its exit to stay: it is never moved to another proxy.
    const attempts = mode === PreflightMode.retry && client.options.sessionId === undefined
      ? PREFLIGHT_MAX_ATTEMPTS
      : 1;
    const timeoutMs = Math.min(this.#o.connectTimeoutMs, client.connectTimeoutMs ?? Infinity);
    let tried: Set<string> | undefined;
    let last: Mismatch | undefined;
    for (let attempt = 0; attempt < attempts; attempt++) {
      let acquired = core.acquire(client, target, retired.excluding(project.id, tried ?? exclude));
      if (acquired instanceof Promise) acquired = await acquired;
      if (isRefusal(acquired)) return last === undefined ? acquired : mismatchRefusal(last);
      const snapshot = core.snapshot;
      // A per-domain rule's direct attempt has no exit of ours to check: the gateway is it.
      if (snapshot === undefined || acquired.upstream.direct === true) return acquired;
      let verdict: Verdict;
      try {
        const checked = checker.check({
          snapshot,
          project,
          options: client.options,
          upstream: acquired.upstream,
          timeoutMs,
        });
        verdict = checked instanceof Promise ? await checked : checked;
      } catch {
        // A fault of the check itself: the request goes on, as for any check without an answer.
        return acquired;
      }
      if (verdict.result !== "mismatch") return acquired;
      const proxyId = acquired.upstream.proxyId;
      this.#o.logger.debug("Preflight: exit location mismatch", {
        project: project.id,
        proxy: proxyId,
        requested: verdict.requirement,
        observed: verdict.observed,
        exit: verdict.ip,
        mode,
      });
      if (mode === PreflightMode.report) return acquired;
      if (verdict.rotates) {
        retired.retire(project.id, proxyId);
        counters.retired++;
      }
      acquired.release(NOT_THE_PROXYS_FAULT);
      last = verdict;
      (tried ??= new Set(exclude)).add(proxyId);
    }
    return mismatchRefusal(last!);
  }
}
