/**
 * The Postgres schema: definitions (users, tokens, projects, credentials, connectors, proxies),
 * proxy status as a column, and the metrics history with its running totals and flush records.
 * Migrations are generated from this file by drizzle-kit (`npm run db:generate`) and committed.
 */
import type { BlockRule, RetryPolicy } from "../shared/blocking/rules.ts";
import type { EscalationPolicy } from "../shared/blocking/escalation.ts";
import type { DomainRule } from "../shared/routing/domain-rules.ts";
import { sql } from "drizzle-orm";
import {
  bigint,
  bigserial,
  boolean,
  check,
  customType,
  date,
  doublePrecision,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
  varchar,
} from "drizzle-orm/pg-core";

const createdAt = () => timestamp("created_at", { withTimezone: true }).notNull().defaultNow();
const updatedAt = () => timestamp("updated_at", { withTimezone: true }).notNull().defaultNow();
const id = () => uuid("id").primaryKey().defaultRandom();

export const users = pgTable("users", {
  id: id(),
  username: text("username").notNull(),
  passwordHash: text("password_hash").notNull(),
  role: text("role").notNull(),
  email: text("email"),
  isActive: boolean("is_active").notNull().default(true),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
  lastLoginAt: timestamp("last_login_at", { withTimezone: true }),
}, (t) => [
  uniqueIndex("users_username_key").on(sql`lower(${t.username})`),
  check("users_role_check", sql`${t.role} in ('admin', 'editor', 'viewer')`),
]);

/**
 * A user's pending invitation (control/services/invites.ts): the SHA-256 of its one-time token
 * (the link holds the token itself), and when it ends. Setting the password through it deletes
 * the user's invitations; a reinvite replaces them.
 */
export const userInvites = pgTable("user_invites", {
  id: id(),
  userId: uuid("user_id").notNull().references(() => users.id, { onDelete: "cascade" }),
  tokenHash: text("token_hash").notNull(),
  expiresAt: timestamp("expires_at", { withTimezone: true }).notNull(),
  createdAt: createdAt(),
}, (t) => [
  uniqueIndex("user_invites_token_hash_key").on(t.tokenHash),
  index("user_invites_user_id_idx").on(t.userId),
]);

export const apiTokens = pgTable("api_tokens", {
  id: id(),
  userId: uuid("user_id").notNull().references(() => users.id, { onDelete: "cascade" }),
  name: text("name").notNull(),
  /** SHA-256 of the token, hex. The token itself is shown once and never stored. */
  tokenHash: text("token_hash").notNull(),
  /** The first characters of the token, so an operator can tell tokens apart. */
  tokenPrefix: text("token_prefix").notNull(),
  createdAt: createdAt(),
  expiresAt: timestamp("expires_at", { withTimezone: true }),
  lastUsedAt: timestamp("last_used_at", { withTimezone: true }),
  revokedAt: timestamp("revoked_at", { withTimezone: true }),
}, (t) => [
  uniqueIndex("api_tokens_token_hash_key").on(t.tokenHash),
  index("api_tokens_user_id_idx").on(t.userId),
]);

export const projects = pgTable("projects", {
  id: id(),
  name: text("name").notNull(),
  description: text("description").notNull().default(""),
  /** The proxy username clients present (before any -option). */
  username: text("username").notNull(),
  /** The proxy password clients present. The feed carries only a keyed digest of it. */
  password: text("password").notNull(),
  strategy: text("strategy").notNull().default("round_robin"),
  locationPolicy: text("location_policy").notNull().default("off"),
  locationPreflight: text("location_preflight").notNull().default("off"),
  /** Attribution sources in order (`database`, `vendor`, `endpoint`); null: the install's. */
  locationSources: jsonb("location_sources").$type<string[]>(),
  /** `consensus` or `first`; null: the install's. */
  locationConflictRule: text("location_conflict_rule"),
  /** Sliding life of a sticky session binding, unless the client's -sesstime- sets one. */
  sessionTtlSeconds: integer("session_ttl_seconds").notNull().default(300),
  stickyQuarantine: boolean("sticky_quarantine").notNull().default(false),
  metricsRetentionDays: integer("metrics_retention_days").notNull().default(90),
  connectionTimeoutSeconds: integer("connection_timeout_seconds").notNull().default(30),
  /** Other proxies a failed request may go on to; 1 is seed 001's 2 distinct proxies. */
  maxRetries: integer("max_retries").notNull().default(1),
  /** The project's traffic quota: a connector's traffic_config's shape, over all its traffic. */
  trafficQuota: jsonb("traffic_quota").$type<TrafficConfig>(),
  /** Where the quota's usage counts from when reset inside its period. */
  trafficResetAt: timestamp("traffic_reset_at", { withTimezone: true }),
  /** Requests a second across every gateway, with a burst; null for no limit. */
  rateLimit: jsonb("rate_limit").$type<ProjectRateLimit>(),
  /** Connections at once per gateway process; null for no cap. */
  maxConnections: integer("max_connections"),
  /** Client addresses allowed to use the project (CIDR blocks); empty: from anywhere. */
  allowedCidrs: jsonb("allowed_cidrs").$type<string[]>().notNull().default([]),
  /** Client addresses that reach the project without a password (CIDR blocks). */
  passwordlessCidrs: jsonb("passwordless_cidrs").$type<string[]>().notNull().default([]),
  /**
   * TLS interception of the project's tunnels: `off`, `plain`, `match_ua` or `override_ua`
   * (control/model/tls-mitm.ts: the api refuses the browser-grade two in this build).
   */
  tlsMitmMode: text("tls_mitm_mode").notNull().default("off"),
  /** The browser whose fingerprint `override_ua` presents; null under every other mode. */
  tlsMitmBrowser: text("tls_mitm_browser"),
  /** Hosts and `.suffixes` whose tunnels stay raw, as shared/tls/bypass.ts reads them. */
  tlsMitmBypass: jsonb("tls_mitm_bypass").$type<string[]>().notNull().default([]),
  /** Rules judging the target's answers, in order (shared/blocking/rules.ts reads them). */
  blockRules: jsonb("block_rules").$type<BlockRule[]>().notNull().default([]),
  /** How a judged answer is retried on another exit; null: the defaults. */
  retry: jsonb("retry").$type<RetryPolicy>(),
  /** How much of a body the rules' markers are looked for in; null: the default (8 KiB). */
  blockBodyBytes: integer("block_body_bytes"),
  /** Cost-aware escalation between connector tiers (shared/blocking/escalation.ts); null: none. */
  escalation: jsonb("escalation").$type<EscalationPolicy>(),
  /** Per-domain routing rules, in order (shared/routing/domain-rules.ts reads them). */
  domainRules: jsonb("domain_rules").$type<DomainRule[]>().notNull().default([]),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
}, (t) => [
  uniqueIndex("projects_name_key").on(sql`lower(${t.name})`),
  uniqueIndex("projects_username_key").on(sql`lower(${t.username})`),
  check(
    "projects_strategy_check",
    sql`${t.strategy} in ('round_robin', 'random', 'least_used', 'health_based', 'sticky')`,
  ),
  check("projects_location_policy_check", sql`${t.locationPolicy} in ('off', 'warn', 'strict')`),
  check(
    "projects_location_preflight_check",
    sql`${t.locationPreflight} in ('off', 'report', 'retry', 'reject')`,
  ),
  check(
    "projects_location_conflict_rule_check",
    sql`${t.locationConflictRule} is null or ${t.locationConflictRule} in ('consensus', 'first')`,
  ),
  check(
    "projects_tls_mitm_mode_check",
    sql`${t.tlsMitmMode} in ('off', 'plain', 'match_ua', 'override_ua')`,
  ),
  // The one rule's last line: a browser only under the mode that uses one.
  check(
    "projects_tls_mitm_browser_check",
    sql`${t.tlsMitmBrowser} is null or (${t.tlsMitmMode} = 'override_ua' and ${t.tlsMitmBrowser} in ('chrome', 'firefox', 'safari', 'edge', 'random'))`,
  ),
]);

