/**
 * Builds the routing core the socket layer runs on: the router (shared/routing/router.ts), the
 * destination guard (shared/routing/destination-guard.ts) and the feed follower (gateway/feed/follower.ts)
 * over one Redis client. The gateway reads only Redis (OCTOPROX_REDIS_URL, its prefix) and the
 * internal secret the feed keys derive from; never Postgres.
 *
 * `buildIsolateCore` is what every isolate serving the process builds for itself (the main one
 * and each worker of gateway/app/isolates.ts): whatever a router, guard or hooks need per isolate
 * (a Redis client for sticky bindings, say) belongs there. The feed follower runs once per
 * process, in the main isolate, which hands each applied feed to the others (`shareWith`).
 */
import { Redis } from "ioredis";
import { deriveFeedKeys, verifyPassword } from "../../shared/feed/codec.ts";
import type { FeedSections } from "../../shared/feed/models.ts";
import { redisKeys, STREAM_CAPS } from "../../shared/redis-keys.ts";
import { JobKind } from "../../shared/roles.ts";
import type { GatewaySettings } from "../../shared/settings.ts";
import type { DestinationGuard } from "../../shared/routing/contract.ts";
import type { Dispatch } from "../../shared/routing/dispatch.ts";
import { type SectionsDelta, sectionsDelta } from "../../shared/routing/feed-share.ts";
import { FeedFreshness } from "../../shared/routing/feed-freshness.ts";
import { createDestinationGuard } from "../../shared/routing/destination-guard.ts";
import { dnsResolver } from "../net/io/resolve.ts";
import { CoreRouter } from "../../shared/routing/router.ts";
import { FeedFollower, type FeedLogger } from "../feed/follower.ts";
import type { GatewayIsolateSnapshot } from "../../shared/gateway-snapshot.ts";
import { withdrawInstanceKeys, writeInstanceKeys } from "../../shared/instance-registry.ts";
import { LoopLagTimer } from "../../shared/loop-lag.ts";
import { FailureLog } from "../metering/failure-log.ts";
import {
  loadMeteringScript,
  loadProjectRateScript,
  loadRateWindowScript,
} from "../metering/lua.ts";
import { projectLimitsStep } from "../limits/project-limits-step.ts";
import { RequestRateLimiter } from "../limits/request-rate.ts";
import { randomSuffix, RequestMetering } from "../metering/metering.ts";
import { RateLimiter } from "../metering/rate-limiter.ts";
import { RedisStickyStore } from "../../shared/routing/sticky/redis-store.ts";
import { clientAddressStep } from "../access/client-address.ts";
import { headerOptionsStep } from "../access/header-options.ts";
import { describeProjects, listensBeyondLoopback, openProjects } from "../access/strict-mode.ts";
import type { RoutingCore } from "./gateway.ts";
import { StartRefused } from "./start-refused.ts";
import type { AdmissionStep } from "../base/admission.ts";
import type { TransferHooks } from "../base/transfer-hooks.ts";
import type { Logger } from "../base/log.ts";
import { withDeadline } from "../../shared/async/deadline.ts";
import { helpLine } from "../base/metric-help.ts";
import { gaugeSample, type MetricSample, renderSamples } from "../base/metrics.ts";

/** The follower reads the feed's head at least this often (less with OCTOPROX_FEED_MAX_STALE). */
const FEED_RECHECK_MS = 30_000;

/** The follower logs pino-style, `(fields, message)`. */
function feedLogger(logger: Logger): FeedLogger {
  return {
    info: (fields, message) => logger.info(message, fields),
    warn: (fields, message) => logger.warn(message, fields),
    error: (fields, message) => logger.error(message, fields),
  };
}

function connectRedis(settings: GatewaySettings, name: string): Redis {
  const redis = new Redis(settings.redisUrl, {
    connectionName: name,
    // Commands wait for a connection at most one reconnect; the follower retries with back-off.
    maxRetriesPerRequest: 1,
    connectTimeout: 5_000,
    retryStrategy: (times) => Math.min(100 * times, 1_000),
    lazyConnect: false,
  });
  // Errors surface on the commands; an unheard 'error' event must not end the process.
  redis.on("error", () => {});
  return redis;
}

