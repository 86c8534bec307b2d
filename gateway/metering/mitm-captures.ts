/**
 * Interception captures (the Inspector's): exchanges inside intercepted tunnels, held in memory
 * and written to their project's capped stream (`mitm:requests:<project>`, `XADD MAXLEN ~
 * STREAM_CAPS.mitmRequests`) by one held background write a second, so a request never waits on
 * Redis. Captures are a sample for inspection, not a record: a project's first
 * MAX_CAPTURES_PER_PROJECT_PER_CYCLE exchanges of each cycle are captured (a busy project's
 * others are not even built: `wants` says so before a request builds one, and they are counted as
 * skipped), and a write that fails (Redis away, no answer in time) drops its cycle's.
 *
 * Runtime-neutral: the caller passes the Redis client (ioredis) and a logger.
 */
import type { GatewayRedis } from "../../shared/redis/contract.ts";
import { encodeMitmCapture, type MitmCapture } from "../../shared/mitm-captures.ts";
import { type RedisKeys, STREAM_CAPS } from "../../shared/redis-keys.ts";
import { withDeadline } from "../../shared/async/deadline.ts";
import { errorText } from "../../shared/errors.ts";
import { counterSample, type MetricSample } from "../base/metrics.ts";
import { HeldWriteLoop } from "./held-write-loop.ts";
import type { PublisherLogger } from "./publisher.ts";

export const MITM_CAPTURE_INTERVAL_MS = 1_000;
/** Captures a cycle holds, every project together. */
export const MAX_CAPTURES_PER_CYCLE = 5_000;
/**
 * Captures a cycle holds of one project: a tenth of what its stream keeps, so the Inspector holds
 * about the last ten seconds of a busy project, at a cost per second that does not grow with its
 * rate.
 */
export const MAX_CAPTURES_PER_PROJECT_PER_CYCLE = 100;

/** Where an intercepted exchange is captured (memory only; never throws). */
export interface CaptureRecorder {
  /** Whether the project's next exchange is captured this cycle (false: counted as skipped). */
  wants(projectId: string): boolean;
  capture(projectId: string, capture: MitmCapture): void;
}

export interface MitmCaptureLogOptions {
  redis: Pick<GatewayRedis, "pipeline">;
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
  /** This cycle's captures by project. */
  #perProject = new Map<string, number>();
  #written = 0;
  #skipped = 0;
  #dropped = 0;
  #writeFailures = 0;
  #consecutiveFailures = 0;
  #lastError: string | null = null;

  constructor(options: MitmCaptureLogOptions) {
    super({ name: "mitm_captures", intervalMs: options.intervalMs ?? MITM_CAPTURE_INTERVAL_MS });
    this.#o = options;
    this.#maxPerCycle = options.maxPerCycle ?? MAX_CAPTURES_PER_CYCLE;
  }

  wants(projectId: string): boolean {
    if ((this.#perProject.get(projectId) ?? 0) < MAX_CAPTURES_PER_PROJECT_PER_CYCLE) return true;
    this.#skipped++;
    return false;
  }

  capture(projectId: string, capture: MitmCapture): void {
    try {
      if (this.closing || this.#pending.length >= this.#maxPerCycle) {
        this.#dropped++;
        return;
      }
      this.#perProject.set(projectId, (this.#perProject.get(projectId) ?? 0) + 1);
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
    this.#perProject.clear();
    if (batch.length === 0) return;
    this.#pending = [];
    const cap = STREAM_CAPS.mitmRequests;
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

  stats(): {
    written: number;
    skipped: number;
    dropped: number;
    pending: number;
    writeFailures: number;
  } {
    return {
      written: this.#written,
      skipped: this.#skipped,
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
      counterSample(name, this.#skipped, 'result="skipped"'),
      counterSample(name, this.#dropped, 'result="dropped"'),
    ];
  }
}