export const credentials = pgTable("credentials", {
  id: id(),
  projectId: uuid("project_id").notNull().references(() => projects.id, { onDelete: "cascade" }),
  name: text("name").notNull(),
  /** The provider the credential is for: `static`, a vendor descriptor id, `aws`, `gcp`, `azure`. */
  provider: text("provider").notNull(),
  /** Provider fields, secrets included; never sent to a gateway unless a template reads them. */
  config: jsonb("config").$type<Record<string, unknown>>().notNull().default({}),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
}, (t) => [
  uniqueIndex("credentials_project_name_key").on(t.projectId, sql`lower(${t.name})`),
]);

export interface ProjectRateLimit {
  requests_per_second: number;
  burst: number;
}

export interface RateLimitConfig {
  max_requests: number;
  window_seconds: number;
  quarantine_seconds_min: number;
  quarantine_seconds_max: number;
  sticky_quarantine: boolean;
}

export interface TrafficConfig {
  limit_bytes: number | null;
  period: "day" | "week" | "month";
  reset_day: number;
  action: "alert" | "block" | "interrupt";
  warn_percent: number;
  limit_status: 509 | 429;
  price_per_gb: number | null;
  currency: string;
}

export const connectors = pgTable("connectors", {
  id: id(),
  projectId: uuid("project_id").notNull().references(() => projects.id, { onDelete: "cascade" }),
  credentialId: uuid("credential_id").references(() => credentials.id, { onDelete: "restrict" }),
  name: text("name").notNull(),
  /** static, vendor, provider_api or cloud. */
  kind: text("kind").notNull(),
  /** The provider behind a vendor, provider-API or cloud connector; `static` for static lists. */
  provider: text("provider").notNull().default("static"),
  enabled: boolean("enabled").notNull().default(true),
  weight: integer("weight").notNull().default(1),
  /** ISO 3166-1 alpha-2 codes this connector serves; empty means it declares none. */
  countries: jsonb("countries").$type<string[]>().notNull().default([]),
  domainAllow: jsonb("domain_allow").$type<string[]>().notNull().default([]),
  domainDeny: jsonb("domain_deny").$type<string[]>().notNull().default([]),
  healthcheckUrl: text("healthcheck_url"),
  /** Kind-specific settings (a cloud connector's region and sizes, a vendor's pool shape). */
  config: jsonb("config").$type<Record<string, unknown>>().notNull().default({}),
  rateLimitConfig: jsonb("rate_limit_config").$type<RateLimitConfig>(),
  trafficConfig: jsonb("traffic_config").$type<TrafficConfig>(),
  trafficResetAt: timestamp("traffic_reset_at", { withTimezone: true }),
  /** Its escalation tier, above its price's rank (shared/routing/tiers.ts); null: by price. */
  tier: integer("tier"),
  pendingDeletion: boolean("pending_deletion").notNull().default(false),
  lastError: text("last_error"),
  consecutiveErrors: integer("consecutive_errors").notNull().default(0),
  /** When the last error was recorded: a cloud connector backs off from it (2^errors minutes). */
  lastErrorAt: timestamp("last_error_at", { withTimezone: true }),
  /**
   * A provider-API connector's run of Empty fetches reached its threshold at this time (the
   * routing sequences that stand on it moved on); cleared by its next fetch that finds proxies.
   */
  depletedAt: timestamp("depleted_at", { withTimezone: true }),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
}, (t) => [
  uniqueIndex("connectors_project_name_key").on(t.projectId, sql`lower(${t.name})`),
  index("connectors_credential_id_idx").on(t.credentialId),
  check("connectors_weight_check", sql`${t.weight} between 1 and 100`),
  check("connectors_tier_check", sql`${t.tier} between 0 and 99`),
  check(
    "connectors_kind_check",
    sql`${t.kind} in ('static', 'vendor', 'provider_api', 'cloud')`,
  ),
]);

