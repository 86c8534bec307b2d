/**
 * The per-site judging counts into the Postgres history (docs/blocking.md, "Per-site counts"):
 * the gateways add to one Redis hash per project and UTC day, kept there seven days; every
 * metrics flush copies today's and yesterday's hashes of every project into `domain_metrics`,
 * a row per hash field, so they outlive Redis's week (for the project's metrics_retention_days)
 * and a Redis that lost its data.
 *
 * A copy writes each count as the hash holds it, keeping the larger of that and the stored one:
 * copying again changes nothing, and a hash that restarted from nothing (Redis lost it) never
 * lowers what was copied before.
 */
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import { translatePostgresError } from "../../db/errors.ts";
import { countDay, type RedisKeys } from "../../shared/redis-keys.ts";

/** Rows upserted per statement. */
const BATCH_ROWS = 5_000;
const DAY_MS = 86_400_000;

export interface DomainHistoryStores {
  redis: Pick<Redis, "pipeline">;
  keys: Pick<RedisKeys, "domainCounts">;
  database: Database;
}

/** One count of a site on a day, as the hash field names it and Postgres keeps it. */
export interface DomainCountRow {
  project_id: string;
  day: string;
  site: string;
  connector: string;
  count: string;
  value: number;
}

/** A hash field (`<site>\t<connector>\t<count>`) and its value as a row; undefined: unreadable. */
export function domainCountRow(
  projectId: string,
  day: string,
  field: string,
  text: string,
): DomainCountRow | undefined {
  const [site, connector, count, extra] = field.split("\t");
  const value = Number(text);
  if (
    site === undefined || connector === undefined || count === undefined || extra !== undefined ||
    site === "" || count === "" || !Number.isSafeInteger(value) || value < 0
  ) return undefined;
  return { project_id: projectId, day, site, connector, count, value };
}

/** Copies today's and yesterday's counts of every project; answers the rows written. */
export async function copyDomainCounts(
  stores: DomainHistoryStores,
  nowMs = Date.now(),
): Promise<number> {
  const sql = stores.database.sql;
  let projects: { id: string }[];
  try {
    projects = await sql<{ id: string }[]>`select id::text from projects order by id`;
  } catch (error) {
    throw translatePostgresError(error);
  }
  if (projects.length === 0) return 0;
  const days = [countDay(nowMs - DAY_MS), countDay(nowMs)];
  const pipeline = stores.redis.pipeline();
  for (const project of projects) {
    for (const day of days) pipeline.hgetall(stores.keys.domainCounts(project.id, day));
  }
  const replies = (await pipeline.exec()) ?? [];
  const rows: DomainCountRow[] = [];
  replies.forEach(([error, value], index) => {
    if (error) throw error;
    const project = projects[Math.floor(index / days.length)];
    const day = days[index % days.length];
    for (const [field, text] of Object.entries((value ?? {}) as Record<string, string>)) {
      const row = domainCountRow(project.id, day, field, text);
      if (row !== undefined) rows.push(row);
    }
  });
  for (let start = 0; start < rows.length; start += BATCH_ROWS) {
    const batch = rows.slice(start, start + BATCH_ROWS);
    try {
      // A project deleted since it was listed takes its rows with it (the join drops them).
      await sql`
        insert into domain_metrics (project_id, day, site, connector, count, value)
        select r.project_id::uuid, r.day::date, r.site, r.connector, r.count, r.value::bigint
        from unnest(
          ${batch.map((r) => r.project_id)}::text[], ${batch.map((r) => r.day)}::text[],
          ${batch.map((r) => r.site)}::text[], ${batch.map((r) => r.connector)}::text[],
          ${batch.map((r) => r.count)}::text[], ${batch.map((r) => String(r.value))}::text[]
        ) as r(project_id, day, site, connector, count, value)
        join projects p on p.id = r.project_id::uuid
        on conflict (project_id, day, site, connector, count)
        do update set value = greatest(domain_metrics.value, excluded.value)`;
    } catch (error) {
      throw translatePostgresError(error);
    }
  }
  return rows.length;
}

/**
 * A project's stored counts over these UTC days, as hash fields by day: what the per-site page
 * merges with Redis's (the larger of the two per count wins).
 */
export async function storedDomainCounts(
  database: Database,
  projectId: string,
  days: readonly string[],
): Promise<Map<string, Record<string, string>>> {
  try {
    const rows = await database.sql<
      { day: string; site: string; connector: string; count: string; value: string }[]
    >`select day::text, site, connector, count, value::text from domain_metrics
      where project_id = ${projectId} and day::text = any(${days as string[]}::text[])`;
    const byDay = new Map<string, Record<string, string>>();
    for (const row of rows) {
      let fields = byDay.get(row.day);
      if (fields === undefined) byDay.set(row.day, fields = {});
      fields[`${row.site}\t${row.connector}\t${row.count}`] = row.value;
    }
    return byDay;
  } catch (error) {
    throw translatePostgresError(error);
  }
}
