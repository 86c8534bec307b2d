/**
 * The controller's compile: every definition the feed carries, read in one read-only REPEATABLE
 * READ transaction so all of it comes from one snapshot however many writers commit meanwhile.
 * Each compile makes the feed's sections (global and one per connector, as JSON with their
 * digests) and the keys the job producers publish, so no producer reads Postgres.
 *
 * Stable bytes: every object is written with its keys in the order of its schema in
 * shared/feed/models.ts, and every list in one order (projects, connectors and tunnel devices by
 * id, proxies by creation time then id, country and domain lists sorted; a sequence's connectors
 * in its own order, which is its meaning), so an unchanged definition compiles to the same JSON,
 * keeps its digest and publishes nothing.
 *
 * The runtime section is not compiled from Postgres: it is a read of what other roles keep in
 * Redis (`readRuntimeSection`), filtered to what the compile holds, and read again on every
 * runtime entry without a compile.
 */
import { slugifyCity } from "../../shared/username.ts";
import { and, asc, eq, sql } from "drizzle-orm";
import type { Redis } from "ioredis";
import { type Database, READ_SNAPSHOT } from "../../db/client.ts";
import {
  connectors,
  credentials,
  projects,
  projectSequences,
  providerDescriptors,
  proxies,
  type TrafficConfig,
} from "../../db/schema.ts";
import { type FeedKeys, passwordDigest, sectionDigest } from "../../shared/feed/codec.ts";
import {
  type ConnectorSection,
  connectorSectionName,
  type FeedConnector,
  type FeedProject,
  type FeedProxy,
  type FeedSequence,
  GLOBAL_SECTION,
  type GlobalSection,
  type RuntimeSection,
  SCHEMA_VERSION,
} from "../../shared/feed/models.ts";
import { fillPlaceholders } from "../../shared/feed/placeholders.ts";
import { type ProviderRegistry, storedDescriptors } from "../../shared/vendors/registry.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import {
  ConnectorKind,
  type JobKind,
  JobKind as K,
  type ProxyScheme,
  ProxyStatus,
  STRATEGIES,
  type Strategy,
} from "../../shared/roles.ts";
import type { Logger } from "../core/logging.ts";
import { parseTrafficSubject } from "../../shared/traffic-subjects.ts";
import { storedBlockEnd } from "../traffic/rules.ts";
import { readProviderApiConfig } from "../provider-api/config.ts";
import { feedGeo, readFeedGeo } from "../geo/feed-part.ts";
import { errorText } from "../../shared/errors.ts";
import { shippedFile } from "../geo/shipped.ts";
import { feedTunnels, readFeedTunnels } from "./tunnels.ts";

/** A section as the publisher takes it: its JSON and the digest of that JSON. */
export interface SectionText {
  readonly json: string;
  readonly digest: string;
}

export interface Compiled {
  /** Wall-clock time the compile's snapshot was taken. */
  compiledAt: number;
  /** The keys of each keyed periodic kind, in a stable order (health: the feed's order). */
  jobKeys: ReadonlyMap<JobKind, readonly string[]>;
  /**
   * The keys of a kind with a first lane that its producer publishes there: the health keys of
   * proxies not checked yet (initializing) or suspect (degraded: one failure so far).
   */
  firstLaneKeys: ReadonlyMap<JobKind, ReadonlySet<string>>;
  /** The global section and one section per connector, by section name. */
  sections: ReadonlyMap<string, SectionText>;
  /**
   * Provider-API connectors by id, each as its section without proxies: their rows live in the
   * activity pool in Redis and are read at each publish (control/feed/pool-sections.ts), not compiled.
   */
  pools: ReadonlyMap<string, ConnectorSection>;
  /** Each provider-API connector's `pool.max_concurrency` (null: no limit), for its rows. */
  poolConcurrency: ReadonlyMap<string, number | null>;
  /** What the runtime section is filtered to. */
  proxyIds: ReadonlySet<string>;
  connectorIds: ReadonlySet<string>;
  projectIds: ReadonlySet<string>;
  /** Connectors with a traffic limit and projects with a quota: what can be traffic-blocked. */
  limited: { connectors: readonly string[]; projects: readonly string[] };
  /** Cloud instances (rows of cloud connectors) by cloud, then status. */
  cloudInstances: Readonly<Record<string, Readonly<Record<string, number>>>>;
}

