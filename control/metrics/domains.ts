/**
 * A project's judging per site (docs/blocking.md, "What it cost"), as gateways count it into one
 * Redis hash per project and UTC day (gateway/blocking/domain-counts.ts): over the last `days`
 * days, each site's answers judged good, blocked and rate-limited, the requests sent again, the
 * bytes the blocked attempts carried and what they cost at their connector's `price_per_gb`, the
 * bytes of the good answers and what every answer cost per good one, by connector, and what rules
 * in shadow mode would have given there. Sites are ordered by the answers they blocked, then by
 * the answers judged.
 *
 * Where the project escalates between connector tiers, each site also shows where it stands
 * (the state escalation keeps in Redis, shared/lua/escalation_report.lua), its tiers named by
 * their connectors as the gateways rank them (shared/routing/tiers.ts); a site escalated but not
 * judged in the days asked is listed too.
 */
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import { translatePostgresError } from "../../db/errors.ts";
import { storedDomainCounts } from "./domain-history.ts";
import {
  countDay,
  DOMAIN_COUNTS,
  DOMAIN_COUNTS_DAYS,
  type DomainCount,
  type RedisKeys,
  STREAM_CAPS,
} from "../../shared/redis-keys.ts";
import type { TrafficConfig } from "../../db/schema.ts";
import { redisDeadline } from "../core/redis.ts";
import { connectorTiers } from "../../shared/routing/tiers.ts";
import { readEscalationState } from "../../shared/blocking/escalation.ts";
import { readCooldownEntry } from "../../shared/blocking/cooldown-entry.ts";

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
  /** Bytes both ways of the good answers that went on to clients. */
  ok_bytes: number;
  /** blocked_bytes at the connector's price_per_gb; null without a price. */
  blocked_spend: number | null;
  /** Every judged byte (good and blocked) at the price; null without one. */
  spend: number | null;
  /** spend over the good answers; null without a price or a good answer. */
  cost_per_success: number | null;
  currency: string | null;
}

/** A site's spend in one currency (its connectors may bill in several). */
export interface DomainSpendView {
  currency: string;
  /** Every judged byte through its priced connectors. */
  total: number;
  /** The blocked attempts' part. */
  blocked: number;
  /** total over the site's good answers (through any connector); null without one. */
  per_success: number | null;
}

export interface DomainShadowView {
  rule: string;
  verdict: string;
  count: number;
}

/** Where a site stands under escalation (docs/blocking.md, "Escalation"). */
export interface DomainEscalationView {
  /** 0: the cheapest tier. */
  tier: number;
  /** The tier's connectors by name (those gone are left out). */
  tier_connectors: string[];
  /** Since when the site is on its tier (ISO 8601). */
  since: string;
  /** What moved it there last: `up` after blocks, `down` after good probes; null: never moved. */
  moved: "up" | "down" | null;
  /** The run that moved it (blocks, or good probes). */
  after: number;
  /** The tier it left, by its connectors' names. */
  from_connectors: string[];
  /** Blocks in a row on its tier now. */
  blocks: number;
  /** Good probes in a row on the tier below now. */
  probes: number;
  /** When its requests start probing the tier below (ISO 8601); null: on the cheapest. */
  next_probe_at: string | null;
  /** The line an operator reads: "shop.example: residential since 14:03 UTC after 3 blocks on …". */
  summary: string;
}

