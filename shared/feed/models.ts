/**
 * What the routing feed carries: the sections the controller compiles and every gateway
 * applies. Runtime-neutral (Node and Deno). The schemas are valibot, since a section is input
 * to the gateway like any other; `SCHEMA_VERSION` lets a gateway ignore a feed of another
 * release during an upgrade.
 *
 * Sections:
 * - `global`: the projects (each password only as a keyed digest), install-wide settings and the
 *   provider descriptors gateways cannot know by themselves (folder and custom ones);
 * - `connector:<id>`: one connector with its proxies, credentials filled, status as stored, and
 *   for a vendor connector the config and credential its provider is built from;
 * - `runtime`: the quarantines and traffic blocks of the moment.
 * Every list is in a stable order, so unchanged definitions compile to the same bytes.
 */
import * as v from "valibot";
import { PROXY_SCHEMES, PROXY_STATUSES, STRATEGIES } from "../roles.ts";

export const SCHEMA_VERSION = 1;

export const GLOBAL_SECTION = "global";
export const RUNTIME_SECTION = "runtime";
export const CONNECTOR_SECTION_PREFIX = "connector:";
export const connectorSectionName = (connectorId: string) =>
  `${CONNECTOR_SECTION_PREFIX}${connectorId}`;

// ---------------------------------------------------------------------------------------------

/**
 * A project's connector sequence as gateways route it. `on_end` and `on_unavailable` are text
 * rather than a list of known values, so a value a later release adds cannot make a gateway
 * refuse the whole global section; a gateway answers an `on_unavailable` it does not know as
 * `reject`.
 */
export const FeedSequenceSchema = v.object({
  /** Connector ids in order. */
  connectors: v.array(v.string()),
  /** The index in `connectors` of the one that serves. */
  current: v.number(),
  on_end: v.string(),
  on_unavailable: v.string(),
  /** Past the last connector with on_end stop: nothing serves. */
  exhausted: v.boolean(),
});
export type FeedSequence = v.InferOutput<typeof FeedSequenceSchema>;

/**
 * A project's TLS interception as gateways apply it. `mode` is text, so a value a later release
 * adds cannot make a gateway refuse the global section: a gateway leaves the tunnels of a mode it
 * does not serve raw (shared/routing/snapshot.ts).
 */
export const FeedInterceptionSchema = v.object({
  /**
   * `plain`: the gateway's own TLS towards the target; `match_ua`, `override_ua`: a browser's
   * fingerprint towards it (gateway/net/tls/impersonation.ts).
   */
  mode: v.string(),
  /** The browser `override_ua` presents (chrome, firefox, edge, random); null otherwise. */
  browser: v.optional(v.nullable(v.string())),
  /** Host names, `.suffixes` and IP addresses whose tunnels stay raw (shared/tls/bypass.ts). */
  bypass: v.array(v.string()),
});
export type FeedInterception = v.InferOutput<typeof FeedInterceptionSchema>;

/** A project's response judging (shared/blocking/rules.ts); null when it has no rule. */
export const FeedBlockingSchema = v.object({
  /** The rules as stored; the gateway reads each again and skips one it cannot. */
  rules: v.array(v.unknown()),
  /** Null: the defaults. */
  retry: v.nullable(v.unknown()),
  /** Null: 8 KiB. */
  body_bytes: v.nullable(v.number()),
  /** Cost-aware escalation (shared/blocking/escalation.ts); null or absent: none. */
  escalation: v.optional(v.nullable(v.unknown())),
});
export type FeedBlocking = v.InferOutput<typeof FeedBlockingSchema>;

