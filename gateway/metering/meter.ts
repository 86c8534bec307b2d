/**
 * One meter per transfer. It holds the keys of the rows the transfer counts into and the bytes
 * not reported yet; it reports them once they reach the report size, when the publisher cuts a
 * window (so a running transfer's bytes reach Redis every interval), and when it finishes. A
 * meter finishes once: a second finish, and bytes after the first, count nothing.
 */
import type { Outcome, Target, UpstreamChoice } from "../../shared/routing/contract.ts";
import type {
  FailureNote,
  RequestProtocol,
  TransferMeter,
  TransferStart,
} from "../base/transfer-hooks.ts";
import type { Slotted } from "../base/slot-set.ts";

/** The rows one transfer counts into (full Redis keys). */
export interface MeterKeys {
  proxy: string;
  project: string;
  connector: string;
  host: string;
  /** The host row beyond the host cap: this project and connector's `(other)`. */
  otherHost: string;
}

/** Where a meter's counts go: the metering that made it. */
export interface MeterSink {
  readonly reportBytes: number;
  report(meter: Meter): void;
  finish(meter: Meter, outcome: Outcome, failure: FailureNote | undefined): void;
  finishedTwice(): void;
}

export class Meter implements TransferMeter, Slotted {
  readonly keys: MeterKeys;
  /** The tunnel device's window (full Redis key) when the client is a device; else undefined. */
  readonly deviceKey: string | undefined;
  /** Connect-to-first-byte latency the transfer began with. */
  readonly latencyMs: number;
  /** Bytes not reported yet, client to upstream and upstream to client. */
  unreportedSentBytes = 0;
  unreportedReceivedBytes = 0;
  /** The metering's cache of this transfer's rows, and the window they belong to. */
  rows: (number[] | undefined)[] | undefined;
  rowsWindow: object | undefined;
  /** The upstream: its rate limit and its connector's traffic block are asked at the end. */
  readonly upstream: UpstreamChoice;
  /** Ends the transfer (the interrupt traffic action); set by the socket layer. */
  readonly interrupt: (() => void) | undefined;
  /** Interrupted already: asked once. */
  interrupted = false;
  /** Who and what the transfer is for: a failed one is described with them. */
  readonly projectId: string;
  readonly target: Target;
  /** How a failure the socket layer did not describe is recorded (a forward is `http`). */
  readonly protocol: RequestProtocol;
  /** Its place among the metering's open transfers. */
  slot = -1;
  #finished = false;
  readonly #sink: MeterSink;

  constructor(
    sink: MeterSink,
    keys: MeterKeys,
    deviceKey: string | undefined,
    latencyMs: number,
    start: TransferStart,
  ) {
    this.#sink = sink;
    this.keys = keys;
    this.deviceKey = deviceKey;
    this.latencyMs = latencyMs;
    this.upstream = start.upstream;
    this.interrupt = start.interrupt;
    this.projectId = start.client.projectId;
    this.target = start.target;
    this.protocol = start.kind;
  }

  get finished(): boolean {
    return this.#finished;
  }

  bytes(toUpstreamBytes: number, toClientBytes: number): void {
    try {
      if (this.#finished) return;
      if (toUpstreamBytes > 0 && Number.isFinite(toUpstreamBytes)) {
        this.unreportedSentBytes += toUpstreamBytes;
      }
      if (toClientBytes > 0 && Number.isFinite(toClientBytes)) {
        this.unreportedReceivedBytes += toClientBytes;
      }
      if (this.unreportedSentBytes + this.unreportedReceivedBytes >= this.#sink.reportBytes) {
        this.#sink.report(this);
      }
    } catch {
      // The byte path must never fail for metering.
    }
  }

  finish(outcome: Outcome, failure?: FailureNote): void {
    try {
      if (this.#finished) {
        this.#sink.finishedTwice();
        return;
      }
      this.#finished = true;
      this.#sink.finish(this, outcome, failure);
    } catch {
      // A transfer's end must never fail for metering.
    }
  }
}