export const proxies = pgTable("proxies", {
  id: id(),
  projectId: uuid("project_id").notNull().references(() => projects.id, { onDelete: "cascade" }),
  connectorId: uuid("connector_id").notNull().references(() => connectors.id, {
    onDelete: "cascade",
  }),
  scheme: text("scheme").notNull(),
  host: text("host").notNull(),
  port: integer("port").notNull(),
  username: text("username"),
  password: text("password"),
  country: text("country"),
  /** Where the country came from: `manual`, `vendor`, `database`, `endpoint`. */
  countrySource: text("country_source"),
  /** The country the vendor promised for this exit (its rendered session or its list). */
  vendorCountry: text("vendor_country"),
  /** The sources attribution asked disagree on the country (shown, and ineligible under strict). */
  locationConflict: boolean("location_conflict").notNull().default(false),
  /** Where the exit was seen: its IP, region, city, ASN and each source's word (ProxyLocation). */
  location: jsonb("location").$type<ProxyLocation>(),
  /** When the location was last judged: attribution writes only forward of it. */
  locationCheckedAt: timestamp("location_checked_at", { withTimezone: true }),
  metadata: jsonb("metadata").$type<Record<string, unknown>>().notNull().default({}),
  /**
   * A cloud instance's id as the cloud knows it (`aws-<instance id>`, `gcp-<name>`,
   * `azure-<name>`): what a scale run matches listed instances by and terminates; null for
   * every other kind.
   */
  instanceId: text("instance_id"),
  /** Moved only by add, drain, terminate and the health job's compare-and-set. */
  status: text("status").notNull().default("initializing"),
  statusChangedAt: timestamp("status_changed_at", { withTimezone: true }).notNull().defaultNow(),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
}, (t) => [
  // One row per address and login within a connector: the upload's duplicate rule.
  uniqueIndex("proxies_identity_key").on(
    t.connectorId,
    t.scheme,
    sql`lower(${t.host})`,
    t.port,
    sql`coalesce(${t.username}, '')`,
  ),
  index("proxies_project_created_idx").on(t.projectId, t.createdAt, t.id),
  index("proxies_connector_created_idx").on(t.connectorId, t.createdAt, t.id),
  // One row per cloud instance: a creator's save is insert-or-skip on it.
  uniqueIndex("proxies_instance_key").on(t.connectorId, t.instanceId)
    .where(sql`${t.instanceId} is not null`),
  // The proxies list's sorts (and the pool's counts by status): each pages by index.
  index("proxies_project_status_idx").on(t.projectId, t.status, t.createdAt, t.id),
  index("proxies_project_country_idx").on(t.projectId, t.country, t.createdAt, t.id),
  index("proxies_project_status_changed_idx").on(
    t.projectId,
    t.statusChangedAt,
    t.createdAt,
    t.id,
  ),
  check("proxies_scheme_check", sql`${t.scheme} in ('http', 'https', 'socks4', 'socks5')`),
  check("proxies_port_check", sql`${t.port} between 1 and 65535`),
  check(
    "proxies_status_check",
    sql`${t.status} in ('initializing', 'healthy', 'degraded', 'unhealthy', 'draining', 'terminating')`,
  ),
]);

// ---------------------------------------------------------------------------------------------
// Metrics history: six tables of one shape, each row one bucket of one entity. Buckets start at
// floor(epoch / width) * width; the metrics flush writes minute rows, compaction folds them.

const counts = () => ({
  bucketStart: timestamp("bucket_start", { withTimezone: true }).notNull(),
  bucketSeconds: integer("bucket_seconds").notNull(),
  requests: bigint("requests", { mode: "number" }).notNull().default(0),
  successes: bigint("successes", { mode: "number" }).notNull().default(0),
  failures: bigint("failures", { mode: "number" }).notNull().default(0),
  bytesSent: bigint("bytes_sent", { mode: "number" }).notNull().default(0),
  bytesReceived: bigint("bytes_received", { mode: "number" }).notNull().default(0),
  latencySumMs: doublePrecision("latency_sum_ms").notNull().default(0),
});

export const proxyMetrics = pgTable("proxy_metrics", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  projectId: uuid("project_id").notNull().references(() => projects.id, { onDelete: "cascade" }),
  proxyId: uuid("proxy_id").notNull().references(() => proxies.id, { onDelete: "cascade" }),
  status: text("status"),
  ...counts(),
}, (t) => [
  index("proxy_metrics_entity_idx").on(t.proxyId, t.bucketStart),
  index("proxy_metrics_tier_idx").on(t.projectId, t.bucketSeconds, t.bucketStart),
]);

export const projectMetrics = pgTable("project_metrics", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  projectId: uuid("project_id").notNull().references(() => projects.id, { onDelete: "cascade" }),
  ...counts(),
}, (t) => [
  index("project_metrics_tier_idx").on(t.projectId, t.bucketSeconds, t.bucketStart),
  // Covers a project quota's sum of a window's bytes (an index-only scan).
  index("project_metrics_usage_idx").on(t.projectId, t.bucketStart, t.bytesSent, t.bytesReceived),
]);

/** Outlives the proxies, so billing-period usage stays complete after rotations. */
export const connectorMetrics = pgTable("connector_metrics", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  projectId: uuid("project_id").notNull().references(() => projects.id, { onDelete: "cascade" }),
  connectorId: uuid("connector_id").notNull().references(() => connectors.id, {
    onDelete: "cascade",
  }),
  ...counts(),
}, (t) => [
  // Covers the traffic job's sum of a window's bytes (an index-only scan).
  index("connector_metrics_entity_idx").on(
    t.connectorId,
    t.bucketStart,
    t.bytesSent,
    t.bytesReceived,
  ),
  index("connector_metrics_tier_idx").on(t.projectId, t.bucketSeconds, t.bucketStart),
]);