export const FeedProjectSchema = v.object({
  id: v.string(),
  name: v.string(),
  /** The proxy username clients present, as stored (matched case-sensitively). */
  username: v.string(),
  /** Hex HMAC-SHA256 of the password under the feed's password key (see codec.ts). */
  password_digest: v.string(),
  strategy: v.picklist(STRATEGIES),
  session_ttl_seconds: v.number(),
  sticky_quarantine: v.boolean(),
  location_policy: v.string(),
  location_preflight: v.string(),
  /** Attribution sources in order; null: the install's (the global section's `geo`). */
  location_sources: v.optional(v.nullable(v.array(v.string()))),
  /** `consensus` or `first`; null: the install's. */
  location_conflict_rule: v.optional(v.nullable(v.string())),
  connection_timeout_seconds: v.number(),
  max_retries: v.number(),
  /** What a client hears while the project is blocked by its traffic quota; null: no quota. */
  traffic_quota: v.nullable(v.object({ action: v.string(), limit_status: v.number() })),
  /** Requests a second across every gateway, with a burst; null: no limit. */
  rate_limit: v.nullable(v.object({ requests_per_second: v.number(), burst: v.number() })),
  /** Connections at once per gateway process; null: no cap. */
  max_connections: v.nullable(v.number()),
  /** Client addresses allowed (CIDR blocks); empty: from anywhere. */
  allowed_cidrs: v.array(v.string()),
  /** Client addresses that reach the project without a password. */
  passwordless_cidrs: v.array(v.string()),
  /**
   * Sequential routing: only `connectors[current]` serves the project (none once `exhausted`).
   * Null: every eligible connector shares by weight. Absent from feeds of earlier releases.
   */
  sequence: v.optional(v.nullable(FeedSequenceSchema), null),
  /**
   * The project's TLS interception; null when its mode is off (tunnels stay raw), as when it
   * is absent (feeds of earlier releases, fixtures).
   */
  tls_mitm: v.optional(v.nullable(FeedInterceptionSchema)),
  /** The project's response judging; null or absent when it has no rule. */
  blocking: v.optional(v.nullable(FeedBlockingSchema)),
  /**
   * Its per-domain routing rules as stored (shared/routing/domain-rules.ts); the gateway reads
   * them again. Absent or empty: none.
   */
  domain_rules: v.optional(v.nullable(v.array(v.unknown()))),
});
export type FeedProject = v.InferOutput<typeof FeedProjectSchema>;

/** A descriptor the gateway has no copy of: a folder or custom one (shipped ones are built in). */
export const FeedDescriptorSchema = v.object({
  id: v.string(),
  version: v.number(),
  /** The descriptor document; the gateway's registry validates it as every process does. */
  document: v.unknown(),
});
export type FeedDescriptor = v.InferOutput<typeof FeedDescriptorSchema>;

/** An IP database a gateway opens: its file is fetched by checksum from the api. */
export const FeedGeoDatabaseSchema = v.object({
  id: v.string(),
  name: v.string(),
  format: v.string(),
  /** SHA-256 of the file, hex: the internal endpoint's name for it. */
  checksum: v.string(),
  size_bytes: v.number(),
});
export type FeedGeoDatabase = v.InferOutput<typeof FeedGeoDatabaseSchema>;

/** The install's attribution settings and its enabled databases, in the order consulted. */
export const FeedGeoSchema = v.object({
  sources: v.array(v.string()),
  conflict_rule: v.string(),
  databases: v.array(FeedGeoDatabaseSchema),
});
export type FeedGeo = v.InferOutput<typeof FeedGeoSchema>;

/** What a feed without a `geo` part (an earlier release's) means: the defaults, no database. */
export const DEFAULT_FEED_GEO: FeedGeo = {
  sources: ["database", "vendor", "endpoint"],
  conflict_rule: "consensus",
  databases: [],
};

/**
 * The install's WireGuard identity and what a gateway's endpoint runs with: one key pair for
 * every gateway (devices trust one server key), the device subnet (the gateway's own tunnel
 * address is its first host) and the port devices are told to dial.
 */
export const FeedWireguardSchema = v.object({
  /** Base64 Curve25519 keys, as `wg` writes them. */
  private_key: v.string(),
  public_key: v.string(),
  /** IPv4 CIDR block, such as `10.66.0.0/16`. */
  subnet: v.string(),
  listen_port: v.number(),
  mtu: v.number(),
  persistent_keepalive_seconds: v.number(),
});
export type FeedWireguard = v.InferOutput<typeof FeedWireguardSchema>;

/**
 * A device: a client that joins its project over a tunnel and whose every TCP connection is
 * routed with its fixed options. Its tunnel address names it on a gateway (a tunnel delivers
 * only packets from a device's own address). `protocol` is text, so a protocol a later release
 * adds cannot make a gateway refuse the global section; a gateway skips one it does not run.
 */
