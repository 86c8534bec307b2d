/**
 * failure_flood: a project whose requests failed in one way (one failure kind: connect, idle,
 * refused…) at least the threshold of times in the last WINDOW_MINUTES, from the failure history
 * the metrics flush writes each minute (so it lags a flush behind). Only minute rows are read:
 * compaction folds none younger than a day.
 */
import type { Condition } from "./condition.ts";

export const WINDOW_MINUTES = 15;

export const failureFlood: Condition = async (deps, rule, nowMs) => {
  const threshold = rule.threshold ?? 1;
  const since = new Date(nowMs - WINDOW_MINUTES * 60_000).toISOString();
  const rows = await deps.database.sql<
    { project_id: string; project_name: string; kind: string; failures: string }[]
  >`
    select f.project_id::text, p.name as project_name, f.kind, sum(f.count)::text as failures
    from failure_metrics f join projects p on p.id = f.project_id
    where f.bucket_seconds = 60 and f.bucket_start >= ${since}::timestamptz
      and (${rule.projectId}::uuid is null or f.project_id = ${rule.projectId}::uuid)
      and (${rule.connectorId}::uuid is null or f.connector_id = ${rule.connectorId}::uuid)
    group by f.project_id, p.name, f.kind`;
  return rows.filter((row) => Number(row.failures) >= threshold).map((row) => ({
    subject: `failures:${row.project_id}:${row.kind}`,
    message: `Project ${row.project_name} had ${row.failures} ${row.kind} failures in the last ` +
      `${WINDOW_MINUTES} minutes (threshold ${threshold})`,
    details: {
      project_id: row.project_id,
      kind: row.kind,
      failures: Number(row.failures),
      window_minutes: WINDOW_MINUTES,
    },
  }));
};