/**
 * Connections of a tunnel device closed as encrypted DNS (the device window's own field,
 * shared/metric-windows.ts): no request, so beside the transfer counts.
 */
const encryptedDnsClosed = () =>
  bigint("encrypted_dns_closed", { mode: "number" }).notNull().default(0);

/** One table for every tunnel protocol, keyed by device, without a foreign key. */
export const tunnelDeviceMetrics = pgTable("tunnel_device_metrics", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  projectId: uuid("project_id").notNull().references(() => projects.id, { onDelete: "cascade" }),
  deviceId: uuid("device_id").notNull(),
  protocol: text("protocol").notNull(),
  ...counts(),
  encryptedDnsClosed: encryptedDnsClosed(),
}, (t) => [
  index("tunnel_device_metrics_entity_idx").on(t.deviceId, t.bucketStart),
  index("tunnel_device_metrics_tier_idx").on(t.projectId, t.bucketSeconds, t.bucketStart),
]);

export const hostMetrics = pgTable("host_metrics", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  projectId: uuid("project_id").notNull().references(() => projects.id, { onDelete: "cascade" }),
  connectorId: uuid("connector_id").references(() => connectors.id, { onDelete: "cascade" }),
  host: text("host").notNull(),
  ...counts(),
}, (t) => [
  index("host_metrics_entity_idx").on(t.projectId, t.host, t.bucketStart),
  index("host_metrics_tier_idx").on(t.projectId, t.bucketSeconds, t.bucketStart),
]);

export const failureMetrics = pgTable("failure_metrics", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  projectId: uuid("project_id").notNull().references(() => projects.id, { onDelete: "cascade" }),
  /** Null: refused before a proxy was chosen. */
  connectorId: uuid("connector_id").references(() => connectors.id, { onDelete: "cascade" }),
  kind: text("kind").notNull(),
  vendorStatus: integer("vendor_status"),
  bucketStart: timestamp("bucket_start", { withTimezone: true }).notNull(),
  bucketSeconds: integer("bucket_seconds").notNull(),
  count: bigint("count", { mode: "number" }).notNull().default(0),
}, (t) => [
  index("failure_metrics_tier_idx").on(t.projectId, t.bucketSeconds, t.bucketStart),
]);

/**
 * All-time totals per entity, written in the history's transaction so the two never disagree.
 * One table for proxies, projects and tunnel devices, without a foreign key; compaction deletes
 * the totals of entities that are gone.
 */
export const metricTotals = pgTable("metric_totals", {
  entityKind: text("entity_kind").notNull(),
  entityId: uuid("entity_id").notNull(),
  requests: bigint("requests", { mode: "number" }).notNull().default(0),
  successes: bigint("successes", { mode: "number" }).notNull().default(0),
  failures: bigint("failures", { mode: "number" }).notNull().default(0),
  bytesSent: bigint("bytes_sent", { mode: "number" }).notNull().default(0),
  bytesReceived: bigint("bytes_received", { mode: "number" }).notNull().default(0),
  latencySumMs: doublePrecision("latency_sum_ms").notNull().default(0),
  /** A tunnel device's; 0 for a proxy's and a project's. */
  encryptedDnsClosed: encryptedDnsClosed(),
  updatedAt: updatedAt(),
}, (t) => [
  primaryKey({ columns: [t.entityKind, t.entityId] }),
  check("metric_totals_kind_check", sql`${t.entityKind} in ('proxy', 'project', 'tunnel_device')`),
]);

/** One row per committed metrics flush, named by its job entry's id; a redelivery finds it. */
/**
 * What judging found per project, UTC day and site: a copy of the gateways' per-site counts in
 * Redis (kept there seven days; docs/blocking.md), one row per count the Redis hash holds, kept
 * here for the project's metrics_retention_days. `connector` is the connector's id, or '' for a
 * shadow rule's count; `count` names it as the hash does (`blocked`, `ok_bytes`,
 * `shadow:<rule>:<verdict>`).
 */
export const domainMetrics = pgTable("domain_metrics", {
  projectId: uuid("project_id").notNull().references(() => projects.id, { onDelete: "cascade" }),
  day: date("day", { mode: "string" }).notNull(),
  site: text("site").notNull(),
  connector: text("connector").notNull(),
  count: text("count").notNull(),
  value: bigint("value", { mode: "number" }).notNull(),
}, (t) => [
  primaryKey({ columns: [t.projectId, t.day, t.site, t.connector, t.count] }),
]);

/**
 * Change entries written in their write's transaction (control/core/outbox.ts): the writer
 * deletes its row once it announced it; the relay announces what is left, in id order.
 */
export const changeOutbox = pgTable("change_outbox", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  kind: text("kind").notNull(),
  ref: text("ref").notNull(),
  createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
});

/**
 * The admin audit log (docs/audit.md): one row per entity a write changed, inserted by the
 * `octoprox_audit` triggers in the write's own transaction (migration 0016) from who the
 * transaction says is writing (db/actor.ts). A bulk proxy write is one row with its count.
 */
export const auditLog = pgTable("audit_log", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  at: timestamp("at", { withTimezone: true }).notNull().defaultNow(),
  /** The writing transaction: the rows of one write share it. */
  tx: bigint("tx", { mode: "number" }).notNull(),
  /** `user`, `token` or `system` (the api's own configuration file). */
  actorKind: text("actor_kind").notNull(),
  actorId: text("actor_id"),
  actorName: text("actor_name"),
  /** The user a token acts for (a user's own write: the same user). */
  userName: text("user_name"),
  /** The client address the request came from. */
  address: text("address"),
  /** `dashboard`, `cli`, `api` or `config` (the api's configuration file). */
  via: text("via").notNull(),
  /** The route that wrote (`PATCH /api/v1/projects/:id`), or what the system did. */
  request: text("request"),
  entity: text("entity").notNull(),
  entityId: text("entity_id"),
  entityName: text("entity_name"),
  /** create, update, delete, or an operation's own name (lift, import). */
  action: text("action").notNull(),
  /** Rows the entry stands for: 1, or a bulk write's count. */
  count: integer("count").notNull().default(1),
  /** The fields that changed, before and after; secrets masked. */
  before: jsonb("before").$type<Record<string, unknown>>(),
  after: jsonb("after").$type<Record<string, unknown>>(),
}, (t) => [
  index("audit_log_at_idx").on(t.at),
  index("audit_log_entity_idx").on(t.entity, t.entityId, t.id),
  index("audit_log_actor_idx").on(t.actorName, t.id),
  index("audit_log_tx_idx").on(t.tx),
]);

