/**
 * The one place Redis key and stream names are built. Every key lives under the configured
 * prefix (`OCTOPROX_REDIS_PREFIX`, default `ox:`), so two installs or two test runs can share
 * one Redis. Nothing else in the code base writes a key name by hand.
 */
import { FIRST_LANE_KINDS, JOB_KINDS, type JobKind } from "./roles.ts";

/** The consumer group every work stream is taken through. */
export const WORKERS_GROUP = "workers";

/**
 * Work streams as the System page names them: the job kinds, their first lanes, the sightings,
 * the observations.
 */
export type WorkStreamName =
  | `jobs.${JobKind}`
  | `jobs.${JobKind}.first`
  | "sightings"
  | "observations";

export const WORK_STREAMS: readonly WorkStreamName[] = [
  ...JOB_KINDS.map((kind) => `jobs.${kind}` as const),
  ...FIRST_LANE_KINDS.map((kind) => `jobs.${kind}.first` as const),
  "sightings",
  "observations",
];

/** Event streams as snapshots and /metrics name them: an entry says what to read again. */
export type EventStreamName = "changes" | "runtime" | "feed";

/** Caps applied with `XADD … MAXLEN ~`: they bound only a stream nobody takes. */
export const STREAM_CAPS = {
  changes: 10_000,
  runtime: 10_000,
  feed: 1_000,
  work: 100_000,
  /** Failure examples per project and kind: a sample for reading, the counts are elsewhere. */
  failures: 100,
  /** Interception captures per project (the Inspector's): about the last thousand exchanges. */
  mitmRequests: 1_000,
  /**
   * Cool-downs after block verdicts (exit × site), read by every gateway: a gateway starting
   * reads those in force among the last this many.
   */
  cooldowns: 10_000,
} as const;

export type RedisKeys = ReturnType<typeof redisKeys>;

/** Days a project's per-site judging counts are kept (today and the six before it). */
export const DOMAIN_COUNTS_DAYS = 7;

/** The counts a site's field names carry, per connector (docs/blocking.md, "What it cost"). */
export const DOMAIN_COUNTS = [
  "ok",
  "blocked",
  "rate_limited",
  "retries",
  "blocked_bytes",
  "ok_bytes",
] as const;
export type DomainCount = (typeof DOMAIN_COUNTS)[number];

/** The UTC day a count falls in, as its key names it. */
export function countDay(atMs: number): string {
  return new Date(atMs).toISOString().slice(0, 10);
}

