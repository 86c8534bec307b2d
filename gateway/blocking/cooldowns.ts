/**
 * The exits cooled down per site after block verdicts, as every gateway sees them: a verdict's
 * cool-down applies here at once (the request path reads memory only), goes to Redis with the
 * next write (a capped stream, `stream:cooldowns`), and reaches the other gateways with their
 * next read of that stream, every half second. A gateway starting reads the cool-downs still in
 * force from the stream's backlog.
 *
 * Failing open: while Redis is away, cool-downs stay local (each gateway keeps its own), the ones
 * not written are kept to write later (up to a bound), and nothing on the request path waits.
 */
import type { GatewayRedis } from "../../shared/redis/contract.ts";
import { type CycleResult, Loop } from "../../shared/async/loop.ts";
import { errorText } from "../../shared/errors.ts";
import { type RedisKeys, STREAM_CAPS } from "../../shared/redis-keys.ts";
import {
  type CooldownEntry,
  cooldownFields,
  readCooldownEntry,
} from "../../shared/blocking/cooldown-entry.ts";
import type { CooldownBook } from "../base/cooldown-book.ts";
import { counterSample, gaugeSample, type MetricSample } from "../base/metrics.ts";

/** How often the stream is written and read. */
export const COOLDOWN_SYNC_INTERVAL_MS = 500;
/** The most cool-downs held here (the oldest go first past it). */
const MAX_HELD = 100_000;
/** The most unwritten cool-downs kept while Redis is away. */
const MAX_PENDING = 10_000;
/** Entries read per XREAD. */
const READ_COUNT = 1_000;

export interface CooldownSyncOptions {
  redis: GatewayRedis;
  keys: RedisKeys;
  /** The gateway's logger's shape (base/log.ts), the two levels used. */
  logger: {
    info(msg: string, fields?: Record<string, unknown>): void;
    warn(msg: string, fields?: Record<string, unknown>): void;
  };
  /** The clock (tests move it). */
  nowMs?: () => number;
}

export class Cooldowns extends Loop implements CooldownBook {
  readonly #redis: GatewayRedis;
  readonly #key: string;
  readonly #logger: CooldownSyncOptions["logger"];
  readonly #now: () => number;
  /** By site: each cooled exit and when its cool-down ends (epoch ms). */
  readonly #sites = new Map<string, Map<string, number>>();
  #held = 0;
  #pending: CooldownEntry[] = [];
  /** The stream's last entry read ("0": from its start). */
  #lastId = "0";
  #failing = false;
  /** Cool-downs set here, read from others, and dropped unwritten (over the pending bound). */
  set = 0;
  learned = 0;
  dropped = 0;

  constructor(options: CooldownSyncOptions) {
    super({ name: "cooldown_sync" });
    this.#redis = options.redis;
    this.#key = options.keys.cooldownsStream;
    this.#logger = options.logger;
    this.#now = options.nowMs ?? Date.now;
  }

  cooled(site: string): ReadonlySet<string> | undefined {
    const exits = this.#sites.get(site);
    if (exits === undefined) return undefined;
    const now = this.#now();
    let live: Set<string> | undefined;
    for (const [proxyId, untilMs] of exits) {
      if (untilMs > now) (live ??= new Set()).add(proxyId);
      else {
        exits.delete(proxyId);
        this.#held--;
      }
    }
    if (exits.size === 0) this.#sites.delete(site);
    return live;
  }

