/**
 * Real stores for the feed tests: a migrated database per file (rows written by SQL), a Redis
 * prefix per test, a real controller lease on it, and small helpers to seed definitions.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { createDatabase, type Database } from "../db/client.ts";
import { migrate } from "../db/migrate.ts";
import { ControllerLease } from "../control/core/lease.ts";
import {
  deriveFeedKeys,
  type FeedKeys,
  passwordDigest,
  sectionDigest,
} from "../shared/feed/codec.ts";
import type { FeedProject } from "../shared/feed/models.ts";
import type { SectionText } from "../control/feed/compile.ts";
import { FeedPublisher } from "../control/feed/publisher.ts";
import { type RedisKeys, redisKeys } from "../shared/redis-keys.ts";
import { type CapturedLine, captureLogger } from "./logger.ts";
import {
  createTestDatabase,
  deletePrefix,
  TEST_REDIS_URL,
  type TestDatabase,
  testPrefix,
  testSecrets,
} from "./stores.ts";
import { waitUntil } from "./wait.ts";
import type { Logger } from "../control/core/logging.ts";

export interface FeedDatabase {
  database: Database;
  close(): Promise<void>;
}

export async function feedDatabase(): Promise<FeedDatabase> {
  const test: TestDatabase = await createTestDatabase();
  await migrate(test.url);
  const database = createDatabase(test.url, { poolSize: 4 });
  return {
    database,
    async close() {
      await database.close();
      await test.drop();
    },
  };
}

export interface FeedBed {
  prefix: string;
  keys: RedisKeys;
  redis: Redis;
  secret: string;
  feedKeys: FeedKeys;
  lease: ControllerLease;
  logger: Logger;
  lines: CapturedLine[];
  /** Starts the lease and waits until it leads. */
  lead(): Promise<void>;
  close(): Promise<void>;
}

