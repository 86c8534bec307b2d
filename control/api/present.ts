/**
 * How rows are shown to API clients: snake_case fields, dates as ISO strings (by JSON), and no
 * secret a caller should not see: never a password hash or a token's hash, never a proxy's or
 * a credential's password (a flag says whether one is set), and a project's proxy password only
 * to roles that may hand it out.
 */
import { maskConfig } from "../services/credentials.ts";
import { maskConnectorConfig } from "../services/connectors.ts";
import type { ProviderRegistry } from "../../shared/vendors/registry.ts";
import type { ConnectorRow } from "../services/connectors.ts";
import type { CredentialRow } from "../services/credentials.ts";
import type { ProjectRow } from "../services/projects.ts";
import type { ProxyRow } from "../services/proxies.ts";
import type { QuarantineView } from "../services/quarantines.ts";
import type { SequenceView } from "../services/sequences.ts";
import { formatProxyUrl } from "../model/proxy-url.ts";
import type { TokenRow } from "../services/tokens.ts";
import type { DistributionKeyRow } from "../provider-api/extraction/distribution-keys.ts";
import type { UserRow } from "../services/users.ts";
import type { ConnectorKind, ProxyScheme, UserRole } from "../../shared/roles.ts";
import type { TrafficUsageView } from "../traffic/usage-view.ts";
import type { TlsMitmBrowser, TlsMitmMode } from "../model/tls-mitm.ts";

export function presentUser(row: UserRow) {
  return {
    id: row.id,
    username: row.username,
    role: row.role as UserRole,
    email: row.email,
    is_active: row.isActive,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
    last_login_at: row.lastLoginAt,
  };
}

export function presentToken(row: TokenRow) {
  const expired = row.expiresAt !== null && row.expiresAt.getTime() <= Date.now();
  return {
    id: row.id,
    user_id: row.userId,
    name: row.name,
    /** The token's first characters, to tell tokens apart; never the whole token. */
    prefix: row.tokenPrefix,
    created_at: row.createdAt,
    expires_at: row.expiresAt,
    last_used_at: row.lastUsedAt,
    revoked_at: row.revokedAt,
    active: row.revokedAt === null && !expired,
  };
}

/** A distribution key, without its secret (shown once, at creation). */
export function presentDistributionKey(row: DistributionKeyRow) {
  const expired = row.expiresAt !== null && row.expiresAt.getTime() <= Date.now();
  return {
    id: row.id,
    project_id: row.projectId,
    name: row.name,
    /** The key's first characters, to tell keys apart; never the whole key. */
    prefix: row.keyPrefix,
    allowed_cidrs: row.allowedCidrs,
    created_at: row.createdAt,
    expires_at: row.expiresAt,
    last_used_at: row.lastUsedAt,
    revoked_at: row.revokedAt,
    active: row.revokedAt === null && !expired,
  };
}

/** A project; `password` only when the caller may see it (editors and admins). */
export function presentProject(
  row: ProjectRow,
  showPassword: boolean,
  trafficUsage: TrafficUsageView | null,
) {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    username: row.username,
    ...(showPassword ? { password: row.password } : {}),
    strategy: row.strategy,
    location_policy: row.locationPolicy,
    location_preflight: row.locationPreflight,
    location_sources: row.locationSources,
    location_conflict_rule: row.locationConflictRule,
    session_ttl_seconds: row.sessionTtlSeconds,
    sticky_quarantine: row.stickyQuarantine,
    metrics_retention_days: row.metricsRetentionDays,
    connection_timeout_seconds: row.connectionTimeoutSeconds,
    max_retries: row.maxRetries,
    traffic_quota: row.trafficQuota,
    traffic_usage: trafficUsage,
    rate_limit: row.rateLimit,
    max_connections: row.maxConnections,
    allowed_cidrs: row.allowedCidrs,
    passwordless_cidrs: row.passwordlessCidrs,
    tls_mitm_mode: row.tlsMitmMode as TlsMitmMode,
    tls_mitm_browser: row.tlsMitmBrowser as TlsMitmBrowser | null,
    tls_mitm_bypass: row.tlsMitmBypass,
    block_rules: row.blockRules,
    retry: row.retry,
    block_body_bytes: row.blockBodyBytes,
    escalation: row.escalation,
    domain_rules: row.domainRules,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

export function presentCredential(row: CredentialRow, registry?: ProviderRegistry) {
  const { config, secretsSet } = maskConfig(row.provider, row.config, registry);
  return {
    id: row.id,
    project_id: row.projectId,
    name: row.name,
    provider: row.provider,
    config,
    ...Object.fromEntries(Object.entries(secretsSet).map(([field, set]) => [`has_${field}`, set])),
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

export function presentConnector(
  row: ConnectorRow,
  proxyCount: number,
  trafficUsage: TrafficUsageView | null,
  registry: ProviderRegistry,
) {
  return {
    id: row.id,
    project_id: row.projectId,
    name: row.name,
    kind: row.kind as ConnectorKind,
    provider: row.provider,
    /** A vendor connector's config as stored (the descriptor's defaults in), secrets masked. */
    config: maskConnectorConfig(row.provider, row.config, registry),
    credential_id: row.credentialId,
    enabled: row.enabled,
    weight: row.weight,
    tier: row.tier,
    countries: row.countries,
    domain_allow: row.domainAllow,
    domain_deny: row.domainDeny,
    healthcheck_url: row.healthcheckUrl,
    rate_limit_config: row.rateLimitConfig,
    traffic_config: row.trafficConfig,
    traffic_usage: trafficUsage,
    pending_deletion: row.pendingDeletion,
    last_error: row.lastError,
    consecutive_errors: row.consecutiveErrors,
    proxy_count: proxyCount,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

/** A project's connector sequence, each connector with when it ran dry. */
export function presentSequence(sequence: SequenceView) {
  return {
    project_id: sequence.projectId,
    connector_ids: sequence.connectorIds,
    current_index: sequence.currentIndex,
    current_connector_id: sequence.currentConnectorId,
    on_end: sequence.onEnd,
    on_unavailable: sequence.onUnavailable,
    exhausted: sequence.exhausted,
    version: sequence.version,
    switched_at: sequence.switchedAt,
    connectors: sequence.connectors.map((connector) => ({
      id: connector.id,
      name: connector.name,
      depleted_at: connector.depletedAt,
    })),
    created_at: sequence.createdAt,
    updated_at: sequence.updatedAt,
  };
}

/**
 * A proxy without its password: `url` carries the username only, `has_password` the rest. Its
 * quarantine is soft state from Redis (control/services/quarantines.ts).
 */
export function presentProxy(
  row: ProxyRow,
  quarantine: QuarantineView,
  lastCheckedAt: string | null = null,
) {
  return {
    id: row.id,
    project_id: row.projectId,
    connector_id: row.connectorId,
    url: formatProxyUrl({ ...row, scheme: row.scheme as ProxyScheme }),
    scheme: row.scheme as ProxyScheme,
    host: row.host,
    port: row.port,
    username: row.username,
    has_password: row.password !== null && row.password !== "",
    country: row.country,
    country_source: row.countrySource,
    vendor_country: row.vendorCountry,
    location_conflict: row.locationConflict,
    location: row.location,
    location_checked_at: row.locationCheckedAt,
    metadata: row.metadata,
    status: row.status,
    status_changed_at: row.statusChangedAt,
    quarantined: quarantine.quarantined,
    quarantine_remaining_seconds: quarantine.quarantine_remaining_seconds,
    last_checked_at: lastCheckedAt,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}
