/**
 * The failure log: every request the gateway could not complete is described (kind, what the
 * client was answered, the upstream's own answer, connector, proxy, target, a scrubbed message)
 * and recorded here, in memory. Its count goes to the failure windows through request metering
 * (exactly once, with metering's batches); this keeps a few distinct examples of each project and
 * kind and writes them to the capped stream of that project and kind
 * (`failures:<project>:<kind>`, `XADD MAXLEN ~ STREAM_CAPS.failures`) every interval (5 s).
 *
 * Examples are a sample for reading, not a record: at most `maxExamplesPerCycle` (5) per project
 * and kind and cycle, distinct by message; the rest are counted as capped. One held background
 * write at a time, under the request deadline, and a request never waits on it. A write that
 * fails (or gets no reply in time) drops that cycle's examples: they are counted as dropped,
 * never sent again, so an outage costs at most one cycle's examples of memory.
 *
 * Every kind is counted from the start (0 included), so /metrics has each from its first scrape.
 * A refusal of a client not known yet (no project) is counted but keeps no example: there is no
 * project's stream to put it in.
 *
 * Runtime-neutral: the caller passes the Redis client (ioredis) and a logger.
 */
import type { GatewayRedis } from "../../shared/redis/contract.ts";
import { encodeFailureExample, type FailureExample } from "../../shared/failure-examples.ts";
import { FAILURE_KINDS, type FailureKind } from "../../shared/failure-kinds.ts";
import { type RedisKeys, STREAM_CAPS } from "../../shared/redis-keys.ts";
import { scrubText } from "../base/scrub.ts";
import { counterSample, type MetricSample } from "../base/metrics.ts";
import { withDeadline } from "../../shared/async/deadline.ts";
import { HeldWriteLoop } from "./held-write-loop.ts";
import { errorText } from "../../shared/errors.ts";
import type { PublisherLogger } from "./publisher.ts";

export const FAILURE_LOG_INTERVAL_MS = 5_000;
/** Examples kept per project and kind and cycle. */
export const MAX_EXAMPLES_PER_CYCLE = 5;
/** Project and kind streams one cycle writes to at most; examples for more are dropped. */
export const MAX_STREAMS_PER_CYCLE = 10_000;

/** Where a failed request is recorded (request metering calls it; memory only, never throws). */
export interface FailureRecorder {
  record(projectId: string | null, example: FailureExample): void;
}

export interface FailureLogOptions {
  redis: Pick<GatewayRedis, "pipeline">;
  keys: Pick<RedisKeys, "failures">;
  intervalMs?: number;
  /** Each write's deadline (OCTOPROX_REDIS_REQUEST_TIMEOUT, 2 s). */
  writeTimeoutMs: number;
  maxExamplesPerCycle?: number;
  maxStreamsPerCycle?: number;
  logger?: PublisherLogger;
}

export interface FailureLogStats {
  /** Failures recorded, every kind together. */
  recorded: number;
  byKind: Record<FailureKind, number>;
  /** Cycles that had examples to write (one pipeline each). */
  writes: number;
  examplesWritten: number;
  /** Over a cycle's limit for their project and kind, or a repeat of an example's message. */
  examplesCapped: number;
  /** Their write failed, or too many streams were waiting. */
  examplesDropped: number;
  writeFailures: number;
  consecutiveFailures: number;
  pendingExamples: number;
  lastError: string | null;
}

interface Pending {
  examples: FailureExample[];
  messages: Set<string>;
}

/**
 * On the `HeldWriteLoop` base (held-write-loop.ts): a write every interval, measured from the end of the
 * last; a cycle never throws (its failures are counted and logged below).
 */
export class FailureLog extends HeldWriteLoop implements FailureRecorder {
  readonly #o: FailureLogOptions;
  readonly #maxPerCycle: number;
  readonly #maxStreams: number;
  readonly #byKind = Object.fromEntries(FAILURE_KINDS.map((kind) => [kind, 0])) as Record<
    FailureKind,
    number
  >;
  #recorded = 0;
  #pending = new Map<string, Pending>();
  #pendingExamples = 0;
  #writes = 0;
  #written = 0;
  #capped = 0;
  #dropped = 0;
  #writeFailures = 0;
  #consecutiveFailures = 0;
  #lastError: string | null = null;