/** What one isolate serves with. */
export interface IsolateCore {
  router: CoreRouter;
  guard: DestinationGuard;
  /**
   * Admission steps of the core's own (who may use the gateway from where, project limits),
   * which every listener runs between the credentials and the destination guard, in this order
   * (gateway/net/session/admission-steps.ts): the client's address, the header options.
   */
  admissionSteps: readonly AdmissionStep[];
  hooks?: TransferHooks;
  /** This isolate's request metering (its own batch writer), also its hooks. */
  metering: RequestMetering;
  /** Counts requests through rate-limited connectors into their proxies' windows. */
  rateLimiter: RateLimiter;
  /** Keeps examples of this isolate's failed requests (its own writer of them). */
  failureLog: FailureLog;
  /** This isolate's event loop lag. */
  loopLag: LoopLagTimer;
  /** This isolate's metering and rate-limiter series, summed with the others' for /metrics. */
  samples(): MetricSample[];
  /** This isolate's part of the heartbeat snapshot (its connections are the caller's). */
  state(): Omit<GatewayIsolateSnapshot, "connections_open" | "tunnels_open">;
  /** What this isolate's writers owe Redis now. */
  owed(): OwedAtStop;
  /**
   * Stops what the core runs and holds (the router's held tasks, its own Redis client), each
   * last send under the request deadline, and logs what Redis did not take.
   */
  stop(): Promise<void>;
}

export interface IsolateCoreOptions {
  /** The counts to route on: a worker's follows the main isolate's (dispatch.ts `follow`). */
  dispatch?: Dispatch;
  /** A Redis client to use (the main isolate's, shared with the follower); else its own. */
  redis?: Redis;
  /** Tells the isolates of one process apart in Redis client names (0 is the main one). */
  isolate?: number;
  /** Hands a quarantine this isolate's rate limiter tripped to the process's other isolates. */
  shareTrip?: (proxyId: string, untilMs: number) => void;
  /** When the process last read the feed: a worker's shares the main isolate's word. */
  freshness?: FeedFreshness;
}