/** A Redis prefix of its own with a lease on it (not started) and the feed's keys. */
export async function feedBed(
  options: {
    secret?: string;
    holderId?: string;
    /** Another Redis (a private server); the test bed's otherwise. */
    redisUrl?: string;
  } = {},
): Promise<FeedBed> {
  const prefix = testPrefix();
  const keys = redisKeys(prefix);
  const redisUrl = options.redisUrl ?? TEST_REDIS_URL;
  const redis = new Redis(redisUrl);
  const secret = options.secret ?? testSecrets().internal;
  const { logger, lines } = captureLogger("controller");
  const lease = new ControllerLease({
    redis,
    keys,
    holderId: options.holderId ?? `c-${randomUUID()}`,
    logger,
    ttlMs: 5000,
    refreshMs: 200,
    pollMs: 100,
  });
  return {
    prefix,
    keys,
    redis,
    secret,
    feedKeys: await deriveFeedKeys(secret),
    lease,
    logger,
    lines,
    async lead() {
      lease.start();
      await waitUntil(() => lease.leading, { message: "the lease to lead" });
    },
    async close() {
      await lease.stop();
      await deletePrefix(redisUrl, prefix);
      redis.disconnect();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Seeding definitions by SQL.

type Sql = Database["sql"];

export async function insertProject(
  sql: Sql,
  fields: { name: string; username: string; password: string; strategy?: string },
): Promise<string> {
  const [row] = await sql`
    insert into projects (name, username, password, strategy)
    values (${fields.name}, ${fields.username}, ${fields.password},
      ${fields.strategy ?? "round_robin"})
    returning id`;
  return row.id as string;
}

export async function insertCredential(
  sql: Sql,
  projectId: string,
  config: Record<string, unknown>,
): Promise<string> {
  const [row] = await sql`
    insert into credentials (project_id, name, provider, config)
    values (${projectId}, ${`cred-${randomUUID().slice(0, 8)}`}, 'static', ${
    JSON.stringify(config)
  }::jsonb)
    returning id`;
  return row.id as string;
}

export interface ConnectorFields {
  name: string;
  enabled?: boolean;
  pendingDeletion?: boolean;
  credentialId?: string | null;
  config?: Record<string, unknown>;
  countries?: string[];
  domainAllow?: string[];
  weight?: number;
  kind?: string;
}

export async function insertConnector(
  sql: Sql,
  projectId: string,
  fields: ConnectorFields,
): Promise<string> {
  const [row] = await sql`
    insert into connectors (project_id, name, kind, enabled, pending_deletion, credential_id,
      config, countries, domain_allow, weight)
    values (${projectId}, ${fields.name}, ${fields.kind ?? "static"}, ${fields.enabled ?? true},
      ${fields.pendingDeletion ?? false}, ${fields.credentialId ?? null},
      ${JSON.stringify(fields.config ?? {})}::jsonb, ${
    JSON.stringify(fields.countries ?? [])
  }::jsonb,
      ${JSON.stringify(fields.domainAllow ?? [])}::jsonb, ${fields.weight ?? 1})
    returning id`;
  return row.id as string;
}

export interface ProxyFields {
  host: string;
  port?: number;
  scheme?: string;
  username?: string | null;
  password?: string | null;
  country?: string | null;
  status?: string;
  metadata?: Record<string, unknown>;
  /** Seconds before now the row was created (orders the rows). */
  ageSeconds?: number;
}

export async function insertProxy(
  sql: Sql,
  projectId: string,
  connectorId: string,
  fields: ProxyFields,
): Promise<string> {
  const [row] = await sql`
    insert into proxies (project_id, connector_id, scheme, host, port, username, password,
      country, status, metadata, created_at)
    values (${projectId}, ${connectorId}, ${fields.scheme ?? "http"}, ${fields.host},
      ${fields.port ?? 3128}, ${fields.username ?? null}, ${fields.password ?? null},
      ${fields.country ?? null}, ${fields.status ?? "healthy"}, ${
    JSON.stringify(fields.metadata ?? {})
  }::jsonb,
      now() - make_interval(secs => ${fields.ageSeconds ?? 0}))
    returning id`;
  return row.id as string;
}

/**
 * Publishes a hand-made feed (section name → section object) through the real fenced publisher,
 * digesting each section as the controller would: how tests and benches give a gateway a feed
 * without a control plane.
 */
export async function publishFeedContent(
  bed: FeedBed,
  content: Iterable<[string, unknown]>,
): Promise<void> {
  const sections = new Map<string, SectionText>();
  for (const [name, value] of content) {
    const json = JSON.stringify(value);
    sections.set(name, { json, digest: await sectionDigest(bed.feedKeys, json) });
  }
  const publisher = new FeedPublisher({
    redis: bed.redis,
    keys: bed.keys,
    feedKeys: bed.feedKeys,
    lease: bed.lease,
  });
  await publisher.publish(sections, Date.now());
}

/** What a hand-made feed says of a project; the rest is the compile's defaults. */
export interface FeedProjectSpec {
  id: string;
  username: string;
  password: string;
  strategy?: string;
  /** connection_timeout_seconds (30 unless said). */
  connectionTimeoutSeconds?: number;
  /** max_retries (1 unless said). */
  maxRetries?: number;
  /** allowed_cidrs and passwordless_cidrs (none unless said). */
  allowedCidrs?: string[];
  passwordlessCidrs?: string[];
  /** rate_limit (none unless said). */
  rateLimit?: { requests_per_second: number; burst: number };
  /** max_connections (none unless said). */
  maxConnections?: number;
  /** traffic_quota as gateways see it (none unless said). */
  trafficQuota?: { action: string; limit_status: number };
  /** The project's response judging as the feed carries it (none unless said). */
  blocking?: FeedProject["blocking"];
  /** The project's TLS interception as the feed carries it (off unless said). */
  tlsMitm?: FeedProject["tls_mitm"];
  /** The project's per-domain routing rules as the feed carries them (none unless said). */
  domainRules?: FeedProject["domain_rules"];
}

/** A project entry of the global section as the compile writes it (password digested). */
export async function feedProject(bed: FeedBed, spec: FeedProjectSpec): Promise<FeedProject> {
  return {
    id: spec.id,
    name: spec.id,
    username: spec.username,
    password_digest: await passwordDigest(bed.feedKeys, spec.password),
    strategy: (spec.strategy ?? "round_robin") as FeedProject["strategy"],
    session_ttl_seconds: 300,
    sticky_quarantine: false,
    location_policy: "off",
    location_preflight: "off",
    connection_timeout_seconds: spec.connectionTimeoutSeconds ?? 30,
    max_retries: spec.maxRetries ?? 1,
    traffic_quota: spec.trafficQuota ?? null,
    rate_limit: spec.rateLimit ?? null,
    max_connections: spec.maxConnections ?? null,
    allowed_cidrs: spec.allowedCidrs ?? [],
    passwordless_cidrs: spec.passwordlessCidrs ?? [],
    sequence: null,
    blocking: spec.blocking ?? null,
    tls_mitm: spec.tlsMitm ?? null,
    domain_rules: spec.domainRules ?? null,
  };
}
