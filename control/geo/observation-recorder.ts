/**
 * The process's observation recorder: one per api and worker process, built and started by the
 * node, stopped after the runtimes so it sends what their stops recorded. Paths that learn an
 * exit hand it observations (`record`, memory only); every `OCTOPROX_GEO_OBSERVATION_PUBLISH_INTERVAL`
 * (5 s), or as soon as the buffer reaches half full while nothing is owed, one script call appends
 * them to the observations stream as one numbered part (shared/lua/batch_append.lua).
 *
 * A part is sent one at a time, and a part Redis did not confirm (refused, or no reply within the
 * send deadline) is owed: it goes again, unchanged, before anything newer, and its number under
 * this writer's identity (`applied:<writer>`) makes Redis append it once. Through an outage the
 * process holds that part and a buffer of 5,000, which drops its oldest (shared/geo/
 * observation-buffer.ts), so an outage costs bounded memory and the newest observations survive.
 *
 * A failed publish is the loop's failure (counted, logged once per streak, backed off 1 s
 * doubling to 30 s); `publishNow` and `close` never reject.
 */
import type { Redis } from "ioredis";
import { withDeadline } from "../../shared/async/deadline.ts";
import { type CycleResult, Loop, type LoopSnapshot } from "../../shared/async/loop.ts";
import {
  OBSERVATION_BUFFER_CAPACITY,
  ObservationBuffer,
  type ObservationBufferCounts,
  type ObservationPart,
} from "../../shared/geo/observation-buffer.ts";
import { OBSERVATION_FIELD } from "../../shared/geo/observation-wire.ts";
import { type RedisKeys, STREAM_CAPS } from "../../shared/redis-keys.ts";
import type { Logger } from "../core/logging.ts";
import { runScript } from "../core/scripts.ts";
import type { Observation, ObservationSink } from "./observation.ts";

export const OBSERVATION_RECORDER_LOOP = "observation_recorder";
/** How long a writer's applied record lives after its last part: a resend comes far sooner. */
export const APPLIED_TTL_SECONDS = 86_400;

export interface ObservationRecorderOptions {
  redis: Redis;
  keys: Pick<RedisKeys, "applied" | "observationsStream">;
  logger: Logger;
  /** The process's instance id; the writer identity adds a suffix fresh for each process life. */
  instance: string;
  intervalMs: number;
  /** How long one send may take before its part counts as unconfirmed (still owed). */
  sendTimeoutMs: number;
  /** The whole of the last attempt a close makes. */
  closeTimeoutMs?: number;
  /** Items the buffer holds at most (5,000). */
  capacity?: number;
}

/** The recorder's row in the snapshot: its loop's job stats and its counts. */
export interface ObservationRecorderSnapshot extends LoopSnapshot {
  observations_recorded: number;
  observations_published: number;
  observations_dropped: number;
  /** Entries the stream's cap removed as parts were appended: a stream no worker takes. */
  observations_trimmed: number;
  observations_buffered: number;
  observations_owed: number;
}

/** Eight hex digits, drawn afresh per process: tells this life's batches from the last one's. */
function lifeSuffix(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(4));
  return [...bytes].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

export class ObservationRecorder extends Loop<Logger> implements ObservationSink {
  /** The batch identity's writer: the applied record is `applied:<writer>`. */
  readonly writer: string;
  readonly #o: ObservationRecorderOptions;
  readonly #buffer: ObservationBuffer;
  readonly #halfFull: number;
  /** The publish in hand: publishes never overlap. */
  #turn: Promise<unknown> = Promise.resolve();
  #closing: Promise<void> | undefined;
  #trimmed = 0;

  constructor(options: ObservationRecorderOptions) {
    super({ name: OBSERVATION_RECORDER_LOOP, logger: options.logger });
    this.#o = options;
    this.writer = `${options.instance}:observations:${lifeSuffix()}`;
    this.#buffer = new ObservationBuffer(options.capacity ?? OBSERVATION_BUFFER_CAPACITY);
    this.#halfFull = Math.max(1, Math.floor(this.#buffer.capacity / 2));
  }

