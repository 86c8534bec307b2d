/**
 * Every OCTOPROX_* setting, validated by one valibot schema per side (control plane, gateway),
 * both built from the one table of fields below. Values are strings in the environment; the
 * parsed settings carry units in their names (`…Ms`).
 *
 * Runs unchanged on Node and Deno: it reads only the record it is given.
 */
import { parseFakeIpRange } from "./net/fake-ip-range.ts";
import * as v from "valibot";
import { parseCidr } from "./net/ip.ts";
import {
  JOB_KINDS,
  type JobKind,
  type Role,
  ROLES,
  STRATEGIES,
  type Strategy,
  WORKER_JOB_KINDS,
} from "./roles.ts";
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
/** A number of seconds from `minSeconds` to `maxSeconds`, as milliseconds. */
function secondsSchema(minSeconds: number, maxSeconds: number) {
  const message = `must be a number of seconds from ${minSeconds} to ${maxSeconds}`;
  return v.pipe(
    trimmed,
    v.regex(/^\d+(\.\d+)?$/, message),
    v.transform(Number),
    v.minValue(minSeconds, message),
    v.maxValue(maxSeconds, message),
    v.transform((s) => Math.round(s * 1000)),
  );
}

function seconds(defaultSeconds: number, minSeconds: number, maxSeconds = 30 * 86_400) {
  return v.optional(secondsSchema(minSeconds, maxSeconds), String(defaultSeconds));
}

/** Seconds that stay undefined when unset (a check can then refuse a value given). */
function optionalSeconds(minSeconds: number, maxSeconds: number) {
  return v.optional(secondsSchema(minSeconds, maxSeconds));
}

/** A Redis REST endpoint's URL (`https://`, `http://`): the gateway's HTTP transport. */
export function isRedisRestUrl(url: string): boolean {
  return /^https?:/i.test(url);
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
      `must be a comma-separated list of job kinds (${WORKER_JOB_KINDS.join(", ")})`,
    ),
    v.minLength(1, "must name at least one job kind"),
    v.transform((kinds) => [...new Set(kinds)] as JobKind[]),
  ),
  WORKER_JOB_KINDS.join(","),
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
// The fields, by environment variable. Shared ones first, then each side's own. Each field is
// its schema and one line saying what it is for: docs/settings.md is written from this table
// (`npm run docs`), so the description is the page's.

/** A field of the table: its schema, with the line the settings page gives it. */
function field<TSchema extends v.GenericSchema>(
  schema: TSchema,
  description: string,
) {
  return v.pipe(schema, v.description(description));
}

/**
 * How often a gateway with a tunnel endpoint publishes its devices' statuses, and how often
 * tunnel_last_seen reads them: both sides read it, and should agree.
 */
/** A network interface's name as Linux takes one (at most 15 characters). */
const interfaceName = (fallback: string) =>
  v.optional(
    v.pipe(
      trimmed,
      v.regex(
        /^[A-Za-z0-9_.-]{1,15}$/,
        "must be an interface name of 1 to 15 letters, digits, _ . -",
      ),
    ),
    fallback,
  );

/** A port from 1 to 65535, or unset (undefined: the caller's default). */
const optionalPort = v.optional(
  v.pipe(
    trimmed,
    v.regex(/^\d+$/, "must be a port number from 1 to 65535"),
    v.transform(Number),
    v.minValue(1, "must be a port number from 1 to 65535"),
    v.maxValue(65535, "must be a port number from 1 to 65535"),
  ),
);

const tunnelStatusIntervalField = field(
  seconds(10, 1, 300),
  "How often gateways publish tunnel devices' statuses and tunnel_last_seen moves devices' " +
    "last sighting forward",
);

const storeFields = {
  OCTOPROX_REDIS_PREFIX: field(
    v.optional(
      v.pipe(
        trimmed,
        v.regex(/^[A-Za-z0-9_.:-]{1,64}$/, "must be 1-64 characters of letters, digits, _ . : -"),
      ),
      "ox:",
    ),
    "Prefix of every Redis key, so installs (and test runs) can share one Redis",
  ),
  OCTOPROX_INTERNAL_SECRET: field(
    secret(),
    "At least 32 characters, the same on the control plane and every gateway (it seals the feed)",
  ),
  OCTOPROX_REDIS_REQUEST_TIMEOUT: field(
    seconds(2, 0.05, 60),
    "Deadline of each Redis step on a request path",
  ),
  OCTOPROX_INSTANCE_ID: field(
    optionalText(),
    "The process's name in logs, heartbeats and Redis client names (unset: a random one)",
  ),
  OCTOPROX_LOG_LEVEL: field(
    oneOf(LOG_LEVELS, "info"),
    `Least level logged: ${LOG_LEVELS.join(", ")}`,
  ),
  // How often a process writes its heartbeat snapshot to Redis (the System page).
  OCTOPROX_HEARTBEAT_INTERVAL: field(
    seconds(5, 0.1, 3600),
    "Heartbeat: a control process checks its stores, every process writes its snapshot to Redis",
  ),
};

/** A file path; unset by default. */
function optionalPath() {
  return v.optional(v.pipe(trimmed, v.minLength(1, "must be a file path")));
}

/**
 * A moment, written as ISO 8601 with its zone (`2027-01-04T00:00:00Z`, `2027-01-04T01:00+01:00`);
 * unset by default. Kept as milliseconds since the epoch.
 */
