/**
 * Usage and failure reads of a project, its connectors, proxies and destination hosts, and the
 * system readings' history. Totals are all-time (a project's and a proxy's survive the
 * history's retention), series cover a range in buckets the compaction tiers keep; live
 * windows (what gateways counted since the last flush) are added where a read ends now.
 */
import { UserRole } from "../../../shared/roles.ts";
import { failureExamples, failureSummary } from "../../metrics/failures.ts";
import { LiveWindows } from "../../metrics/live-windows.ts";
import { ProjectUsage } from "../../metrics/project-usage.ts";
import { type RangeName, type Window, windowOf } from "../../metrics/ranges.ts";
import { systemHistory } from "../../metrics/system-history.ts";
import { type DeviceSeries, type Series, UsageReader } from "../../metrics/usage.ts";
import { getConnector } from "../../services/connectors.ts";
import { getProject } from "../../services/projects.ts";
import { getProxy } from "../../services/proxies.ts";
import type { ApiDeps } from "../deps.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import {
  DeviceSeriesAnswer,
  FailureExamplesAnswer,
  FailureReportAnswer,
  HostHistoryAnswer,
  HostsPageAnswer,
  ProjectMetricsAnswer,
  ProxyUsagePageAnswer,
  SeriesAnswer,
  SplitAnswer,
  SystemHistoryAnswer,
  TotalsAnswer,
} from "../answers/metrics.ts";
import {
  FailureExamplesQuery,
  FailuresQuery,
  HistoryQuery,
  HostHistoryQuery,
  HostsQuery,
  ProxiesUsageQuery,
  RangeOrAllQuery,
  SystemHistoryQuery,
} from "../../model/metrics.ts";

const PROJECT = "/api/v1/projects/:id";

const USAGE_FIELDS = "`{requests, successes, failures, success_rate, bytes_sent, " +
  "bytes_received, avg_latency_ms}`: bytes_sent is client to upstream, bytes_received " +
  "upstream to client; latency is connect to first byte (or tunnel up), averaged over requests";

const HISTORY_NOTE = "`range` (1h, 6h, 24h, 7d, 30d, 90d; default 24h) back from `end` (now " +
  "by default), in buckets of `bucket_seconds` (60, 3600, 21600, 86400; the range's default " +
  "unless given). Minute rows are kept a day, hours a week, six hours 30 days, then days: a " +
  "width finer than the range's oldest rows is a 422. Empty buckets are zeros. A window " +
  "ending now adds the live counts to its last bucket.";

export interface HistoryRoute<S = Series> {
  path: string;
  tag: string;
  summary: string;
  /** What the series is of, said before the query's note. */
  about?: string;
  /** The series over the query's window; raises NotFoundError for an entity not there. */
  series(params: Readonly<Record<string, string>>, window: Window): Promise<S>;
}

/** What every usage series route shares: its place, its query and its note. */
function historySpec(spec: HistoryRoute<unknown>) {
  return {
    method: "get",
    path: spec.path,
    tag: spec.tag,
    summary: spec.summary,
    description: spec.about === undefined ? HISTORY_NOTE : `${spec.about} ${HISTORY_NOTE}`,
    access: UserRole.viewer,
    query: HistoryQuery,
  } as const;
}

/**
 * A usage series route (a project's, a connector's, a proxy's): one query, read into its
 * window before anything else (a bad range is a 422 first), one answer shape.
 */
export function historyRoute(spec: HistoryRoute): Route {
  return defineRoute({
    ...historySpec(spec),
    responses: {
      200: answer(
        "`{range, bucket_seconds, from, to, live_included, points: [{t, ...usage}]}`",
        SeriesAnswer,
      ),
    },
    async handler({ c, params, query }) {
      const window = windowOf(query.range as RangeName, query.bucket_seconds, query.end);
      return c.json(await spec.series(params, window));
    },
  });
}

/**
 * A tunnel device's usage series route: a project's history query, its points carrying the
 * device's encrypted DNS closed beside the usage.
 */
export function deviceHistoryRoute(spec: HistoryRoute<DeviceSeries>): Route {
  return defineRoute({
    ...historySpec(spec),
    responses: {
      200: answer(
        "`{range, bucket_seconds, from, to, live_included, points: [{t, ...usage, " +
          "encrypted_dns_closed}]}`",
        DeviceSeriesAnswer,
      ),
    },
    async handler({ c, params, query }) {
      const window = windowOf(query.range as RangeName, query.bucket_seconds, query.end);
      return c.json(await spec.series(params, window));
    },
  });
}

interface EntityRoutes {
  /** The totals route's path; the series is at `<path>/history`. */
  path: string;
  entity: "connector" | "proxy";
  totalsSummary: string;
  totalsNote: string;
  /** Answers 404 unless the entity is the project's. */
  exists(params: Readonly<Record<string, string>>): Promise<unknown>;
  id(params: Readonly<Record<string, string>>): string;
}

