/**
 * The one retry loop of the request path, for forwarded requests, CONNECT and SOCKS5 tunnels:
 * acquire an upstream (never one this request tried), run one attempt through it, and after a
 * failed attempt that leaves the request answerable and unspent, go on to another proxy, at
 * most `attempts` distinct ones in all (gateway/net/session/limits.ts `attemptsFor`; seed 001
 * section 7.2). The attempt itself is the caller's: a forwarded exchange (http/exchange.ts) or
 * a tunnel's dial (tunnel/tunnel.ts); it releases its allocation when it fails, and says what
 * may follow.
 *
 * Each attempt that failed before a transfer began is told to metering's `attemptFailed` once
 * the request ended, with what the client was finally answered: the status it got from the
 * upstream, the gateway's own answer of the last failure, or nothing when it had gone. A
 * request served by its first attempt builds nothing for any of this.
 */
import {
  type Allocation,
  type Client,
  FailurePhase,
  isRefusal,
  type MaybePromise,
  NOTHING_TRIED,
  type Refusal,
  type Target,
} from "../../../shared/routing/contract.ts";
import type { TunnelSession } from "./contract.ts";
import type { Finding } from "../../../shared/blocking/judge.ts";
import type { Failure } from "./failures.ts";
import {
  type FailedAttempt,
  type FailureNote,
  safely,
  type TransferHooks,
} from "../../base/transfer-hooks.ts";

/** What follows a failed attempt. */
export const AfterFailure = {
  /** Another proxy may take the request (if any is left; else as `answer`). */
  retry: "retry",
  /** No other attempt: the client gets the failure's answer. */
  answer: "answer",
  /** The request is over: the client had its answer (or went away); nothing more to send. */
  end: "end",
} as const;
export type AfterFailure = (typeof AfterFailure)[keyof typeof AfterFailure];

/** An attempt that served the request: the value is the caller's (keep-alive, a tunnel). */
export interface AttemptServed<T> {
  kind: "served";
  value: T;
  /** The status the client got: the failed attempts before are told it. */
  status: number;
}

export interface AttemptFailed {
  kind: "failed";
  failure: Failure;
  error: unknown;
  /** The failure as the failure log keeps it (its answer filled in once the request ends). */
  note: FailureNote;
  /** The transfer began (the upstream answered): its own meter told of the failure. */
  began: boolean;
  /** The upstream's status the client got once the transfer began (else 0). */
  status: number;
  /** From the attempt's start to its failure. */
  elapsedMs: number;
  then: AfterFailure;
}

/**
 * An attempt whose answer a block rule judged `blocked` or `rate_limited`: the answer is held
 * (its head and first body bytes read, nothing sent to the client) until the retry loop either
 * delivers it (no other exit, or the retry budget spent) or drops it (another exit served).
 * Exactly one of the two is called, once.
 */
export interface AttemptJudged<T> {
  kind: "judged";
  finding: Finding;
  /** The target's status. */
  status: number;
  /** Sends the held answer to the client, as a served attempt (or a failed one). */
  deliver(): Promise<AttemptOutcome<T>>;
  /** Closes the held answer's connection; its bytes are metered, nothing reaches the client. */
  drop(): void;
}

export type AttemptOutcome<T> = AttemptServed<T> | AttemptFailed | AttemptJudged<T>;

/** What every attempt plan carries: whom for, where to, how many proxies at most. */
export interface AttemptPlan {
  client: Client;
  /** Where the client asked to go: what routing, metering and the log see. */
  target: Target;
  /**
   * Where the upstream is asked to go: `target`, or the address the guard checked for it when
   * the gateway resolves destinations (OCTOPROX_DESTINATION_RESOLUTION=gateway).
   */
  dialTarget: Target;
  /** Distinct proxies the request may be tried on (1: no retry). */
  attempts: number;
  /** How the log names a failed attempt: `Forward`, `CONNECT`. */
  label: string;
  /**
   * The target's site when its project judges answers: the exits cooled down for it are passed
   * over (while another is left). Absent: none is.
   */
  site?: string;
  /** Retries after block verdicts: exits tried in all, and no attempt starts after the deadline. */
  verdictAttempts?: number;
  verdictDeadlineMs?: number;
  /** Which attempt is under way (1 the first), set by the loop before each. */
  turn?: number;
}

/** One attempt through the allocated upstream; releases the allocation whenever it fails. */
export type Attempt<S extends TunnelSession, P extends AttemptPlan, T> = (
  session: S,
  plan: P,
  allocation: Allocation,
) => Promise<AttemptOutcome<T>>;

/** How the request's attempts ended. */
export type Tried<T> =
  | AttemptServed<T>
  /** Every attempt failed and the client may be answered: the last failure is the answer. */
  | AttemptFailed
  /** The router refused the first acquire (a later refusal answers the last failure). */
  | { kind: "refused"; refusal: Refusal }
  /** Nothing more to answer (see AfterFailure.end). */
  | { kind: "ended" };

const ENDED: { kind: "ended" } = Object.freeze({ kind: "ended" });

/** The answer recorded for a request that ended with nothing more to tell its client. */
export const NOTHING_ANSWERED = Object.freeze({ status: 0, proxyStatus: "" });

