/**
 * domain_block_rate: a site whose answers a project's block rules judged blocked or rate-limited
 * today (UTC) more often than the threshold (percent), read as the project's Domains page reads
 * it (control/metrics/domains.ts). A site judged fewer than MIN_JUDGED times today does not
 * fire: a handful of answers says little of a rate.
 */
import { projectDomains } from "../metrics/domains.ts";
import type { Condition } from "./condition.ts";

export const MIN_JUDGED = 20;
/** Sites read per project at most, the most blocked first. */
const SITES_READ = 500;

export const domainBlockRate: Condition = async (deps, rule, nowMs) => {
  const threshold = rule.threshold ?? 0;
  const projects = await deps.database.sql<{ id: string; name: string }[]>`
    select p.id::text, p.name from projects p
    where (${rule.projectId}::uuid is null or p.id = ${rule.projectId}::uuid)
      and (${rule.connectorId}::uuid is null
        or p.id = (select project_id from connectors where id = ${rule.connectorId}::uuid))
    order by p.name`;
  const stores = {
    redis: deps.redis,
    keys: deps.keys,
    database: deps.database,
    deadlineMs: deps.settings.redisRequestTimeoutMs,
  };
  const firing = [];
  for (const project of projects) {
    const page = await projectDomains(stores, project.id, { days: 1, limit: SITES_READ, nowMs });
    for (const site of page.sites) {
      const connectors = rule.connectorId === null
        ? site.connectors
        : site.connectors.filter((c) => c.connector_id === rule.connectorId);
      const judged = connectors.reduce((sum, c) => sum + c.ok + c.blocked + c.rate_limited, 0);
      const refused = connectors.reduce((sum, c) => sum + c.blocked + c.rate_limited, 0);
      if (judged < MIN_JUDGED) continue;
      const percent = Math.round((refused * 1000) / judged) / 10;
      if (percent <= threshold) continue;
      firing.push({
        subject: `site:${project.id}:${site.site}`,
        message: `${site.site} blocked or rate-limited ${percent}% of ${judged} answers today ` +
          `(project ${project.name}, over ${threshold}%)`,
        details: {
          project_id: project.id,
          site: site.site,
          judged,
          refused,
          percent,
        },
      });
    }
  }
  return firing;
};