function optionalTime() {
  return v.optional(
    v.pipe(
      trimmed,
      v.check(
        (value) =>
          /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(value) &&
          Number.isFinite(Date.parse(value)),
        "must be a time in ISO 8601 with its zone, such as 2027-01-04T00:00:00Z",
      ),
      v.transform((value) => Date.parse(value)),
    ),
  );
}

/**
 * The TLS interception CA's rotation (docs/tls-interception.md, "Rotation"): the CA clients are
 * moving from, and when the overlap ends. Until then the api hands out both and gateways keep
 * signing with this one; from then on, the current one alone.
 */
const previousCaCertField = field(
  optionalPath(),
  "After a rotation: the previous CA's certificate, handed out until the overlap ends",
);
const overlapUntilField = field(
  optionalTime(),
  "After a rotation: when the overlap with the previous CA ends (ISO 8601 with its zone)",
);

/**
 * The TLS interception CA's certificate: gateways sign host certificates under it, the api
 * answers it for clients to trust. Files, never Postgres or Redis (seed 000), so a store's
 * backup or dump never carries what lets its holder intercept the install's traffic.
 */
const caCertField = field(
  optionalPath(),
  "The TLS interception CA's certificate (PEM); gateways need it; `npm start` makes one",
);

/** The one description both sides' OCTOPROX_REDIS_URL share on the settings page. */
const REDIS_URL_ABOUT =
  "Redis URL: `redis://` or `rediss://` (TCP); a gateway also takes a Redis " +
  "REST endpoint's `https://` URL with OCTOPROX_REDIS_TOKEN; `npm start` provides a local one";