/** Runs the plan's attempts until one serves the request or none may follow. */
export async function tryUpstreams<S extends TunnelSession, P extends AttemptPlan, T>(
  session: S,
  plan: P,
  attempt: Attempt<S, P, T>,
): Promise<Tried<T>> {
  const ctx = session.ctx;
  const attempts = plan.attempts;
  const verdictAttempts = plan.verdictAttempts ?? 1;
  const rounds = verdictAttempts > attempts ? verdictAttempts : attempts;
  // Built only for a second attempt: most requests are served by their first.
  let exclude: Set<string> | undefined;
  let last: AttemptFailed | undefined;
  // The attempts that failed before a transfer began (built on failure only).
  let failed: FailedAttempt[] | undefined;
  // A judged answer held while another exit is tried: delivered if none serves.
  let held: AttemptJudged<T> | undefined;
  try {
    for (let index = 0; index < rounds; index++) {
      let acquired = acquire(session, plan, exclude);
      if (acquired instanceof Promise) acquired = await acquired;
      if (isRefusal(acquired)) {
        if (last !== undefined || held !== undefined) break;
        return { kind: "refused", refusal: acquired };
      }
      if (index + 1 < rounds) (exclude ??= new Set()).add(acquired.upstream.proxyId);
      if (index > 0) ctx.metrics.retries++;
      plan.turn = index + 1;
      const outcome = await attempt(session, plan, acquired);
      if (outcome.kind === "judged") {
        held?.drop();
        held = outcome;
        // Read again: an attempt that cannot be sent again (its body not kept) lowers it.
        const more = index + 1 < (plan.verdictAttempts ?? 1) && !session.cancelled &&
          !session.client.closed &&
          (plan.verdictDeadlineMs === undefined || Date.now() < plan.verdictDeadlineMs);
        if (!more) break;
        ctx.metrics.verdictRetries++;
        continue;
      }
      if (outcome.kind === "served") {
        if (held !== undefined) {
          const dropped = held;
          held = undefined;
          dropped.drop();
        }
        if (failed !== undefined) {
          reportFailedAttempts(ctx.hooks, failed, { status: outcome.status, proxyStatus: "" });
        }
        return outcome;
      }
      last = outcome;
      const failure = outcome.failure;
      if (failure.phase !== FailurePhase.client) ctx.metrics.upstreamFailure(failure.phase);
      // The message, not the error: it is scrubbed of the proxy's credentials and URL queries.
      const fields = {
        kind: outcome.note.kind,
        phase: failure.phase,
        failure: outcome.note.message,
      };
      if (failure.internal) ctx.logger.error(`${plan.label} attempt failed`, fields);
      else ctx.logger.debug(`${plan.label} attempt failed`, fields);
      if (!outcome.began) {
        (failed ??= []).push({
          client: plan.client,
          target: plan.target,
          upstream: acquired.upstream,
          elapsedMs: outcome.elapsedMs,
          note: outcome.note,
        });
      }
      if (outcome.then === AfterFailure.end) {
        // A transfer that began told its own meter; the client got the upstream's answer.
        reportFailedAttempts(
          ctx.hooks,
          failed,
          outcome.began ? { status: outcome.status, proxyStatus: "" } : NOTHING_ANSWERED,
        );
        return ENDED;
      }
      if (outcome.then === AfterFailure.answer || index + 1 >= attempts) break;
    }
    if (held !== undefined) {
      // The last judged answer is the client's: no exit after it served.
      const delivering = held;
      held = undefined;
      reportFailedAttempts(ctx.hooks, failed, { status: delivering.status, proxyStatus: "" });
      const delivered = await delivering.deliver();
      // A delivery is never judged again.
      return delivered.kind === "judged" ? ENDED : delivered;
    }
    reportFailedAttempts(ctx.hooks, failed, last!.failure.answer);
    return last!;
  } finally {
    // A throw past the paths above: the held answer's connection still closes.
    held?.drop();
  }
}

/**
 * The router's choice for the next attempt: the exits cooled down for the target's site are
 * passed over too, unless that leaves none, when they are tried after all (a cooled exit is
 * better than no answer).
 */
function acquire(
  session: TunnelSession,
  plan: AttemptPlan,
  exclude: ReadonlySet<string> | undefined,
): MaybePromise<Allocation | Refusal> {
  const router = session.ctx.router;
  const cooled = plan.site === undefined ? undefined : session.ctx.cooldowns?.cooled(plan.site);
  if (cooled === undefined) {
    return router.acquire(plan.client, plan.target, exclude ?? NOTHING_TRIED);
  }
  const passOver = new Set(cooled);
  if (exclude !== undefined) { for (const id of exclude) passOver.add(id); }
  const first = router.acquire(plan.client, plan.target, passOver);
  const fallBack = (result: Allocation | Refusal) =>
    isRefusal(result) ? router.acquire(plan.client, plan.target, exclude ?? NOTHING_TRIED) : result;
  return first instanceof Promise ? first.then(fallBack) : fallBack(first);
}

/**
 * Tells the hooks of a request's failed attempts, once its final answer is known: each note
 * gets that answer. Nothing to do (and nothing allocated) for a request without any.
 */
function reportFailedAttempts(
  hooks: TransferHooks | undefined,
  attempts: readonly FailedAttempt[] | undefined,
  answered: { status: number; proxyStatus: string },
): void {
  if (attempts === undefined || hooks?.attemptFailed === undefined) return;
  for (const attempt of attempts) {
    attempt.note.clientStatus = answered.status;
    attempt.note.proxyStatus = answered.proxyStatus;
    safely(() => hooks.attemptFailed!(attempt));
  }
}