/** The api's usage reader: flushed history and totals, with the live windows from Redis. */
export function usageReaderOf(deps: ApiDeps): UsageReader {
  const live = new LiveWindows({
    redis: deps.redis,
    keys: deps.keys,
    logger: deps.logger,
    deadlineMs: deps.settings.redisRequestTimeoutMs,
  });
  return new UsageReader({ database: deps.database, live });
}

export function metricsRoutes(deps: ApiDeps): Route[] {
  const usage = usageReaderOf(deps);
  const project = new ProjectUsage({
    database: deps.database,
    redis: deps.redis,
    keys: deps.keys,
    logger: deps.logger,
    deadlineMs: deps.settings.redisRequestTimeoutMs,
    usage,
    routing: deps,
  });
  const rangeWindow = (range: string) =>
    range === "all" ? undefined : windowOf(range as RangeName, undefined, undefined);

  /** A connector's or proxy's totals and series: one shape for both. */
  const entityRoutes = (spec: EntityRoutes): Route[] => [
    defineRoute({
      method: "get",
      path: spec.path,
      tag: "metrics",
      summary: spec.totalsSummary,
      description: `\`usage\` is ${USAGE_FIELDS}: ${spec.totalsNote}`,
      access: UserRole.viewer,
      responses: { 200: answer("`{usage, live_included}`", TotalsAnswer) },
      async handler({ c, params }) {
        await spec.exists(params);
        return c.json(await usage.total(spec.entity, spec.id(params)));
      },
    }),
    historyRoute({
      path: `${spec.path}/history`,
      tag: "metrics",
      summary: `${spec.entity === "proxy" ? "A proxy's" : "A connector's"} usage over time`,
      async series(params, window) {
        await spec.exists(params);
        return await usage.series(spec.entity, spec.id(params), window);
      },
    }),
  ];

  return [
    defineRoute({
      method: "get",
      path: `${PROJECT}/metrics`,
      tag: "metrics",
      summary: "A project's all-time usage and its pool as it stands",
      description: `\`usage\` is ${USAGE_FIELDS}, all-time (kept past the history's ` +
        "retention), with the live counts added; `live_included` is false when Redis did " +
        "not answer (the flushed totals alone). `pool` counts the proxies by status and " +
        "those resting in a rate-limit quarantine now (null without Redis).",
      access: UserRole.viewer,
      responses: {
        200: answer(
          "`{usage, live_included, pool: {total, by_status, quarantined}}`",
          ProjectMetricsAnswer,
        ),
      },
      async handler({ c, params }) {
        await getProject(deps, params.id);
        const totals = await usage.total("project", params.id);
        return c.json({ ...totals, pool: await project.pool(params.id) });
      },
    }),
    historyRoute({
      path: `${PROJECT}/metrics/history`,
      tag: "metrics",
      summary: "A project's usage over time",
      async series(params, window) {
        await getProject(deps, params.id);
        return await usage.series("project", params.id, window);
      },
    }),
    defineRoute({
      method: "get",
      path: `${PROJECT}/metrics/connectors`,
      tag: "metrics",
      summary: "The traffic split across a project's connectors",
      description: "Per connector, over `range` (1h to 90d, or all; default 24h): its usage, " +
        "its share of the requests and bytes, and the share gateways give it now of requests " +
        "that name no place and no domain: worked out by the gateway's own routing code over " +
        "a compile of this project with the quarantines, traffic blocks and provider-API " +
        "pools in Redis (as the routing preview is), its weight over the weights of the " +
        "connectors that can take one. `excluded_reason` says why one takes none, in the " +
        "router's words. `runtime_included` is false when Redis did not answer (shares " +
        "without runtime state). `cost` is its bytes both ways in decimal GB times its " +
        "traffic_config.price_per_gb.",
      access: UserRole.viewer,
      query: RangeOrAllQuery,
      responses: {
        200: answer("`{range, items: [...], runtime_included}`", SplitAnswer),
      },
      async handler({ c, params, query }) {
        const window = rangeWindow(query.range);
        await getProject(deps, params.id);
        const split = await project.split(params.id, window);
        return c.json({
          range: query.range,
          items: split.items,
          runtime_included: split.runtimeIncluded,
        });
      },
    }),
    defineRoute({
      method: "get",
      path: `${PROJECT}/metrics/proxies`,
      tag: "metrics",
      summary: "A project's proxies by their all-time usage, a page at a time",
      description: "Ordered by `order` (requests, failures or bytes; the flushed totals), " +
        "filtered by `connector_id` and by `ids` (proxy ids, comma-separated, at most 1000: " +
        "the rows a list page shows). Each row's usage has the live counts added.",
      access: UserRole.viewer,
      query: ProxiesUsageQuery,
      responses: {
        200: answer("`{items, total, page, page_size, live_included}`", ProxyUsagePageAnswer),
      },
      async handler({ c, params, query }) {
        await getProject(deps, params.id);
        const page = await project.proxies(params.id, {
          connectorId: query.connector_id,
          ids: query.ids,
          order: query.order,
          limit: query.page_size,
          offset: (query.page - 1) * query.page_size,
        });
        return c.json({
          items: page.items,
          total: page.total,
          page: query.page,
          page_size: query.page_size,
          live_included: page.liveIncluded,
        });
      },
    }),
    defineRoute({
      method: "get",
      path: `${PROJECT}/metrics/hosts`,
      tag: "metrics",
      summary: "A project's destination hosts, most requested first",
      description: "Over `range` (1h to 90d, or all; default 24h), filtered by `connector_id` " +
        "and `search` (part of a host name), paged. From the flushed history only: up to " +
        "one flush interval behind. Hosts past a gateway's cap per window are counted under " +
        "`(other)`.",
      access: UserRole.viewer,
      query: HostsQuery,
      responses: {
        200: answer(
          "`{range, items: [{host, ...usage}], total, page, page_size}`",
          HostsPageAnswer,
        ),
      },
      async handler({ c, params, query }) {
        const window = rangeWindow(query.range);
        await getProject(deps, params.id);
        const page = await usage.hosts(params.id, window, {
          connectorId: query.connector_id,
          search: query.search,
          limit: query.page_size,
          offset: (query.page - 1) * query.page_size,
        });
        return c.json({
          range: query.range,
          items: page.items,
          total: page.total,
          page: query.page,
          page_size: query.page_size,
        });
      },
    }),
    defineRoute({
      method: "get",
      path: `${PROJECT}/metrics/hosts/history`,
      tag: "metrics",
      summary: "Usage over time of up to 12 destination hosts of a project",
      description: `\`hosts\` is a comma-separated list. ${HISTORY_NOTE} Hosts are read ` +
        "from the flushed history only.",
      access: UserRole.viewer,
      query: HostHistoryQuery,
      responses: { 200: answer("`{items: [{host, series}]}`", HostHistoryAnswer) },
      async handler({ c, params, query }) {
        const window = windowOf(query.range as RangeName, query.bucket_seconds, query.end);
        await getProject(deps, params.id);
        return c.json({ items: await usage.hostSeries(params.id, query.hosts, window) });
      },
    }),
    ...entityRoutes({
      path: `${PROJECT}/connectors/:cid/metrics`,
      entity: "connector",
      totalsSummary: "A connector's usage over everything retained",
      totalsNote: "its history summed (which outlives its proxies, to the project's " +
        "metrics_retention_days), with the live counts added.",
      exists: (params) => getConnector(deps, params.id, params.cid),
      id: (params) => params.cid,
    }),
    ...entityRoutes({
      path: `${PROJECT}/proxies/:pid/metrics`,
      entity: "proxy",
      totalsSummary: "A proxy's all-time usage",
      totalsNote: "all-time, with the live counts added.",
      exists: (params) => getProxy(deps, params.id, params.pid),
      id: (params) => params.pid,
    }),
    defineRoute({
      method: "get",
      path: `${PROJECT}/failures`,
      tag: "metrics",
      summary: "What a project's failed requests failed of",
      description: "Over `range` (default 24h), from the flushed failure counts: every " +
        "failure kind (refusals of the gateway's own and failed attempts through a proxy), " +
        "by connector and by what the upstream itself answered. Works without Redis.",
      access: UserRole.viewer,
      query: FailuresQuery,
      responses: { 200: answer("`{range, from, to, total, by_kind, rows}`", FailureReportAnswer) },
      async handler({ c, params, query }) {
        const window = windowOf(query.range as RangeName, undefined, undefined);
        await getProject(deps, params.id);
        return c.json(
          await failureSummary(deps.database, params.id, window, query.connector_id),
        );
      },
    }),
    defineRoute({
      method: "get",
      path: `${PROJECT}/failures/examples`,
      tag: "metrics",
      summary: "Recent examples of a project's failed requests, newest first",
      description: "A sample: each gateway keeps a few distinct examples per project and kind " +
        "every few seconds, the last 100 or so per kind. Messages carry no credentials and " +
        "no URL queries. Filter by `kind` and `connector_id`; page with `cursor` (the " +
        "previous page's `next_cursor`). Needs Redis (503 without it).",
      access: UserRole.viewer,
      query: FailureExamplesQuery,
      responses: { 200: answer("`{items, next_cursor}`", FailureExamplesAnswer) },
      async handler({ c, params, query }) {
        await getProject(deps, params.id);
        return c.json(
          await failureExamples(
            deps.redis,
            deps.keys,
            deps.settings.redisRequestTimeoutMs,
            params.id,
            {
              kind: query.kind,
              connectorId: query.connector_id,
              limit: query.limit,
              cursor: query.cursor,
            },
          ),
        );
      },
    }),
    defineRoute({
      method: "get",
      path: "/api/v1/system/stats/history",
      tag: "system",
      summary: "The system readings over time",
      description: "The snapshot job's readings (database and table sizes, Redis memory and " +
        "keys, counts of projects, connectors and proxies by status), averaged per bucket " +
        "over `range` (1h, 24h, 7d, 30d, 90d; default 24h).",
      access: UserRole.admin,
      query: SystemHistoryQuery,
      responses: { 200: answer("`{range, bucket_seconds, points}`", SystemHistoryAnswer) },
      async handler({ c, query }) {
        return c.json(await systemHistory(deps.database, query.range));
      },
    }),
  ];
}
