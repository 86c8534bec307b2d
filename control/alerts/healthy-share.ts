/**
 * healthy_share: a connector whose share of healthy proxies (by their status column, as the
 * health checks leave it) is under the threshold, in percent. A connector without proxies has
 * no share and does not fire.
 */
import type { Condition } from "./condition.ts";

export const healthyShare: Condition = async (deps, rule) => {
  const threshold = rule.threshold ?? 0;
  const rows = await deps.database.sql<
    {
      id: string;
      name: string;
      project_id: string;
      project_name: string;
      total: number;
      healthy: number;
    }[]
  >`
    select c.id::text, c.name, c.project_id::text, p.name as project_name,
      count(x.id)::int as total, (count(x.id) filter (where x.status = 'healthy'))::int as healthy
    from connectors c join projects p on p.id = c.project_id
    join proxies x on x.connector_id = c.id
    where (${rule.projectId}::uuid is null or c.project_id = ${rule.projectId}::uuid)
      and (${rule.connectorId}::uuid is null or c.id = ${rule.connectorId}::uuid)
    group by c.id, c.name, c.project_id, p.name`;
  return rows.filter((row) => row.total > 0 && (row.healthy * 100) / row.total < threshold)
    .map((row) => {
      const percent = Math.floor((row.healthy * 100) / row.total);
      return {
        subject: `connector:${row.id}`,
        message: `Connector ${row.name} (project ${row.project_name}) has ${row.healthy} of ` +
          `${row.total} proxies healthy (${percent}%, under ${threshold}%)`,
        details: {
          id: row.id,
          project_id: row.project_id,
          name: row.name,
          healthy: row.healthy,
          total: row.total,
          percent,
        },
      };
    });
};