export interface CompileOptions {
  keys: FeedKeys;
  /** The install's default strategy (OCTOPROX_DEFAULT_STRATEGY). */
  defaultStrategy: Strategy;
  /**
   * The process's provider registry. The controller's compile applies the custom descriptors
   * of its snapshot to it; a one-project compile (a preview) works on a fork and keeps nothing.
   */
  providers: ProviderRegistry;
  logger?: Logger;
  /**
   * Only this project, its connectors, credentials and proxies (the api's routing preview):
   * the same compile the gateways get, over one project, so a preview is routed by the rules
   * the feed carries rather than a copy of them.
   */
  projectId?: string;
  /**
   * OCTOPROX_INTERNAL_SECRET: opens the WireGuard keys sealed at rest for the global section's
   * `tunnels` part (control/feed/tunnels.ts). A compile without it (the routing preview, which
   * routes no device) leaves the part out.
   */
  internalSecret?: string;
}

/** Proxies leaving the pool are not checked: a check must never undo a drain. */
const LEAVING: ReadonlySet<string> = new Set([ProxyStatus.draining, ProxyStatus.terminating]);
const KNOWN_STRATEGIES: ReadonlySet<string> = new Set(STRATEGIES);

type Config = Record<string, unknown>;

export async function compile(
  database: Pick<Database, "transaction">,
  options: CompileOptions,
): Promise<Compiled> {
  const only = options.projectId;
  const read = await database.transaction(async (tx) => {
    const compiledAt = Date.now();
    const projectRows = await tx.select({
      id: projects.id,
      name: projects.name,
      username: projects.username,
      password: projects.password,
      strategy: projects.strategy,
      sessionTtlSeconds: projects.sessionTtlSeconds,
      stickyQuarantine: projects.stickyQuarantine,
      locationPolicy: projects.locationPolicy,
      locationPreflight: projects.locationPreflight,
      locationSources: projects.locationSources,
      locationConflictRule: projects.locationConflictRule,
      connectionTimeoutSeconds: projects.connectionTimeoutSeconds,
      maxRetries: projects.maxRetries,
      trafficQuota: projects.trafficQuota,
      rateLimit: projects.rateLimit,
      maxConnections: projects.maxConnections,
      allowedCidrs: projects.allowedCidrs,
      passwordlessCidrs: projects.passwordlessCidrs,
      tlsMitmMode: projects.tlsMitmMode,
      tlsMitmBrowser: projects.tlsMitmBrowser,
      tlsMitmBypass: projects.tlsMitmBypass,
      blockRules: projects.blockRules,
      retry: projects.retry,
      blockBodyBytes: projects.blockBodyBytes,
      escalation: projects.escalation,
      domainRules: projects.domainRules,
    }).from(projects).where(only === undefined ? undefined : eq(projects.id, only))
      .orderBy(asc(projects.id));
    const connectorRows = await tx.select({
      id: connectors.id,
      projectId: connectors.projectId,
      credentialId: connectors.credentialId,
      name: connectors.name,
      kind: connectors.kind,
      provider: connectors.provider,
      enabled: connectors.enabled,
      weight: connectors.weight,
      tier: connectors.tier,
      countries: connectors.countries,
      domainAllow: connectors.domainAllow,
      domainDeny: connectors.domainDeny,
      config: connectors.config,
      rateLimit: connectors.rateLimitConfig,
      traffic: connectors.trafficConfig,
      pendingDeletion: connectors.pendingDeletion,
    }).from(connectors).where(only === undefined ? undefined : eq(connectors.projectId, only))
      .orderBy(asc(connectors.id));
    const sequenceRows = await tx.select({
      projectId: projectSequences.projectId,
      connectorIds: projectSequences.connectorIds,
      currentIndex: projectSequences.currentIndex,
      onEnd: projectSequences.onEnd,
      onUnavailable: projectSequences.onUnavailable,
      exhausted: projectSequences.exhausted,
    }).from(projectSequences)
      .where(only === undefined ? undefined : eq(projectSequences.projectId, only));
    const credentialRows = await tx.select({ id: credentials.id, config: credentials.config })
      .from(credentials)
      .where(only === undefined ? undefined : eq(credentials.projectId, only));
    // Raw rows (no per-row mapping) in the connector index's order: 100,000 rows are most of a
    // compile's time, so only what the feed carries is read, and metadata only for its one key.
    const proxyRows = await tx.execute<RawProxy>(sql`
      select ${proxies.id} as id, ${proxies.connectorId} as connector_id,
        ${proxies.scheme} as scheme, ${proxies.host} as host, ${proxies.port} as port,
        ${proxies.username} as username, ${proxies.password} as password,
        ${proxies.country} as country, ${proxies.status} as status,
        ${proxies.metadata} -> 'max_concurrency' as max_concurrency,
        ${proxies.location} ->> 'region' as region, ${proxies.location} ->> 'city' as city,
        ${proxies.locationConflict} as location_conflict,
        ${proxies.countrySource} = 'manual' as country_manual
      from ${proxies}
      ${only === undefined ? sql`` : sql`where ${proxies.projectId} = ${only}`}
      order by ${proxies.connectorId}, ${proxies.createdAt}, ${proxies.id}`);
    const cloud = await tx
      .select({ id: connectors.id })
      .from(connectors)
      .where(
        only === undefined
          ? eq(connectors.kind, "cloud")
          : and(eq(connectors.kind, "cloud"), eq(connectors.projectId, only)),
      )
      .orderBy(asc(connectors.createdAt), asc(connectors.id));
    const descriptorRows = await tx.select({
      document: providerDescriptors.document,
      version: providerDescriptors.version,
    }).from(providerDescriptors).orderBy(asc(providerDescriptors.id));
    const geoRows = await readFeedGeo(tx);
    const tunnelRows = options.internalSecret === undefined
      ? undefined
      : await readFeedTunnels(tx, only);
    return {
      compiledAt,
      projectRows,
      sequenceRows,
      connectorRows,
      credentialRows,
      proxyRows,
      cloud,
      descriptorRows,
      geoRows,
      tunnelRows,
    };
  }, READ_SNAPSHOT);

  const { keys, defaultStrategy, logger } = options;
  const registry = only === undefined ? options.providers : options.providers.fork();
  registry.setCustomDescriptors(storedDescriptors(read.descriptorRows));

  const sequences = new Map<string, FeedSequence>(
    read.sequenceRows.map((row) => [row.projectId, {
      connectors: [...row.connectorIds],
      current: row.currentIndex,
      on_end: row.onEnd,
      on_unavailable: row.onUnavailable,
      exhausted: row.exhausted,
    }]),
  );

  // Global: projects by id, each password only as its keyed digest.
  const feedProjects: FeedProject[] = await Promise.all(read.projectRows.map(async (row) => {
    let strategy = row.strategy as Strategy;
    if (!KNOWN_STRATEGIES.has(row.strategy)) {
      warnOnce(logger, `strategy:${row.id}:${row.strategy}`, {
        project_id: row.id,
        strategy: row.strategy,
        default_strategy: defaultStrategy,
      }, "Unknown routing strategy served as the default");
      strategy = defaultStrategy;
    }
    return {
      id: row.id,
      name: row.name,
      username: row.username,
      password_digest: await passwordDigest(keys, row.password),
      strategy,
      session_ttl_seconds: row.sessionTtlSeconds,
      sticky_quarantine: row.stickyQuarantine,
      location_policy: row.locationPolicy,
      location_preflight: row.locationPreflight,
      location_sources: row.locationSources === null ? null : [...row.locationSources],
      location_conflict_rule: row.locationConflictRule,
      connection_timeout_seconds: row.connectionTimeoutSeconds,
      max_retries: row.maxRetries,
      // A quota without a limit only counts: gateways need nothing of it.
      traffic_quota: row.trafficQuota?.limit_bytes
        ? { action: row.trafficQuota.action, limit_status: row.trafficQuota.limit_status }
        : null,
      rate_limit: row.rateLimit
        ? {
          requests_per_second: row.rateLimit.requests_per_second,
          burst: row.rateLimit.burst,
        }
        : null,
      max_connections: row.maxConnections,
      allowed_cidrs: [...row.allowedCidrs],
      passwordless_cidrs: [...row.passwordlessCidrs],
      sequence: sequences.get(row.id) ?? null,
      // Off: nothing for gateways to apply (a bypass list kept for later stays in Postgres).
      tls_mitm: row.tlsMitmMode === "off" ? null : {
        mode: row.tlsMitmMode,
        browser: row.tlsMitmBrowser,
        bypass: [...row.tlsMitmBypass],
      },
      // Every rule off: nothing for gateways to judge.
      blocking: row.blockRules.every((rule) => rule.mode === "off") ? null : {
        rules: row.blockRules,
        retry: row.retry,
        body_bytes: row.blockBodyBytes,
        ...(row.escalation === null ? {} : { escalation: row.escalation }),
      },
      domain_rules: row.domainRules.length === 0 ? null : row.domainRules,
    };
  }));
  const global: GlobalSection = {
    schema: SCHEMA_VERSION,
    default_strategy: defaultStrategy,
    projects: feedProjects,
    descriptors: registry.shipped().map((entry) => ({
      id: entry.descriptor.id,
      version: entry.version,
      document: entry.descriptor,
    })),
    // The shipped database's checksum is read once per process; a failed read lists the
    // admin's databases alone until a later compile reads it.
    geo: feedGeo(
      read.geoRows,
      await shippedFile().catch((error) => {
        warnOnce(logger, "geo:shipped", { error: errorText(error) }, "Shipped IP database unread");
        return undefined;
      }),
    ),
    // Devices and the WireGuard identity, keys opened; absent without the secret that opens them.
    ...(read.tunnelRows === undefined || options.internalSecret === undefined ? {} : {
      tunnels: feedTunnels(
        read.tunnelRows,
        options.internalSecret,
        (key, fields, message) => warnOnce(logger, key, fields, message),
      ),
    }),
  };

  // One section per connector, disabled and pending-deletion ones included (the router skips
  // them); proxies grouped from the one ordered read.
  const credentialConfigs = new Map<string, Config>(
    read.credentialRows.map((row) => [row.id, row.config]),
  );
  const cloudInstances: Record<string, Record<string, number>> = {};
  const byConnector = new Map<string, RawProxy[]>();
  for (const row of read.proxyRows) {
    let list = byConnector.get(row.connector_id);
    if (!list) byConnector.set(row.connector_id, list = []);
    list.push(row);
  }

  const texts: [string, string][] = [[GLOBAL_SECTION, JSON.stringify(global)]];
  const proxyIds = new Set<string>();
  const connectorIds = new Set<string>();
  const healthKeys: string[] = [];
  const healthFirst = new Set<string>();
  const syncKeys: string[] = [];
  const poolKeys: string[] = [];
  const pools = new Map<string, ConnectorSection>();
  const poolConcurrency = new Map<string, number | null>();
  for (const row of read.connectorRows) {
    if (row.kind === ConnectorKind.providerApi) {
      // Its rows are the pool's routed entries, read at publish; a disabled one's pool is still
      // looked after (reaped), only not refilled.
      connectorIds.add(row.id);
      if (!row.pendingDeletion) poolKeys.push(row.id);
      pools.set(row.id, {
        schema: SCHEMA_VERSION,
        connector: feedConnector(row),
        proxies: [],
        config: null,
        credential: null,
      });
      poolConcurrency.set(row.id, readProviderApiConfig(row.config)?.pool.max_concurrency ?? null);
      continue;
    }
    const credential = row.credentialId === null
      ? undefined
      : credentialConfigs.get(row.credentialId);
    const sources = { connector: row.config, credential };
    // A vendor connector's provider, built as every process builds it.
    let shipped: { config: Config; credential: Config } | null = null;
    let dynamic = false;
    if (row.kind === "vendor") {
      const built = registry.descriptorProvider(row, credential ?? null);
      if (!built.ok && built.reason === "gone") {
        warnOnce(logger, `gone:${row.id}:${row.provider}`, {
          connector_id: row.id,
          provider: row.provider,
        }, "Connector left out of the feed: its provider is gone");
        continue;
      }
      if (built.ok) {
        const provider = built.provider;
        shipped = { config: provider.shippedConfig(), credential: provider.shippedCredential() };
        dynamic = provider.dynamic;
        if (row.enabled && !row.pendingDeletion) syncKeys.push(row.id);
      } else {
        warnOnce(logger, `invalid:${row.id}:${built.message}`, {
          connector_id: row.id,
          provider: row.provider,
          error: built.message,
        }, "Connector's provider cannot be built: its rows are served as stored");
      }
    }
    connectorIds.add(row.id);
    // A fixed exit's attributed state and city route requests; a vendor session's exit is the
    // session's, not the row's, so only its country (the vendor's word, or the sources') does.
    const fixedExits = row.kind === "static" || row.kind === "cloud";
    const rows = byConnector.get(row.id) ?? [];
    if (row.kind === "cloud") {
      const counts = cloudInstances[row.provider] ??= {};
      for (const p of rows) counts[p.status] = (counts[p.status] ?? 0) + 1;
    }
    const feedProxies: FeedProxy[] = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const p = rows[i];
      proxyIds.add(p.id);
      // A dynamic-sessions row is a vendor session per request: no one exit speaks for it.
      if (row.enabled && !dynamic && !LEAVING.has(p.status)) {
        healthKeys.push(p.id);
        if (p.status === ProxyStatus.initializing || p.status === ProxyStatus.degraded) {
          healthFirst.add(p.id);
        }
      }
      feedProxies[i] = {
        id: p.id,
        scheme: p.scheme as ProxyScheme,
        host: p.host,
        port: p.port,
        username: fillPlaceholders(p.username, sources),
        password: fillPlaceholders(p.password, sources),
        country: p.country,
        ...placeFields(p, fixedExits),
        status: p.status as ProxyStatus,
        max_concurrency: positiveInteger(p.max_concurrency),
      };
    }
    const section: ConnectorSection = {
      schema: SCHEMA_VERSION,
      connector: feedConnector(row),
      proxies: feedProxies,
      config: shipped?.config ?? null,
      credential: shipped?.credential ?? null,
    };
    texts.push([connectorSectionName(row.id), JSON.stringify(section)]);
  }

  const digests = await Promise.all(texts.map(([, json]) => sectionDigest(keys, json)));
  const sections = new Map<string, SectionText>();
  texts.forEach(([name, json], i) => sections.set(name, { json, digest: digests[i] }));

  // Health keys in the feed's order (connector, then creation): stable, and no sort of 100,000
  // rows; producers spread keys by their slot, so the order carries no meaning.
  const jobKeys = new Map<JobKind, readonly string[]>([
    [K.health, healthKeys],
    // Every enabled vendor connector whose provider can be built syncs.
    [K.sync, syncKeys],
    [K.scale, read.cloud.map((row) => row.id)],
    [K.pool, poolKeys],
  ]);
  const projectIds = new Set(read.projectRows.map((row) => row.id));
  const limited = {
    connectors: read.connectorRows.filter((row) => row.traffic?.limit_bytes).map((r) => r.id),
    projects: read.projectRows.filter((row) => row.trafficQuota?.limit_bytes).map((r) => r.id),
  };
  return {
    compiledAt: read.compiledAt,
    jobKeys,
    firstLaneKeys: new Map([[K.health, healthFirst]]),
    sections,
    pools,
    poolConcurrency,
    proxyIds,
    connectorIds,
    projectIds,
    limited,
    cloudInstances,
  };
}