export const metricFlushes = pgTable("metric_flushes", {
  flushId: text("flush_id").primaryKey(),
  committedAt: timestamp("committed_at", { withTimezone: true }).notNull().defaultNow(),
});

/**
 * System readings, one row per snapshot run that stored one: gauges (sizes, memory, counts),
 * averaged when a history read downsamples them, kept for OCTOPROX_SYSTEM_METRICS_RETENTION_DAYS.
 */
export const systemMetrics = pgTable("system_metrics", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  recordedAt: timestamp("recorded_at", { withTimezone: true }).notNull().defaultNow(),
  databaseBytes: bigint("database_bytes", { mode: "number" }).notNull(),
  /** Total size (table, indexes, toast) of each of our tables, by name. */
  tableBytes: jsonb("table_bytes").$type<Record<string, number>>().notNull().default({}),
  redisUsedMemoryBytes: bigint("redis_used_memory_bytes", { mode: "number" }),
  /** Every key of the Redis database, whoever wrote it. */
  redisKeys: bigint("redis_keys", { mode: "number" }),
  /** Keys under this install's prefix; null when the count was cut short (too many to scan). */
  redisPrefixKeys: bigint("redis_prefix_keys", { mode: "number" }),
  projects: integer("projects").notNull(),
  connectors: integer("connectors").notNull(),
  /** Proxies by status (every status, zeros included). */
  proxiesByStatus: jsonb("proxies_by_status").$type<Record<string, number>>().notNull().default({}),
}, (t) => [
  index("system_metrics_recorded_idx").on(t.recordedAt),
]);

/**
 * The revision of the last configuration file applied with one (`revision:` in the file): an
 * apply of a lower revision is refused, so a replica still holding an older file cannot undo a
 * newer one. One row at most.
 */
export const configRevision = pgTable("config_revision", {
  id: integer("id").primaryKey().default(1),
  revision: bigint("revision", { mode: "number" }).notNull(),
  appliedAt: timestamp("applied_at", { withTimezone: true }).notNull().defaultNow(),
}, (t) => [
  check("config_revision_single_row", sql`${t.id} = 1`),
]);

/**
 * Custom provider descriptors: an admin's own vendors, one row each, the document as valibot
 * accepted it. `version` counts its saves; every save and delete is in provider_audit_log.
 */
export const providerDescriptors = pgTable("provider_descriptors", {
  id: text("id").primaryKey(),
  version: integer("version").notNull().default(1),
  document: jsonb("document").$type<Record<string, unknown>>().notNull(),
  /** The egress hosts the admin confirmed with the last save. */
  confirmedHosts: jsonb("confirmed_hosts").$type<string[]>().notNull().default([]),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
});

/** Who saved or deleted which custom descriptor, and the document of each version. */
export const providerAuditLog = pgTable("provider_audit_log", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  descriptorId: text("descriptor_id").notNull(),
  version: integer("version").notNull(),
  /** created, updated or deleted. */
  action: text("action").notNull(),
  /** The username of the admin who did it. */
  actor: text("actor").notNull(),
  document: jsonb("document").$type<Record<string, unknown>>(),
  at: timestamp("at", { withTimezone: true }).notNull().defaultNow(),
}, (t) => [
  index("provider_audit_log_descriptor_idx").on(t.descriptorId, t.at),
  check("provider_audit_log_action_check", sql`${t.action} in ('created', 'updated', 'deleted')`),
]);

/**
 * A project's sequential routing: its connectors in order, served one at a time from
 * `current_index`. The index moves only by compare-and-set on `version`, so any number of
 * processes seeing the same depleted connector move the sequence on once.
 */
export const projectSequences = pgTable("project_sequences", {
  projectId: uuid("project_id").primaryKey().references(() => projects.id, {
    onDelete: "cascade",
  }),
  /** Connector ids in order (at least two). */
  connectorIds: jsonb("connector_ids").$type<string[]>().notNull(),
  currentIndex: integer("current_index").notNull().default(0),
  /** Bumped by every move of the index and every edit: what a compare-and-set compares. */
  version: integer("version").notNull().default(1),
  /** Past the last connector: stop (serve nothing), loop (back to the first), stay_last. */
  onEnd: text("on_end").notNull().default("stop"),
  /** When the current connector cannot serve a request: reject (503 with the reason). */
  onUnavailable: text("on_unavailable").notNull().default("reject"),
  /** Whether the sequence has run past its last connector (on_end stop). */
  exhausted: boolean("exhausted").notNull().default(false),
  switchedAt: timestamp("switched_at", { withTimezone: true }),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
}, (t) => [
  check("project_sequences_on_end_check", sql`${t.onEnd} in ('stop', 'loop', 'stay_last')`),
  check("project_sequences_on_unavailable_check", sql`${t.onUnavailable} in ('reject')`),
  check("project_sequences_index_check", sql`${t.currentIndex} >= 0`),
]);

/**
 * Distribution keys: the credentials of the extraction API, one project each and nothing else.
 * As API tokens, only a digest is stored; the key is shown once.
 */