  coolDown(site: string, proxyId: string, durationMs: number, projectId: string): void {
    if (durationMs <= 0) return;
    const untilMs = this.#now() + durationMs;
    if (!this.#apply(site, proxyId, untilMs)) return;
    this.set++;
    if (this.#pending.length >= MAX_PENDING) {
      this.#pending.shift();
      this.dropped++;
    }
    this.#pending.push({ site, proxyId, untilMs, projectId });
  }

  /** How many cool-downs are held (expired ones go as they are met). */
  get size(): number {
    return this.#held;
  }

  /** Holds a cool-down, keeping the later end; false when one as long was held already. */
  #apply(site: string, proxyId: string, untilMs: number): boolean {
    let exits = this.#sites.get(site);
    if (exits === undefined) this.#sites.set(site, exits = new Map());
    const held = exits.get(proxyId);
    if (held !== undefined && held >= untilMs) return false;
    if (held === undefined) {
      if (this.#held >= MAX_HELD) this.#prune();
      this.#held++;
    }
    exits.set(proxyId, untilMs);
    return true;
  }

  /** Drops every ended cool-down; past the bound still, the site met first goes. */
  #prune(): void {
    const now = this.#now();
    for (const [site, exits] of this.#sites) {
      for (const [proxyId, untilMs] of exits) {
        if (untilMs <= now) {
          exits.delete(proxyId);
          this.#held--;
        }
      }
      if (exits.size === 0) this.#sites.delete(site);
    }
    if (this.#held < MAX_HELD) return;
    const first = this.#sites.keys().next();
    if (first.done) return;
    this.#held -= this.#sites.get(first.value)!.size;
    this.#sites.delete(first.value);
  }

  protected override nextDuty(signal: AbortSignal): Promise<void> {
    return this.waitFor(COOLDOWN_SYNC_INTERVAL_MS, signal);
  }

  /** Writes what is pending, then reads what others wrote; never throws (fails open). */
  protected override async cycle(): Promise<CycleResult> {
    try {
      const wrote = await this.#write();
      const read = await this.#read();
      if (this.#failing) {
        this.#failing = false;
        this.#logger.info("Cool-downs reach Redis again");
      }
      return wrote || read;
    } catch (error) {
      if (!this.#failing) {
        this.#failing = true;
        this.#logger.warn("Cool-downs cannot reach Redis: they apply on this gateway only", {
          error: errorText(error),
        });
      }
      return false;
    }
  }

  async #write(): Promise<boolean> {
    const batch = this.#pending;
    if (batch.length === 0) return false;
    this.#pending = [];
    const pipeline = this.#redis.pipeline();
    for (const entry of batch) {
      pipeline.xadd(
        this.#key,
        "MAXLEN",
        "~",
        STREAM_CAPS.cooldowns,
        "*",
        ...cooldownFields(entry),
      );
    }
    try {
      const results = await pipeline.exec();
      const failed = results?.find(([error]) => error !== null);
      if (results === null || failed !== undefined) {
        throw failed?.[0] ?? new Error("the pipeline was not run");
      }
    } catch (error) {
      // Kept for the next write, ahead of what came since (within the bound).
      this.#pending = [...batch, ...this.#pending].slice(-MAX_PENDING);
      throw error;
    }
    return true;
  }

  async #read(): Promise<boolean> {
    let any = false;
    for (;;) {
      const answer = await this.#redis.xread(
        "COUNT",
        READ_COUNT,
        "STREAMS",
        this.#key,
        this.#lastId,
      ) as [string, [string, string[]][]][] | null;
      const entries = answer?.[0]?.[1] ?? [];
      if (entries.length === 0) return any;
      any = true;
      const now = this.#now();
      for (const [id, fields] of entries) {
        this.#lastId = id;
        const read = readCooldownEntry(fields);
        if (read === undefined || !(read.untilMs > now)) continue;
        if (this.#apply(read.site, read.proxyId, read.untilMs)) this.learned++;
      }
      if (entries.length < READ_COUNT) return any;
    }
  }

  /** The isolate's series for /metrics (every isolate holds them all: the largest is shown). */
  samples(): MetricSample[] {
    const name = "octoprox_gateway_cooldowns_total";
    return [
      gaugeSample("octoprox_gateway_cooldowns_held", this.#held, "max"),
      counterSample(name, this.set, 'source="here"'),
      counterSample(name, this.learned, 'source="other_gateways"'),
      counterSample(name, this.dropped, 'source="dropped_unwritten"'),
    ];
  }
}
