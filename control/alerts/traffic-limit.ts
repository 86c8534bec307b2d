/**
 * traffic_limit: a connector (its traffic_config) or a project (its traffic quota) past its
 * warning line, at its limit, or blocked by it, read as the api's usage answers read it
 * (control/traffic/usage-view.ts). Without Redis the usage would be the history alone, so the
 * condition throws rather than resolve on a partial count.
 */
import type { TrafficConfig } from "../../db/schema.ts";
import { StoreUnavailableError } from "../../shared/errors.ts";
import { trafficSubjectKey } from "../../shared/traffic-subjects.ts";
import { trafficUsageViews, type UsageSubject } from "../traffic/usage-view.ts";
import type { Condition, Firing } from "./condition.ts";

interface LimitedRow {
  kind: "connector" | "project";
  id: string;
  project_id: string;
  name: string;
  project_name: string;
  config: TrafficConfig | string;
  /** Text, as a raw query answers times. */
  reset_at: string | null;
}

export const trafficLimit: Condition = async (deps, rule, nowMs) => {
  const sql = deps.database.sql;
  const projectId = rule.projectId;
  const connectorId = rule.connectorId;
  const rows = await sql<LimitedRow[]>`
    select 'connector' as kind, c.id::text, c.project_id::text, c.name, p.name as project_name,
      c.traffic_config as config, c.traffic_reset_at as reset_at
    from connectors c join projects p on p.id = c.project_id
    where c.traffic_config is not null
      and (${projectId}::uuid is null or c.project_id = ${projectId}::uuid)
      and (${connectorId}::uuid is null or c.id = ${connectorId}::uuid)
    union all
    select 'project', p.id::text, p.id::text, p.name, p.name, p.traffic_quota, p.traffic_reset_at
    from projects p
    where p.traffic_quota is not null and ${connectorId}::uuid is null
      and (${projectId}::uuid is null or p.id = ${projectId}::uuid)`;
  const subjects: UsageSubject[] = rows.map((row) => ({
    subject: { kind: row.kind, id: row.id },
    projectId: row.project_id,
    config: typeof row.config === "string" ? JSON.parse(row.config) : row.config,
    resetAt: row.reset_at === null ? null : new Date(row.reset_at),
  }));
  const views = await trafficUsageViews(deps, subjects, nowMs);
  const firing: Firing[] = [];
  for (const row of rows) {
    const view = views.get(trafficSubjectKey({ kind: row.kind, id: row.id }));
    if (view === undefined) continue;
    if (!view.runtime_included) throw new StoreUnavailableError("redis");
    if (view.status === "ok" && !view.blocked) continue;
    const what = row.kind === "connector"
      ? `Connector ${row.name} (project ${row.project_name})`
      : `Project ${row.name}`;
    const state = view.blocked
      ? "is blocked by its traffic limit"
      : view.status === "limit"
      ? "is at its traffic limit"
      : "is past its traffic limit's warning line";
    firing.push({
      subject: `${row.kind}:${row.id}`,
      message: `${what} ${state}: ${view.bytes} of ${view.limit_bytes} bytes (${view.percent}%)`,
      details: {
        kind: row.kind,
        id: row.id,
        project_id: row.project_id,
        name: row.name,
        bytes: view.bytes,
        limit_bytes: view.limit_bytes,
        percent: view.percent,
        status: view.status,
        blocked: view.blocked,
        period_end: view.period_end,
      },
    });
  }
  return firing;
};