export const distributionKeys = pgTable("distribution_keys", {
  id: id(),
  projectId: uuid("project_id").notNull().references(() => projects.id, { onDelete: "cascade" }),
  name: text("name").notNull(),
  /** SHA-256 of the key, hex. */
  keyHash: text("key_hash").notNull(),
  /** The first characters of the key, so an operator can tell keys apart. */
  keyPrefix: text("key_prefix").notNull(),
  /** Client addresses the key is taken from (CIDR blocks); empty: from anywhere. */
  allowedCidrs: jsonb("allowed_cidrs").$type<string[]>().notNull().default([]),
  createdAt: createdAt(),
  expiresAt: timestamp("expires_at", { withTimezone: true }),
  lastUsedAt: timestamp("last_used_at", { withTimezone: true }),
  revokedAt: timestamp("revoked_at", { withTimezone: true }),
}, (t) => [
  uniqueIndex("distribution_keys_key_hash_key").on(t.keyHash),
  uniqueIndex("distribution_keys_project_name_key").on(t.projectId, sql`lower(${t.name})`),
]);

// ---------------------------------------------------------------------------------------------
// Where exits are: IP databases, the attribution settings, observations and each connector's
// exits (docs/geo.md).

/** Raw bytes (IP database files). */
const bytea = customType<{ data: Uint8Array; driverData: Uint8Array }>({
  dataType: () => "bytea",
});

/** What one source said of a proxy's exit, as the attribution kept it. */
export interface LocationSourceWord {
  source: string;
  country: string | null;
  /** The database that placed it (source `database`). */
  database?: string;
}

/** A proxy's attributed location. */
export interface ProxyLocation {
  ip: string | null;
  region: string | null;
  city: string | null;
  asn: number | null;
  sources: LocationSourceWord[];
}

/** The install's attribution settings: one row, seeded by the migration. */
export const geoSettings = pgTable("geo_settings", {
  id: integer("id").primaryKey().default(1),
  locationSources: jsonb("location_sources").$type<string[]>().notNull().default([
    "database",
    "vendor",
    "endpoint",
  ]),
  locationConflictRule: text("location_conflict_rule").notNull().default("consensus"),
  observationRetentionDays: integer("observation_retention_days").notNull().default(30),
  /** Null: exit IPs are kept forever. */
  exitIpRetentionDays: integer("exit_ip_retention_days"),
  updatedAt: updatedAt(),
}, (t) => [
  check("geo_settings_single_row", sql`${t.id} = 1`),
  check(
    "geo_settings_conflict_rule_check",
    sql`${t.locationConflictRule} in ('consensus', 'first')`,
  ),
]);

/** An IP database an admin added: its file is in geo_files under its checksum. */
export const geoDatabases = pgTable("geo_databases", {
  id: id(),
  name: text("name").notNull(),
  format: text("format").notNull(),
  enabled: boolean("enabled").notNull().default(true),
  /** Consulted in ascending position, then name. */
  position: integer("position").notNull().default(0),
  /** `upload` or `url`. */
  origin: text("origin").notNull(),
  url: text("url"),
  /** Download credentials ({type: basic|token, ...}): never in the feed or an answer. */
  auth: jsonb("auth").$type<Record<string, unknown>>(),
  updateIntervalHours: integer("update_interval_hours"),
  /** SHA-256 of the current file, hex; null until a first download stored one. */
  checksum: text("checksum"),
  sizeBytes: bigint("size_bytes", { mode: "number" }),
  entries: integer("entries"),
  /** The file's own build date or version, when it states one. */
  version: text("version"),
  lastUpdateAt: timestamp("last_update_at", { withTimezone: true }),
  lastError: text("last_error"),
  lastErrorAt: timestamp("last_error_at", { withTimezone: true }),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
}, (t) => [
  uniqueIndex("geo_databases_name_key").on(sql`lower(${t.name})`),
  check("geo_databases_format_check", sql`${t.format} in ('mmdb', 'geofeed')`),
  check("geo_databases_origin_check", sql`${t.origin} in ('upload', 'url')`),
]);

/** IP database files by content: a replaced file is deleted by the next geo_update tick. */
export const geoFiles = pgTable("geo_files", {
  checksum: text("checksum").primaryKey(),
  bytes: bytea("bytes").notNull(),
  sizeBytes: bigint("size_bytes", { mode: "number" }).notNull(),
  createdAt: createdAt(),
});

/**
 * Every exit seen, raw: no foreign keys, so what a deleted connector did stays traceable for
 * the retention window (observation_retention_days).
 */
export const ipObservations = pgTable("ip_observations", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  observedAt: timestamp("observed_at", { withTimezone: true }).notNull(),
  ip: text("ip").notNull(),
  projectId: uuid("project_id"),
  connectorId: uuid("connector_id"),
  proxyId: uuid("proxy_id"),
  /** What saw it: `health`, `sync`, `preflight`, `enrich`, `lookup`. */
  source: text("source").notNull(),
  sessionId: varchar("session_id", { length: 255 }),
  instanceId: varchar("instance_id", { length: 64 }),
  country: text("country"),
  region: text("region"),
  city: text("city"),
  asn: integer("asn"),
  /** The country the vendor promised for it. */
  claimedCountry: text("claimed_country"),
  handOut: boolean("hand_out").notNull().default(false),
}, (t) => [
  index("ip_observations_observed_idx").on(t.observedAt),
  index("ip_observations_connector_idx").on(t.connectorId, t.observedAt),
  index("ip_observations_proxy_idx").on(t.proxyId, t.observedAt),
]);

/** Each connector's distinct exits: first and last seen, the latest state, hand-outs. */
export const connectorExitIps = pgTable("connector_exit_ips", {
  connectorId: uuid("connector_id").notNull().references(() => connectors.id, {
    onDelete: "cascade",
  }),
  ip: text("ip").notNull(),
  projectId: uuid("project_id").notNull(),
  firstSeenAt: timestamp("first_seen_at", { withTimezone: true }).notNull(),
  lastSeenAt: timestamp("last_seen_at", { withTimezone: true }).notNull(),
  /** When the state below was seen: only a newer observation replaces it. */
  stateAt: timestamp("state_at", { withTimezone: true }).notNull(),
  country: text("country"),
  region: text("region"),
  city: text("city"),
  asn: integer("asn"),
  claimedCountry: text("claimed_country"),
  /** Sources that placed it, as the latest observation had them. */
  sources: jsonb("sources").$type<string[]>().notNull().default([]),
  observations: bigint("observations", { mode: "number" }).notNull().default(0),
  handOuts: bigint("hand_outs", { mode: "number" }).notNull().default(0),
}, (t) => [
  primaryKey({ columns: [t.connectorId, t.ip] }),
  index("connector_exit_ips_project_idx").on(t.projectId, t.lastSeenAt),
  index("connector_exit_ips_last_seen_idx").on(t.lastSeenAt),
]);

