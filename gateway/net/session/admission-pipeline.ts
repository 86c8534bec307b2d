/**
 * Runs the admission steps (admission.ts) over one request, in order, and keeps what they hold.
 * A session owns one `AdmissionTicket` and reuses it for each request it serves (`begin`); the
 * listener calls `release` once the request ended. Steps that answer at once are run in one
 * synchronous loop: no Promise and no closure per request unless a step returns a Promise.
 * Runtime-neutral.
 */
import { clientIp } from "../../../shared/net/cidr-set.ts";
import type { IpAddress } from "../../../shared/net/ip.ts";
import type { Client, MaybePromise, Refusal, Target } from "../../../shared/routing/contract.ts";
import type { HeaderField } from "../http/parse.ts";
import {
  type AdmissionGrant,
  type AdmissionRequest,
  AdmissionStage,
  type AdmissionStep,
  type AdmissionVerdict,
  type ClientAddress,
  isAdmissionRefusal,
} from "../../base/admission.ts";
import type { RequestProtocol } from "../../base/transfer-hooks.ts";
import { type RequestKind, RequestOutcome } from "../../base/metrics.ts";

const NO_HEADERS: readonly HeaderField[] = Object.freeze([]);

/** One request's passage through the steps: what it offered, what steps set and hold. */
export class AdmissionTicket implements AdmissionRequest {
  /** The connection's peer, or the address a trusted PROXY protocol header gave. */
  clientAddress: ClientAddress;
  clientIp: IpAddress | undefined;
  protocol: RequestProtocol = "http";
  credentials: string | null = null;
  headers: readonly HeaderField[] = NO_HEADERS;
  target: Target | undefined;
  client: Client | undefined;
  dialTarget: Target | undefined;
  /** The index of the next step to run. */
  next = 0;
  /** What steps hold: most requests hold nothing, some one grant. */
  #held: AdmissionGrant | AdmissionGrant[] | undefined;
  #stripped: Set<string> | undefined;

  constructor(clientAddress: ClientAddress) {
    this.clientAddress = clientAddress;
    this.clientIp = clientIp(clientAddress.hostname);
  }

  /** The client is another than the peer: what a trusted PROXY protocol header said. */
  setClientAddress(clientAddress: ClientAddress): void {
    this.clientAddress = clientAddress;
    this.clientIp = clientIp(clientAddress.hostname);
  }

