/**
 * The feed builder, on the leading controller: follows the change stream and the runtime stream
 * and compiles. A change after a quiet spell is compiled at once; changes that arrive within the
 * compile interval of the last compile wait and are compiled together, however many. A new lead
 * compiles at once and publishes nothing before a compile of its own.
 */
import type { Redis } from "ioredis";
import type { Db } from "../../db/client.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { BroadcastFollower } from "../core/consumers.ts";
import type { Logger } from "../core/logging.ts";
import type { CycleResult } from "../core/loops.ts";
import type { StreamEntry } from "../core/work-streams.ts";
import { compile, type Compiled } from "./compile.ts";
import type { ControllerLease } from "./lease.ts";
import { awaitLead } from "./leased.ts";

export interface FeedBuilderOptions {
  db: Db;
  redis: Redis;
  keys: RedisKeys;
  lease: ControllerLease;
  logger: Logger;
  compileIntervalMs: number;
  reconcileIntervalMs: number;
  /** Told after every compile that worked (the producers read `latest` themselves). */
  onCompiled?: (compiled: Compiled) => void;
}

export class FeedBuilder extends BroadcastFollower {
  readonly #o: FeedBuilderOptions;
  #term = 0;
  #leadSignal: AbortSignal | undefined;
  #dirty = false;
  #lastCompileAt = Number.NEGATIVE_INFINITY;
  #latest: Compiled | undefined;
  #compiles = 0;

  constructor(options: FeedBuilderOptions) {
    super({
      name: "feed_builder",
      logger: options.logger,
      reader: options.redis.duplicate({ enableOfflineQueue: true }),
      streams: [options.keys.changesStream, options.keys.runtimeStream],
      reconcileIntervalMs: options.reconcileIntervalMs,
    });
    this.#o = options;
  }

  /** The last compile that worked, kept across lost leads and Postgres outages. */
  get latest(): Compiled | undefined {
    return this.#latest;
  }

  override snapshot() {
    return {
      ...super.snapshot(),
      compiles: this.#compiles,
      compiled_at: this.#latest ? new Date(this.#latest.compiledAt).toISOString() : null,
      pending_changes: this.#dirty,
    };
  }

  protected override async nextDuty(signal: AbortSignal): Promise<void> {
    const lead = await awaitLead(this.#o.lease, signal, () => this.resetStreak());
    if (!lead) return;
    this.#leadSignal = lead.signal;
    if (lead.term !== this.#term) {
      this.#term = lead.term;
      this.requestFullRead("new lead");
    }
  }

  protected override readSignal(signal: AbortSignal): AbortSignal {
    return this.#leadSignal ? AbortSignal.any([signal, this.#leadSignal]) : signal;
  }

  protected override blockMsNow(): number {
    if (!this.#dirty) return super.blockMsNow();
    return this.#lastCompileAt + this.#o.compileIntervalMs - Date.now();
  }

  protected override async readAll(): Promise<void> {
    await this.#compile();
  }

  protected override onEntries(_stream: string, entries: readonly StreamEntry[]): Promise<void> {
    if (entries.length > 0) this.#dirty = true;
    return Promise.resolve();
  }

  protected override async cycle(signal: AbortSignal): Promise<CycleResult> {
    if (!this.#o.lease.leading) return false;
    const result = await super.cycle(signal);
    if (this.#dirty && Date.now() - this.#lastCompileAt >= this.#o.compileIntervalMs) {
      await this.#compile();
      return true;
    }
    return result;
  }

  async #compile(): Promise<void> {
    // Cleared first: a change read while the compile runs asks for the next one.
    this.#dirty = false;
    this.#lastCompileAt = Date.now();
    try {
      this.#latest = await compile(this.#o.db);
    } catch (error) {
      this.#dirty = true;
      throw error;
    }
    this.#compiles += 1;
    this.#o.onCompiled?.(this.#latest);
  }
}
