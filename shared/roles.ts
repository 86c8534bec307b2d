/**
 * Names every other module agrees on: the process roles and the job kinds.
 * Imports nothing, so settings, the loop catalogue and the key catalogue can all use it.
 */

export const Role = {
  api: "api",
  controller: "controller",
  worker: "worker",
  /** The echo alone (`/echo` and the probes), for an edge the proxies' exits reach. */
  echo: "echo",
  all: "all",
} as const;
export type Role = (typeof Role)[keyof typeof Role];
export const ROLES: readonly Role[] = Object.values(Role);

/** The runtimes a process of each role runs, in start order (stopped in reverse). */
export const ROLE_RUNTIMES: Readonly<Record<Role, readonly Exclude<Role, "all">[]>> = {
  api: ["api"],
  controller: ["controller"],
  worker: ["worker"],
  echo: ["echo"],
  all: ["api", "controller", "worker"],
};

export const JobKind = {
  health: "health",
  sync: "sync",
  provision: "provision",
  reattribute: "reattribute",
  enrich: "enrich",
  scale: "scale",
  traffic: "traffic",
  metricsFlush: "metrics_flush",
  compaction: "compaction",
  snapshot: "snapshot",
  geoUpdate: "geo_update",
  tunnelLastSeen: "tunnel_last_seen",
  indexHygiene: "index_hygiene",
  /** A provider-API connector's pool: reap, check, promote, plan and run fetches. */
  pool: "pool",
} as const;
export type JobKind = (typeof JobKind)[keyof typeof JobKind];
export const JOB_KINDS: readonly JobKind[] = Object.values(JobKind);
/**
 * The kinds a worker has a handler for (control/jobs/handlers.ts builds one job of each): every
 * kind. OCTOPROX_WORKER_JOBS may name these, and takes them all by default.
 */
export const WORKER_JOB_KINDS: readonly JobKind[] = [
  JobKind.health,
  JobKind.reattribute,
  JobKind.enrich,
  JobKind.pool,
  JobKind.sync,
  JobKind.provision,
  JobKind.scale,
  JobKind.traffic,
  JobKind.metricsFlush,
  JobKind.compaction,
  JobKind.snapshot,
  JobKind.indexHygiene,
  JobKind.geoUpdate,
  JobKind.tunnelLastSeen,
];

/**
 * The kinds with a first lane: a stream of their own that workers read beside the regular one,
 * for work that must not queue behind periodic runs (a new proxy's first check, a suspect's
 * re-check).
 */
export const FIRST_LANE_KINDS: readonly JobKind[] = [JobKind.health];

export const ProxyStatus = {
  initializing: "initializing",
  healthy: "healthy",
  degraded: "degraded",
  unhealthy: "unhealthy",
  draining: "draining",
  terminating: "terminating",
} as const;
export type ProxyStatus = (typeof ProxyStatus)[keyof typeof ProxyStatus];
export const PROXY_STATUSES: readonly ProxyStatus[] = Object.values(ProxyStatus);

export const ProxyScheme = {
  http: "http",
  https: "https",
  socks4: "socks4",
  socks5: "socks5",
} as const;
export type ProxyScheme = (typeof ProxyScheme)[keyof typeof ProxyScheme];
export const PROXY_SCHEMES: readonly ProxyScheme[] = Object.values(ProxyScheme);

export const Strategy = {
  roundRobin: "round_robin",
  random: "random",
  leastUsed: "least_used",
  healthBased: "health_based",
  sticky: "sticky",
} as const;
export type Strategy = (typeof Strategy)[keyof typeof Strategy];
export const STRATEGIES: readonly Strategy[] = Object.values(Strategy);

/** A traffic limit's (or quota's) periods, actions and the statuses a blocked request may get. */
export const TRAFFIC_PERIODS = ["day", "week", "month"] as const;
export const TRAFFIC_ACTIONS = ["alert", "block", "interrupt"] as const;
export const TRAFFIC_LIMIT_STATUSES = [509, 429] as const;

/**
 * A project's location rules: the policy (strict leaves proxies whose sources disagree on their
 * country out of routing) and preflight (checking a request's exit before it goes out).
 */
export const LOCATION_POLICIES = ["off", "warn", "strict"] as const;
export const LOCATION_PREFLIGHTS = ["off", "report", "retry", "reject"] as const;

/**
 * A routing sequence's move past its last connector (stop: serve nothing; loop: back to the
 * first; stay_last: keep the last), and what a request gets when its current connector cannot
 * serve it (reject: refused with the reason).
 */
export const SEQUENCE_ON_END = ["stop", "loop", "stay_last"] as const;
export type SequenceOnEnd = (typeof SEQUENCE_ON_END)[number];
export const SEQUENCE_ON_UNAVAILABLE = ["reject"] as const;
export type SequenceOnUnavailable = (typeof SEQUENCE_ON_UNAVAILABLE)[number];

/** The most other proxies a project's request may go on to after a failed attempt (max_retries). */
export const MAX_RETRIES_LIMIT = 10;

export const UserRole = {
  admin: "admin",
  editor: "editor",
  viewer: "viewer",
} as const;
export type UserRole = (typeof UserRole)[keyof typeof UserRole];
export const USER_ROLES: readonly UserRole[] = Object.values(UserRole);

/** Connector kinds. `static`, `vendor` and `provider_api` have behaviour; `cloud` reserves its place. */
export const ConnectorKind = {
  static: "static",
  vendor: "vendor",
  providerApi: "provider_api",
  cloud: "cloud",
} as const;
export type ConnectorKind = (typeof ConnectorKind)[keyof typeof ConnectorKind];
export const CONNECTOR_KINDS: readonly ConnectorKind[] = Object.values(ConnectorKind);

/** What a change entry names: the kind of definition that changed. */
export const ChangeKind = {
  project: "project",
  credential: "credential",
  connector: "connector",
  proxy: "proxy",
  user: "user",
  /** A custom provider descriptor (the global section carries them). */
  descriptor: "descriptor",
  /** IP databases or the attribution settings (the global section carries them). */
  geo: "geo",
  /** A tunnel device, or the WireGuard settings (`wireguard`): the global section carries them. */
  tunnel: "tunnel",
  all: "all",
} as const;
export type ChangeKind = (typeof ChangeKind)[keyof typeof ChangeKind];
