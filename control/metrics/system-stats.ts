/**
 * What the System page shows, read from the stores and from what every process publishes, never
 * from the answering api's memory, so it reads the same whichever api answers. Each section
 * carries its own error rather than failing the page.
 */
import type { Redis } from "ioredis";
import { type RedisKeys, WORK_STREAMS, type WorkStreamName } from "../../shared/redis-keys.ts";
import { errorText } from "../../shared/errors.ts";
import { readHead } from "../../shared/feed/manifest.ts";
import { appliedDigestOf } from "../../shared/gateway-snapshot.ts";
import { type WorkStreamStats, workStreamStats } from "../core/work-streams.ts";
import type { PoolOutageSnapshot } from "../provider-api/pool/outage.ts";

export interface Section<T> {
  data: T | null;
  error: string | null;
}

export interface ListedProcess {
  instance: string;
  role: string;
  version: string | null;
  started_at: string | null;
  /** How long ago the last heartbeat landed, read off its key's remaining time to live. */
  heartbeat_age_ms: number | null;
  /** The process's own report; null when this release cannot read it. */
  snapshot: Record<string, unknown> | null;
}

/** One gateway against the routing feed. */
export interface FeedGateway {
  instance: string;
  /** The head digest it applied last, as its heartbeat reported it (null: none yet, or unknown). */
  applied_digest: string | null;
  /** It applied the head Redis holds now. */
  current: boolean;
  /** Milliseconds since it applied its feed, as of its last heartbeat. */
  apply_age_ms: number | null;
  heartbeat_age_ms: number | null;
}

/** The routing feed's head and every listed gateway against it. */
export interface FeedStatus {
  /** The head in Redis; null when there is none (or of a schema this release cannot read). */
  head: { digest: string; compiled_at: string } | null;
  gateways: FeedGateway[];
  /** Gateways listed that have not applied the head. */
  behind: number;
}

/** Provider-API pools whose runs go on with last-known settings, as the workers report them. */
export interface PoolSettingsStatus {
  /** Pools whose latest run, on any listed worker, went on with last-known settings. */
  on_last_known: number;
  connector_ids: string[];
  /** Listed workers whose pool runs find Postgres away now. */
  workers_without_postgres: number;
}

export interface SystemStats {
  read_at: string;
  processes: Section<{ total: number; by_role: Record<string, ListedProcess[]> }>;
  leader: Section<{ instance: string; lease_ttl_ms: number } | null>;
  feed: Section<FeedStatus>;
  work_streams: Section<Record<WorkStreamName, WorkStreamStats>>;
  pool_settings: Section<PoolSettingsStatus>;
}

async function section<T>(read: () => Promise<T>): Promise<Section<T>> {
  try {
    return { data: await read(), error: null };
  } catch (error) {
    return { data: null, error: errorText(error) };
  }
}

export async function readSystemStats(redis: Redis, keys: RedisKeys): Promise<SystemStats> {
  const listing = readProcesses(redis, keys);
  const [processes, leader, feed, streams] = await Promise.all([
    section(() => listing),
    section(() => readLeader(redis, keys)),
    section(async () => readFeed(redis, keys, (await listing).by_role.gateway ?? [])),
    section(async () => {
      const stats = await workStreamStats(redis, WORK_STREAMS.map((name) => keys.workStream(name)));
      return Object.fromEntries(WORK_STREAMS.map((name, i) => [name, stats[i]])) as Record<
        WorkStreamName,
        WorkStreamStats
      >;
    }),
  ]);
  return {
    read_at: new Date().toISOString(),
    processes,
    leader,
    feed,
    work_streams: streams,
    pool_settings: await section(async () => readPoolSettings(await listing)),
  };
}

/**
 * The pools on last-known settings, from every listed process that runs pool jobs (a worker, or
 * a process of role all): one pool counts once, whichever workers ran it so.
 */