export function redisKeys(prefix: string) {
  const p = prefix;
  return {
    prefix: p,

    // Event streams: an entry says what to read again.
    changesStream: `${p}stream:changes`,
    runtimeStream: `${p}stream:runtime`,
    feedStream: `${p}stream:feed`,
    /**
     * Exits cooled down per site after block verdicts (gateway/blocking/cooldowns.ts): entries
     * of `s` site, `p` proxy id, `u` until (epoch ms) and `j` the project whose verdict it was.
     */
    cooldownsStream: `${p}stream:cooldowns`,

    // Work streams: an entry is the work itself.
    jobStream: (kind: JobKind) => `${p}jobs:${kind}:stream`,
    /** A kind's first lane (FIRST_LANE_KINDS): read ahead of its regular stream. */
    jobFirstStream: (kind: JobKind) => `${p}jobs:${kind}:first`,
    sightingsStream: `${p}stream:sightings`,
    observationsStream: `${p}stream:observations`,
    workStream(name: WorkStreamName): string {
      if (name === "sightings") return this.sightingsStream;
      if (name === "observations") return this.observationsStream;
      if (name.endsWith(".first")) {
        return this.jobFirstStream(name.slice("jobs.".length, -".first".length) as JobKind);
      }
      return this.jobStream(name.slice("jobs.".length) as JobKind);
    },

    // The routing feed.
    feedHead: `${p}feed:head`,
    feedManifest: `${p}feed:manifest`,
    feedSections: `${p}feed:sections`,

    // The controller lease.
    controllerLease: `${p}lease:controller`,

    // Processes: a registry key per process (its life), a snapshot key (what it reports), and
    // the index of process ids, pruned by index hygiene once a registry key has expired.
    instanceIndex: `${p}instances`,
    instance: (id: string) => `${p}instance:${id}`,
    instanceSnapshot: (id: string) => `${p}instance:${id}:snapshot`,

    // Batch identities: the highest batch Redis applied for a writer.
    applied: (writer: string) => `${p}applied:${writer}`,

    // Per-proxy soft state.
    proxyHealth: (proxyId: string) => `${p}proxy:health:${proxyId}`,
    proxyRequests: (proxyId: string) => `${p}proxy:requests:${proxyId}`,
    proxyLastExit: (proxyId: string) => `${p}proxy:last_exit:${proxyId}`,
    proxyQuarantined: `${p}proxy:quarantined`,

    // A project's request-rate bucket, shared by every gateway.
    projectRate: (projectId: string) => `${p}rate:project:${projectId}`,

    // Traffic decisions.
    trafficBlocked: `${p}traffic:blocked`,
    trafficPending: `${p}traffic:pending`,

    // Per-key request state.
    sticky: (projectId: string, sessionId: string) => `${p}sticky:${projectId}:${sessionId}`,
    preflightVerdict: (projectId: string, proxyId: string) =>
      `${p}preflight:${projectId}:${proxyId}`,

    // The tunnel resolver's fake-IP mapping, per block (`198.18.0.0/15`), shared by every
    // gateway: shared/lua/fake_ip_assign.lua.
    fakeIp: (block: string) => ({
      names: `${p}tunnel:fakeip:${block}:names`,
      offsets: `${p}tunnel:fakeip:${block}:offsets`,
      recency: `${p}tunnel:fakeip:${block}:recency`,
      next: `${p}tunnel:fakeip:${block}:next`,
    }),

    // Tunnel statuses: each gateway with a tunnel endpoint writes what its devices last did
    // (expiring), and lists itself among the carriers; tunnel_last_seen reads them all.
    tunnelStatus: (instance: string) => `${p}tunnel:status:${instance}`,
    tunnelCarriers: `${p}tunnel:carriers`,

    // Metric windows and their indexes; the metrics flush stages under the flush's id.
    metricWindow: (kind: string, key: string) => `${p}metrics:${kind}:${key}`,
    metricIndex: (kind: string) => `${p}metrics:index:${kind}`,
    metricsTaken: (flushId: string) => `${p}metrics:taken:${flushId}`,
    demand: (projectId: string, minute: number) => `${p}demand:${projectId}:${minute}`,

    // Cloud scaling state.
    autoscaler: (connectorId: string) => `${p}autoscaler:${connectorId}`,
    scaleCreating: (connectorId: string) => `${p}scale:creating:${connectorId}`,

    // Provider-API pools (the activity pool of short-lived proxies): see docs/provider-api.md.
    // The install's pool generation: made anew when Redis lost it, so leases and ledgers of an
    // earlier generation can never be taken for this one's.
    poolGeneration: `${p}pool:generation`,
    /** Entries by id: each a JSON record (credentials sealed). */
    poolEntries: (connectorId: string) => `${p}pool:${connectorId}:entries`,
    /** Fetched entries waiting for their first check, scored by fetch time (ms). */
    poolChecking: (connectorId: string) => `${p}pool:${connectorId}:checking`,
    /** Available entries the feed routes, scored by usable-until (ms). */
    poolRouted: (connectorId: string) => `${p}pool:${connectorId}:routed`,
    /** Available entries no gateway routes (extraction stock), scored by usable-until (ms). */
    poolStock: (connectorId: string) => `${p}pool:${connectorId}:stock`,
    /**
     * Available entries that failed a check or were named by a gateway's failures: out of the
     * feed and of extraction until a check passes, scored by usable-until (ms).
     */
    poolSuspect: (connectorId: string) => `${p}pool:${connectorId}:suspect`,
    /**
     * Available entries by their last passed check (ms): the oldest are re-checked first. Kept
     * lazily: an id whose entry left the available sets is dropped when a re-check finds it.
     */
    poolChecked: (connectorId: string) => `${p}pool:${connectorId}:checked`,
    /**
     * Gateways' connect failures through the pool's proxies, by entry id (a count), since the
     * pool job last took them: evidence that makes an entry suspect before its next check.
     */
    poolEvidence: (connectorId: string) => `${p}pool:${connectorId}:evidence`,
    /**
     * What each gateway holds through the pool's proxies (reserved and active transfers), by
     * gateway instance: `<count>:<written at, ms>`, written every second by each gateway that
     * holds any, read by the pool job's refill plan.
     */
    poolHeld: (connectorId: string) => `${p}pool:${connectorId}:held`,
    /** Extracted entries, scored by their expiry (ms). */
    poolExtracted: (connectorId: string) => `${p}pool:${connectorId}:extracted`,
    /** Every entry, scored by its hard expiry (ms): what the reaper walks. */
    poolExpiry: (connectorId: string) => `${p}pool:${connectorId}:expiry`,
    /**
     * Which pool entry owns a proxy, by keyed digest of its uniqueness key, across the install:
     * one proxy is in one pool at a time, so one project's extraction is never another's route.
     */
    poolOwners: `${p}pool:owners`,
    /** A provider-API connector's fetch state: leader, epoch, pacing, permits, ledger, counts. */
    poolLeader: (connectorId: string) => `${p}pool:${connectorId}:leader`,
    poolEpoch: (connectorId: string) => `${p}pool:${connectorId}:epoch`,
    poolFetch: (connectorId: string) => `${p}pool:${connectorId}:fetch`,
    poolPermits: (connectorId: string) => `${p}pool:${connectorId}:permits`,
    /**
     * The connector's last-known settings, sealed (a hash: digest, sealed, saved_at): what its
     * pool runs go on with while Postgres does not answer.
     */
    poolLastKnown: (connectorId: string) => `${p}pool:${connectorId}:last_known`,

    // Exclusive extraction: idempotent answers per project and key digest, leases.
    extractIdempotency: (projectId: string, keyDigest: string) =>
      `${p}extract:idem:${projectId}:${keyDigest}`,
    extractLease: (leaseId: string) => `${p}extract:lease:${leaseId}`,
    /** Every open lease, scored by its end (ms): what the reaper walks. */
    extractLeases: `${p}extract:leases`,

    // Failure log and interception captures, per project.
    failures: (projectId: string, kind: string) => `${p}failures:${projectId}:${kind}`,
    mitmRequests: (projectId: string) => `${p}mitm:requests:${projectId}`,
    /**
     * What judging found for a project on one UTC day (`YYYY-MM-DD`), by site: a hash whose
     * fields are `<site>\t<connector id>\t<count>` and `<site>\t\tshadow:<rule>:<verdict>`
     * (gateway/blocking/domain-counts.ts), kept DOMAIN_COUNTS_DAYS.
     */
    domainCounts: (projectId: string, day: string) => `${p}domains:${projectId}:${day}`,
    /**
     * A project's escalation state, by site: a hash of JSON records (shared/lua/
     * escalation_report.lua), and the version raised whenever a tier or a probe time changes.
     */
    escalation: (projectId: string) => `${p}escalation:${projectId}`,
    escalationVersion: (projectId: string) => `${p}escalation:${projectId}:version`,

    /**
     * Every key a project owns: its own, and patterns (SCAN MATCH) for the families keyed under
     * it. What a deleted project leaves is removed by these (control/services/project-state.ts);
     * a key family added per project belongs here too.
     */
    projectOwned: (projectId: string) => ({
      keys: [
        `${p}rate:project:${projectId}`,
        `${p}mitm:requests:${projectId}`,
        `${p}escalation:${projectId}`,
        `${p}escalation:${projectId}:version`,
      ],
      patterns: ["sticky", "preflight", "demand", "extract:idem", "failures", "domains"].map((
        family,
      ) =>
        // The prefix is the operator's: any glob character in it is matched as itself.
        `${p.replace(/[*?[\]\\]/g, "\\$&")}${family}:${projectId}:*`
      ),
    }),
  };
}