/** The router, guard and hooks of one isolate (the main one, or a worker). */
export async function buildIsolateCore(
  settings: GatewaySettings,
  logger: Logger,
  instance: string,
  options: IsolateCoreOptions = {},
): Promise<IsolateCore> {
  const feedKeys = await deriveFeedKeys(settings.internalSecret);
  const ownRedis = options.redis === undefined;
  const redis = options.redis ??
    connectRedis(settings, `octoprox-gateway:${instance}:${options.isolate ?? 0}`);
  const keys = redisKeys(settings.redisPrefix);
  const router = new CoreRouter({
    verifyPassword: (password, digest) => verifyPassword(feedKeys, password, digest),
    log: { warn: (message, fields) => logger.warn(message, fields) },
    freshness: options.freshness ?? new FeedFreshness(settings.feedMaxStaleMs),
    ...(options.dispatch !== undefined ? { dispatch: options.dispatch } : {}),
    // Sticky bindings in Redis, read under the request deadline and written by held tasks.
    sticky: {
      store: new RedisStickyStore(redis, keys),
      requestTimeoutMs: settings.redisRequestTimeoutMs,
    },
    // A country an "All countries" session pool has no group for asks a worker for one.
    provision: {
      ask: async (key) => {
        await withDeadline("provision request", settings.redisRequestTimeoutMs, () =>
          redis.xadd(
            keys.jobStream(JobKind.provision),
            "MAXLEN",
            "~",
            STREAM_CAPS.work,
            "*",
            "key",
            key,
          ));
        return true;
      },
    },
  });
  const guard = createDestinationGuard({
    allowCidrs: settings.destinationAllowCidrs,
    resolution: settings.destinationResolution,
    resolve: dnsResolver(),
  });
  const isolate = options.isolate ?? 0;
  const writer = `${instance}:${isolate}`;
  // Each finished request through a rate-limited connector goes to its proxy's window in Redis
  // (a held write, never awaited by the request); a trip excludes the proxy here at once.
  const rateLimiter = new RateLimiter({
    redis,
    keys,
    script: await loadRateWindowScript(),
    writer: `${writer}:${randomSuffix()}`,
    requestTimeoutMs: settings.redisRequestTimeoutMs,
    tripped: (proxyId, untilMs) => {
      router.quarantineLocally(proxyId, untilMs);
      options.shareTrip?.(proxyId, untilMs);
      logger.info("Rate limit reached: proxy quarantined", { proxy: proxyId, untilMs });
    },
    logger,
  });
  // A project's request rate across every gateway: tokens leased from its Redis bucket a chunk
  // at a time, spent from memory.
  const requestRate = new RequestRateLimiter({
    redis,
    keys,
    script: await loadProjectRateScript(),
    requestTimeoutMs: settings.redisRequestTimeoutMs,
  });
  // Examples of failed requests, a few per project and kind every 5 s, by a held write.
  const failureLog = new FailureLog({
    redis,
    keys,
    writeTimeoutMs: settings.redisRequestTimeoutMs,
    logger,
  });
  // Counts in memory per proxy, project, connector and host; one round trip every 5 s. Each
  // isolate is a writer of its own, so its batches are applied once whatever the others do.
  const metering = new RequestMetering({
    redis,
    keys,
    script: await loadMeteringScript(),
    instance: writer,
    logger,
    // A stop's final attempt gets the request deadline, like every other last send to Redis.
    closeTimeoutMs: settings.redisRequestTimeoutMs,
    rateLimiter,
    // A running transfer through a connector blocked with the interrupt action stops at its
    // next report (the snapshot in force says so).
    interrupts: (connectorId, projectId) => router.interrupts(connectorId, projectId),
    trafficLimits: {
      connector: (connectorId) => router.trafficLimited(connectorId),
      project: (projectId) => router.quotaLimited(projectId),
    },
    failureLog,
  });
  // Every isolate has an event loop of its own, so each measures its own lag.
  const loopLag = new LoopLagTimer({
    lagging: (lateMs, meanMs) =>
      logger.warn("Event loop lagging", { isolate, late_ms: lateMs, mean_ms: meanMs }),
  });
  metering.start();
  failureLog.start();
  loopLag.start();
  const lagLabel = `isolate="${isolate}"`;
  // Who may use a project from where, then the options its request headers ask for.
  const admissionSteps: AdmissionStep[] = [
    clientAddressStep({
      snapshot: () => router.snapshot,
      strict: listensBeyondLoopback(settings.host),
    }),
    headerOptionsStep(),
  ];
  return {
    router,
    guard,
    admissionSteps: [
      ...admissionSteps,
      projectLimitsStep({ router, dispatch: router.dispatch, rate: requestRate }),
    ],
    hooks: metering,
    metering,
    rateLimiter,
    failureLog,
    loopLag,
    samples: () => {
      const lag = loopLag.snapshot();
      return [
        ...metering.samples(),
        ...rateLimiter.samples(),
        ...requestRate.samples(),
        // Every isolate holds the process's trips: the largest copy says how many there are.
        gaugeSample("octoprox_gateway_local_quarantines", router.localQuarantineCount, "max"),
        ...failureLog.samples(),
        gaugeSample(
          "octoprox_gateway_loop_lag_worst_seconds",
          lag.worst_ms / 1000,
          "max",
          lagLabel,
        ),
        gaugeSample("octoprox_gateway_loop_lag_mean_seconds", lag.mean_ms / 1000, "max", lagLabel),
      ];
    },
    state: () => {
      const m = metering.stats();
      const f = failureLog.stats();
      return {
        isolate,
        loop_lag: loopLag.snapshot(),
        metering: {
          sends: m.sends,
          failures: m.failures,
          consecutive_failures: m.consecutiveFailures,
          last_error: m.lastError,
          owed_parts: m.owedParts,
          pending_rows: m.pendingRows,
          meters_open: m.metersOpen,
        },
        failure_log: {
          sends: f.writes,
          failures: f.writeFailures,
          consecutive_failures: f.consecutiveFailures,
          last_error: f.lastError,
          recorded: f.recorded,
          examples_written: f.examplesWritten,
          examples_capped: f.examplesCapped,
          examples_dropped: f.examplesDropped,
          pending_examples: f.pendingExamples,
        },
      };
    },
    owed: () => owedAtStop(metering, rateLimiter, failureLog, {}),
    async stop() {
      loopLag.stop();
      router.close();
      const before = {
        rate: rateLimiter.stats().dropped,
        failures: failureLog.stats().examplesDropped,
      };
      try {
        // The listeners closed first, so every meter has finished. Each last send (sticky
        // writes, the rate windows, metering's final attempt, the failure examples) is bounded
        // by the request deadline, and they go together: a Redis that is gone costs the stop one
        // deadline, not one per writer.
        await Promise.all([
          router.drain(),
          rateLimiter.close(),
          metering.close(),
          failureLog.close(),
        ]);
      } finally {
        if (ownRedis) redis.disconnect();
      }
      // One line with what Redis did not take (sizes only), whether or not anything is owed.
      const owed = owedAtStop(metering, rateLimiter, failureLog, before);
      const unsent = Object.values(owed).some((count) => count > 0);
      const message = unsent
        ? "Final sends: some counts not sent to Redis"
        : "Final sends: all sent";
      (unsent ? logger.warn : logger.info).call(logger, message, { isolate, ...owed });
    },
  };
}

