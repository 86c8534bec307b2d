/**
 * The pools as the leading controller sees them: every `intervalMs`, each provider-API
 * connector of the last compile has its pool's counts by state and its fetch bookkeeping read
 * from Redis (one pipeline of small reads per connector), for /metrics and the System page. One
 * reader for the whole cluster, so a sum over processes never counts a pool twice; a standby
 * reports nothing.
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../../shared/redis-keys.ts";
import type { Logger } from "../../core/logging.ts";
import type { CycleResult, LoopSnapshot } from "../../../shared/async/loop.ts";
import type { ConnectorSection } from "../../../shared/feed/models.ts";
import type { ControllerLease } from "../../core/lease.ts";
import { LeasedPeriodicLoop } from "../../core/leased.ts";
import type { FetchStats } from "../fetch-contract.ts";
import type { PoolCounts } from "./contract.ts";
import type { RedisPoolStore } from "./store.ts";

export interface PoolReading {
  connector_id: string;
  project_id: string;
  counts: PoolCounts;
  /** The connector's fetch bookkeeping; null when it could not be read. */
  fetch: FetchStats | null;
}

export interface PoolWatchSnapshot extends LoopSnapshot {
  /** Null before the first reading of this lead. */
  pools: PoolReading[] | null;
  read_at: string | null;
}

export interface PoolWatchOptions {
  redis: Redis;
  keys: RedisKeys;
  store: RedisPoolStore;
  lease: ControllerLease;
  logger: Logger;
  intervalMs: number;
  /** The provider-API connectors of the last compile. */
  pools: () => ReadonlyMap<string, ConnectorSection> | undefined;
  /** A connector's fetch bookkeeping (control/provider-api/fetch/coordinator.ts). */
  fetchStats?: (connectorId: string) => Promise<FetchStats>;
}

export class PoolWatch extends LeasedPeriodicLoop {
  readonly #o: PoolWatchOptions;
  #readings: PoolReading[] | null = null;
  #readAt: number | undefined;

  constructor(options: PoolWatchOptions) {
    super({
      name: "pool_watch",
      logger: options.logger,
      lease: options.lease,
      intervalMs: options.intervalMs,
    });
    this.#o = options;
  }

  /** The last reading, while leading. */
  get readings(): readonly PoolReading[] | null {
    return this.lease.leading ? this.#readings : null;
  }

  override snapshot(): PoolWatchSnapshot {
    return {
      ...super.snapshot(),
      pools: this.readings === null ? null : [...this.readings],
      read_at: this.#readAt === undefined ? null : new Date(this.#readAt).toISOString(),
    };
  }

  protected override onNewLead(): void {
    this.#readings = null;
  }

  protected override async cycle(): Promise<CycleResult> {
    if (!this.lease.leading) return false;
    const pools = this.#o.pools();
    if (pools === undefined) return false;
    const readings = await Promise.all([...pools.values()].map(async (section) => {
      const id = section.connector.id;
      const [counts, fetch] = await Promise.all([
        this.#o.store.counts(id),
        this.#o.fetchStats?.(id).catch(() => null) ?? Promise.resolve(null),
      ]);
      return { connector_id: id, project_id: section.connector.project_id, counts, fetch };
    }));
    readings.sort((a, b) => (a.connector_id < b.connector_id ? -1 : 1));
    this.#readings = readings;
    this.#readAt = Date.now();
    return false;
  }
}
