/**
 * The gateway's sightings: each exit preflight saw through a proxy (shared/geo/sighting-wire.ts)
 * is recorded in memory and appended to the sightings stream every few seconds by a held write
 * (HeldWriteLoop: one at a time, under the request deadline, never waited for by a request).
 *
 * A write sends one numbered part at a time with this isolate's writer identity; Redis records
 * the highest part it applied (`applied:<writer>`, shared/lua/batch_append.lua), so a part
 * sent again after a lost reply lands once. A part Redis did not confirm is owed and goes again,
 * unchanged, before anything newer is cut. Through a Redis outage an isolate so holds one part
 * and a buffer of at most `capacity` sightings, which drops its oldest once full: the newest
 * say most about where exits are now, and the next echoes of the same exits repeat what the
 * dropped ones saw.
 *
 * Runtime-neutral: the caller passes the Redis client (ioredis) and the registered script.
 */
import { errorText } from "../../shared/errors.ts";
import { type LuaScript, runScript, type ScriptClient } from "../../shared/lua/loader.ts";
import { type RedisKeys, STREAM_CAPS } from "../../shared/redis-keys.ts";
import { encodeSighting, type Sighting, SIGHTING_FIELD } from "../../shared/geo/sighting-wire.ts";
import { withDeadline } from "../../shared/async/deadline.ts";
import { counterSample, gaugeSample, type MetricSample } from "../base/metrics.ts";
import { HeldWriteLoop } from "../metering/held-write-loop.ts";
import type { PublisherLogger } from "../metering/publisher.ts";

/** "Every few seconds": a worker judges a slot's sighting soon after the request saw it. */
export const SIGHTINGS_INTERVAL_MS = 2_000;
/** Sightings one isolate holds at most while Redis does not take them. */
export const SIGHTINGS_CAPACITY = 5_000;
/** How long a writer's applied record lives after its last part: a resend comes far sooner. */
const APPLIED_TTL_SECONDS = 86_400;

/** Where preflight hands a sighting: memory only, never throwing, never waiting. */
export interface SightingRecorder {
  record(sighting: Sighting): void;
}

export interface SightingPublisherOptions {
  redis: ScriptClient;
  keys: Pick<RedisKeys, "applied" | "sightingsStream">;
  script: LuaScript;
  /** The isolate as a writer (`<instance>:<isolate>`); a suffix fresh for each life is added. */
  writer: string;
  /** Each write's deadline (OCTOPROX_REDIS_REQUEST_TIMEOUT). */
  writeTimeoutMs: number;
  intervalMs?: number;
  capacity?: number;
  logger?: PublisherLogger;
}

interface Part {
  number: number;
  entries: readonly string[];
}

export interface SightingStats {
  recorded: number;
  /** In parts Redis confirmed. */
  published: number;
  /** Oldest sightings dropped from a full buffer. */
  dropped: number;
  buffered: number;
  owed: number;
  writeFailures: number;
}

function lifeSuffix(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(4));
  return [...bytes].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

export class SightingPublisher extends HeldWriteLoop implements SightingRecorder {
  /** The batch identity: the applied record is `applied:<writer>`. */
  readonly writer: string;
  readonly #o: SightingPublisherOptions;
  readonly #capacity: number;
  #buffer: Sighting[] = [];
  #owed: Part | undefined;
  #nextNumber = 1;
  #recorded = 0;
  #published = 0;
  #dropped = 0;
  #writeFailures = 0;
  #failing = false;

  constructor(options: SightingPublisherOptions) {
    super({ name: "sightings", intervalMs: options.intervalMs ?? SIGHTINGS_INTERVAL_MS });
    this.#o = options;
    this.#capacity = options.capacity ?? SIGHTINGS_CAPACITY;
    this.writer = `${options.writer}:sightings:${lifeSuffix()}`;
  }

  record(sighting: Sighting): void {
    try {
      if (this.closing) return;
      this.#recorded++;
      this.#buffer.push(sighting);
      if (this.#buffer.length > this.#capacity) {
        const over = this.#buffer.length - this.#capacity;
        this.#buffer.splice(0, over);
        this.#dropped += over;
      }
    } catch {
      // Never raise on the request path.
    }
  }

  /** The owed part, then one cut from the buffer; a failure keeps the part owed. */
  protected override async writePending(): Promise<void> {
    try {
      if (this.#owed !== undefined) await this.#send(this.#owed);
      if (this.#buffer.length === 0) return;
      // Serialised at the cut, never when recorded: recording is the request path's.
      const entries = this.#buffer.map(encodeSighting);
      this.#buffer = [];
      this.#owed = { number: this.#nextNumber++, entries };
      await this.#send(this.#owed);
    } catch (error) {
      this.#writeFailures++;
      // One line per failure streak: a lasting outage must not flood the log.
      if (!this.#failing) {
        this.#failing = true;
        this.#o.logger?.error("Sightings not appended; they are owed", {
          error: errorText(error),
          owed: this.#owed?.entries.length ?? 0,
        });
      }
    }
  }

  async #send(part: Part): Promise<void> {
    const { redis, keys, script } = this.#o;
    const reply = await withDeadline(
      "sightings append",
      this.#o.writeTimeoutMs,
      () =>
        runScript(redis, script, [keys.applied(this.writer), keys.sightingsStream], [
          String(part.number),
          String(APPLIED_TTL_SECONDS),
          String(STREAM_CAPS.work),
          SIGHTING_FIELD,
          ...part.entries,
        ]),
    );
    if (!Array.isArray(reply) || reply.length !== 2) {
      throw new Error(`Unexpected batch_append reply ${JSON.stringify(reply)}`);
    }
    // Applied now, or before (a resend after a lost reply): either way the stream has it.
    if (this.#owed === part) this.#owed = undefined;
    this.#published += part.entries.length;
    if (this.#failing) {
      this.#failing = false;
      this.#o.logger?.info("Sightings appended again", {});
    }
  }

  stats(): SightingStats {
    return {
      recorded: this.#recorded,
      published: this.#published,
      dropped: this.#dropped,
      buffered: this.#buffer.length,
      owed: this.#owed?.entries.length ?? 0,
      writeFailures: this.#writeFailures,
    };
  }

  /** This isolate's series for the gateway's /metrics (summed over the process's isolates). */
  samples(): MetricSample[] {
    const name = "octoprox_gateway_sightings_total";
    const s = this.stats();
    return [
      counterSample(name, s.recorded, 'result="recorded"'),
      counterSample(name, s.published, 'result="published"'),
      counterSample(name, s.dropped, 'result="dropped"'),
      gaugeSample("octoprox_gateway_sightings_pending", s.buffered + s.owed),
    ];
  }
}