/**
 * What one isolate's writers still owe Redis (counts, never contents). A type, not an interface:
 * it is read as a record of counts (RoutingCore.owed).
 */
export type OwedAtStop = {
  metering_parts_owed: number;
  metering_rows_owed: number;
  rate_limit_requests_dropped: number;
  failure_examples_dropped: number;
};

function owedAtStop(
  metering: RequestMetering,
  rateLimiter: RateLimiter,
  failureLog: FailureLog,
  before: { rate?: number; failures?: number },
): OwedAtStop {
  const owed = metering.owed();
  const rate = rateLimiter.stats();
  const failures = failureLog.stats();
  return {
    metering_parts_owed: owed.parts,
    metering_rows_owed: owed.rows,
    // Dropped during the stop (a write that failed), plus whatever is still waiting.
    rate_limit_requests_dropped: rate.dropped - (before.rate ?? rate.dropped) +
      rate.pendingRequests,
    failure_examples_dropped: failures.examplesDropped -
      (before.failures ?? failures.examplesDropped) +
      failures.pendingExamples,
  };
}

/** The main isolate's core: its own isolate core plus the feed follower, once per process. */
export interface WiredCore extends RoutingCore {
  readonly router: CoreRouter;
  /** What the main isolate's writers owe Redis now (the workers log their own at their stop). */
  owed(): OwedAtStop;
  /**
   * Hands every feed applied from now on (as its delta) to `receiver`, before the first one
   * binds the listeners: the process's other isolates build their snapshots from it.
   */
  shareWith(receiver: (delta: SectionsDelta) => void): void;
  /** Hands every quarantine the main isolate's rate limiter trips to `receiver` (the workers). */
  shareTripsWith(receiver: (proxyId: string, untilMs: number) => void): void;
  /** When the follower last read the feed (its buffer goes to the worker isolates). */
  readonly freshness: FeedFreshness;
}