  /**
   * Starts the next request on the session (anything the last one held is released first).
   * SOCKS5 starts without a target, set once its request names one, and without header fields.
   */
  begin(
    protocol: RequestProtocol,
    credentials: string | null,
    target: Target | undefined,
    headers: readonly HeaderField[] = NO_HEADERS,
  ): void {
    if (this.#held !== undefined) this.release();
    this.protocol = protocol;
    this.credentials = credentials;
    this.headers = headers;
    this.target = target;
    this.client = undefined;
    this.dialTarget = undefined;
    this.next = 0;
    this.#stripped = undefined;
  }

  /**
   * Every step ran and admitted the request: its header fields and credentials are read no
   * more, so a long tunnel keeps neither (nor the head they are views of, nor the secret).
   */
  admitted(): void {
    this.credentials = null;
    this.headers = NO_HEADERS;
  }

  /** The request header fields (lower-case names) steps asked to keep from the upstream. */
  get strippedHeaders(): ReadonlySet<string> | undefined {
    return this.#stripped;
  }

  stripHeader(lower: string): void {
    (this.#stripped ??= new Set()).add(lower);
  }

  hold(grant: AdmissionGrant): void {
    const held = this.#held;
    if (held === undefined) this.#held = grant;
    else if (Array.isArray(held)) held.push(grant);
    else this.#held = [held, grant];
  }

  /**
   * Gives back what the steps hold, each grant once, the last taken first; safe to call again.
   * A grant that throws is a bug of its step: the others are still released.
   */
  release(): void {
    const held = this.#held;
    if (held === undefined) return;
    this.#held = undefined;
    if (!Array.isArray(held)) {
      releaseGrant(held);
      return;
    }
    for (let index = held.length - 1; index >= 0; index--) releaseGrant(held[index]);
  }
}

function releaseGrant(grant: AdmissionGrant): void {
  try {
    grant.release();
  } catch {
    // The step's own fault; what the other steps hold must still go back.
  }
}

/** The ordered steps, and the loop that runs them. */
export class Admission {
  readonly steps: readonly AdmissionStep[];

  constructor(steps: readonly AdmissionStep[]) {
    let requestStage = false;
    for (const step of steps) {
      if (step.stage === AdmissionStage.request) requestStage = true;
      else if (requestStage) {
        throw new Error(`Admission step ${step.name} decides on the client after a request step`);
      }
    }
    this.steps = steps;
  }

  /**
   * Runs the ticket's steps from where it stopped, up to those of stage `through` (`request`:
   * all of them). Undefined: admitted so far, with what the steps hold kept on the ticket. A
   * refusal, or a step's error (thrown or rejected), releases what the earlier steps hold. Once
   * every step ran, the ticket names the client (a list without a step setting it is a bug).
   */
  run(ticket: AdmissionTicket, through: AdmissionStage): MaybePromise<Refusal | undefined> {
    const steps = this.steps;
    while (ticket.next < steps.length) {
      const step = steps[ticket.next];
      if (through === AdmissionStage.client && step.stage === AdmissionStage.request) {
        return undefined;
      }
      ticket.next++;
      let verdict: MaybePromise<AdmissionVerdict>;
      try {
        verdict = step.admit(ticket);
      } catch (error) {
        ticket.release();
        throw error;
      }
      if (verdict instanceof Promise) {
        return verdict.then(
          (settled) => this.#settled(ticket, settled, through),
          (error) => {
            ticket.release();
            throw error;
          },
        );
      }
      if (verdict !== undefined) {
        if (isAdmissionRefusal(verdict)) {
          ticket.release();
          return verdict;
        }
        ticket.hold(verdict);
      }
    }
    if (ticket.client === undefined) {
      ticket.release();
      throw new Error("No admission step established the client");
    }
    ticket.admitted();
    return undefined;
  }

  /** The step that failed with an error, for the log (after `run` threw or rejected). */
  failedStep(ticket: AdmissionTicket): string {
    return this.steps[ticket.next - 1]?.name ?? "none";
  }

  #settled(
    ticket: AdmissionTicket,
    verdict: AdmissionVerdict,
    through: AdmissionStage,
  ): MaybePromise<Refusal | undefined> {
    if (verdict !== undefined) {
      if (isAdmissionRefusal(verdict)) {
        ticket.release();
        return verdict;
      }
      ticket.hold(verdict);
    }
    return this.run(ticket, through);
  }
}

/** A step failed with an error (a bug, not a refusal): the caller closes or answers a failure. */
export const ADMISSION_ERROR = Symbol("admission error");

/** What a session's admission step loop needs of its listener's context. */
export interface AdmissionContext {
  admission: Admission;
  logger: { error(message: string, fields?: Readonly<Record<string, unknown>>): void };
  metrics: { request(kind: RequestKind, outcome: RequestOutcome, status: number): void };
}

/**
 * Runs the ticket's steps through `through`'s stage for a session of `kind` (SOCKS5's, a tunnel
 * device's): undefined when they admit, their refusal, or ADMISSION_ERROR when a step failed with
 * an error, which is logged and counted as a failed request here. Waits only for a step that
 * answers with a Promise.
 */
export function admitThrough(
  ctx: AdmissionContext,
  ticket: AdmissionTicket,
  through: AdmissionStage,
  kind: RequestKind,
): MaybePromise<Refusal | undefined | typeof ADMISSION_ERROR> {
  const failed = (error: unknown): typeof ADMISSION_ERROR => {
    ctx.logger.error("Admission failed with an error", {
      step: ctx.admission.failedStep(ticket),
      error,
    });
    ctx.metrics.request(kind, RequestOutcome.failed, 500);
    return ADMISSION_ERROR;
  };
  let result: MaybePromise<Refusal | undefined>;
  try {
    result = ctx.admission.run(ticket, through);
  } catch (error) {
    return failed(error);
  }
  return result instanceof Promise ? result.catch(failed) : result;
}