interface RawProxy {
  [column: string]: unknown;
  id: string;
  connector_id: string;
  scheme: string;
  host: string;
  port: number;
  username: string | null;
  password: string | null;
  country: string | null;
  status: string;
  max_concurrency: unknown;
  region: string | null;
  city: string | null;
  location_conflict: boolean;
  country_manual: boolean | null;
}

/** The attributed place a row carries, only where known (absent fields read as unknown). */
function placeFields(
  p: RawProxy,
  fixedExit: boolean,
): Pick<FeedProxy, "region" | "city" | "location_conflict" | "country_manual"> {
  const city = fixedExit && p.city !== null ? slugifyCity(p.city) : undefined;
  return {
    ...(fixedExit && p.region !== null ? { region: p.region.toUpperCase() } : {}),
    ...(city !== undefined ? { city } : {}),
    ...(p.location_conflict ? { location_conflict: true } : {}),
    // A country set by hand is a requirement preflight checks exits against.
    ...(p.country_manual === true && p.country !== null ? { country_manual: true } : {}),
  };
}

function positiveInteger(value: unknown): number | null {
  return typeof value === "number" && Number.isInteger(value) && value > 0 ? value : null;
}

/** Sorted, without repeats: list order carries no meaning, so it must not move a digest. */
function sortedSet(values: readonly unknown[] | null, normalise: (s: string) => string): string[] {
  const out = new Set<string>();
  for (const value of values ?? []) if (typeof value === "string") out.add(normalise(value));
  return [...out].sort();
}