function readPoolSettings(
  listing: { by_role: Record<string, ListedProcess[]> },
): PoolSettingsStatus {
  const ids = new Set<string>();
  let away = 0;
  for (const process of Object.values(listing.by_role).flat()) {
    const runtimes = process.snapshot?.runtimes as Record<string, unknown> | undefined;
    const worker = runtimes?.worker as { pool_settings?: Partial<PoolOutageSnapshot> } | undefined;
    const reported = worker?.pool_settings;
    if (reported === undefined || reported === null) continue;
    if (typeof reported.postgres_away_since === "string") away++;
    if (!Array.isArray(reported.on_last_known)) continue;
    for (const id of reported.on_last_known) if (typeof id === "string") ids.add(id);
  }
  const connectorIds = [...ids].sort();
  return {
    on_last_known: connectorIds.length,
    connector_ids: connectorIds,
    workers_without_postgres: away,
  };
}

async function readProcesses(redis: Redis, keys: RedisKeys) {
  const ids = (await redis.smembers(keys.instanceIndex)).sort();
  const pipeline = redis.pipeline();
  for (const id of ids) {
    pipeline.get(keys.instance(id));
    pipeline.get(keys.instanceSnapshot(id));
    pipeline.pttl(keys.instanceSnapshot(id));
  }
  const replies = ids.length > 0 ? ((await pipeline.exec()) ?? []) : [];
  const byRole: Record<string, ListedProcess[]> = {};
  let total = 0;
  ids.forEach((instance, i) => {
    const [registryError, registryRaw] = replies[i * 3] ?? [];
    if (registryError) throw registryError;
    // Listed while its registry key lives.
    if (typeof registryRaw !== "string") return;
    const registry = parseObject(registryRaw) ?? {};
    const snapshot = parseObject(replies[i * 3 + 1]?.[1]);
    const pttl = Number(replies[i * 3 + 2]?.[1]);
    const ttlMs = typeof registry.ttl_ms === "number" ? registry.ttl_ms : undefined;
    const role = typeof registry.role === "string" ? registry.role : "unknown";
    const listed: ListedProcess = {
      instance,
      role,
      version: typeof registry.version === "string" ? registry.version : null,
      started_at: typeof registry.started_at === "string" ? registry.started_at : null,
      heartbeat_age_ms: ttlMs !== undefined && pttl > 0 ? Math.max(0, ttlMs - pttl) : null,
      snapshot,
    };
    (byRole[role] ??= []).push(listed);
    total += 1;
  });
  return { total, by_role: byRole };
}

/**
 * The head as the gateways' followers read it (one GET), and each listed gateway's applied digest
 * against it: a gateway whose follower cannot read or verify the head, or that is stalled, keeps
 * its old digest and shows behind.
 */
async function readFeed(
  redis: Redis,
  keys: RedisKeys,
  gateways: readonly ListedProcess[],
): Promise<FeedStatus> {
  const text = await redis.get(keys.feedHead);
  const read = text === null ? undefined : readHead(text);
  const head = read?.kind === "head"
    ? { digest: read.head.digest, compiled_at: new Date(read.head.compiled_at).toISOString() }
    : null;
  const listed = gateways.map((gateway): FeedGateway => {
    const applied = appliedDigestOf(gateway.snapshot);
    const feed = gateway.snapshot?.feed as Record<string, unknown> | undefined;
    return {
      instance: gateway.instance,
      applied_digest: applied,
      current: head !== null && applied === head.digest,
      apply_age_ms: typeof feed?.apply_age_ms === "number" ? feed.apply_age_ms : null,
      heartbeat_age_ms: gateway.heartbeat_age_ms,
    };
  });
  return {
    head,
    gateways: listed,
    behind: listed.filter((gateway) => !gateway.current).length,
  };
}

async function readLeader(redis: Redis, keys: RedisKeys) {
  const [[getError, holder], [ttlError, ttl]] = (await redis.multi().get(keys.controllerLease)
    .pttl(keys.controllerLease).exec()) ?? [[null, null], [null, -2]];
  if (getError) throw getError;
  if (ttlError) throw ttlError;
  if (typeof holder !== "string") return null;
  return { instance: holder, lease_ttl_ms: Math.max(0, Number(ttl)) };
}

function parseObject(raw: unknown): Record<string, unknown> | null {
  if (typeof raw !== "string") return null;
  try {
    const value: unknown = JSON.parse(raw);
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? value as Record<string, unknown>
      : null;
  } catch {
    return null;
  }
}
