/**
 * quarantine_storm: a connector with at least the threshold of its proxies quarantined at once
 * by the gateways' rate limiters (the quarantine set in Redis, as the api's views read it).
 * Redis away: the condition cannot tell, and throws.
 */
import { redisDeadline } from "../core/redis.ts";
import type { Condition } from "./condition.ts";

export const quarantineStorm: Condition = async (deps, rule, nowMs) => {
  const threshold = rule.threshold ?? 1;
  const ids = await redisDeadline(
    deps.settings.redisRequestTimeoutMs,
    () => deps.redis.zrangebyscore(deps.keys.proxyQuarantined, `(${nowMs}`, "+inf"),
  );
  if (ids.length === 0) return [];
  const rows = await deps.database.sql<
    { id: string; name: string; project_id: string; project_name: string; quarantined: number }[]
  >`
    select c.id::text, c.name, c.project_id::text, p.name as project_name,
      count(*)::int as quarantined
    from proxies x join connectors c on c.id = x.connector_id join projects p on p.id = c.project_id
    where x.id::text = any(${ids}::text[])
      and (${rule.projectId}::uuid is null or c.project_id = ${rule.projectId}::uuid)
      and (${rule.connectorId}::uuid is null or c.id = ${rule.connectorId}::uuid)
    group by c.id, c.name, c.project_id, p.name`;
  return rows.filter((row) => row.quarantined >= threshold).map((row) => ({
    subject: `connector:${row.id}`,
    message: `Connector ${row.name} (project ${row.project_name}) has ${row.quarantined} ` +
      `proxies quarantined at once (threshold ${threshold})`,
    details: {
      id: row.id,
      project_id: row.project_id,
      name: row.name,
      quarantined: row.quarantined,
    },
  }));
};