interface ConnectorRow {
  id: string;
  projectId: string;
  name: string;
  kind: string;
  provider: string;
  enabled: boolean;
  weight: number;
  tier: number | null;
  countries: string[];
  domainAllow: string[];
  domainDeny: string[];
  rateLimit: {
    max_requests: number;
    window_seconds: number;
    quarantine_seconds_min: number;
    quarantine_seconds_max: number;
    sticky_quarantine: boolean;
  } | null;
  traffic: TrafficConfig | null;
  pendingDeletion: boolean;
}

/** The connector's routing fields, without its config, credential or error bookkeeping. */
function feedConnector(row: ConnectorRow): FeedConnector {
  const rate = row.rateLimit;
  return {
    id: row.id,
    project_id: row.projectId,
    name: row.name,
    kind: row.kind,
    provider: row.provider,
    enabled: row.enabled,
    pending_deletion: row.pendingDeletion,
    weight: row.weight,
    countries: sortedSet(row.countries, (s) => s.toUpperCase()),
    domain_allow: sortedSet(row.domainAllow, (s) => s.toLowerCase()),
    domain_deny: sortedSet(row.domainDeny, (s) => s.toLowerCase()),
    rate_limit: rate
      ? {
        max_requests: rate.max_requests,
        window_seconds: rate.window_seconds,
        quarantine_seconds_min: rate.quarantine_seconds_min,
        quarantine_seconds_max: rate.quarantine_seconds_max,
        sticky_quarantine: rate.sticky_quarantine,
      }
      : null,
    // A config without a limit only counts and prices: gateways need nothing of it.
    traffic: row.traffic?.limit_bytes
      ? { action: row.traffic.action, limit_status: row.traffic.limit_status }
      : null,
    // What ranks it for escalation, only when set (a connector without either is unchanged).
    ...(row.tier === null ? {} : { tier: row.tier }),
    ...(row.traffic?.price_per_gb == null ? {} : { price_per_gb: row.traffic.price_per_gb }),
  };
}

