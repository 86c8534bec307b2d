/**
 * Every OCTOPROX_* setting, validated by one valibot schema per side (control plane, gateway),
 * both built from the one table of fields below. Values are strings in the environment; the
 * parsed settings carry units in their names (`…Ms`).
 *
 * Runs unchanged on Node and Deno: it reads only the record it is given.
 */
import * as v from "valibot";
import { parseCidr } from "./net/ip.ts";
import { JOB_KINDS, type JobKind, type Role, ROLES, STRATEGIES, type Strategy } from "./roles.ts";
import { SettingsError } from "./errors.ts";

type Env = Readonly<Record<string, string | undefined>>;

// ---------------------------------------------------------------------------------------------
// Field builders. Each takes the raw string (or undefined) and yields a typed value.

const trimmed = v.pipe(v.string(), v.trim());

function text(defaultValue?: string) {
  return defaultValue === undefined
    ? v.pipe(trimmed, v.minLength(1, "must not be empty"))
    : v.optional(v.pipe(trimmed, v.minLength(1, "must not be empty")), defaultValue);
}

function optionalText() {
  return v.optional(v.pipe(trimmed, v.minLength(1, "must not be empty")));
}

function urlWithSchemes(schemes: readonly string[], label: string) {
  return v.pipe(
    trimmed,
    v.minLength(1, "is required"),
    v.check((value) => {
      try {
        return schemes.includes(new URL(value).protocol.replace(/:$/, ""));
      } catch {
        return false;
      }
    }, `must be a ${label} URL (${schemes.map((s) => `${s}://`).join(" or ")}…)`),
  );
}

function secret() {
  return v.pipe(
    v.string("is required"),
    v.minLength(32, "must be at least 32 characters (generate one with `openssl rand -hex 32`)"),
  );
}

function integer(defaultValue: number, min: number, max: number) {
  return v.optional(
    v.pipe(
      trimmed,
      v.regex(/^-?\d+$/, `must be a whole number from ${min} to ${max}`),
      v.transform(Number),
      v.minValue(min, `must be a whole number from ${min} to ${max}`),
      v.maxValue(max, `must be a whole number from ${min} to ${max}`),
    ),
    String(defaultValue),
  );
}

function port(defaultValue: number) {
  return v.optional(
    v.pipe(
      trimmed,
      v.regex(/^\d+$/, "must be a port number from 0 to 65535"),
      v.transform(Number),
      v.maxValue(65535, "must be a port number from 0 to 65535"),
    ),
    String(defaultValue),
  );
}

/** A duration given in seconds (fractions allowed), parsed to milliseconds. */
function seconds(defaultSeconds: number, minSeconds: number, maxSeconds = 30 * 86_400) {
  const message = `must be a number of seconds from ${minSeconds} to ${maxSeconds}`;
  return v.optional(
    v.pipe(
      trimmed,
      v.regex(/^\d+(\.\d+)?$/, message),
      v.transform(Number),
      v.minValue(minSeconds, message),
      v.maxValue(maxSeconds, message),
      v.transform((s) => Math.round(s * 1000)),
    ),
    String(defaultSeconds),
  );
}

function oneOf<const T extends string>(values: readonly T[], defaultValue: T) {
  return v.optional(
    v.pipe(
      trimmed,
      v.toLowerCase(),
      v.picklist(values, `must be one of ${values.join(", ")}`),
    ),
    defaultValue,
  );
}

function flag(defaultValue: boolean) {
  return v.optional(
    v.pipe(
      trimmed,
      v.toLowerCase(),
      v.picklist(["1", "0", "true", "false", "yes", "no", "on", "off"], "must be true or false"),
      v.transform((s) => ["1", "true", "yes", "on"].includes(s)),
    ),
    String(defaultValue),
  );
}

/**
 * A setting of the spec whose job this release does not run yet: setting it stops the process,
 * rather than being accepted and doing nothing.
 */
function unavailable(why: string) {
  return v.optional(v.never(`is not available in this release (${why}); unset it`));
}

/**
 * Who resolves a destination's name (OCTOPROX_DESTINATION_RESOLUTION): `upstream` passes names on
 * unresolved, `gateway` resolves them once, checks the addresses and sends the upstream one.
 */
export const DESTINATION_RESOLUTIONS = ["upstream", "gateway"] as const;
export type DestinationResolution = (typeof DESTINATION_RESOLUTIONS)[number];

const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;

const jobKindList = v.optional(
  v.pipe(
    trimmed,
    v.transform((s) => s.split(",").map((part) => part.trim()).filter((part) => part !== "")),
    v.check(
      (kinds) => kinds.every((kind) => (JOB_KINDS as readonly string[]).includes(kind)),
      `must be a comma-separated list of job kinds (${JOB_KINDS.join(", ")})`,
    ),
    v.minLength(1, "must name at least one job kind"),
    v.transform((kinds) => [...new Set(kinds)] as JobKind[]),
  ),
  JOB_KINDS.join(","),
);

const cidrList = v.optional(
  v.pipe(
    trimmed,
    v.transform((s) => s.split(",").map((part) => part.trim()).filter((part) => part !== "")),
    v.check(
      (cidrs) => cidrs.every((cidr) => /^[0-9a-fA-F:.]+\/\d{1,3}$/.test(cidr)),
      "must be a comma-separated list of CIDR blocks such as 127.0.0.0/8",
    ),
  ),
  "",
);

/** Blocks (a bare address is one host), each read as the gateway reads it; empty by default. */
const blockList = v.optional(
  v.pipe(
    trimmed,
    v.transform((s) => s.split(",").map((part) => part.trim()).filter((part) => part !== "")),
    v.check(
      (cidrs) =>
        cidrs.every((cidr) => {
          try {
            parseCidr(cidr);
            return true;
          } catch {
            return false;
          }
        }),
      "must be a comma-separated list of CIDR blocks or addresses such as 10.0.0.5,10.1.0.0/16",
    ),
    v.transform((cidrs) => [...new Set(cidrs)]),
  ),
  "",
);

// ---------------------------------------------------------------------------------------------
// The fields, by environment variable. Shared ones first, then each side's own.

const storeFields = {
  OCTOPROX_REDIS_URL: urlWithSchemes(["redis", "rediss"], "Redis"),
  OCTOPROX_REDIS_PREFIX: v.optional(
    v.pipe(
      trimmed,
      v.regex(/^[A-Za-z0-9_.:-]{1,64}$/, "must be 1-64 characters of letters, digits, _ . : -"),
    ),
    "ox:",
  ),
  OCTOPROX_INTERNAL_SECRET: secret(),
  OCTOPROX_REDIS_REQUEST_TIMEOUT: seconds(2, 0.05, 60),
  OCTOPROX_INSTANCE_ID: optionalText(),
  OCTOPROX_LOG_LEVEL: oneOf(LOG_LEVELS, "info"),
};

const controlFields = {
  ...storeFields,
  OCTOPROX_DATABASE_URL: urlWithSchemes(["postgres", "postgresql"], "Postgres"),
  OCTOPROX_ROLE: oneOf(ROLES, "all"),
  OCTOPROX_JWT_SECRET: secret(),
  OCTOPROX_JWT_EXPIRY_HOURS: integer(24, 1, 24 * 365),
  OCTOPROX_DATA_DIR: text("data"),
  OCTOPROX_API_HOST: text("0.0.0.0"),
  OCTOPROX_API_PORT: port(8000),
  OCTOPROX_ADMIN_USERNAME: text("admin"),
  OCTOPROX_ADMIN_PASSWORD: v.optional(
    v.pipe(v.string(), v.minLength(8, "must be at least 8 characters")),
  ),
  OCTOPROX_DATABASE_POOL_SIZE: integer(10, 1, 200),
  OCTOPROX_DEFAULT_STRATEGY: oneOf(STRATEGIES, "round_robin"),
  // A configuration file the api applies at start, on SIGHUP and on a reload call.
  OCTOPROX_CONFIG_FILE: v.optional(v.pipe(trimmed, v.minLength(1, "must be a file path"))),
  // Whether that apply deletes what the file does not name.
  OCTOPROX_CONFIG_PRUNE: flag(false),
  // A folder of provider descriptors (YAML or JSON), read at start, never written.
  OCTOPROX_PROVIDERS_DIR: v.optional(v.pipe(trimmed, v.minLength(1, "must be a folder path"))),
  OCTOPROX_WORKER_JOBS: jobKindList,
  OCTOPROX_ECHO_URL: v.optional(urlWithSchemes(["http", "https"], "HTTP")),
  OCTOPROX_PUBLIC_URL: v.optional(
    v.pipe(
      urlWithSchemes(["http", "https"], "HTTP"),
      v.check((value) => {
        // Runs after a failed scheme check too: an unparsable value is that check's to name.
        if (!URL.canParse(value)) return true;
        const url = new URL(value);
        return url.search === "" && url.hash === "";
      }, "must be the api's address alone, without a query or fragment (http://203.0.113.5:8000)"),
    ),
  ),
  // The spec's intervals and timings, with its defaults.
  OCTOPROX_HEARTBEAT_INTERVAL: seconds(5, 0.1, 3600),
  OCTOPROX_RECONCILE_INTERVAL: seconds(3600, 1),
  OCTOPROX_FEED_COMPILE_INTERVAL: seconds(1, 0.01, 3600),
  OCTOPROX_HEALTH_CHECK_INTERVAL: seconds(60, 1),
  OCTOPROX_HEALTH_CHECK_TIMEOUT: seconds(30, 0.1, 600),
  // Probes in flight per worker, and its health batches. Only hung checks hold a probe for long,
  // so with 5% of proxies hanging a worker may check up to 20 x this / timeout_s a second (667
  // at the 30 s timeout); below that its CPU decides (npm run bench -- health; docs/jobs.md).
  OCTOPROX_HEALTH_CHECK_CONCURRENCY: integer(1000, 1, 10_000),
  OCTOPROX_METRICS_FLUSH_INTERVAL: seconds(60, 1),
  OCTOPROX_COMPACTION_INTERVAL: seconds(3600, 1),
  OCTOPROX_SYSTEM_METRICS_INTERVAL: v.optional(
    v.pipe(
      trimmed,
      v.regex(/^\d+$/, "must be 0 (off) or a number of seconds of at least 60"),
      v.transform(Number),
      v.check((s) => s === 0 || s >= 60, "must be 0 (off) or a number of seconds of at least 60"),
      v.transform((s) => s * 1000),
    ),
    "300",
  ),
  // Days system readings are kept; 0 keeps them.
  OCTOPROX_SYSTEM_METRICS_RETENTION_DAYS: integer(90, 0, 36_500),
  OCTOPROX_INDEX_HYGIENE_INTERVAL: seconds(60, 1),
  OCTOPROX_CONTROLLER_LEASE_TTL: seconds(30, 1, 3600),
  OCTOPROX_CONTROLLER_LEASE_REFRESH: seconds(2, 0.05, 600),
  OCTOPROX_CONTROLLER_LEASE_POLL: seconds(1, 0.05, 600),
  OCTOPROX_CLAIM_TIMEOUT: seconds(60, 0.1, 86_400),
  OCTOPROX_RECLAIM_INTERVAL: seconds(20, 0.05, 3600),
  OCTOPROX_MAX_DELIVERIES: integer(5, 1, 100),
  OCTOPROX_STOP_GRACE: seconds(30, 0, 600),
  // For tests only: lets a provider descriptor's HTTP calls reach loopback (127.0.0.0/8, ::1),
  // where the tests run their vendor emulators. Private, link-local and metadata addresses stay
  // refused; never set it on an install.
  OCTOPROX_EGRESS_ALLOW_LOOPBACK: flag(false),
  // A PEM file of the certificate authorities descriptor calls trust instead of the system's
  // (vendor APIs behind an internal CA or a TLS-inspecting egress proxy; the tests' own CA).
  OCTOPROX_EGRESS_CA_FILE: v.optional(v.pipe(trimmed, v.minLength(1, "must be a file path"))),
  // How often each vendor connector's pool is synced with the vendor (the sync job's period).
  OCTOPROX_IP_REFRESH_INTERVAL: seconds(3600, 60, 86_400),
  // How often each provider-API connector's pool is looked after (reaped, checked, refilled);
  // a shortfall asks a run at once besides.
  OCTOPROX_POOL_INTERVAL: seconds(5, 1, 3600),
  // The periods of jobs that have no handler yet: refused until their job runs.
  OCTOPROX_SCALE_INTERVAL: unavailable("no scale job runs yet"),
  OCTOPROX_GEO_UPDATER_INTERVAL: unavailable("no geo_update job runs yet"),
  OCTOPROX_TUNNEL_STATUS_INTERVAL: unavailable("no tunnel_last_seen job runs yet"),
};

const gatewayFields = {
  ...storeFields,
  OCTOPROX_GATEWAY_HOST: text("0.0.0.0"),
  OCTOPROX_PROXY_PORT: port(8080),
  OCTOPROX_GATEWAY_STATUS_PORT: port(8081),
  OCTOPROX_SOCKS_PORT: port(1080),
  OCTOPROX_SOCKS_ENABLED: flag(true),
  OCTOPROX_DESTINATION_ALLOW_CIDRS: cidrList,
  // Who resolves a destination's name: the upstream (names go on unresolved, as residential exits
  // need), or the gateway (resolved once here, checked, and the upstream sent the address).
  OCTOPROX_DESTINATION_RESOLUTION: oneOf(DESTINATION_RESOLUTIONS, "upstream"),
  // Balancers whose PROXY protocol header (v1 or v2) names the client; from any other peer a
  // header is refused.
  OCTOPROX_TRUSTED_PROXIES: blockList,
  OCTOPROX_MAX_CLIENT_CONNECTIONS: integer(20_000, 1, 1_000_000),
  OCTOPROX_MAX_HEADER_BYTES: integer(32_768, 1024, 1_048_576),
  OCTOPROX_CLIENT_IDLE_TIMEOUT: seconds(60, 1, 86_400),
  OCTOPROX_CONNECT_TIMEOUT: seconds(30, 0.1, 600),
  // Isolates (threads) one gateway process serves from; 0: one per core. 1 by default: on the
  // measured hosts more isolates did not serve more, and each adds a snapshot's memory
  // (docs/gateway.md, "Every core").
  OCTOPROX_GATEWAY_ISOLATES: integer(1, 0, 256),
  // How often the gateway writes its instance snapshot (the System page), as control processes.
  OCTOPROX_HEARTBEAT_INTERVAL: seconds(5, 0.1, 3600),
  // How long a gateway may go without reading the feed before it stops taking new requests; 0
  // (the default) serves on the last feed for as long as it must (docs/gateway.md).
  OCTOPROX_FEED_MAX_STALE: v.optional(
    v.pipe(
      trimmed,
      v.regex(/^\d+(\.\d+)?$/, "must be 0 (off) or a number of seconds from 1 to 86400"),
      v.transform(Number),
      v.check(
        (s) => s === 0 || (s >= 1 && s <= 86_400),
        "must be 0 (off) or a number of seconds from 1 to 86400",
      ),
      v.transform((s) => Math.round(s * 1000)),
    ),
    "0",
  ),
};

// ---------------------------------------------------------------------------------------------
// The schemas, each yielding settings named for the code rather than the environment.

const store = (e: v.InferOutput<v.ObjectSchema<typeof storeFields, undefined>>) => ({
  redisUrl: e.OCTOPROX_REDIS_URL,
  redisPrefix: e.OCTOPROX_REDIS_PREFIX,
  internalSecret: e.OCTOPROX_INTERNAL_SECRET,
  redisRequestTimeoutMs: e.OCTOPROX_REDIS_REQUEST_TIMEOUT,
  instanceId: e.OCTOPROX_INSTANCE_ID,
  logLevel: e.OCTOPROX_LOG_LEVEL,
});

export const ControlSettingsSchema = v.pipe(
  v.object(controlFields),
  v.check(
    (e) => e.OCTOPROX_JWT_SECRET !== e.OCTOPROX_INTERNAL_SECRET,
    "OCTOPROX_JWT_SECRET must differ from OCTOPROX_INTERNAL_SECRET",
  ),
  v.transform((e) => ({
    ...store(e),
    databaseUrl: e.OCTOPROX_DATABASE_URL,
    role: e.OCTOPROX_ROLE as Role,
    jwtSecret: e.OCTOPROX_JWT_SECRET,
    jwtExpiryMs: e.OCTOPROX_JWT_EXPIRY_HOURS * 3_600_000,
    dataDir: e.OCTOPROX_DATA_DIR,
    apiHost: e.OCTOPROX_API_HOST,
    apiPort: e.OCTOPROX_API_PORT,
    adminUsername: e.OCTOPROX_ADMIN_USERNAME,
    adminPassword: e.OCTOPROX_ADMIN_PASSWORD,
    databasePoolSize: e.OCTOPROX_DATABASE_POOL_SIZE,
    defaultStrategy: e.OCTOPROX_DEFAULT_STRATEGY as Strategy,
    configFile: e.OCTOPROX_CONFIG_FILE,
    configPrune: e.OCTOPROX_CONFIG_PRUNE,
    providersDir: e.OCTOPROX_PROVIDERS_DIR,
    egressCaFile: e.OCTOPROX_EGRESS_CA_FILE,
    workerJobs: e.OCTOPROX_WORKER_JOBS,
    echoUrl: e.OCTOPROX_ECHO_URL,
    publicUrl: e.OCTOPROX_PUBLIC_URL,
    heartbeatIntervalMs: e.OCTOPROX_HEARTBEAT_INTERVAL,
    reconcileIntervalMs: e.OCTOPROX_RECONCILE_INTERVAL,
    feedCompileIntervalMs: e.OCTOPROX_FEED_COMPILE_INTERVAL,
    healthCheckIntervalMs: e.OCTOPROX_HEALTH_CHECK_INTERVAL,
    ipRefreshIntervalMs: e.OCTOPROX_IP_REFRESH_INTERVAL,
    poolIntervalMs: e.OCTOPROX_POOL_INTERVAL,
    healthCheckTimeoutMs: e.OCTOPROX_HEALTH_CHECK_TIMEOUT,
    healthCheckConcurrency: e.OCTOPROX_HEALTH_CHECK_CONCURRENCY,
    metricsFlushIntervalMs: e.OCTOPROX_METRICS_FLUSH_INTERVAL,
    compactionIntervalMs: e.OCTOPROX_COMPACTION_INTERVAL,
    systemMetricsIntervalMs: e.OCTOPROX_SYSTEM_METRICS_INTERVAL,
    systemMetricsRetentionDays: e.OCTOPROX_SYSTEM_METRICS_RETENTION_DAYS,
    indexHygieneIntervalMs: e.OCTOPROX_INDEX_HYGIENE_INTERVAL,
    controllerLeaseTtlMs: e.OCTOPROX_CONTROLLER_LEASE_TTL,
    controllerLeaseRefreshMs: e.OCTOPROX_CONTROLLER_LEASE_REFRESH,
    controllerLeasePollMs: e.OCTOPROX_CONTROLLER_LEASE_POLL,
    claimTimeoutMs: e.OCTOPROX_CLAIM_TIMEOUT,
    reclaimIntervalMs: e.OCTOPROX_RECLAIM_INTERVAL,
    maxDeliveries: e.OCTOPROX_MAX_DELIVERIES,
    stopGraceMs: e.OCTOPROX_STOP_GRACE,
    egressAllowLoopback: e.OCTOPROX_EGRESS_ALLOW_LOOPBACK,
  })),
);
export type ControlSettings = v.InferOutput<typeof ControlSettingsSchema>;

export const GatewaySettingsSchema = v.pipe(
  v.object(gatewayFields),
  v.transform((e) => ({
    ...store(e),
    host: e.OCTOPROX_GATEWAY_HOST,
    proxyPort: e.OCTOPROX_PROXY_PORT,
    statusPort: e.OCTOPROX_GATEWAY_STATUS_PORT,
    socksPort: e.OCTOPROX_SOCKS_PORT,
    socksEnabled: e.OCTOPROX_SOCKS_ENABLED,
    destinationAllowCidrs: e.OCTOPROX_DESTINATION_ALLOW_CIDRS,
    destinationResolution: e.OCTOPROX_DESTINATION_RESOLUTION as DestinationResolution,
    trustedProxies: e.OCTOPROX_TRUSTED_PROXIES,
    maxClientConnections: e.OCTOPROX_MAX_CLIENT_CONNECTIONS,
    maxHeaderBytes: e.OCTOPROX_MAX_HEADER_BYTES,
    clientIdleTimeoutMs: e.OCTOPROX_CLIENT_IDLE_TIMEOUT,
    connectTimeoutMs: e.OCTOPROX_CONNECT_TIMEOUT,
    /** 1 (default): one isolate; 0: one per core (the process resolves it); n: n isolates. */
    isolates: e.OCTOPROX_GATEWAY_ISOLATES,
    heartbeatIntervalMs: e.OCTOPROX_HEARTBEAT_INTERVAL,
    /** 0: off (the last feed serves however old its read). */
    feedMaxStaleMs: e.OCTOPROX_FEED_MAX_STALE,
  })),
);
export type GatewaySettings = v.InferOutput<typeof GatewaySettingsSchema>;

/** Every environment variable either side reads; the start script and docs list these. */
export const SETTING_NAMES: readonly string[] = [
  ...new Set([...Object.keys(controlFields), ...Object.keys(gatewayFields)]),
].sort();

// ---------------------------------------------------------------------------------------------
// Parsing: one line naming the variable and what is wrong, never its value (it may be a secret).

export { SettingsError };

function parseWith<TSchema extends v.GenericSchema<unknown, unknown>>(
  schema: TSchema,
  env: Env,
): v.InferOutput<TSchema> {
  // Empty strings count as unset, as shells and env files commonly leave them.
  const cleaned: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (key.startsWith("OCTOPROX_") && value !== undefined && value !== "") cleaned[key] = value;
  }
  const result = v.safeParse(schema, cleaned);
  if (result.success) return result.output;
  const issue = result.issues[0];
  const variable = issue.path?.[0]?.key;
  if (typeof variable === "string") {
    const missing = issue.input === undefined;
    throw new SettingsError(variable, missing ? "is required but not set" : issue.message);
  }
  throw new SettingsError(undefined, issue.message);
}

export function parseControlSettings(env: Env): ControlSettings {
  return parseWith(ControlSettingsSchema, env);
}

export function parseGatewaySettings(env: Env): GatewaySettings {
  return parseWith(GatewaySettingsSchema, env);
}