export async function buildRoutingCore(
  settings: GatewaySettings,
  logger: Logger,
  instance: string,
): Promise<WiredCore> {
  const feedKeys = await deriveFeedKeys(settings.internalSecret);
  const redis = connectRedis(settings, `octoprox-gateway:${instance}`);
  const keys = redisKeys(settings.redisPrefix);
  let shareTrip: ((proxyId: string, untilMs: number) => void) | undefined;
  const freshness = new FeedFreshness(settings.feedMaxStaleMs);
  const isolate = await buildIsolateCore(settings, logger, instance, {
    redis,
    shareTrip: (proxyId, untilMs) => shareTrip?.(proxyId, untilMs),
    freshness,
  });
  const { router, guard, admissionSteps } = isolate;
  let share: ((delta: SectionsDelta) => void) | undefined;
  /** The sections the other isolates have: each delta is taken against them. */
  let shared: FeedSections | undefined;

  let markApplied: () => void = () => {};
  let refuseStart: (error: Error) => void = () => {};
  const firstApplied = new Promise<void>((resolve, reject) => {
    markApplied = resolve;
    refuseStart = reject;
  });
  const strict = listensBeyondLoopback(settings.host);
  /** Open projects already warned of (strict mode), so each is logged once while it stays so. */
  let warnedOpen = new Set<string>();
  const follower = new FeedFollower({
    redis,
    keys,
    feedKeys,
    stopWaitMs: settings.redisRequestTimeoutMs,
    // With a bound on staleness, a gateway whose reads succeed must read well within it.
    recheckIntervalMs: freshness.recheckIntervalMs(FEED_RECHECK_MS),
    onRead: () => freshness.read(Date.now()),
    logger: feedLogger(logger),
    apply: (update) => {
      const started = performance.now();
      const snapshot = router.apply(update.sections);
      if (share !== undefined) {
        try {
          share(sectionsDelta(shared, snapshot));
          shared = snapshot.sections;
        } catch (error) {
          // The other isolates keep their last feed; the next delta is taken against it.
          logger.error("Handing the feed to the other isolates failed", { error });
        }
      }
      logger.info(update.first ? "First feed applied" : "Feed applied", {
        digest: update.digest.slice(0, 16),
        changed: update.changed.size,
        applyMs: Math.round((performance.now() - started) * 100) / 100,
        projects: snapshot.projectsById.size,
      });
      if (strict && snapshot.stats.projectsRebuilt) {
        const open = openProjects(snapshot);
        if (update.first && open.length > 0) {
          // The listeners never bind: the process stops with this one line (gateway.ts).
          refuseStart(
            new StartRefused(
              "Refusing to start: a project can be used without a password from any address " +
                "(strict mode: the gateway listens beyond loopback)",
              { projects: describeProjects(open), host: settings.host },
            ),
          );
          return;
        }
        const newly = open.filter((entry) => !warnedOpen.has(entry.id));
        if (newly.length > 0) {
          logger.warn(
            "Strict mode: password-less access refused for projects anyone could use without a " +
              "password",
            { projects: describeProjects(newly) },
          );
        }
        warnedOpen = new Set(open.map((entry) => entry.id));
      }
      markApplied();
    },
  });

  const deadlineMs = settings.redisRequestTimeoutMs;
  return {
    router,
    guard,
    admissionSteps,
    hooks: isolate.hooks,
    firstApplied,
    instances: {
      write: (registration, snapshotJson) =>
        withDeadline(
          "heartbeat write",
          deadlineMs,
          () => writeInstanceKeys(redis, keys, instance, registration, snapshotJson),
        ),
      withdraw: () =>
        withDeadline(
          "heartbeat withdrawal",
          deadlineMs,
          () => withdrawInstanceKeys(redis, keys, instance),
        ),
    },
    feedState() {
      const stats = follower.stats();
      const appliedMs = stats.applied_at === null ? null : Date.parse(stats.applied_at);
      return {
        applied_digest: stats.applied_digest,
        applied_at: stats.applied_at,
        compiled_at: stats.compiled_at,
        apply_age_ms: appliedMs === null ? null : Math.max(0, Date.now() - appliedMs),
        applies: stats.applies,
        failures: stats.failures,
        consecutive_failures: stats.consecutive_failures,
        last_error: stats.last_error,
        holding: stats.holding,
      };
    },
    freshness,
    unready() {
      const staleMs = freshness.staleForMs(Date.now());
      if (staleMs === undefined) return [];
      return [
        `routing feed stale: not read for ${Math.round(staleMs / 1000)} s ` +
        `(OCTOPROX_FEED_MAX_STALE ${freshness.maxStaleMs / 1000} s); new requests are refused`,
      ];
    },
    isolateState: () => isolate.state(),
    shareWith(receiver) {
      share = receiver;
    },
    shareTripsWith(receiver) {
      shareTrip = receiver;
    },
    start: () => follower.start(),
    owed: () => isolate.owed(),
    async stop() {
      try {
        // Together: each is bounded by the request deadline, so the core's stop takes one.
        await Promise.all([follower.stop(), isolate.stop()]);
      } finally {
        redis.disconnect();
      }
    },
    metrics(others = []) {
      const stats = follower.stats();
      const lines: string[] = [];
      const metric = (name: string, type: string, value: number) => {
        const help = helpLine(name);
        if (help !== undefined) lines.push(help);
        lines.push(`# TYPE ${name} ${type}`, `${name} ${value}`);
      };
      metric("octoprox_gateway_feed_applies_total", "counter", stats.applies);
      metric("octoprox_gateway_feed_failures_total", "counter", stats.failures);
      metric("octoprox_gateway_feed_consecutive_failures", "gauge", stats.consecutive_failures);
      // Only once a feed is applied: before, there is no age to tell (octoprox_gateway_ready).
      if (stats.applied_at !== null && stats.compiled_at !== null) {
        const ageMs = Math.max(0, Date.now() - Date.parse(stats.applied_at));
        metric("octoprox_gateway_feed_applied_age_seconds", "gauge", ageMs / 1000);
        const readAgeMs = freshness.ageMs(Date.now());
        if (readAgeMs !== undefined) {
          metric("octoprox_gateway_feed_read_age_seconds", "gauge", readAgeMs / 1000);
        }
        metric(
          "octoprox_gateway_feed_compiled_timestamp_seconds",
          "gauge",
          Date.parse(stats.compiled_at) / 1000,
        );
      }
      return `${lines.join("\n")}\n` + renderSamples([isolate.samples(), ...others]);
    },
  };
}