const warned = new Set<string>();

/** Logs a condition once per process (it would otherwise repeat at every compile). */
function warnOnce(
  logger: Logger | undefined,
  key: string,
  fields: Record<string, unknown>,
  message: string,
): void {
  if (!logger || warned.has(key)) return;
  warned.add(key);
  logger.warn(fields, message);
}

// ---------------------------------------------------------------------------------------------
// The runtime section: a read of Redis, not a compile.

/** What the runtime section is filtered to: the ids the last compile holds. */
export interface RuntimeFilter {
  proxyIds: ReadonlySet<string>;
  connectorIds: ReadonlySet<string>;
  projectIds: ReadonlySet<string>;
}

/**
 * Reads the quarantines (those not ended by `nowMs`) and the traffic blocks of connectors and
 * projects as Redis holds them, filtered to what the compile holds, each list by id. A block's
 * end is read by the traffic rules' one reader (control/traffic/rules.ts); anything else is
 * skipped.
 */
export async function readRuntimeSection(
  redis: Redis,
  keys: Pick<RedisKeys, "proxyQuarantined" | "trafficBlocked">,
  filter: RuntimeFilter,
  nowMs: number = Date.now(),
): Promise<RuntimeSection> {
  const replies = await redis.multi()
    .zrangebyscore(keys.proxyQuarantined, `(${nowMs}`, "+inf", "WITHSCORES")
    .hgetall(keys.trafficBlocked)
    .exec();
  if (!replies) throw new Error("Runtime state read was discarded");
  const [[zError, zReply], [hError, hReply]] = replies;
  if (zError) throw zError;
  if (hError) throw hError;
  const flat = zReply as string[];
  const quarantines: { proxy_id: string; until_ms: number }[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    if (filter.proxyIds.has(flat[i])) {
      quarantines.push({ proxy_id: flat[i], until_ms: Number(flat[i + 1]) });
    }
  }
  const traffic_blocks: { connector_id: string; until_ms: number }[] = [];
  const project_blocks: { project_id: string; until_ms: number }[] = [];
  for (const [field, value] of Object.entries(hReply as Record<string, string>)) {
    const subject = parseTrafficSubject(field);
    const untilMs = storedBlockEnd(value);
    if (subject === undefined || untilMs === undefined) continue;
    if (subject.kind === "connector" && filter.connectorIds.has(subject.id)) {
      traffic_blocks.push({ connector_id: subject.id, until_ms: untilMs });
    } else if (subject.kind === "project" && filter.projectIds.has(subject.id)) {
      project_blocks.push({ project_id: subject.id, until_ms: untilMs });
    }
  }
  quarantines.sort((a, b) => compareText(a.proxy_id, b.proxy_id));
  traffic_blocks.sort((a, b) => compareText(a.connector_id, b.connector_id));
  project_blocks.sort((a, b) => compareText(a.project_id, b.project_id));
  return { schema: SCHEMA_VERSION, quarantines, traffic_blocks, project_blocks };
}

const compareText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