export const FeedTunnelDeviceSchema = v.object({
  id: v.string(),
  project_id: v.string(),
  protocol: v.string(),
  name: v.string(),
  /** The device's IPv4 address inside its protocol's subnet. */
  address: v.string(),
  /** A disabled device is kept in the feed and refused by every gateway. */
  enabled: v.boolean(),
  /** WireGuard: the device's public key and the preshared key (base64); null otherwise. */
  public_key: v.nullable(v.string()),
  preshared_key: v.nullable(v.string()),
  /** Fixed options, read as a username's are: ISO 3166-1 upper case, subdivision upper case,
   * city slug, session id; null when not set. */
  country: v.nullable(v.string()),
  state: v.nullable(v.string()),
  city: v.nullable(v.string()),
  session_id: v.nullable(v.string()),
  /**
   * OpenVPN: the serial of the device's certificate on record (lower-case hex, no separators or
   * leading zeros), the one a gateway admits; null otherwise. Absent in an earlier release's feed.
   */
  certificate_serial: v.optional(v.nullable(v.string()), null),
});
export type FeedTunnelDevice = v.InferOutput<typeof FeedTunnelDeviceSchema>;

/**
 * The install's OpenVPN identity and what a gateway's daemon runs with: the CA certificate
 * devices are checked against (never the CA's key), the server's certificate and key, the
 * tls-crypt key, the device subnet (the gateway's tunnel address is its first host), the
 * transport, MTU and keepalive.
 */
export const FeedOpenvpnSchema = v.object({
  ca_certificate: v.string(),
  server_certificate: v.string(),
  server_key: v.string(),
  tls_crypt_key: v.string(),
  subnet: v.string(),
  /** `udp` or `tcp`. */
  transport: v.string(),
  listen_port: v.number(),
  mtu: v.number(),
  keepalive_interval_seconds: v.number(),
  keepalive_timeout_seconds: v.number(),
});
export type FeedOpenvpn = v.InferOutput<typeof FeedOpenvpnSchema>;

export const FeedTunnelsSchema = v.object({
  /** Null until the install's WireGuard identity exists. */
  wireguard: v.nullable(FeedWireguardSchema),
  /** Every device of every project, by id. */
  devices: v.array(FeedTunnelDeviceSchema),
  /** Null until the install's OpenVPN identity exists; absent in an earlier release's feed. */
  openvpn: v.optional(v.nullable(FeedOpenvpnSchema), null),
});
export type FeedTunnels = v.InferOutput<typeof FeedTunnelsSchema>;

/** What a feed without a `tunnels` part (an earlier release's) means: none. */
export const NO_FEED_TUNNELS: FeedTunnels = { wireguard: null, devices: [], openvpn: null };

export const GlobalSectionSchema = v.object({
  schema: v.literal(SCHEMA_VERSION),
  default_strategy: v.picklist(STRATEGIES),
  /** By id. */
  projects: v.array(FeedProjectSchema),
  /** By id. */
  descriptors: v.optional(v.array(FeedDescriptorSchema), []),
  /** Absent: DEFAULT_FEED_GEO. */
  geo: v.optional(FeedGeoSchema),
  /** Absent: NO_FEED_TUNNELS. */
  tunnels: v.optional(FeedTunnelsSchema),
});
export type GlobalSection = v.InferOutput<typeof GlobalSectionSchema>;

export const FeedConnectorSchema = v.object({
  id: v.string(),
  project_id: v.string(),
  name: v.string(),
  kind: v.string(),
  provider: v.string(),
  enabled: v.boolean(),
  pending_deletion: v.boolean(),
  /** 1-100: the connector's share among the eligible connectors of its project. */
  weight: v.number(),
  /** ISO 3166-1 alpha-2, upper case, sorted; empty when it declares none. */
  countries: v.array(v.string()),
  /** Lower-case host names; a rule matches the name and every name under it. */
  domain_allow: v.array(v.string()),
  domain_deny: v.array(v.string()),
  rate_limit: v.nullable(v.object({
    max_requests: v.number(),
    window_seconds: v.number(),
    quarantine_seconds_min: v.number(),
    quarantine_seconds_max: v.number(),
    sticky_quarantine: v.boolean(),
  })),
  /** What a client hears while the connector is blocked by its traffic limit. */
  traffic: v.nullable(v.object({
    action: v.string(),
    limit_status: v.number(),
  })),
  /**
   * What ranks it for escalation (shared/routing/tiers.ts): its explicit tier and its price per
   * GB; null or absent: none.
   */
  tier: v.optional(v.nullable(v.number())),
  price_per_gb: v.optional(v.nullable(v.number())),
});
export type FeedConnector = v.InferOutput<typeof FeedConnectorSchema>;
/** A connector's rate limit, applied per proxy (the gateway's rate limiter). */
export type FeedRateLimit = NonNullable<FeedConnector["rate_limit"]>;

