/** The API's answers as the pages read them (the API's own field names). */

export interface TrafficConfig {
  limit_bytes: number | null;
  period: string;
  reset_day: number;
  action: string;
  warn_percent: number;
  limit_status: number;
  price_per_gb: number | null;
  currency: string;
}

export interface TrafficUsage {
  period: string;
  period_end: string;
  counting_since: string;
  bytes: number;
  limit_bytes: number | null;
  percent: number | null;
  status: "ok" | "warning" | "limit";
  cost: number | null;
  currency: string;
  blocked: boolean;
  blocked_until: string | null;
  pending: boolean;
}

export interface Project {
  id: string;
  name: string;
  description: string | null;
  username: string;
  password?: string;
  strategy: string;
  session_ttl_seconds: number;
  location_policy: string;
  location_preflight: string;
  sticky_quarantine: boolean;
  metrics_retention_days: number;
  connection_timeout_seconds: number | null;
  max_retries: number | null;
  traffic_quota: TrafficConfig | null;
  traffic_usage: TrafficUsage | null;
  rate_limit: { requests_per_second: number; burst: number } | null;
  max_connections: number | null;
  allowed_cidrs: string[];
  passwordless_cidrs: string[];
  created_at: string;
  updated_at: string;
}

export interface Usage {
  requests: number;
  successes: number;
  failures: number;
  success_rate: number | null;
  bytes_sent: number;
  bytes_received: number;
  avg_latency_ms: number | null;
}

export interface Series {
  range: string;
  bucket_seconds: number;
  from: string;
  to: string;
  points: ({ t: string } & Usage)[];
}

export interface ProjectMetrics {
  usage: Usage;
  pool: { total: number; by_status: Record<string, number>; quarantined: number };
}

export interface SplitRow {
  connector_id: string;
  name: string;
  enabled: boolean;
  weight: number;
  proxies: number;
  healthy: number;
  expected_share: number;
  observed_share: number | null;
  observed_bytes_share: number | null;
  excluded_reason: string | null;
  usage: Usage;
  cost: number | null;
  currency: string | null;
}

export interface RateLimitConfig {
  max_requests: number;
  window_seconds: number;
  quarantine_seconds_min: number;
  quarantine_seconds_max: number;
  sticky_quarantine: boolean;
}

export interface Connector {
  id: string;
  project_id: string;
  name: string;
  kind: string;
  provider: string | null;
  credential_id: string | null;
  enabled: boolean;
  weight: number;
  countries: string[];
  domain_allow: string[];
  domain_deny: string[];
  healthcheck_url: string | null;
  rate_limit_config: RateLimitConfig | null;
  traffic_config: TrafficConfig | null;
  traffic_usage: TrafficUsage | null;
  pending_deletion: boolean;
  last_error: string | null;
  consecutive_errors: number;
  proxy_count: number;
  /** A vendor connector's config (proxy_type, slots, session_mode, its fields), secrets masked. */
  config: Record<string, unknown>;
  created_at: string;
  updated_at: string;
}

/** A credential; secret config fields are answered masked, with a `has_<key>` flag. */
export interface Credential {
  id: string;
  project_id: string;
  name: string;
  provider: string;
  config: Record<string, unknown>;
  created_at: string;
  updated_at: string;
  [flag: `has_${string}`]: boolean;
}

/** What the API answers in place of a secret; sent back, it keeps the stored one. */
export const SECRET_MASK = "********";

export interface Proxy {
  id: string;
  connector_id: string;
  url: string;
  scheme: string;
  host: string;
  port: number;
  username: string | null;
  has_password: boolean;
  country: string | null;
  metadata?: Record<string, unknown>;
  status: string;
  status_changed_at: string;
  quarantined: boolean;
  quarantine_remaining_seconds: number;
  last_checked_at: string | null;
  created_at: string;
}

export interface Page<T> {
  items: T[];
  total: number;
  page: number;
  page_size: number;
}

export interface ProxyUsageRow {
  proxy_id: string;
  usage: Usage;
}

export interface UploadReport {
  total_lines: number;
  added: number;
  duplicates: number;
  refused: number;
  errors: { line: number; reason: string }[];
  duplicate_lines: number[];
}

export interface ConnectorSummary {
  id: string;
  name: string;
  kind: string;
}

/** `GET /projects/{id}/failures`: the flushed failure counts over a range. */
export interface FailureReport {
  range: string;
  from: string;
  to: string;
  total: number;
  by_kind: { kind: string; count: number }[];
  rows: {
    kind: string;
    connector_id: string | null;
    vendor_status: number | null;
    count: number;
  }[];
}

/** One scrubbed example of a failed request (`…/failures/examples`). */
export interface FailureExample {
  id: string;
  at: string;
  kind: string;
  protocol: string;
  client_status: number;
  proxy_status: string;
  vendor_status: number | null;
  connector_id: string | null;
  proxy_id: string | null;
  target: string;
  message: string;
}

/** A section of `GET /system/stats`: its data, or what Redis answered instead. */
export interface StatsSection<T> {
  data: T | null;
  error: string | null;
}

export interface LoopStats {
  name: string;
  state: string;
  runs: number;
  failures: number;
  consecutive_failures: number;
  last_run_at: string | null;
  last_error: string | null;
  last_duration_ms: number | null;
  owner?: string;
}