const controlFields = {
  ...storeFields,
  // The control plane's blocking reads and consumer groups need a connection: TCP only.
  OCTOPROX_REDIS_URL: field(
    v.pipe(
      urlWithSchemes(["redis", "rediss", "http", "https"], "Redis"),
      v.check(
        (value) => !isRedisRestUrl(value),
        "must be a redis:// or rediss:// URL: the control plane speaks to Redis over TCP only " +
          "(a REST endpoint's https:// URL serves gateways)",
      ),
    ),
    REDIS_URL_ABOUT,
  ),
  OCTOPROX_DATABASE_URL: field(
    urlWithSchemes(["postgres", "postgresql"], "Postgres"),
    "Postgres URL (`postgres://`); `npm start` provides a local one",
  ),
  OCTOPROX_ROLE: field(oneOf(ROLES, "all"), `What the process runs: ${ROLES.join(", ")}`),
  OCTOPROX_JWT_SECRET: field(
    secret(),
    "At least 32 characters, different from the internal secret; signs login tokens",
  ),
  OCTOPROX_JWT_EXPIRY_HOURS: field(integer(24, 1, 24 * 365), "Lifetime of a login token, in hours"),
  OCTOPROX_DATA_DIR: field(
    text("data"),
    "`npm start`'s folder for the local stores and the generated secrets",
  ),
  OCTOPROX_API_HOST: field(
    text("0.0.0.0"),
    "Address the API (or a controller's or worker's probes) listens on",
  ),
  OCTOPROX_API_PORT: field(port(8000), "Port of the API, the dashboard and the probes"),
  OCTOPROX_ADMIN_USERNAME: field(
    text("admin"),
    "The first admin, created when the database has no user",
  ),
  OCTOPROX_ADMIN_PASSWORD: field(
    v.optional(v.pipe(v.string(), v.minLength(8, "must be at least 8 characters"))),
    "The first admin's password, at least 8 characters (unset: one is generated and printed once)",
  ),
  OCTOPROX_DATABASE_POOL_SIZE: field(integer(10, 1, 200), "Postgres connections per process"),
  OCTOPROX_DEFAULT_STRATEGY: field(
    oneOf(STRATEGIES, "round_robin"),
    "Routing strategy of new projects",
  ),
  OCTOPROX_CONFIG_FILE: field(
    v.optional(v.pipe(trimmed, v.minLength(1, "must be a file path"))),
    "A configuration file the api applies at start, on SIGHUP and on a reload call",
  ),
  OCTOPROX_CONFIG_PRUNE: field(
    flag(false),
    "Whether applying that file deletes what it does not name",
  ),
  OCTOPROX_PROVIDERS_DIR: field(
    v.optional(v.pipe(trimmed, v.minLength(1, "must be a folder path"))),
    "A folder of provider descriptors (YAML or JSON), read at start, never written",
  ),
  OCTOPROX_WORKER_JOBS: field(jobKindList, "Comma-separated job kinds a worker takes"),
  OCTOPROX_ECHO_URL: field(
    v.optional(urlWithSchemes(["http", "https"], "HTTP")),
    "Echo that health checks ask through each proxy (a connector's own check URL comes first)",
  ),
  OCTOPROX_PUBLIC_URL: field(
    v.optional(
      v.pipe(
        urlWithSchemes(["http", "https"], "HTTP"),
        v.check(
          (value) => {
            // Runs after a failed scheme check too: an unparsable value is that check's to name.
            if (!URL.canParse(value)) return true;
            const url = new URL(value);
            return url.search === "" && url.hash === "";
          },
          "must be the api's address alone, without a query or fragment (http://203.0.113.5:8000)",
        ),
      ),
    ),
    "The api's address as proxies reach it; without an echo URL, health checks ask its `/echo`",
  ),
  // The spec's intervals and timings, with its defaults.
  OCTOPROX_RECONCILE_INTERVAL: field(
    seconds(3600, 1),
    "Full re-read by every stream follower",
  ),
  OCTOPROX_FEED_COMPILE_INTERVAL: field(
    seconds(1, 0.01, 3600),
    "The leading controller's feed compile cadence",
  ),
  OCTOPROX_HEALTH_CHECK_INTERVAL: field(seconds(60, 1), "Health checks of each proxy"),
  OCTOPROX_HEALTH_CHECK_TIMEOUT: field(seconds(30, 0.1, 600), "One health check's deadline"),
  // Probes in flight per worker, and its health batches. Only hung checks hold a probe for long,
  // so with 5% of proxies hanging a worker may check up to 20 x this / timeout_s a second (667
  // at the 30 s timeout); below that its CPU decides (npm run bench -- health; docs/jobs.md).
  OCTOPROX_HEALTH_CHECK_CONCURRENCY: field(
    integer(1000, 1, 10_000),
    "Health checks in flight per worker process",
  ),
  OCTOPROX_METRICS_FLUSH_INTERVAL: field(
    seconds(60, 1),
    "Metric windows flushed from Redis to the Postgres history",
  ),
  OCTOPROX_COMPACTION_INTERVAL: field(seconds(3600, 1), "Metrics history compaction"),
  OCTOPROX_SYSTEM_METRICS_INTERVAL: field(
    v.optional(
      v.pipe(
        trimmed,
        v.regex(/^\d+$/, "must be 0 (off) or a number of seconds of at least 60"),
        v.transform(Number),
        v.check((s) => s === 0 || s >= 60, "must be 0 (off) or a number of seconds of at least 60"),
        v.transform((s) => s * 1000),
      ),
      "300",
    ),
    "System readings snapshot for the System page (0: off, else at least 60)",
  ),
  OCTOPROX_SYSTEM_METRICS_RETENTION_DAYS: field(
    integer(90, 0, 36_500),
    "Days system readings are kept (0: forever)",
  ),
  OCTOPROX_AUDIT_RETENTION_DAYS: field(
    integer(365, 0, 36_500),
    "Days the audit log keeps its entries (0: forever); the compaction job removes older ones",
  ),
  OCTOPROX_INDEX_HYGIENE_INTERVAL: field(seconds(60, 1), "Redis index hygiene"),
  OCTOPROX_CONTROLLER_LEASE_TTL: field(seconds(30, 1, 3600), "The controller lease's lifetime"),
  OCTOPROX_CONTROLLER_LEASE_REFRESH: field(
    seconds(2, 0.05, 600),
    "Lease refresh while leading",
  ),
  OCTOPROX_CONTROLLER_LEASE_POLL: field(seconds(1, 0.05, 600), "Lease poll while standing by"),
  OCTOPROX_CLAIM_TIMEOUT: field(
    seconds(60, 0.1, 86_400),
    "Idle time after which another worker claims a job entry",
  ),
  OCTOPROX_RECLAIM_INTERVAL: field(
    seconds(20, 0.05, 3600),
    "Reclaim check and keep-alive of running jobs",
  ),
  OCTOPROX_MAX_DELIVERIES: field(
    integer(5, 1, 100),
    "Deliveries of a job entry before it is given up",
  ),
  OCTOPROX_STOP_GRACE: field(seconds(30, 0, 600), "Time running jobs get at a stop"),
  // Sooner when the buffer reaches half its 5,000 while nothing is owed (docs/geo.md).
  OCTOPROX_GEO_OBSERVATION_PUBLISH_INTERVAL: field(
    seconds(5, 0.05, 3600),
    "Observations of exits appended to their stream by each api and worker process",
  ),
  // Loopback only (127.0.0.0/8, ::1), where the tests run their vendor emulators: private,
  // link-local and metadata addresses stay refused.
  OCTOPROX_EGRESS_ALLOW_LOOPBACK: field(
    flag(false),
    "Tests only: provider descriptor calls may reach loopback; never set it on an install",
  ),
  // The api reads the certificate alone: the CA's key stays on the gateways' CA volume.
  OCTOPROX_TLS_MITM_CA_CERT_PATH: caCertField,
  OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH: previousCaCertField,
  OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL: overlapUntilField,
  OCTOPROX_EGRESS_CA_FILE: field(
    v.optional(v.pipe(trimmed, v.minLength(1, "must be a file path"))),
    "A PEM file of CAs descriptor calls trust instead of the system's (an internal CA)",
  ),
  // Each api process evaluates every alert rule this often; one insert wins however many do.
  OCTOPROX_ALERT_EVALUATION_INTERVAL: field(
    seconds(30, 0.05, 3600),
    "How often each api process evaluates the alert rules (docs/alerts.md)",
  ),
  // Doubling from here to an hour, for a day at most: a receiver down for a night still gets it.
  OCTOPROX_ALERT_RETRY_BASE_DELAY: field(
    seconds(30, 0.05, 3600),
    "The wait before an alert delivery's second try; each further one doubles it, up to an hour",
  ),
  // Unset: email channels are refused (422 on body.type). Credentials ride in the URL.
  OCTOPROX_SMTP_URL: field(
    v.optional(urlWithSchemes(["smtp", "smtps"], "SMTP")),
    "Where alert emails are sent (`smtp://user:pass@host:587`, STARTTLS when offered; " +
      "`smtps://` for TLS from the start); unset: no email channels",
  ),
  OCTOPROX_SMTP_FROM: field(
    text("Octoprox <octoprox@localhost>"),
    "The From of alert emails",
  ),
  OCTOPROX_IP_REFRESH_INTERVAL: field(
    seconds(3600, 60, 86_400),
    "Each vendor connector's sync with its vendor (60 to 86400)",
  ),
  // A shortfall asks a run at once besides.
  OCTOPROX_POOL_INTERVAL: field(
    seconds(5, 1, 3600),
    "Each provider-API connector's pool run: reap, check, refill (1 to 3600)",
  ),
  // Each tick downloads the URL databases whose own update interval has passed, so this is how
  // late a due download may start, not how often files are fetched.
  OCTOPROX_GEO_UPDATER_INTERVAL: field(
    seconds(3600, 60, 86_400),
    "IP database updates: downloads of databases due by their own interval (60 to 86400)",
  ),
  // Every cloud connector's scale run; one runs at once after a create, an edit, a deletion.
  OCTOPROX_SCALE_INTERVAL: field(
    seconds(30, 1, 3600),
    "Each cloud connector's scale run: list, settle, scale, rotate, drain (docs/cloud.md)",
  ),
  // The wait after a scaling step before the next: the new instances' first checks come first.
  OCTOPROX_SCALE_COOLDOWN: field(
    seconds(180, 1, 3600),
    "The wait after a cloud connector's scaling step before its next one",
  ),
  // Demand is counted per minute: the window is whole minutes, within what a demand hash lives.
  OCTOPROX_SCALE_DEMAND_WINDOW: field(
    integer(5, 1, 5),
    "Minutes of demand a cloud connector's target is read over (1 to 5)",
  ),
  OCTOPROX_CLOUD_PROXY_PORT: field(
    port(3128),
    "The port cloud instances run their proxy (Squid) on; their security group must let it in",
  ),
  OCTOPROX_CLOUD_CREATE_TIMEOUT: field(
    seconds(300, 1, 600),
    "How long a cloud create waits for its instance to run with a public address",
  ),
  OCTOPROX_CLOUD_POLL_INTERVAL: field(
    seconds(5, 0.05, 60),
    "How often a cloud create or delete asks how its instance or operation stands",
  ),
  // Tests and compatible regions: each client talks to this base URL instead of the cloud's.
  OCTOPROX_AWS_ENDPOINT: field(
    v.optional(urlWithSchemes(["https", "http"], "HTTP")),
    "The EC2 API's URL for every region (tests, compatible clouds); unset: AWS's own",
  ),
  OCTOPROX_GCP_ENDPOINT: field(
    v.optional(urlWithSchemes(["https", "http"], "HTTP")),
    "The Compute Engine API's base URL (tests); unset: https://compute.googleapis.com",
  ),
  OCTOPROX_GCP_TOKEN_URL: field(
    v.optional(urlWithSchemes(["https", "http"], "HTTP")),
    "Where GCP service account tokens are asked for (tests); unset: Google's own",
  ),
  OCTOPROX_AZURE_ENDPOINT: field(
    v.optional(urlWithSchemes(["https", "http"], "HTTP")),
    "The Azure Resource Manager URL (tests, sovereign clouds); unset: management.azure.com",
  ),
  OCTOPROX_AZURE_AUTHORITY: field(
    v.optional(urlWithSchemes(["https"], "HTTPS")),
    "The Microsoft Entra authority host (tests, sovereign clouds); unset: login.microsoftonline.com",
  ),
  OCTOPROX_TUNNEL_STATUS_INTERVAL: tunnelStatusIntervalField,
};