  constructor(options: FailureLogOptions) {
    super({ name: "failure_log", intervalMs: options.intervalMs ?? FAILURE_LOG_INTERVAL_MS });
    this.#o = options;
    this.#maxPerCycle = options.maxExamplesPerCycle ?? MAX_EXAMPLES_PER_CYCLE;
    this.#maxStreams = options.maxStreamsPerCycle ?? MAX_STREAMS_PER_CYCLE;
  }

  record(projectId: string | null, example: FailureExample): void {
    try {
      this.#recorded++;
      this.#byKind[example.kind] = (this.#byKind[example.kind] ?? 0) + 1;
      if (projectId === null || this.closing) return;
      const key = this.#o.keys.failures(projectId, example.kind);
      let pending = this.#pending.get(key);
      if (pending === undefined) {
        if (this.#pending.size >= this.#maxStreams) {
          this.#dropped++;
          return;
        }
        pending = { examples: [], messages: new Set() };
        this.#pending.set(key, pending);
      }
      // Whoever built it scrubbed the message; this holds whatever the caller forgot.
      const message = scrubText(example.message);
      if (pending.examples.length >= this.#maxPerCycle || pending.messages.has(message)) {
        this.#capped++;
        return;
      }
      pending.messages.add(message);
      pending.examples.push({ ...example, message, target: scrubText(example.target) });
      this.#pendingExamples++;
    } catch {
      // Never raise on the request path.
    }
  }

  /** One pipeline of XADDs, one per example; never rejects. */
  protected override async writePending(): Promise<void> {
    const batch = this.#pending;
    const count = this.#pendingExamples;
    if (count === 0) return;
    this.#pending = new Map();
    this.#pendingExamples = 0;
    this.#writes++;
    const cap = STREAM_CAPS.failures;
    let replies: [Error | null, unknown][] | null;
    try {
      replies = await withDeadline("failure examples write", this.#o.writeTimeoutMs, () => {
        const pipeline = this.#o.redis.pipeline();
        for (const [key, pending] of batch) {
          for (const example of pending.examples) {
            pipeline.xadd(key, "MAXLEN", "~", cap, "*", ...encodeFailureExample(example));
          }
        }
        return pipeline.exec();
      });
    } catch (error) {
      // No answer: the whole cycle's examples are dropped (a late one may still land).
      this.#dropped += count;
      this.#failed(error, count);
      return;
    }
    if (replies === null) {
      this.#dropped += count;
      this.#failed(new Error("Pipeline discarded"), count);
      return;
    }
    const refused = replies.filter(([error]) => error !== null);
    this.#written += replies.length - refused.length;
    this.#dropped += refused.length;
    if (refused.length > 0) this.#failed(refused[0][0], refused.length);
    else this.#recovered();
  }

  #failed(error: unknown, dropped: number): void {
    const text = errorText(error);
    this.#writeFailures++;
    this.#consecutiveFailures++;
    // One line per failure streak and cause: a lasting outage must not flood the log.
    if (this.#consecutiveFailures === 1 || text !== this.#lastError) {
      this.#o.logger?.error("Failure examples not written; dropped", {
        error: text,
        examples: dropped,
      });
    }
    this.#lastError = text;
  }

  #recovered(): void {
    if (this.#consecutiveFailures === 0) return;
    this.#o.logger?.info("Failure examples written again", {
      failures: this.#consecutiveFailures,
    });
    this.#consecutiveFailures = 0;
  }

  stats(): FailureLogStats {
    return {
      recorded: this.#recorded,
      byKind: { ...this.#byKind },
      writes: this.#writes,
      examplesWritten: this.#written,
      examplesCapped: this.#capped,
      examplesDropped: this.#dropped,
      writeFailures: this.#writeFailures,
      consecutiveFailures: this.#consecutiveFailures,
      pendingExamples: this.#pendingExamples,
      lastError: this.#lastError,
    };
  }

  /** This isolate's series for the gateway's /metrics (summed over the process's isolates). */
  samples(): MetricSample[] {
    const samples: MetricSample[] = [];
    for (const kind of FAILURE_KINDS) {
      samples.push(
        counterSample("octoprox_gateway_failures_total", this.#byKind[kind], `kind="${kind}"`),
      );
    }
    const name = "octoprox_gateway_failure_examples_total";
    samples.push(
      counterSample(name, this.#written, 'result="written"'),
      counterSample(name, this.#capped, 'result="capped"'),
      counterSample(name, this.#dropped, 'result="dropped"'),
      counterSample("octoprox_gateway_failure_log_write_failures_total", this.#writeFailures),
    );
    return samples;
  }
}