export interface ListedProcess {
  instance: string;
  role: string;
  version: string | null;
  started_at: string | null;
  heartbeat_age_ms: number | null;
  snapshot: Record<string, unknown> | null;
}

export interface FeedGatewayStatus {
  instance: string;
  applied_digest: string | null;
  current: boolean;
  apply_age_ms: number | null;
  heartbeat_age_ms: number | null;
}

export interface WorkStreamStatus {
  length: number;
  pending: number;
  backlog: number;
  consumers: number;
  oldestAgeMs: number | null;
  groupMissing: boolean;
}

export interface SystemStats {
  read_at: string;
  processes: StatsSection<{ total: number; by_role: Record<string, ListedProcess[]> }>;
  leader: StatsSection<{ instance: string; lease_ttl_ms: number } | null>;
  feed: StatsSection<{
    head: { digest: string; compiled_at: string } | null;
    gateways: FeedGatewayStatus[];
    behind: number;
  }>;
  work_streams: StatsSection<Record<string, WorkStreamStatus>>;
}

export interface SystemPoint {
  t: string;
  readings: number;
  database_bytes: number;
  redis_used_memory_bytes: number | null;
  redis_keys: number | null;
  projects: number;
  connectors: number;
  proxies_by_status: Record<string, number>;
}

export interface SystemHistory {
  range: string;
  bucket_seconds: number;
  points: SystemPoint[];
}

export interface UserRecord {
  id: string;
  username: string;
  role: "viewer" | "editor" | "admin";
  email: string | null;
  is_active: boolean;
  created_at: string;
  updated_at: string;
  last_login_at: string | null;
}

export interface ApiToken {
  id: string;
  user_id: string;
  name: string;
  prefix: string;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  revoked_at: string | null;
  active: boolean;
  /** Only in the create answer, this once. */
  token?: string;
}

/** A provider descriptor as the catalogue answers it (GET /api/v1/providers). */
export interface ProviderField {
  key: string;
  label: string;
  type: "text" | "password" | "number" | "select" | "boolean" | "textarea" | "url" | "country";
  secret: boolean;
  required: boolean;
  default?: string | number | boolean;
  /** Bounds of a number. */
  min?: number;
  max?: number;
  /** A regular expression the whole value must match. */
  pattern?: string;
  /** The choices of a select. */
  options?: { value: string; label?: string }[];
  help?: string;
}

export interface ProviderType {
  id: string;
  name: string;
  mode: "session" | "port" | "list";
  scheme?: string;
  host: string | null;
  port: number | null;
  dynamic_sessions: boolean;
  countries: string[] | null;
  state_countries?: string[] | null;
  city_countries?: string[] | null;
  session_time?: {
    unit: "minutes" | "seconds";
    min_minutes: number;
    max_minutes: number;
    default_minutes?: number;
  } | null;
  max_slots?: number;
  renders: { country: boolean; state: boolean; city: boolean; session_time: boolean };
}

export interface ProviderRecord {
  id: string;
  name: string;
  description: string;
  docs_url: string | null;
  beta: boolean;
  source: "builtin" | "file" | "custom";
  version: number;
  credential_fields: ProviderField[];
  connector_fields: ProviderField[];
  proxy_types: ProviderType[];
  egress_hosts: string[];
  checks_credentials: boolean;
}

/** GET /api/v1/providers/{id}: the entry with the whole descriptor as stored. */
export interface ProviderDetail extends ProviderRecord {
  descriptor: {
    proxy_types: { id: string; call?: unknown; discovery?: unknown }[];
    [key: string]: unknown;
  };
}

/** A provider-API connector's activity pool (GET …/connectors/{cid}/pool); no address. */
export interface PoolView {
  connector_id: string;
  /** The pool generation the fetch counts belong to; null before any fetch lead made one. */
  generation: string | null;
  counts: {
    checking: number;
    routed: number;
    stock: number;
    draining: number;
    extracted: number;
  };
  /** Checking, routed and stock: what the pool's sizes count. */
  live: number;
  pool: {
    min_size: number;
    target_size: number;
    max_size: number;
    reserve_for_gateway: number | null;
  } | null;
  fetch: {
    success: number;
    empty: number;
    duplicate_only: number;
    error: number;
    rate_limited: number;
    empty_streak: number;
    error_streak: number;
    backoff_until: string | null;
    in_flight: number;
    ledger_used: number;
    ledger_pending: number;
    max_total: number | null;
  };
  depleted_at: string | null;
}

/** A project's connector sequence (GET /projects/{id}/sequence). */
export interface Sequence {
  project_id: string;
  connector_ids: string[];
  current_index: number;
  /** Null once exhausted. */
  current_connector_id: string | null;
  on_end: "stop" | "loop" | "stay_last";
  on_unavailable: "reject";
  exhausted: boolean;
  version: number;
  switched_at: string | null;
  connectors: { id: string; name: string; depleted_at: string | null }[];
  created_at: string;
  updated_at: string;
}

/** A distribution key of a project; `key` only in the create answer, this once. */
export interface DistributionKey {
  id: string;
  project_id: string;
  name: string;
  prefix: string;
  allowed_cidrs: string[];
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  revoked_at: string | null;
  active: boolean;
  key?: string;
}