const gatewayFields = {
  ...storeFields,
  OCTOPROX_REDIS_URL: field(
    urlWithSchemes(["redis", "rediss", "https", "http"], "Redis"),
    REDIS_URL_ABOUT,
  ),
  // The HTTP transport (docs/gateway.md, "Redis over HTTP").
  OCTOPROX_REDIS_TOKEN: field(
    optionalText(),
    "The Redis REST endpoint's bearer token; required with an https:// OCTOPROX_REDIS_URL, " +
      "refused with a TCP one",
  ),
  OCTOPROX_FEED_POLL_INTERVAL: field(
    // Unset stays undefined, so a TCP URL can refuse a value given (the check below).
    optionalSeconds(0.1, 30),
    "HTTP transport only (default 1): how often the gateway reads the feed's head, the most a " +
      "feed edit waits to be seen",
  ),
  OCTOPROX_GATEWAY_HOST: field(text("0.0.0.0"), "Address the gateway's listeners bind"),
  OCTOPROX_PROXY_PORT: field(port(8080), "HTTP proxy listener"),
  OCTOPROX_GATEWAY_STATUS_PORT: field(
    port(8081),
    "Status listener: `/health`, `/live`, `/ready`, `/metrics`",
  ),
  OCTOPROX_SOCKS_PORT: field(port(1080), "SOCKS5 listener"),
  OCTOPROX_SOCKS_ENABLED: field(flag(true), "Whether the SOCKS5 listener runs"),
  // Tunnel devices (docs/tunnels.md): the gateway runs the WireGuard and OpenVPN endpoints and
  // the plane its devices' connections pass through. It needs CAP_NET_ADMIN, and `ip`, `nft`,
  // `conntrack`, `wg` (and `wireguard-go` without the kernel module) and `openvpn` on its PATH.
  OCTOPROX_TUNNEL_STATUS_INTERVAL: tunnelStatusIntervalField,
  OCTOPROX_WIREGUARD_ENABLED: field(
    flag(false),
    "Whether this gateway runs the WireGuard endpoint for tunnel devices",
  ),
  OCTOPROX_WIREGUARD_INTERFACE: field(
    interfaceName("wg0"),
    "The WireGuard interface the gateway makes (its own while it runs)",
  ),
  OCTOPROX_WIREGUARD_LISTEN_PORT: field(
    optionalPort,
    "UDP port of the WireGuard endpoint (default: the port devices are told, from the " +
      "WireGuard settings)",
  ),
  OCTOPROX_OPENVPN_ENABLED: field(
    flag(false),
    "Whether this gateway runs the OpenVPN endpoint for tunnel devices (needs `openvpn`)",
  ),
  OCTOPROX_OPENVPN_INTERFACE: field(
    interfaceName("ovpn0"),
    "The tun interface the OpenVPN daemon makes (the gateway's own while it runs)",
  ),
  OCTOPROX_OPENVPN_LISTEN_PORT: field(
    optionalPort,
    "Port of the OpenVPN endpoint, UDP or TCP as the OpenVPN settings say (default: the port " +
      "devices are told, from the OpenVPN settings)",
  ),
  // 8081 is the status listener's here, which binds every address: the tunnel listener's port
  // is another, bound only on the tunnel's own address.
  OCTOPROX_TUNNEL_TRANSPARENT_PORT: field(
    port(8082),
    "Port of the listener devices' TCP is redirected to (bound on the tunnel address only)",
  ),
  OCTOPROX_TUNNEL_DNS_PORT: field(
    port(5353),
    "Port of the fake-IP resolver devices' DNS is redirected to (the tunnel address only)",
  ),
  OCTOPROX_TUNNEL_FAKE_IP_RANGE: field(
    v.optional(
      v.pipe(
        trimmed,
        v.check((text) => {
          try {
            parseFakeIpRange(text);
            return true;
          } catch {
            return false;
          }
        }, "must be an IPv4 CIDR block from /8 to /30, such as 198.18.0.0/15"),
      ),
      "198.18.0.0/15",
    ),
    "The block the tunnel resolver answers names from (one address per name in use)",
  ),
  OCTOPROX_TUNNEL_SNIFF_TIMEOUT: field(
    seconds(2, 0.1, 30),
    "How long a device connection to an address the resolver did not give waits for its TLS " +
      "name or HTTP Host",
  ),
  OCTOPROX_TUNNEL_BLOCK_ENCRYPTED_DNS: field(
    flag(true),
    "Close devices' DNS over TLS and well-known DNS-over-HTTPS connections, so names go " +
      "through the tunnel resolver",
  ),
  OCTOPROX_DESTINATION_ALLOW_CIDRS: field(
    cidrList,
    "Private destinations clients may reach (comma-separated CIDR blocks)",
  ),
  // The upstream: names go on unresolved, as residential exits need; the gateway: resolved once
  // here, checked, and the upstream sent the address.
  OCTOPROX_DESTINATION_RESOLUTION: field(
    oneOf(DESTINATION_RESOLUTIONS, "upstream"),
    "Who resolves destination names: `upstream` or `gateway` (resolved and checked here)",
  ),
  // From any other peer a header is refused.
  OCTOPROX_TRUSTED_PROXIES: field(
    blockList,
    "Balancers whose PROXY protocol header (v1 or v2) is taken (CIDR blocks or addresses)",
  ),
  OCTOPROX_TLS_MITM_CA_CERT_PATH: caCertField,
  // PKCS#8, as web crypto reads it (openssl pkcs8 -topk8 -nocrypt converts an older key form).
  // Optional to the schema, which both sides share; a gateway refuses to start without it
  // (gateway/app/mitm-ca.ts), naming it.
  OCTOPROX_TLS_MITM_CA_KEY_PATH: field(
    optionalPath(),
    "The TLS interception CA's key (PEM, PKCS#8), with the certificate's; gateways need it",
  ),
  OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH: previousCaCertField,
  OCTOPROX_TLS_MITM_CA_PREVIOUS_KEY_PATH: field(
    optionalPath(),
    "After a rotation: the previous CA's key; gateways sign with it until the overlap ends",
  ),
  OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL: overlapUntilField,
  // Minting one takes about a millisecond; each kept one holds a few kilobytes and a TLS context.
  OCTOPROX_TLS_MITM_CERT_CACHE_SIZE: field(
    integer(10_000, 16, 1_000_000),
    "Host certificates an intercepting gateway keeps (least recently used go first)",
  ),
  // Added to the runtime's own roots, never instead of them; verification cannot be turned off.
  OCTOPROX_UPSTREAM_CA_FILE: field(
    optionalPath(),
    "More CAs (PEM) an intercepting gateway trusts for targets' certificates",
  ),
  OCTOPROX_MAX_CLIENT_CONNECTIONS: field(
    integer(20_000, 1, 1_000_000),
    "Client connections per gateway process",
  ),
  OCTOPROX_MAX_HEADER_BYTES: field(integer(32_768, 1024, 1_048_576), "Largest request head"),
  // Site names as label values are unbounded: only the most judged few, and none unless asked.
  OCTOPROX_METRICS_TOP_SITES: field(
    integer(0, 0, 100),
    "Sites named on /metrics' per-site verdict counts (the most judged of each isolate); 0: none",
  ),
  OCTOPROX_CLIENT_IDLE_TIMEOUT: field(
    seconds(60, 1, 86_400),
    "Idle client connections are closed after this",
  ),
  OCTOPROX_CONNECT_TIMEOUT: field(seconds(30, 0.1, 600), "Deadline to reach an upstream"),
  // 1 by default: on the measured hosts more isolates did not serve more, and each adds a
  // snapshot's memory (docs/gateway.md, "Every core").
  OCTOPROX_GATEWAY_ISOLATES: field(
    integer(1, 0, 256),
    "Isolates (threads) serving in one gateway process; 0: one per core",
  ),
  // Slots of the gateway's table of proxies (32 bytes of counts each): freed slots are reused,
  // so this bounds the proxies routed at once, not those ever seen (docs/routing.md).
  OCTOPROX_GATEWAY_MAX_PROXIES: field(
    integer(1_000_000, 1000, 8_000_000),
    "Proxies one gateway routes at once at most; past it, new ones are left out and counted",
  ),
  // The api's address as gateways reach it: IP database files come from its internal endpoint
  // by checksum, in the background (docs/geo.md).
  OCTOPROX_GATEWAY_GEO_URL: field(
    v.optional(urlWithSchemes(["http", "https"], "HTTP")),
    "The api's address for IP database files (`http://api:8000`); unset: the gateway opens none",
  ),
  OCTOPROX_GATEWAY_GEO_DIR: field(
    v.optional(v.pipe(trimmed, v.minLength(1, "must be a folder path"))),
    "A folder of IP database files named by their SHA-256, read before asking the api",
  ),
  // Preflight's one echo per cache miss goes through the chosen proxy to this address, so it
  // must be reachable from the proxies' exits (docs/geo.md, "Preflight").
  OCTOPROX_GATEWAY_ECHO_URL: field(
    v.optional(urlWithSchemes(["http", "https"], "HTTP")),
    "The echo preflight asks through proxies (`http://api:8000/echo`); unset: exits go unchecked",
  ),
  // 0 (the default) serves on the last feed for as long as it must (docs/gateway.md).
  OCTOPROX_FEED_MAX_STALE: field(
    v.optional(
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
    "Time without reading the feed before the gateway refuses new requests (0: never)",
  ),
};

/** A row of the settings page: a variable, the sides that read it, its default, what it is for. */
export interface SettingDoc {
  name: string;
  sides: readonly ("control" | "gateway")[];
  /** The default as the environment would spell it; undefined when it has none. */
  defaultValue: string | undefined;
  /** Whether the process refuses to start without it. */
  required: boolean;
  description: string;
}

/** Every setting, in the table's order (shared ones first, then the control plane's, the gateway's). */
export function settingDocs(): SettingDoc[] {
  const docs = new Map<string, SettingDoc>();
  const sides = [["control", controlFields], ["gateway", gatewayFields]] as const;
  for (const [side, fields] of sides) {
    for (const [name, schema] of Object.entries(fields)) {
      const known = docs.get(name);
      if (known !== undefined) {
        docs.set(name, { ...known, sides: [...known.sides, side] });
        continue;
      }
      const fallback = v.getDefault(schema as v.GenericSchema);
      docs.set(name, {
        name,
        sides: [side],
        defaultValue: typeof fallback === "string" ? fallback : undefined,
        required: schema.type !== "optional",
        description: v.getDescription(schema) ?? "",
      });
    }
  }
  return [...docs.values()];
}

// ---------------------------------------------------------------------------------------------
// The schemas, each yielding settings named for the code rather than the environment.

const store = (
  e: v.InferOutput<v.ObjectSchema<typeof storeFields, undefined>> & { OCTOPROX_REDIS_URL: string },
) => ({
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
  // A previous CA without its overlap's end would be handed out for ever, and the reverse means
  // nothing: refused before the process starts.
  v.check(
    (e) =>
      (e.OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH === undefined) ===
        (e.OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL === undefined),
    "OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH and OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL must be set " +
      "together",
  ),
  v.check(
    (e) =>
      e.OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH === undefined ||
      e.OCTOPROX_TLS_MITM_CA_CERT_PATH !== undefined,
    "OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH needs OCTOPROX_TLS_MITM_CA_CERT_PATH (the CA it " +
      "was rotated to)",
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
    tunnelStatusIntervalMs: e.OCTOPROX_TUNNEL_STATUS_INTERVAL,
    ipRefreshIntervalMs: e.OCTOPROX_IP_REFRESH_INTERVAL,
    poolIntervalMs: e.OCTOPROX_POOL_INTERVAL,
    scaleIntervalMs: e.OCTOPROX_SCALE_INTERVAL,
    scaleCooldownMs: e.OCTOPROX_SCALE_COOLDOWN,
    scaleDemandWindowMinutes: e.OCTOPROX_SCALE_DEMAND_WINDOW,
    cloud: {
      proxyPort: e.OCTOPROX_CLOUD_PROXY_PORT,
      createTimeoutMs: e.OCTOPROX_CLOUD_CREATE_TIMEOUT,
      pollIntervalMs: e.OCTOPROX_CLOUD_POLL_INTERVAL,
      awsEndpoint: e.OCTOPROX_AWS_ENDPOINT,
      gcpEndpoint: e.OCTOPROX_GCP_ENDPOINT,
      gcpTokenUrl: e.OCTOPROX_GCP_TOKEN_URL,
      azureEndpoint: e.OCTOPROX_AZURE_ENDPOINT,
      azureAuthority: e.OCTOPROX_AZURE_AUTHORITY,
    },
    geoUpdaterIntervalMs: e.OCTOPROX_GEO_UPDATER_INTERVAL,
    healthCheckTimeoutMs: e.OCTOPROX_HEALTH_CHECK_TIMEOUT,
    healthCheckConcurrency: e.OCTOPROX_HEALTH_CHECK_CONCURRENCY,
    metricsFlushIntervalMs: e.OCTOPROX_METRICS_FLUSH_INTERVAL,
    compactionIntervalMs: e.OCTOPROX_COMPACTION_INTERVAL,
    systemMetricsIntervalMs: e.OCTOPROX_SYSTEM_METRICS_INTERVAL,
    systemMetricsRetentionDays: e.OCTOPROX_SYSTEM_METRICS_RETENTION_DAYS,
    auditRetentionDays: e.OCTOPROX_AUDIT_RETENTION_DAYS,
    indexHygieneIntervalMs: e.OCTOPROX_INDEX_HYGIENE_INTERVAL,
    controllerLeaseTtlMs: e.OCTOPROX_CONTROLLER_LEASE_TTL,
    controllerLeaseRefreshMs: e.OCTOPROX_CONTROLLER_LEASE_REFRESH,
    controllerLeasePollMs: e.OCTOPROX_CONTROLLER_LEASE_POLL,
    claimTimeoutMs: e.OCTOPROX_CLAIM_TIMEOUT,
    reclaimIntervalMs: e.OCTOPROX_RECLAIM_INTERVAL,
    maxDeliveries: e.OCTOPROX_MAX_DELIVERIES,
    stopGraceMs: e.OCTOPROX_STOP_GRACE,
    geoObservationPublishIntervalMs: e.OCTOPROX_GEO_OBSERVATION_PUBLISH_INTERVAL,
    egressAllowLoopback: e.OCTOPROX_EGRESS_ALLOW_LOOPBACK,
    alertEvaluationIntervalMs: e.OCTOPROX_ALERT_EVALUATION_INTERVAL,
    alertRetryBaseDelayMs: e.OCTOPROX_ALERT_RETRY_BASE_DELAY,
    /** Holds the SMTP login: never logged. */
    smtpUrl: e.OCTOPROX_SMTP_URL,
    smtpFrom: e.OCTOPROX_SMTP_FROM,
    /** The TLS interception CA's certificate file; undefined: the api has none to answer. */
    tlsMitmCaCertPath: e.OCTOPROX_TLS_MITM_CA_CERT_PATH,
    /** After a rotation: the previous CA's certificate, handed out too until the overlap ends. */
    tlsMitmCaPreviousCertPath: e.OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH,
    /** When the rotation's overlap ends, ms since the epoch (set with the previous CA). */
    tlsMitmCaOverlapUntilMs: e.OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL,
  })),
);
export type ControlSettings = v.InferOutput<typeof ControlSettingsSchema>;