export const FeedProxySchema = v.object({
  id: v.string(),
  scheme: v.picklist(PROXY_SCHEMES),
  host: v.string(),
  port: v.number(),
  /** Credentials with every placeholder filled; null when the proxy takes none. */
  username: v.nullable(v.string()),
  password: v.nullable(v.string()),
  /** ISO 3166-1 alpha-2 when known. */
  country: v.nullable(v.string()),
  /**
   * Where a fixed exit was seen (attribution): ISO 3166-2 subdivision (`DE-BE`) and the city as
   * a slug (`berlin`); null when unknown. Absent from feeds of earlier releases.
   */
  region: v.optional(v.nullable(v.string())),
  city: v.optional(v.nullable(v.string())),
  /** The sources attribution asked disagree on its country: ineligible under `strict`. */
  location_conflict: v.optional(v.boolean()),
  /**
   * The country was set by hand (`country_source` manual): a requirement preflight checks the
   * exit against, where a country attribution found is not. Absent: not set by hand.
   */
  country_manual: v.optional(v.boolean()),
  status: v.picklist(PROXY_STATUSES),
  /** At most this many requests at once through the proxy on one gateway; null: no limit. */
  max_concurrency: v.nullable(v.number()),
  /**
   * A provider-API proxy's usable-until (epoch ms): gateways allocate it for no new request from
   * then on, whatever feed they hold. Absent or null: no such end.
   */
  usable_until_ms: v.optional(v.nullable(v.number())),
});
export type FeedProxy = v.InferOutput<typeof FeedProxySchema>;

/**
 * An object of anything, as the gateway's check of a connector section takes it: valibot's
 * record would take a list too (read as an empty object).
 */
const ConfigSchema = v.custom<Record<string, unknown>>(
  (value) => typeof value === "object" && value !== null && !Array.isArray(value),
  "must be an object",
);

export const ConnectorSectionSchema = v.object({
  schema: v.literal(SCHEMA_VERSION),
  connector: FeedConnectorSchema,
  /** By creation time, then id. */
  proxies: v.array(FeedProxySchema),
  /**
   * A vendor connector's config and credential, less every secret no template reads: what its
   * provider is built from (a dynamic-sessions row is rendered per request). Null otherwise.
   */
  config: v.optional(v.nullable(ConfigSchema), null),
  credential: v.optional(v.nullable(ConfigSchema), null),
});
export type ConnectorSection = v.InferOutput<typeof ConnectorSectionSchema>;

export const RuntimeSectionSchema = v.object({
  schema: v.literal(SCHEMA_VERSION),
  /** Proxies resting until `until_ms` (epoch ms), by proxy id; ended ones are left out. */
  quarantines: v.array(v.object({ proxy_id: v.string(), until_ms: v.number() })),
  /** Connectors blocked by their traffic limit until `until_ms`, by connector id. */
  traffic_blocks: v.array(v.object({ connector_id: v.string(), until_ms: v.number() })),
  /** Projects blocked by their traffic quota until `until_ms`, by project id. */
  project_blocks: v.array(v.object({ project_id: v.string(), until_ms: v.number() })),
});
export type RuntimeSection = v.InferOutput<typeof RuntimeSectionSchema>;

/** The manifest: every section's name and the digest of its JSON, names sorted. */
export const ManifestSchema = v.object({
  schema: v.literal(SCHEMA_VERSION),
  sections: v.record(v.string(), v.string()),
});
export type Manifest = v.InferOutput<typeof ManifestSchema>;

/** The head: one small key every gateway GETs; its digest is the manifest's HMAC. */
export const HeadSchema = v.object({
  schema: v.literal(SCHEMA_VERSION),
  /** Hex HMAC-SHA256 of the manifest's JSON under the digest key. */
  digest: v.string(),
  /** Wall-clock ms of the compile's snapshot (display only; nothing compares clocks). */
  compiled_at: v.number(),
});
export type Head = v.InferOutput<typeof HeadSchema>;

/** A decoded, verified feed: what the gateway's snapshot is built from. */
export interface FeedSections {
  global: GlobalSection;
  runtime: RuntimeSection;
  /** By connector id. */
  connectors: ReadonlyMap<string, ConnectorSection>;
}