/**
 * Alerting (docs/alerts.md): where alerts go. A webhook's signing secret is sealed
 * (control/core/seal.ts) under a key drawn from OCTOPROX_INTERNAL_SECRET, bound to the channel.
 */
export const alertChannels = pgTable("alert_channels", {
  id: uuid("id").primaryKey().defaultRandom(),
  name: text("name").notNull(),
  /** `webhook` (the one type this release delivers to). */
  type: text("type").notNull(),
  /** `json` (our own body, signed) or `slack` (`{text, blocks}`, signed too). */
  format: text("format").notNull().default("json"),
  url: text("url").notNull(),
  /** The admin's explicit leave to reach a private, loopback or link-local address. */
  allowPrivateAddress: boolean("allow_private_address").notNull().default(false),
  secretSealed: text("secret_sealed").notNull(),
  createdAt: createdAt(),
  updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
}, (t) => [
  uniqueIndex("alert_channels_name_key").on(sql`lower(${t.name})`),
]);

/** What to watch: a condition the system already knows, its scope, threshold and severity. */
export const alertRules = pgTable("alert_rules", {
  id: uuid("id").primaryKey().defaultRandom(),
  name: text("name").notNull(),
  kind: text("kind").notNull(),
  /** Scope: one project (and its connectors), one connector, or neither (everything). */
  projectId: uuid("project_id").references(() => projects.id, { onDelete: "cascade" }),
  connectorId: uuid("connector_id").references(() => connectors.id, { onDelete: "cascade" }),
  threshold: doublePrecision("threshold"),
  severity: text("severity").notNull(),
  /** No new event for the same rule and subject within this long of the last one fired. */
  quietPeriodSeconds: integer("quiet_period_seconds").notNull(),
  createdAt: createdAt(),
  updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
}, (t) => [
  uniqueIndex("alert_rules_name_key").on(sql`lower(${t.name})`),
  check("alert_rules_severity_check", sql`${t.severity} in ('info', 'warning', 'critical')`),
]);

/** The channels a rule delivers to. */
export const alertRuleChannels = pgTable("alert_rule_channels", {
  ruleId: uuid("rule_id").notNull().references(() => alertRules.id, { onDelete: "cascade" }),
  channelId: uuid("channel_id").notNull().references(() => alertChannels.id, {
    onDelete: "cascade",
  }),
}, (t) => [
  primaryKey({ columns: [t.ruleId, t.channelId] }),
  index("alert_rule_channels_channel_idx").on(t.channelId),
]);

/**
 * A condition that fired, and when it resolved. At most one open event per rule and subject
 * (the partial unique index): however many processes see a condition, one insert wins.
 */
export const alertEvents = pgTable("alert_events", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  ruleId: uuid("rule_id").notNull().references(() => alertRules.id, { onDelete: "cascade" }),
  /** What fired: `connector:<id>`, `project:<id>`, `job:<kind>`, `tls_ca`. */
  subject: text("subject").notNull(),
  severity: text("severity").notNull(),
  message: text("message").notNull(),
  details: jsonb("details").$type<Record<string, unknown>>().notNull().default({}),
  firedAt: timestamp("fired_at", { withTimezone: true }).notNull().defaultNow(),
  resolvedAt: timestamp("resolved_at", { withTimezone: true }),
}, (t) => [
  uniqueIndex("alert_events_open_key").on(t.ruleId, t.subject).where(
    sql`${t.resolvedAt} is null`,
  ),
  index("alert_events_rule_subject_idx").on(t.ruleId, t.subject, t.firedAt),
  index("alert_events_fired_idx").on(t.firedAt),
]);

/**
 * One message owed to one channel: an event's firing or resolving, or a test. Claimed with
 * `for update skip locked` by any process's delivery loop, retried with back-off for a day.
 */
export const alertDeliveries = pgTable("alert_deliveries", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  /** Null for a test delivery. */
  eventId: bigint("event_id", { mode: "number" }).references(() => alertEvents.id, {
    onDelete: "cascade",
  }),
  channelId: uuid("channel_id").notNull().references(() => alertChannels.id, {
    onDelete: "cascade",
  }),
  /** `fired`, `resolved` or `test`. */
  action: text("action").notNull(),
  /** What is sent (no secret in it). */
  payload: jsonb("payload").$type<Record<string, unknown>>().notNull(),
  /** `pending`, `delivered` or `failed` (gave up). */
  state: text("state").notNull().default("pending"),
  attempts: integer("attempts").notNull().default(0),
  nextAttemptAt: timestamp("next_attempt_at", { withTimezone: true }).notNull().defaultNow(),
  createdAt: createdAt(),
  finishedAt: timestamp("finished_at", { withTimezone: true }),
}, (t) => [
  index("alert_deliveries_due_idx").on(t.nextAttemptAt).where(sql`${t.state} = 'pending'`),
  index("alert_deliveries_created_idx").on(t.createdAt),
  index("alert_deliveries_event_idx").on(t.eventId),
  index("alert_deliveries_channel_idx").on(t.channelId),
]);