export const GatewaySettingsSchema = v.pipe(
  v.object(gatewayFields),
  v.forward(
    v.check(
      (e) => !isRedisRestUrl(e.OCTOPROX_REDIS_URL) || e.OCTOPROX_REDIS_TOKEN !== undefined,
      "is required with an https:// OCTOPROX_REDIS_URL (the REST endpoint's token)",
    ),
    ["OCTOPROX_REDIS_TOKEN"],
  ),
  v.forward(
    v.check(
      (e) => isRedisRestUrl(e.OCTOPROX_REDIS_URL) || e.OCTOPROX_REDIS_TOKEN === undefined,
      "applies to an https:// OCTOPROX_REDIS_URL only (a redis:// URL carries its password)",
    ),
    ["OCTOPROX_REDIS_TOKEN"],
  ),
  v.forward(
    v.check(
      (e) => isRedisRestUrl(e.OCTOPROX_REDIS_URL) || e.OCTOPROX_FEED_POLL_INTERVAL === undefined,
      "applies to an https:// OCTOPROX_REDIS_URL only (over TCP the feed's stream wakes the " +
        "gateway at once)",
    ),
    ["OCTOPROX_FEED_POLL_INTERVAL"],
  ),
  // One without the other is a CA a gateway cannot sign with: refused before it starts.
  v.check(
    (e) =>
      (e.OCTOPROX_TLS_MITM_CA_CERT_PATH === undefined) ===
        (e.OCTOPROX_TLS_MITM_CA_KEY_PATH === undefined),
    "OCTOPROX_TLS_MITM_CA_CERT_PATH and OCTOPROX_TLS_MITM_CA_KEY_PATH must be set together",
  ),
  // The previous CA signs during the overlap: its two files and the overlap's end go together,
  // and only beside a current pair.
  v.check(
    (e) =>
      new Set([
        e.OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH === undefined,
        e.OCTOPROX_TLS_MITM_CA_PREVIOUS_KEY_PATH === undefined,
        e.OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL === undefined,
      ]).size === 1,
    "OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH, OCTOPROX_TLS_MITM_CA_PREVIOUS_KEY_PATH and " +
      "OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL must be set together",
  ),
  v.check(
    (e) =>
      e.OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH === undefined ||
      e.OCTOPROX_TLS_MITM_CA_CERT_PATH !== undefined,
    "OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH needs OCTOPROX_TLS_MITM_CA_CERT_PATH and " +
      "OCTOPROX_TLS_MITM_CA_KEY_PATH (the CA it was rotated to)",
  ),
  v.transform((e) => ({
    ...store(e),
    host: e.OCTOPROX_GATEWAY_HOST,
    proxyPort: e.OCTOPROX_PROXY_PORT,
    statusPort: e.OCTOPROX_GATEWAY_STATUS_PORT,
    socksPort: e.OCTOPROX_SOCKS_PORT,
    socksEnabled: e.OCTOPROX_SOCKS_ENABLED,
    wireguardEnabled: e.OCTOPROX_WIREGUARD_ENABLED,
    wireguardInterface: e.OCTOPROX_WIREGUARD_INTERFACE,
    /** Undefined: the port the WireGuard settings tell devices. */
    wireguardListenPort: e.OCTOPROX_WIREGUARD_LISTEN_PORT,
    openvpnEnabled: e.OCTOPROX_OPENVPN_ENABLED,
    openvpnInterface: e.OCTOPROX_OPENVPN_INTERFACE,
    /** Undefined: the port the OpenVPN settings tell devices. */
    openvpnListenPort: e.OCTOPROX_OPENVPN_LISTEN_PORT,
    tunnelTransparentPort: e.OCTOPROX_TUNNEL_TRANSPARENT_PORT,
    tunnelDnsPort: e.OCTOPROX_TUNNEL_DNS_PORT,
    tunnelFakeIpRange: e.OCTOPROX_TUNNEL_FAKE_IP_RANGE,
    tunnelSniffTimeoutMs: e.OCTOPROX_TUNNEL_SNIFF_TIMEOUT,
    tunnelBlockEncryptedDns: e.OCTOPROX_TUNNEL_BLOCK_ENCRYPTED_DNS,
    tunnelStatusIntervalMs: e.OCTOPROX_TUNNEL_STATUS_INTERVAL,
    destinationAllowCidrs: e.OCTOPROX_DESTINATION_ALLOW_CIDRS,
    destinationResolution: e.OCTOPROX_DESTINATION_RESOLUTION as DestinationResolution,
    trustedProxies: e.OCTOPROX_TRUSTED_PROXIES,
    maxClientConnections: e.OCTOPROX_MAX_CLIENT_CONNECTIONS,
    maxHeaderBytes: e.OCTOPROX_MAX_HEADER_BYTES,
    /** Sites named on /metrics' per-site verdict counts; 0: none. */
    metricsTopSites: e.OCTOPROX_METRICS_TOP_SITES,
    clientIdleTimeoutMs: e.OCTOPROX_CLIENT_IDLE_TIMEOUT,
    connectTimeoutMs: e.OCTOPROX_CONNECT_TIMEOUT,
    /** 1 (default): one isolate; 0: one per core (the process resolves it); n: n isolates. */
    isolates: e.OCTOPROX_GATEWAY_ISOLATES,
    maxProxies: e.OCTOPROX_GATEWAY_MAX_PROXIES,
    heartbeatIntervalMs: e.OCTOPROX_HEARTBEAT_INTERVAL,
    /** The HTTP transport's bearer token (undefined over TCP). */
    redisToken: e.OCTOPROX_REDIS_TOKEN,
    /** How often the HTTP transport reads the feed's head (unused over TCP). */
    feedPollIntervalMs: e.OCTOPROX_FEED_POLL_INTERVAL ?? 1_000,
    /** 0: off (the last feed serves however old its read). */
    feedMaxStaleMs: e.OCTOPROX_FEED_MAX_STALE,
    /** The api's base URL for IP database files; undefined: only the folder, if any. */
    geoUrl: e.OCTOPROX_GATEWAY_GEO_URL,
    geoDir: e.OCTOPROX_GATEWAY_GEO_DIR,
    /** Where preflight's echo goes through proxies; undefined: no exit can be checked. */
    echoUrl: e.OCTOPROX_GATEWAY_ECHO_URL,
    /**
     * The TLS interception CA's files (both or neither): loaded before anything else, and
     * required (gateway/app/mitm-ca.ts refuses to start without them).
     */
    tlsMitmCaCertPath: e.OCTOPROX_TLS_MITM_CA_CERT_PATH,
    tlsMitmCaKeyPath: e.OCTOPROX_TLS_MITM_CA_KEY_PATH,
    /**
     * After a rotation: the previous CA's files (all three or none), which the gateway signs with
     * while the overlap lasts at its start (gateway/app/mitm-ca.ts).
     */
    tlsMitmCaPreviousCertPath: e.OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH,
    tlsMitmCaPreviousKeyPath: e.OCTOPROX_TLS_MITM_CA_PREVIOUS_KEY_PATH,
    tlsMitmCaOverlapUntilMs: e.OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL,
    tlsMitmCertCacheSize: e.OCTOPROX_TLS_MITM_CERT_CACHE_SIZE,
    upstreamCaFile: e.OCTOPROX_UPSTREAM_CA_FILE,
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
