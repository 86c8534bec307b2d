/**
 * A project's judging per site (docs/blocking.md, "What it cost"), as gateways count it into one
 * Redis hash per project and UTC day (gateway/blocking/domain-counts.ts): over the last `days`
 * days, each site's answers judged good, blocked and rate-limited, the requests sent again, the
 * bytes the blocked attempts carried and what they cost at their connector's `price_per_gb`, by
 * connector, and what rules in shadow mode would have given there. Sites are ordered by the
 * answers they blocked, then by the answers judged.
 */
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import { translatePostgresError } from "../../db/errors.ts";
import {
  countDay,
  DOMAIN_COUNTS,
  type DomainCount,
  type RedisKeys,
} from "../../shared/redis-keys.ts";
import type { TrafficConfig } from "../../db/schema.ts";
import { redisDeadline } from "../core/redis.ts";

const GB = 1_000_000_000;

export interface DomainConnectorView {
  connector_id: string;
  /** Null when the connector is gone. */
  connector_name: string | null;
  ok: number;
  blocked: number;
  rate_limited: number;
  retries: number;
  blocked_bytes: number;
  /** blocked_bytes at the connector's price_per_gb; null without a price. */
  blocked_spend: number | null;
  currency: string | null;
}

export interface DomainShadowView {
  rule: string;
  verdict: string;
  count: number;
}

export interface DomainView {
  site: string;
  judged: number;
  ok: number;
  blocked: number;
  rate_limited: number;
  retries: number;
  blocked_bytes: number;
  connectors: DomainConnectorView[];
  shadow: DomainShadowView[];
}

export interface DomainsPage {
  days: number;
  /** The UTC days counted, oldest first. */
  from: string;
  to: string;
  sites: DomainView[];
  /** Sites left out past `limit`. */
  more: number;
}

export interface DomainStores {
  redis: Redis;
  keys: RedisKeys;
  database: Database;
  deadlineMs: number;
}

const isCount = (text: string): text is DomainCount =>
  (DOMAIN_COUNTS as readonly string[]).includes(text);

export async function projectDomains(
  stores: DomainStores,
  projectId: string,
  options: { days: number; limit: number; nowMs?: number },
): Promise<DomainsPage> {
  const now = options.nowMs ?? Date.now();
  const days = Array.from(
    { length: options.days },
    (_, back) => countDay(now - (options.days - 1 - back) * 86_400_000),
  );
  const hashes = await redisDeadline(stores.deadlineMs, async () => {
    const pipeline = stores.redis.pipeline();
    for (const day of days) pipeline.hgetall(stores.keys.domainCounts(projectId, day));
    const replies = await pipeline.exec();
    return (replies ?? []).map(([error, value]) => {
      if (error) throw error;
      return value as Record<string, string>;
    });
  });
  const sites = new Map<string, DomainView>();
  const perConnector = new Map<string, Map<string, DomainConnectorView>>();
  const shadows = new Map<string, Map<string, DomainShadowView>>();
  const siteOf = (site: string) => {
    let view = sites.get(site);
    if (view === undefined) {
      view = {
        site,
        judged: 0,
        ok: 0,
        blocked: 0,
        rate_limited: 0,
        retries: 0,
        blocked_bytes: 0,
        connectors: [],
        shadow: [],
      };
      sites.set(site, view);
    }
    return view;
  };
  for (const hash of hashes) {
    for (const [field, text] of Object.entries(hash ?? {})) {
      const [site, connectorId, count] = field.split("\t");
      const value = Number(text);
      if (site === undefined || count === undefined || !Number.isFinite(value)) continue;
      const view = siteOf(site);
      if (count.startsWith("shadow:")) {
        const [, rule, verdict] = count.split(":");
        let byRule = shadows.get(site);
        if (byRule === undefined) shadows.set(site, byRule = new Map());
        const key = `${rule}:${verdict}`;
        const known = byRule.get(key) ?? { rule, verdict, count: 0 };
        known.count += value;
        byRule.set(key, known);
        continue;
      }
      if (!isCount(count) || connectorId === "") continue;
      view[count] += value;
      let connectors = perConnector.get(site);
      if (connectors === undefined) perConnector.set(site, connectors = new Map());
      let connector = connectors.get(connectorId);
      if (connector === undefined) {
        connector = {
          connector_id: connectorId,
          connector_name: null,
          ok: 0,
          blocked: 0,
          rate_limited: 0,
          retries: 0,
          blocked_bytes: 0,
          blocked_spend: null,
          currency: null,
        };
        connectors.set(connectorId, connector);
      }
      connector[count] += value;
    }
  }
  const ids = new Set<string>();
  for (const connectors of perConnector.values()) for (const id of connectors.keys()) ids.add(id);
  const known = await connectorPrices(stores.database, [...ids]);
  for (const [site, view] of sites) {
    view.judged = view.ok + view.blocked + view.rate_limited;
    view.connectors = [...(perConnector.get(site)?.values() ?? [])].map((connector) => {
      const row = known.get(connector.connector_id);
      const price = row?.traffic?.price_per_gb ?? null;
      return {
        ...connector,
        connector_name: row?.name ?? null,
        blocked_spend: price === null ? null : (connector.blocked_bytes / GB) * price,
        currency: price === null ? null : row?.traffic?.currency ?? null,
      };
    }).sort((a, b) => b.blocked - a.blocked || a.connector_id.localeCompare(b.connector_id));
    view.shadow = [...(shadows.get(site)?.values() ?? [])].sort((a, b) =>
      b.count - a.count || a.rule.localeCompare(b.rule)
    );
  }
  const ordered = [...sites.values()].sort((a, b) =>
    b.blocked + b.rate_limited - (a.blocked + a.rate_limited) || b.judged - a.judged ||
    a.site.localeCompare(b.site)
  );
  return {
    days: options.days,
    from: days[0],
    to: days[days.length - 1],
    sites: ordered.slice(0, options.limit),
    more: Math.max(0, ordered.length - options.limit),
  };
}

async function connectorPrices(
  database: Database,
  ids: readonly string[],
): Promise<Map<string, { name: string; traffic: TrafficConfig | null }>> {
  const uuids = ids.filter((id) => /^[0-9a-f-]{36}$/i.test(id));
  if (uuids.length === 0) return new Map();
  try {
    const rows = await database.sql<
      { id: string; name: string; traffic_config: TrafficConfig | null }[]
    >`select id::text as id, name, traffic_config from connectors where id = any(${uuids}::uuid[])`;
    return new Map(rows.map((row) => [row.id, { name: row.name, traffic: row.traffic_config }]));
  } catch (error) {
    throw translatePostgresError(error);
  }
}
