/**
 * Project-wide usage views built on the usage reader: the pool as it stands (proxies by status,
 * quarantined now), the traffic split across connectors over a window, and a page of proxies
 * ordered by their totals. Postgres first; Redis after (soft); a second short Postgres read
 * only where Redis names rows (the quarantined ones).
 *
 * The split's expected shares are the router's, not a query's: the project's routing as a gateway
 * holds it (control/feed/project-routing.ts, the routing preview's own building) judged by
 * shared/routing/expected-share.ts, so what the dashboard expects is what gateways do.
 */
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import { translatePostgresError } from "../../db/errors.ts";
import { errorText } from "../../shared/errors.ts";
import type { UsernameOptions } from "../../shared/routing/contract.ts";
import { Ineligible } from "../../shared/routing/eligibility.ts";
import { type Exclusion, expectedShares, NotServing } from "../../shared/routing/expected-share.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { PROXY_STATUSES } from "../../shared/roles.ts";
import type { Logger } from "../core/logging.ts";
import { redisDeadline } from "../core/redis.ts";
import { isUuid } from "../core/store.ts";
import { projectRouting, type ProjectRoutingDeps } from "../feed/project-routing.ts";
import type { SplitExclusion } from "../model/metrics.ts";
import type { Window } from "./ranges.ts";
import type { UsageReader } from "./usage.ts";
import {
  addCounts,
  type Counts,
  countsOfRow,
  type SumRow,
  type Usage,
  usageOf,
  ZERO_COUNTS,
} from "./usage-model.ts";

export interface ProjectUsageOptions {
  database: Database;
  redis: Redis;
  keys: RedisKeys;
  logger: Logger;
  deadlineMs: number;
  usage: UsageReader;
  /** What a project's routing is built from, for the split's expected shares. */
  routing: ProjectRoutingDeps;
}

export interface Pool {
  total: number;
  by_status: Record<string, number>;
  /** Proxies resting in a rate-limit quarantine now; null when Redis did not answer. */
  quarantined: number | null;
}

export interface SplitRow {
  connector_id: string;
  name: string;
  enabled: boolean;
  weight: number;
  proxies: number;
  healthy: number;
  /**
   * Its share of the requests that name no place and no domain, as gateways route them now: its
   * weight over the weights of the connectors that can take such a request; 0 when excluded.
   */
  expected_share: number;
  /** Its share of the window's requests; null when the window has none. */
  observed_share: number | null;
  /** Its share of the window's bytes (both directions); null when the window has none. */
  observed_bytes_share: number | null;
  /** Why it takes no such request (SPLIT_EXCLUSIONS); null when it takes them. */
  excluded_reason: SplitExclusion | null;
  usage: Usage;
  /** Bytes both ways in decimal GB times the connector's price_per_gb; null without a price. */
  cost: number | null;
  currency: string | null;
}

export interface ProxyUsageRow {
  proxy_id: string;
  connector_id: string;
  host: string;
  port: number;
  status: string;
  usage: Usage;
}

export interface Split {
  items: SplitRow[];
  /** False when Redis did not answer: the shares were worked out without quarantines or blocks. */
  runtimeIncluded: boolean;
}

/** A request that names no place and no destination: the split is of plain traffic. */
const NO_PLACE: UsernameOptions = { user: "" };
const NO_HOST = "";

/** The router's exclusion under the split's name for it (SPLIT_EXCLUSIONS says why). */
function splitExclusion(excluded: Exclusion, pendingDeletion: boolean): SplitExclusion {
  return excluded === Ineligible.notTakingRequests && !pendingDeletion ? "disabled" : excluded;
}

const round = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits;

export class ProjectUsage {
  readonly #o: ProjectUsageOptions;
  #quarantineFailing = false;
  #routingFailing = false;

  constructor(options: ProjectUsageOptions) {
    this.#o = options;
  }

