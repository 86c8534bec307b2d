/**
 * snapshot (every OCTOPROX_SYSTEM_METRICS_INTERVAL; none at 0): one row of system readings in
 * system_metrics: the database's size and each of our tables', Redis's memory and key counts,
 * and the counts of projects, connectors and proxies by status. The stored readings set the
 * cadence: a run stores one only when the newest is at least nine tenths of the interval old,
 * so an entry published twice, redelivered or run after a failover adds no row. Retention runs
 * after each stored reading. Redis's figures are soft: without Redis the row has none.
 */
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import { translatePostgresError } from "../../db/errors.ts";
import { errorText } from "../../shared/errors.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { JobKind, PROXY_STATUSES } from "../../shared/roles.ts";
import type { Logger } from "../core/logging.ts";
import { DAY_MS } from "../metrics/tiers.ts";
import type { Job, WorkBatch } from "../core/job.ts";

export interface SystemSnapshotOptions {
  database: Database;
  redis: Redis;
  keys: RedisKeys;
  logger: Logger;
  /** The snapshot period (the setting, floored at a minute by its validation). */
  intervalMs: number;
  /** Readings older than this many days are deleted; 0 keeps them. */
  retentionDays: number;
  now?: () => number;
}

/** Keys scanned at most to count this install's own; past it the count is left out. */
export const MAX_SCANNED_KEYS = 50_000;

export interface SystemReading {
  databaseBytes: number;
  tableBytes: Record<string, number>;
  redisUsedMemoryBytes: number | null;
  redisKeys: number | null;
  redisPrefixKeys: number | null;
  projects: number;
  connectors: number;
  proxiesByStatus: Record<string, number>;
}

export class SystemSnapshotJob implements Job {
  readonly kind = JobKind.snapshot;
  readonly #o: SystemSnapshotOptions;
  #redisWarned = false;

  constructor(options: SystemSnapshotOptions) {
    this.#o = options;
  }

  async run(_batch: WorkBatch, signal: AbortSignal): Promise<void> {
    await this.snapshot(signal);
  }

  /** Stores a reading when one is due; answers whether it stored one. */
  async snapshot(signal?: AbortSignal): Promise<boolean> {
    try {
      const sql = this.#o.database.sql;
      const nowMs = (this.#o.now ?? Date.now)();
      const newest = await sql<{ recorded_at: string }[]>`
        select recorded_at::text from system_metrics order by recorded_at desc limit 1`;
      if (newest.length > 0) {
        const ageMs = nowMs - new Date(newest[0].recorded_at).getTime();
        if (ageMs < this.#o.intervalMs * 0.9) return false;
      }
      signal?.throwIfAborted();
      const reading = await this.read();
      await sql`insert into system_metrics (recorded_at, database_bytes, table_bytes,
          redis_used_memory_bytes, redis_keys, redis_prefix_keys, projects, connectors,
          proxies_by_status)
        values (${new Date(nowMs).toISOString()}::timestamptz, ${reading.databaseBytes},
          ${
        JSON.stringify(reading.tableBytes)
      }::jsonb, ${reading.redisUsedMemoryBytes}, ${reading.redisKeys},
          ${reading.redisPrefixKeys}, ${reading.projects}, ${reading.connectors},
          ${JSON.stringify(reading.proxiesByStatus)}::jsonb)`;
      if (this.#o.retentionDays > 0) {
        const before = new Date(nowMs - this.#o.retentionDays * DAY_MS).toISOString();
        await sql`delete from system_metrics where recorded_at < ${before}::timestamptz`;
      }
      return true;
    } catch (error) {
      throw translatePostgresError(error);
    }
  }

  /** The readings, Postgres first (one short session), then Redis. */
  async read(): Promise<SystemReading> {
    const sql = this.#o.database.sql;
    const [sizes, tables, counts, statuses] = await Promise.all([
      sql<{ bytes: string }[]>`select pg_database_size(current_database())::text as bytes`,
      sql<{ name: string; bytes: string }[]>`
        select c.relname as name, pg_total_relation_size(c.oid)::text as bytes
        from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = current_schema() and c.relkind in ('r', 'p') order by c.relname`,
      sql<{ projects: number; connectors: number }[]>`
        select (select count(*) from projects)::int as projects,
          (select count(*) from connectors)::int as connectors`,
      sql<{ status: string; n: number }[]>`
        select status, count(*)::int as n from proxies group by status`,
    ]);
    const proxiesByStatus: Record<string, number> = {};
    for (const status of PROXY_STATUSES) proxiesByStatus[status] = 0;
    for (const row of statuses) proxiesByStatus[row.status] = row.n;
    const reading: SystemReading = {
      databaseBytes: Number(sizes[0].bytes),
      tableBytes: Object.fromEntries(tables.map((t) => [t.name, Number(t.bytes)])),
      redisUsedMemoryBytes: null,
      redisKeys: null,
      redisPrefixKeys: null,
      projects: counts[0].projects,
      connectors: counts[0].connectors,
      proxiesByStatus,
    };
    try {
      Object.assign(reading, await this.#readRedis());
      this.#redisWarned = false;
    } catch (error) {
      if (!this.#redisWarned) {
        this.#redisWarned = true;
        this.#o.logger.warn(
          { error: errorText(error) },
          "Redis readings unavailable; system readings stored without them",
        );
      }
    }
    return reading;
  }

  async #readRedis(): Promise<Partial<SystemReading>> {
    const { redis, keys } = this.#o;
    const info = await redis.info("memory");
    const used = /^used_memory:(\d+)/m.exec(info);
    const total = await redis.dbsize();
    // This install's own keys, by a bounded scan: another install or test run may share Redis.
    let prefixKeys: number | null = 0;
    let scanned = 0;
    let cursor = "0";
    do {
      const [next, found] = await redis.scan(cursor, "MATCH", `${keys.prefix}*`, "COUNT", 1000);
      cursor = next;
      prefixKeys += found.length;
      scanned += 1000;
      if (scanned >= MAX_SCANNED_KEYS && cursor !== "0") {
        prefixKeys = null;
        break;
      }
    } while (cursor !== "0");
    return {
      redisUsedMemoryBytes: used ? Number(used[1]) : null,
      redisKeys: total,
      redisPrefixKeys: prefixKeys,
    };
  }
}