/** Each try of a delivery: when, how long, the answer's status or the error. */
export const alertDeliveryTries = pgTable("alert_delivery_tries", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  deliveryId: bigint("delivery_id", { mode: "number" }).notNull().references(
    () => alertDeliveries.id,
    { onDelete: "cascade" },
  ),
  at: timestamp("at", { withTimezone: true }).notNull().defaultNow(),
  durationMs: integer("duration_ms").notNull(),
  statusCode: integer("status_code"),
  error: text("error"),
}, (t) => [
  index("alert_delivery_tries_delivery_idx").on(t.deliveryId, t.id),
]);

/**
 * Tunnel devices (docs/api.md, "WireGuard devices"): the install's WireGuard identity, one row
 * made by the first api to start (one insert wins). The private key is sealed
 * (control/core/seal.ts) under a key drawn from OCTOPROX_INTERNAL_SECRET, bound to the row; the
 * feed carries it opened, sealed as the feed is, to the gateways.
 */
export const wireguardSettings = pgTable("wireguard_settings", {
  id: integer("id").primaryKey().default(1),
  privateKeySealed: text("private_key_sealed").notNull(),
  /** Base64 Curve25519 public key, as `wg` writes it: what every device trusts. */
  publicKey: text("public_key").notNull(),
  /** The devices' IPv4 block; its first host is the gateways' tunnel address and DNS. */
  subnet: text("subnet").notNull().default("10.66.0.0/16"),
  listenPort: integer("listen_port").notNull().default(51820),
  /** The public host name or address devices dial; null until an admin sets it. */
  endpointHost: text("endpoint_host"),
  mtu: integer("mtu").notNull().default(1420),
  persistentKeepaliveSeconds: integer("persistent_keepalive_seconds").notNull().default(25),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
}, (t) => [
  check("wireguard_settings_single_row", sql`${t.id} = 1`),
]);

/**
 * The install's OpenVPN identity (docs/tunnels.md, "OpenVPN"), one row made by the first api to
 * start: a private CA whose key never leaves Postgres (sealed, bound to the row), the server
 * certificate it signed with its key, and the tls-crypt key every device shares with the
 * servers. Gateways get the CA certificate, the server's pair and the tls-crypt key through the
 * feed; device certificates are signed here.
 */
export const openvpnSettings = pgTable("openvpn_settings", {
  id: integer("id").primaryKey().default(1),
  caCertificate: text("ca_certificate").notNull(),
  caKeySealed: text("ca_key_sealed").notNull(),
  serverCertificate: text("server_certificate").notNull(),
  serverKeySealed: text("server_key_sealed").notNull(),
  tlsCryptKeySealed: text("tls_crypt_key_sealed").notNull(),
  /** The devices' IPv4 block; its first host is the gateways' tunnel address and DNS. */
  subnet: text("subnet").notNull().default("10.67.0.0/16"),
  /** `udp` or `tcp`: one per install, as every device's profile names it. */
  transport: text("transport").notNull().default("udp"),
  listenPort: integer("listen_port").notNull().default(1194),
  /** The public host name or address devices dial; null until an admin sets it. */
  endpointHost: text("endpoint_host"),
  mtu: integer("mtu").notNull().default(1500),
  keepaliveIntervalSeconds: integer("keepalive_interval_seconds").notNull().default(10),
  keepaliveTimeoutSeconds: integer("keepalive_timeout_seconds").notNull().default(60),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
}, (t) => [
  check("openvpn_settings_single_row", sql`${t.id} = 1`),
  check("openvpn_settings_transport_check", sql`${t.transport} in ('udp', 'tcp')`),
]);

/**
 * A device of a project: a client that joins it over a tunnel, every TCP connection of it routed
 * with its fixed options. Its address is unique per protocol across the install (it names the
 * device on a gateway). A WireGuard device's keys: its public key (unique), its private key
 * sealed only when the server made the pair (a supplied public key keeps none), and the
 * preshared key the server made, sealed; each bound to the row.
 */
export const tunnelDevices = pgTable("tunnel_devices", {
  id: id(),
  projectId: uuid("project_id").notNull().references(() => projects.id, { onDelete: "cascade" }),
  /** `wireguard` or `openvpn`. */
  protocol: text("protocol").notNull(),
  name: text("name").notNull(),
  /** The device's IPv4 address inside its protocol's subnet, dotted quad. */
  address: text("address").notNull(),
  enabled: boolean("enabled").notNull().default(true),
  publicKey: text("public_key"),
  privateKeySealed: text("private_key_sealed"),
  presharedKeySealed: text("preshared_key_sealed"),
  /** Fixed options, read as a username's are (shared/username.ts), stored normalised. */
  country: text("country"),
  state: text("state"),
  city: text("city"),
  sessionId: text("session_id"),
  /** OpenVPN: the device's client certificate (PEM) the install's CA signed, and its serial. */
  certificate: text("certificate"),
  /** Lower-case hex without separators or leading zeros, as admission compares it. */
  certificateSerial: text("certificate_serial"),
  /** Written by a worker job from what gateways report; bookkeeping, not a definition. */
  lastSeenAt: timestamp("last_seen_at", { withTimezone: true }),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
}, (t) => [
  uniqueIndex("tunnel_devices_project_name_key").on(
    t.projectId,
    t.protocol,
    sql`lower(${t.name})`,
  ),
  uniqueIndex("tunnel_devices_address_key").on(t.protocol, t.address),
  uniqueIndex("tunnel_devices_public_key_key").on(t.publicKey),
  check("tunnel_devices_protocol_check", sql`${t.protocol} in ('wireguard', 'openvpn')`),
  uniqueIndex("tunnel_devices_certificate_serial_key").on(t.certificateSerial),
  check(
    "tunnel_devices_openvpn_certificate_check",
    sql`${t.protocol} <> 'openvpn' or (${t.certificate} is not null and ${t.certificateSerial} is not null and ${t.privateKeySealed} is not null)`,
  ),
  check(
    "tunnel_devices_wireguard_keys_check",
    sql`${t.protocol} <> 'wireguard' or (${t.publicKey} is not null and ${t.presharedKeySealed} is not null)`,
  ),
]);
