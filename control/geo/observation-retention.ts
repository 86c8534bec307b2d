/**
 * How long what the observation ingest wrote is kept, read from the install's settings
 * (geo_settings) at each compaction run, so a change applies at the next run:
 *
 * - raw observations (`ip_observations`) past `observation_retention_days` (30 by default);
 * - exits (`connector_exit_ips`) last seen before `exit_ip_retention_days`, when it is set (by
 *   default they are kept: an exit table outlives the raw log).
 *
 * Rows go in slices of 10,000, each its own statement, so a first run over a large log never
 * holds one long transaction, and a stop is honoured between slices.
 */
import type { Database } from "../../db/client.ts";

const DAY_MS = 86_400_000;
/** Rows one statement deletes at most. */
export const RETENTION_SLICE = 10_000;
/** What the settings row holds when it is missing (a restore may have dropped it). */
const DEFAULT_OBSERVATION_RETENTION_DAYS = 30;

export interface RetentionOutcome {
  observationsExpired: number;
  exitIpsExpired: number;
}

/** The retentions in force: days, or null where rows are kept. */
async function retentionDays(
  sql: Database["sql"],
): Promise<{ observations: number | null; exitIps: number | null }> {
  const [row] = await sql<{ observations: number; exit_ips: number | null }[]>`
    select observation_retention_days as observations, exit_ip_retention_days as exit_ips
    from geo_settings where id = 1`;
  const observations = row?.observations ?? DEFAULT_OBSERVATION_RETENTION_DAYS;
  const exitIps = row?.exit_ips ?? null;
  // The settings refuse 0; should one be stored anyway, it keeps rather than wipes.
  return {
    observations: observations > 0 ? observations : null,
    exitIps: exitIps !== null && exitIps > 0 ? exitIps : null,
  };
}

export async function expireObservations(
  database: Pick<Database, "sql">,
  nowMs: number,
  signal?: AbortSignal,
): Promise<RetentionOutcome> {
  const { sql } = database;
  const days = await retentionDays(sql);
  const outcome: RetentionOutcome = { observationsExpired: 0, exitIpsExpired: 0 };
  if (days.observations !== null) {
    const before = new Date(nowMs - days.observations * DAY_MS).toISOString();
    for (;;) {
      signal?.throwIfAborted();
      const result = await sql`
        delete from ip_observations where id in (
          select id from ip_observations where observed_at < ${before}::timestamptz
          limit ${RETENTION_SLICE}
        )`;
      outcome.observationsExpired += result.count;
      if (result.count < RETENTION_SLICE) break;
    }
  }
  if (days.exitIps !== null) {
    const before = new Date(nowMs - days.exitIps * DAY_MS).toISOString();
    for (;;) {
      signal?.throwIfAborted();
      const result = await sql`
        delete from connector_exit_ips
        where (connector_id, ip) in (
          select connector_id, ip from connector_exit_ips where last_seen_at < ${before}::timestamptz
          limit ${RETENTION_SLICE}
        )
          -- Checked again on the row a concurrent ingest may have just moved forward.
          and last_seen_at < ${before}::timestamptz`;
      outcome.exitIpsExpired += result.count;
      if (result.count < RETENTION_SLICE) break;
    }
  }
  return outcome;
}
