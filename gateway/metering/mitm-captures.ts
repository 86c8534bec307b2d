/**
 * Interception captures (the Inspector's): each exchange inside an intercepted tunnel, held in
 * memory and written to its project's capped stream (`mitm:requests:<project>`, `XADD MAXLEN ~
 * STREAM_CAPS.mitmRequests`) by one held background write a second, so a request never waits on
 * Redis. Captures are a sample for inspection, not a record: past what a cycle holds they are
 * dropped and counted, and a write that fails (Redis away, no answer in time) drops its cycle's.
 *
 * Runtime-neutral: the caller passes the Redis client (ioredis) and a logger.
 */
import type { Redis } from "ioredis";
import { encodeMitmCapture, type MitmCapture } from "../../shared/mitm-captures.ts";
import { type RedisKeys, STREAM_CAPS } from "../../shared/redis-keys.ts";
import { withDeadline } from "../../shared/async/deadline.ts";
import { errorText } from "../../shared/errors.ts";
import { counterSample, type MetricSample } from "../base/metrics.ts";
import { HeldWriteLoop } from "./held-write-loop.ts";
import type { PublisherLogger } from "./publisher.ts";

export const MITM_CAPTURE_INTERVAL_MS = 1_000;
/** Captures a cycle holds, every project together: more than a stream keeps of one project. */
export const MAX_CAPTURES_PER_CYCLE = 5_000;

/** Where an intercepted exchange is captured (memory only; never throws). */
export interface CaptureRecorder {
  capture(projectId: string, capture: MitmCapture): void;
}

export interface MitmCaptureLogOptions {
  redis: Pick<Redis, "pipeline">;
  keys: Pick<RedisKeys, "mitmRequests">;
  intervalMs?: number;
  /** Each write's deadline (OCTOPROX_REDIS_REQUEST_TIMEOUT). */
  writeTimeoutMs: number;
  maxPerCycle?: number;
  logger?: PublisherLogger;
}

export class MitmCaptureLog extends HeldWriteLoop implements CaptureRecorder {
  readonly #o: MitmCaptureLogOptions;
  readonly #maxPerCycle: number;
  #pending: [key: string, capture: MitmCapture][] = [];
  #written = 0;
  #dropped = 0;
  #writeFailures = 0;
  #consecutiveFailures = 0;
  #lastError: string | null = null;

  constructor(options: MitmCaptureLogOptions) {
    super({ name: "mitm_captures", intervalMs: options.intervalMs ?? MITM_CAPTURE_INTERVAL_MS });
    this.#o = options;
    this.#maxPerCycle = options.maxPerCycle ?? MAX_CAPTURES_PER_CYCLE;
  }

  capture(projectId: string, capture: MitmCapture): void {
    try {
      if (this.closing || this.#pending.length >= this.#maxPerCycle) {
        this.#dropped++;
        return;
      }
      this.#pending.push([this.#o.keys.mitmRequests(projectId), capture]);
    } catch {
      // Never raise on the request path.
    }
  }

  get pending(): number {
    return this.#pending.length;
  }

  /** One pipeline of XADDs; never rejects. */
  protected override async writePending(): Promise<void> {
    const batch = this.#pending;
    if (batch.length === 0) return;
    this.#pending = [];
    const cap = String(STREAM_CAPS.mitmRequests);
    let replies: [Error | null, unknown][] | null;
    try {
      replies = await withDeadline("interception captures write", this.#o.writeTimeoutMs, () => {
        const pipeline = this.#o.redis.pipeline();
        for (const [key, capture] of batch) {
          pipeline.xadd(key, "MAXLEN", "~", cap, "*", ...encodeMitmCapture(capture));
        }
        return pipeline.exec();
      });
    } catch (error) {
      this.#failed(error, batch.length);
      return;
    }
    if (replies === null) {
      this.#failed(new Error("Pipeline discarded"), batch.length);
      return;
    }
    const refused = replies.filter(([error]) => error !== null);
    this.#written += replies.length - refused.length;
    if (refused.length > 0) this.#failed(refused[0][0], refused.length);
    else if (this.#consecutiveFailures > 0) {
      this.#o.logger?.info("Interception captures written again", {
        failures: this.#consecutiveFailures,
      });
      this.#consecutiveFailures = 0;
    }
  }

  #failed(error: unknown, dropped: number): void {
    const text = errorText(error);
    this.#dropped += dropped;
    this.#writeFailures++;
    this.#consecutiveFailures++;
    // One line per failure streak and cause.
    if (this.#consecutiveFailures === 1 || text !== this.#lastError) {
      this.#o.logger?.error("Interception captures not written; dropped", {
        error: text,
        captures: dropped,
      });
    }
    this.#lastError = text;
  }

  stats(): { written: number; dropped: number; pending: number; writeFailures: number } {
    return {
      written: this.#written,
      dropped: this.#dropped,
      pending: this.#pending.length,
      writeFailures: this.#writeFailures,
    };
  }

  /** This isolate's series for /metrics (summed over the process's isolates). */
  samples(): MetricSample[] {
    const name = "octoprox_gateway_mitm_captures_total";
    return [
      counterSample(name, this.#written, 'result="written"'),
      counterSample(name, this.#dropped, 'result="dropped"'),
    ];
  }
}
