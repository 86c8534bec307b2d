/**
 * What the two exchanges of a forwarded request (exchange.ts, the gateway's own wire;
 * browser-exchange.ts, the browser-grade engine's) share once an attempt fails, and their reads
 * and writes of the client: one rule for what may follow a failure (another proxy while nothing
 * reached the client and nothing of the request was spent; our own answer while nothing final
 * reached it; nothing once the answer began), the allocation released once, the meter finished
 * once, the failure noted as the failure log keeps it.
 */
import { type Allocation, FailurePhase, type Outcome } from "../../../shared/routing/contract.ts";
import { UpstreamIdleError } from "../../../shared/proxy-protocol/errors.ts";
import { RequestKind, RequestOutcome } from "../../base/metrics.ts";
import { safely, type TransferMeter } from "../../base/transfer-hooks.ts";
import {
  AfterFailure,
  type AttemptFailed,
  type AttemptOutcome,
  NOTHING_ANSWERED,
} from "../session/attempts.ts";
import type { HttpSession } from "../session/contract.ts";
import { ClientGoneError, describeFailure, failureNote } from "../session/failures.ts";
import type { RequestHead } from "./parse.ts";

/** An attempt's allocation, released exactly once whatever path ends it. */
export class AllocationHold {
  readonly allocation: Allocation;
  readonly #session: HttpSession;
  released = false;

  constructor(session: HttpSession, allocation: Allocation) {
    this.#session = session;
    this.allocation = allocation;
  }

  release(outcome: Outcome): void {
    if (this.released) return;
    this.released = true;
    try {
      this.allocation.release(outcome);
    } catch (error) {
      this.#session.ctx.logger.error("Allocation release failed", { error });
    }
  }

  /** For a path that threw past the others: released as the client's end. */
  settle(): void {
    if (!this.released) this.release({ ok: false, phase: FailurePhase.client });
  }
}

/**
 * The answer was relayed: the allocation released and the meter finished as a success, the
 * request counted with the status the client got.
 */
export function attemptServed(
  session: HttpSession,
  hold: AllocationHold,
  meter: TransferMeter | undefined,
  latencyMs: number | undefined,
  status: number,
): void {
  const outcome: Outcome = { ok: true, latencyMs };
  hold.release(outcome);
  if (meter) safely(() => meter.finish(outcome));
  session.ctx.metrics.request(RequestKind.http, RequestOutcome.relayed, status);
}

/** Where a failed attempt was, as the rule needs it. */
export interface FailedAttemptState {
  head: RequestHead;
  hold: AllocationHold;
  startedMs: number;
  /** Connect to first byte, once the upstream answered. */
  latencyMs: number | undefined;
  /** The upstream's status once it answered (else 0). */
  status: number;
  meter: TransferMeter | undefined;
  /** Stopped by the interrupt traffic action: policy, not the upstream's failure. */
  interrupted: boolean;
  /** The upstream answered (its meter began). */
  began: boolean;
  /** The answer's head went to the client: nothing else can be sent it. */
  relaying: boolean;
  /** Something of the request's body was sent or read: it cannot go again. */
  spent: boolean;
}

/** A phase failed (or the interrupt action stopped the answer): what follows. */
export function attemptFailed(
  session: HttpSession,
  state: FailedAttemptState,
  caught: unknown,
): AttemptOutcome<boolean> {
  let error = caught;
  if (session.idleFired && state.relaying) {
    error = new UpstreamIdleError("Transfer idle", { timedOut: true, cause: caught });
  }
  const { latencyMs, meter, hold } = state;
  if (state.interrupted) {
    const outcome: Outcome = { ok: true, latencyMs };
    hold.release(outcome);
    if (meter) safely(() => meter.finish(outcome));
    session.ctx.metrics.request(RequestKind.http, RequestOutcome.broken, 0);
    // The client got the upstream's status, and its connection closes.
    return { kind: "served", value: false, status: state.status };
  }
  const failure = describeFailure(error);
  const outcome: Outcome = { ok: false, phase: failure.phase, latencyMs };
  hold.release(outcome);
  const head = state.head;
  // Once the upstream answered, the client got its status; before, the request's final
  // answer is filled in by the retry loop.
  const note = failureNote(
    failure,
    error,
    {
      protocol: RequestKind.http,
      line: `${head.method} ${head.target}`,
      upstream: hold.allocation.upstream,
    },
    state.began ? { status: state.status, proxyStatus: "" } : NOTHING_ANSWERED,
  );
  if (meter) safely(() => meter.finish(outcome, note));
  const answerable = !state.relaying && !session.client.closed;
  // Retrying waits out another deadline: a proxy that timed out answering is not retried.
  const retryable = answerable && !state.spent &&
    !(failure.phase === FailurePhase.firstByte && failure.timedOut) &&
    failure.phase !== FailurePhase.client;
  const result: AttemptFailed = {
    kind: "failed",
    failure,
    error,
    note,
    began: state.began,
    status: state.status,
    elapsedMs: Date.now() - state.startedMs,
    then: !answerable
      ? AfterFailure.end
      : !retryable || session.cancelled
      ? AfterFailure.answer
      : AfterFailure.retry,
  };
  return result;
}

export async function writeClient(session: HttpSession, bytes: Uint8Array): Promise<void> {
  try {
    await session.client.write(bytes);
  } catch (error) {
    throw new ClientGoneError("Client closed the connection", { cause: error });
  }
}

export async function readClient(session: HttpSession, buffer: Uint8Array): Promise<Uint8Array> {
  let count: number | null;
  try {
    count = await session.client.read(buffer);
  } catch (error) {
    throw new ClientGoneError("Client connection failed mid-request", { cause: error });
  }
  if (count === null) throw new ClientGoneError("Client closed the connection mid-request");
  return buffer.subarray(0, count);
}
