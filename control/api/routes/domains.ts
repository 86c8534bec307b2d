/**
 * A project's judging per site: what its block rules found on each site over the last days, by
 * connector, with what the blocked attempts cost (docs/blocking.md). Counted by the gateways in
 * Redis: without it, 503.
 */
import { UserRole } from "../../../shared/roles.ts";
import { projectDomains } from "../../metrics/domains.ts";
import { DOMAIN_HISTORY_DAYS_MAX, DomainsQuery } from "../../model/domains.ts";
import { getProject } from "../../services/projects.ts";
import { DomainsAnswer } from "../answers/domains.ts";
import type { ApiDeps } from "../deps.ts";
import { answer, defineRoute, type Route } from "../registry.ts";

export function domainRoutes(deps: ApiDeps): Route[] {
  const stores = {
    redis: deps.redis,
    keys: deps.keys,
    database: deps.database,
    deadlineMs: deps.settings.redisRequestTimeoutMs,
  };
  return [
    defineRoute({
      method: "get",
      path: "/api/v1/projects/:id/domains",
      tag: "projects",
      summary: "What a project's block rules found, per site",
      description: "Over the last `days` UTC days (1, today, to " +
        `${DOMAIN_HISTORY_DAYS_MAX}; days past the last seven are read from the history in ` +
        "Postgres, kept for the project's `metrics_retention_days`): each site's judged " +
        "answers (`ok`, `blocked`, `rate_limited`), the requests sent again through another " +
        "exit (`retries`), the bytes the blocked attempts and the good answers carried both ways " +
        "(`blocked_bytes`, `ok_bytes`), each by connector with `blocked_spend`, `spend` and " +
        "`cost_per_success` at the connector's `price_per_gb` (null without one), the site's " +
        "`spend` per currency (its total, blocked part and cost per good answer), what rules in " +
        "shadow mode would have given (`shadow`), and, where the project escalates between " +
        "connector tiers, where the site stands (`escalation`: its tier by connector names, " +
        "since when, what moved it, when it next probes the tier below, and a `summary` line). " +
        "A site is the target's registrable domain. " +
        "Sites with the most blocked answers first; `limit` (1-1000, 100) of them, `more` says " +
        "how many were left out. Needs Redis and Postgres (503 without either).",
      access: UserRole.viewer,
      query: DomainsQuery,
      responses: { 200: answer("The project's sites", DomainsAnswer) },
      async handler({ c, params, query }) {
        await getProject(deps, params.id);
        return c.json(
          await projectDomains(stores, params.id, { days: query.days, limit: query.limit }),
        );
      },
    }),
  ];
}