export interface DomainView {
  site: string;
  judged: number;
  ok: number;
  blocked: number;
  rate_limited: number;
  retries: number;
  blocked_bytes: number;
  ok_bytes: number;
  /** Per currency: what the site cost, its blocked part, and the cost per good answer. */
  spend: DomainSpendView[];
  connectors: DomainConnectorView[];
  shadow: DomainShadowView[];
  /** Exits cooled down for the site now after the project's verdicts (docs/blocking.md). */
  cooldowns: number;
  /** Null: the project does not escalate, or the site is on the cheapest tier unmoved. */
  escalation: DomainEscalationView | null;
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
  // Redis keeps the last week; Postgres keeps a copy (a flush behind) and what is older. The
  // larger of the two per count wins: fresher in Redis, kept in Postgres if Redis lost it.
  const recent = days.slice(-DOMAIN_COUNTS_DAYS);
  const [cooldowns, escalated, ...fresh] = await redisDeadline(stores.deadlineMs, async () => {
    const pipeline = stores.redis.pipeline();
    pipeline.xrevrange(stores.keys.cooldownsStream, "+", "-", "COUNT", STREAM_CAPS.cooldowns);
    pipeline.hgetall(stores.keys.escalation(projectId));
    for (const day of recent) pipeline.hgetall(stores.keys.domainCounts(projectId, day));
    const replies = await pipeline.exec();
    return (replies ?? []).map(([error, value]) => {
      if (error) throw error;
      return value;
    });
  }) as [[string, string[]][], Record<string, string>, ...Record<string, string>[]];
  const stored = await storedDomainCounts(stores.database, projectId, days);
  const hashes = days.map((day) => {
    const merged = { ...stored.get(day) };
    const index = recent.indexOf(day);
    for (const [field, text] of Object.entries(index < 0 ? {} : fresh[index] ?? {})) {
      if (!(Number(merged[field]) >= Number(text))) merged[field] = text;
    }
    return merged;
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
        ok_bytes: 0,
        spend: [],
        connectors: [],
        shadow: [],
        cooldowns: 0,
        escalation: null,
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
          ok_bytes: 0,
          blocked_spend: null,
          spend: null,
          cost_per_success: null,
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
  for (const [site, exits] of cooledExits(cooldowns ?? [], projectId, now)) {
    siteOf(site).cooldowns = exits;
  }
  if (Object.keys(escalated ?? {}).length > 0) {
    const tiers = await projectTiers(stores.database, projectId);
    for (const [site, text] of Object.entries(escalated)) {
      const view = escalationView(site, text, tiers, now);
      if (view !== null) siteOf(site).escalation = view;
    }
  }
  for (const [site, view] of sites) {
    view.judged = view.ok + view.blocked + view.rate_limited;
    view.connectors = [...(perConnector.get(site)?.values() ?? [])].map((connector) => {
      const row = known.get(connector.connector_id);
      const price = row?.traffic?.price_per_gb ?? null;
      const spend = price === null
        ? null
        : ((connector.ok_bytes + connector.blocked_bytes) / GB) * price;
      return {
        ...connector,
        connector_name: row?.name ?? null,
        blocked_spend: price === null ? null : (connector.blocked_bytes / GB) * price,
        spend,
        cost_per_success: spend === null || connector.ok === 0 ? null : spend / connector.ok,
        currency: price === null ? null : row?.traffic?.currency ?? null,
      };
    }).sort((a, b) => b.blocked - a.blocked || a.connector_id.localeCompare(b.connector_id));
    const byCurrency = new Map<string, DomainSpendView>();
    for (const connector of view.connectors) {
      if (connector.spend === null || connector.currency === null) continue;
      const known = byCurrency.get(connector.currency) ??
        { currency: connector.currency, total: 0, blocked: 0, per_success: null };
      known.total += connector.spend;
      known.blocked += connector.blocked_spend ?? 0;
      byCurrency.set(connector.currency, known);
    }
    view.spend = [...byCurrency.values()].map((entry) => ({
      ...entry,
      per_success: view.ok === 0 ? null : entry.total / view.ok,
    }));
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

/** The project's connector names by tier, as the gateways rank them. */
async function projectTiers(database: Database, projectId: string): Promise<string[][]> {
  try {
    const rows = await database.sql<
      { id: string; name: string; tier: number | null; traffic_config: TrafficConfig | null }[]
    >`select id::text as id, name, tier, traffic_config from connectors
      where project_id = ${projectId} order by created_at, id`;
    return connectorTiers(rows, (row) => ({
      id: row.id,
      tier: row.tier,
      price_per_gb: row.traffic_config?.price_per_gb ?? null,
    })).map((tier) => tier.map((row) => row.name));
  } catch (error) {
    throw translatePostgresError(error);
  }
}

const clock = (atMs: number) => new Date(atMs).toISOString().slice(11, 16);

/** A site's stored state as the api shows it; null when it cannot be read. */
function escalationView(
  site: string,
  text: string,
  tiers: readonly string[][],
  nowMs: number,
): DomainEscalationView | null {
  const state = readEscalationState(text);
  if (state === undefined) return null;
  const at = Math.min(state.tier, Math.max(0, tiers.length - 1));
  const nameOf = (rank: number) => tiers[rank]?.join(" + ") || `tier ${rank}`;
  const { sinceMs, moved, after, fromTier: from, probeAtMs } = state;
  let summary = `${site}: ${nameOf(at)}`;
  if (moved !== null) {
    summary += ` since ${clock(sinceMs)} UTC after ${after} ` +
      (moved === "up" ? "blocks" : "good probes") +
      (from === undefined ? "" : ` on ${nameOf(moved === "up" ? from : at)}`);
  }
  if (at > 0 && probeAtMs > 0) {
    const minutes = Math.ceil((probeAtMs - nowMs) / 60_000);
    summary += minutes > 0
      ? `; next probe down in ${minutes} min`
      : `; probing ${nameOf(at - 1)} now`;
  }
  return {
    tier: at,
    tier_connectors: tiers[at] ?? [],
    since: new Date(sinceMs).toISOString(),
    moved,
    after,
    from_connectors: from === undefined ? [] : tiers[from] ?? [],
    blocks: state.blocks,
    probes: state.probes,
    next_probe_at: at > 0 && probeAtMs > 0 ? new Date(probeAtMs).toISOString() : null,
    summary,
  };
}

/** The project's exits cooled down now, by site, from the gateways' stream (newest first). */
function cooledExits(
  entries: readonly [string, string[]][],
  projectId: string,
  nowMs: number,
): Map<string, number> {
  const bySite = new Map<string, Set<string>>();
  for (const [, fields] of entries) {
    const entry = readCooldownEntry(fields);
    if (entry?.projectId !== projectId || !(entry.untilMs > nowMs)) continue;
    const { site, proxyId } = entry;
    let exits = bySite.get(site);
    if (exits === undefined) bySite.set(site, exits = new Set());
    exits.add(proxyId);
  }
  return new Map([...bySite].map(([site, exits]) => [site, exits.size]));
}