  async #postgres<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      throw translatePostgresError(error);
    }
  }

  async pool(projectId: string): Promise<Pool> {
    const sql = this.#o.database.sql;
    const rows = await this.#postgres(() =>
      sql<{ status: string; n: number }[]>`
        select status, count(*)::int as n from proxies where project_id = ${projectId}
        group by status`
    );
    const byStatus: Record<string, number> = {};
    for (const status of PROXY_STATUSES) byStatus[status] = 0;
    let total = 0;
    for (const row of rows) {
      byStatus[row.status] = row.n;
      total += row.n;
    }
    return { total, by_status: byStatus, quarantined: await this.#quarantined(projectId) };
  }

  /** Quarantines are install-wide (a few thousand at most): which are this project's. */
  async #quarantined(projectId: string): Promise<number | null> {
    const { redis, keys, deadlineMs, logger } = this.#o;
    let ids: string[];
    try {
      ids = await redisDeadline(
        deadlineMs,
        () => redis.zrangebyscore(keys.proxyQuarantined, Date.now(), "+inf"),
      );
      this.#quarantineFailing = false;
    } catch (error) {
      if (!this.#quarantineFailing) {
        this.#quarantineFailing = true;
        logger.warn(
          { what: "quarantines", error: errorText(error) },
          "Runtime state unavailable, shown without it",
        );
      }
      return null;
    }
    if (ids.length === 0) return 0;
    const sql = this.#o.database.sql;
    const rows = await this.#postgres(() =>
      sql<{ n: number }[]>`select count(*)::int as n from proxies
        where project_id = ${projectId} and id = any(${ids.filter(isUuid)}::uuid[])`
    );
    return rows[0]?.n ?? 0;
  }

  /** The traffic split over a window (undefined: everything retained). */
  async split(projectId: string, window: Window | undefined): Promise<Split> {
    const sql = this.#o.database.sql;
    const connectors = await this.#postgres(() =>
      sql<
        {
          id: string;
          name: string;
          enabled: boolean;
          weight: number;
          traffic_config: { price_per_gb?: number | null; currency?: string } | null;
          proxies: number;
          healthy: number;
        }[]
      >`
        select c.id::text, c.name, c.enabled, c.weight, c.traffic_config,
          (select count(*) from proxies p where p.connector_id = c.id)::int as proxies,
          (select count(*) from proxies p where p.connector_id = c.id
            and p.status = 'healthy')::int as healthy
        from connectors c where c.project_id = ${projectId} order by c.created_at, c.id`
    );
    const sums = await this.#o.usage.connectorSums(projectId, window);
    const counts = new Map<string, Counts>(
      connectors.map((c) => [c.id, sums.get(c.id) ?? { ...ZERO_COUNTS }]),
    );
    if (window === undefined || window.live) {
      const live = await this.#o.usage.live("connector", connectors.map((c) => c.id));
      for (const [id, extra] of live.counts) counts.set(id, addCounts(counts.get(id)!, extra));
    }
    const expected = await this.#expected(projectId);
    let requests = 0;
    let bytes = 0;
    for (const c of counts.values()) {
      requests += c.requests;
      bytes += c.bytesSent + c.bytesReceived;
    }
    const items = connectors.map((c): SplitRow => {
      const own = counts.get(c.id)!;
      const ownBytes = own.bytesSent + own.bytesReceived;
      const price = c.traffic_config?.price_per_gb ?? null;
      // A connector the compile left out (its provider gone) is in no gateway's routing.
      const judged = expected.shares.get(c.id);
      return {
        connector_id: c.id,
        name: c.name,
        enabled: c.enabled,
        weight: c.weight,
        proxies: c.proxies,
        healthy: c.healthy,
        expected_share: judged === undefined ? 0 : round(judged.share, 4),
        observed_share: requests > 0 ? round(own.requests / requests, 4) : null,
        observed_bytes_share: bytes > 0 ? round(ownBytes / bytes, 4) : null,
        excluded_reason: judged === undefined
          ? NotServing.notInRouting
          : judged.excluded === null
          ? null
          : splitExclusion(judged.excluded, judged.pendingDeletion),
        usage: usageOf(own),
        cost: price === null ? null : round((ownBytes / 1e9) * price, 4),
        currency: price === null ? null : c.traffic_config?.currency ?? "USD",
      };
    });
    return { items, runtimeIncluded: expected.runtimeIncluded };
  }

  /** Each connector's share as the router splits plain requests now, by connector id. */
  async #expected(projectId: string) {
    let failed = false;
    const routing = await projectRouting(this.#o.routing, projectId, {
      stickyReads: false,
      unavailable: (part, error) => {
        failed = true;
        // Logged once an outage, as the pool's quarantines are.
        if (this.#routingFailing) return;
        this.#routingFailing = true;
        this.#o.logger.warn(
          { what: "traffic split", part, error: errorText(error) },
          "Runtime state unavailable, shown without it",
        );
      },
    });
    if (!failed) this.#routingFailing = false;
    const shares = new Map<
      string,
      { share: number; excluded: Exclusion | null; pendingDeletion: boolean }
    >();
    const { snapshot, project, nowMs } = routing;
    for (const judged of expectedShares(snapshot, project, NO_PLACE, NO_HOST, nowMs)) {
      shares.set(judged.connector.id, {
        share: judged.share,
        excluded: judged.excluded,
        pendingDeletion: judged.connector.connector.pending_deletion,
      });
    }
    return { shares, runtimeIncluded: routing.runtimeIncluded };
  }

  /** A page of a project's proxies, most requested first (by their stored totals). */
  async proxies(
    projectId: string,
    options: {
      connectorId?: string;
      /** Only these proxies (a list page's rows). */
      ids?: readonly string[];
      order: "requests" | "failures" | "bytes";
      limit: number;
      offset: number;
    },
  ): Promise<{ items: ProxyUsageRow[]; total: number; liveIncluded: boolean }> {
    const order = {
      requests: "coalesce(t.requests, 0)",
      failures: "coalesce(t.failures, 0)",
      bytes: "coalesce(t.bytes_sent + t.bytes_received, 0)",
    }[options.order];
    const params: (string | number)[] = [projectId];
    let filter = "";
    if (options.connectorId) {
      params.push(options.connectorId);
      filter = `and p.connector_id = $${params.length}`;
    }
    if (options.ids) {
      params.push(options.ids.join(","));
      filter += ` and p.id = any(string_to_array($${params.length}, ',')::uuid[])`;
    }
    params.push(options.limit, options.offset);
    const sql = this.#o.database.sql;
    const rows = await this.#postgres(() =>
      sql.unsafe<
        (SumRow & {
          id: string;
          connector_id: string;
          host: string;
          port: number;
          status: string;
          total: number;
        })[]
      >(
        `select p.id::text, p.connector_id::text, p.host, p.port, p.status,
          t.requests::text, t.successes::text, t.failures::text, t.bytes_sent::text,
          t.bytes_received::text, t.latency_sum_ms, (count(*) over ())::int as total
        from proxies p left join metric_totals t
          on t.entity_kind = 'proxy' and t.entity_id = p.id
        where p.project_id = $1 ${filter}
        order by ${order} desc, p.created_at, p.id
        limit $${params.length - 1} offset $${params.length}`,
        params,
      )
    );
    const live = await this.#o.usage.live("proxy", rows.map((r) => r.id));
    return {
      items: rows.map((row) => {
        const stored = countsOfRow(row);
        const extra = live.counts.get(row.id);
        return {
          proxy_id: row.id,
          connector_id: row.connector_id,
          host: row.host,
          port: row.port,
          status: row.status,
          usage: usageOf(extra ? addCounts(stored, extra) : stored),
        };
      }),
      total: rows[0]?.total ?? 0,
      liveIncluded: live.included,
    };
  }
}