  /** Memory only: never throws, never waits. */
  record(observation: Observation): void {
    try {
      this.#buffer.record(observation);
      // Half full with nothing owed: publish now rather than at the interval. While a part is
      // owed Redis is failing us, and the back-off decides when to try again.
      if (this.#buffer.size === this.#halfFull && this.#buffer.owed === undefined) this.wake();
    } catch {
      // Recording is its callers' side line: it never fails them.
    }
  }

  counts(): ObservationBufferCounts & { trimmed: number } {
    return { ...this.#buffer.counts(), trimmed: this.#trimmed };
  }

  override snapshot(): ObservationRecorderSnapshot {
    const counts = this.#buffer.counts();
    return {
      ...super.snapshot(),
      observations_recorded: counts.recorded,
      observations_published: counts.published,
      observations_dropped: counts.dropped,
      observations_trimmed: this.#trimmed,
      observations_buffered: counts.buffered,
      observations_owed: counts.owed,
    };
  }

  /** Starts publishing every interval; a start after a close does nothing. */
  override start(): Promise<void> {
    if (this.#closing !== undefined) return Promise.resolve();
    return super.start();
  }

  /**
   * Publishes now (after the publish in hand): what is owed, then what is buffered. True when
   * nothing is left owed or buffered; never rejects (a failure is logged by the loop's cycles,
   * not here).
   */
  publishNow(timeoutMs = this.#o.sendTimeoutMs): Promise<boolean> {
    const next = this.#turn.then(() => this.#publish(Date.now() + timeoutMs)).then(
      () => this.#buffer.owed === undefined && this.#buffer.size === 0,
      () => false,
    );
    this.#turn = next;
    return next;
  }

  /** Stops the loop, then tries once more to send everything. Safe twice; never rejects. */
  override close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.stop();
      const done = await this.publishNow(this.#o.closeTimeoutMs ?? 5_000);
      const left = this.#buffer.counts();
      if (!done && left.owed + left.buffered > 0) {
        this.logger.error(
          { observations: left.owed + left.buffered },
          "Observations not appended before the stop; they are lost",
        );
      }
    })();
    return this.#closing;
  }

  protected override nextDuty(signal: AbortSignal): Promise<void> {
    return this.waitFor(this.#o.intervalMs, signal);
  }

  /** Throws when a send fails: the loop counts it, logs it once a streak and backs off. */
  protected override async cycle(): Promise<CycleResult> {
    const turn = this.#turn.then(() => this.#publish(Date.now() + this.#o.sendTimeoutMs));
    this.#turn = turn.catch(() => {});
    return await turn;
  }

  /** Sends the owed part, then one part cut from the buffer; false when there was nothing. */
  async #publish(deadlineAtMs: number): Promise<boolean> {
    const owed = this.#buffer.owed;
    if (owed !== undefined) await this.#sendWithin(owed, deadlineAtMs);
    // What is recorded while this part is on its way waits for the next publish.
    const fresh = this.#buffer.next();
    if (fresh !== undefined) await this.#sendWithin(fresh, deadlineAtMs);
    return owed !== undefined || fresh !== undefined;
  }

  async #sendWithin(part: ObservationPart, deadlineAtMs: number): Promise<void> {
    const remainingMs = Math.min(this.#o.sendTimeoutMs, deadlineAtMs - Date.now());
    if (remainingMs <= 0) throw new Error("No time left to append the observations owed");
    // A reply after the deadline is dropped: the part stays owed, and its number makes a
    // second append of it a no-op.
    await withDeadline("observations append", remainingMs, () => this.#send(part));
    this.#buffer.confirmed(part);
  }

  async #send(part: ObservationPart): Promise<void> {
    const { redis, keys } = this.#o;
    const reply = await runScript(
      redis,
      "batch_append",
      [keys.applied(this.writer), keys.observationsStream],
      [
        part.number,
        APPLIED_TTL_SECONDS,
        STREAM_CAPS.work,
        OBSERVATION_FIELD,
        ...part.entries,
      ],
    );
    if (!Array.isArray(reply) || reply.length !== 2) {
      throw new Error(`Unexpected batch_append reply ${JSON.stringify(reply)}`);
    }
    const trimmed = Number(reply[1]);
    if (trimmed > 0) {
      this.#trimmed += trimmed;
      this.logger.warn(
        { trimmed, stream: "observations" },
        "The observations stream reached its cap; its oldest entries were trimmed",
      );
    }
  }
}
