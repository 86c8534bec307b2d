/**
 * pool_depleted: a provider-API connector marked depleted (its `depleted_at`, set when its pool
 * found no proxy to route and cleared when it finds them again: control/services/sequences.ts).
 */
import type { Condition } from "./condition.ts";

export const poolDepleted: Condition = async (deps, rule) => {
  const rows = await deps.database.sql<
    { id: string; name: string; project_id: string; project_name: string; depleted_at: string }[]
  >`
    select c.id::text, c.name, c.project_id::text, p.name as project_name,
      c.depleted_at::text as depleted_at
    from connectors c join projects p on p.id = c.project_id
    where c.depleted_at is not null
      and (${rule.projectId}::uuid is null or c.project_id = ${rule.projectId}::uuid)
      and (${rule.connectorId}::uuid is null or c.id = ${rule.connectorId}::uuid)`;
  return rows.map((row) => ({
    subject: `connector:${row.id}`,
    message: `Connector ${row.name} (project ${row.project_name}) has no proxy left to route ` +
      `(depleted since ${new Date(row.depleted_at).toISOString()})`,
    details: {
      id: row.id,
      project_id: row.project_id,
      name: row.name,
      depleted_at: new Date(row.depleted_at).toISOString(),
    },
  }));
};
