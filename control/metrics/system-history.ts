/**
 * The system readings' history for the System page's trends: the snapshot job's rows averaged
 * per bucket (they are gauges: summing a database size would invent a number).
 */
import type { Database } from "../../db/client.ts";
import { translatePostgresError } from "../../db/errors.ts";
import { PROXY_STATUSES } from "../../shared/roles.ts";
import { bucketStartMs } from "./tiers.ts";

const RANGE_MS = {
  "1h": 3_600_000,
  "24h": 86_400_000,
  "7d": 7 * 86_400_000,
  "30d": 30 * 86_400_000,
  "90d": 90 * 86_400_000,
} as const;

/** Buckets of about a hundred points per range (readings come every 5 minutes by default). */
const WIDTH_SECONDS: Readonly<Record<keyof typeof RANGE_MS, number>> = {
  "1h": 300,
  "24h": 900,
  "7d": 3_600,
  "30d": 21_600,
  "90d": 86_400,
};

export interface SystemPoint {
  t: string;
  readings: number;
  database_bytes: number;
  redis_used_memory_bytes: number | null;
  redis_keys: number | null;
  projects: number;
  connectors: number;
  proxies_by_status: Record<string, number>;
}

export async function systemHistory(
  database: Database,
  range: keyof typeof RANGE_MS,
  nowMs = Date.now(),
): Promise<{ range: string; bucket_seconds: number; points: SystemPoint[] }> {
  const width = WIDTH_SECONDS[range];
  const fromMs = bucketStartMs(nowMs - RANGE_MS[range], width);
  const statuses = PROXY_STATUSES.map((status) =>
    `avg(coalesce((proxies_by_status->>'${status}')::float8, 0)) as "${status}"`
  ).join(", ");
  let rows: Record<string, string | number | null>[];
  try {
    rows = await database.sql.unsafe(
      `select (floor(extract(epoch from recorded_at) / ${width}) * ${width})::bigint::text as t,
        count(*)::int as readings, avg(database_bytes)::float8 as database_bytes,
        avg(redis_used_memory_bytes)::float8 as redis_used_memory_bytes,
        avg(redis_keys)::float8 as redis_keys, avg(projects)::float8 as projects,
        avg(connectors)::float8 as connectors, ${statuses}
      from system_metrics where recorded_at >= $1 group by 1 order by 1`,
      [new Date(fromMs).toISOString()],
    );
  } catch (error) {
    throw translatePostgresError(error);
  }
  const whole = (value: unknown) => value === null ? null : Math.round(Number(value));
  return {
    range,
    bucket_seconds: width,
    points: rows.map((row) => ({
      t: new Date(Number(row.t) * 1000).toISOString(),
      readings: Number(row.readings),
      database_bytes: whole(row.database_bytes) ?? 0,
      redis_used_memory_bytes: whole(row.redis_used_memory_bytes),
      redis_keys: whole(row.redis_keys),
      projects: Math.round(Number(row.projects) * 10) / 10,
      connectors: Math.round(Number(row.connectors) * 10) / 10,
      proxies_by_status: Object.fromEntries(
        PROXY_STATUSES.map((status) => [status, Math.round(Number(row[status]) * 10) / 10]),
      ),
    })),
  };
}
