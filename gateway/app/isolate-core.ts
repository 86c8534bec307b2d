/**
 * What every isolate serving the process builds for itself (the main one and each worker of
 * gateway/app/isolates.ts): its router, destination guard, admission steps and Redis writers.
 * Whatever a router, guard or hooks need per isolate (a Redis client for sticky bindings, say)
 * belongs here; what runs once per process (the feed follower) is the routing core's
 * (routing-core.ts).
 */
import { DomainCounts } from "../blocking/domain-counts.ts";
import { Cooldowns } from "../blocking/cooldowns.ts";
import { Escalations } from "../blocking/escalations.ts";
import { loadEscalationScript } from "../blocking/lua.ts";
import { deriveFeedKeys } from "../../shared/feed/codec.ts";
import { LoopLagTimer } from "../../shared/loop-lag.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import type { GatewaySettings } from "../../shared/settings.ts";
import type { DestinationGuard, Router } from "../../shared/routing/contract.ts";
import { createDestinationGuard } from "../../shared/routing/destination-guard.ts";
import type { Dispatch } from "../../shared/routing/dispatch.ts";
import type { FeedFreshness } from "../../shared/routing/feed-freshness.ts";
import type { CoreRouter } from "../../shared/routing/router.ts";
import { clientAddressStep } from "../access/client-address.ts";
import { headerOptionsStep } from "../access/header-options.ts";
import { listensBeyondLoopback } from "../access/strict-mode.ts";
import type { AdmissionStep } from "../base/admission.ts";
import type { GeoView } from "../geo/contract.ts";
import { buildPreflight, type Preflight } from "../geo/preflight.ts";
import type { Logger } from "../base/log.ts";
import type { MetricSample } from "../base/metrics.ts";
import type { TransferHooks } from "../base/transfer-hooks.ts";
import { projectLimitsStep } from "../limits/project-limits-step.ts";
import type { RequestRateLimiter } from "../limits/request-rate.ts";
import type { FailureLog } from "../metering/failure-log.ts";
import type { RequestMetering } from "../metering/metering.ts";
import type { RateLimiter } from "../metering/rate-limiter.ts";
import { dnsResolver } from "../net/io/resolve.ts";
import { isolateSamples, type IsolateState, isolateState } from "./isolate-report.ts";
import { buildIsolateRouter } from "./isolate-router.ts";
import {
  buildIsolateWriters,
  droppedSoFar,
  type IsolateWriters,
  type OwedAtStop,
  owedAtStop,
} from "./isolate-writers.ts";
import { connectRedis, type RedisConnection } from "../redis/connection.ts";

/** What one isolate serves with. */
export interface IsolateCore {
  router: CoreRouter;
  /** The router the listeners ask: the core's, behind preflight (gateway/geo/preflight.ts). */
  serving: Router;
  guard: DestinationGuard;
  /**
   * Admission steps of the core's own (who may use the gateway from where, project limits),
   * which every listener runs between the credentials and the destination guard, in this order
   * (gateway/net/session/admission-steps.ts): the client's address, the header options.
   */
  admissionSteps: readonly AdmissionStep[];
  /**
   * A tunnel device's: the project limits alone (a device is named by its tunnel address and
   * carries its options in the feed, so neither address rules nor header options apply).
   */
  deviceAdmissionSteps: readonly AdmissionStep[];
  hooks?: TransferHooks;
  /** Exits cooled down per site after block verdicts, synced with every gateway. */
  cooldowns: Cooldowns;
  /** What judging found per project and site, written to Redis. */
  domains: DomainCounts;
  /** Where each site of an escalated project stands, shared through Redis. */
  escalations: Escalations;
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
  state(): IsolateState;
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
  /** A Redis connection to use (the main isolate's, shared with the follower); else its own. */
  connection?: RedisConnection;
  /** Tells the isolates of one process apart in Redis client names (0 is the main one). */
  isolate?: number;
  /** Hands a quarantine this isolate's rate limiter tripped to the process's other isolates. */
  shareTrip?: (proxyId: string, untilMs: number) => void;
  /** When the process last read the feed: a worker's shares the main isolate's word. */
  freshness?: FeedFreshness;
  /** The IP databases preflight judges exits with; none: the echo's own word only. */
  geo?: GeoView;
}

/** The router, guard and hooks of one isolate (the main one, or a worker). */
export async function buildIsolateCore(
  settings: GatewaySettings,
  logger: Logger,
  instance: string,
  options: IsolateCoreOptions = {},
): Promise<IsolateCore> {
  const feedKeys = await deriveFeedKeys(settings.internalSecret);
  const isolate = options.isolate ?? 0;
  const connection = options.connection ??
    connectRedis(settings, `octoprox-gateway:${instance}:${isolate}`);
  const redis = connection.redis;
  const keys = redisKeys(settings.redisPrefix);
  const router = buildIsolateRouter({
    settings,
    logger,
    redis,
    keys,
    feedKeys,
    dispatch: options.dispatch,
    freshness: options.freshness,
  });
  const guard = destinationGuard(settings);
  const writers = await buildIsolateWriters({
    settings,
    logger,
    redis,
    keys,
    router,
    writer: `${instance}:${isolate}`,
    shareTrip: options.shareTrip,
    ...(isolate === 0 ? { mainOf: instance } : {}),
  });
  // Checks the exits of the upstreams chosen for projects that ask it, before relaying.
  const preflight = await buildPreflight({
    settings,
    core: router,
    redis,
    keys,
    logger,
    writer: `${instance}:${isolate}`,
    geo: options.geo,
  });
  // Every isolate has an event loop of its own, so each measures its own lag.
  const loopLag = new LoopLagTimer({
    lagging: (lateMs, meanMs) =>
      logger.warn("Event loop lagging", { isolate, late_ms: lateMs, mean_ms: meanMs }),
  });
  const cooldowns = new Cooldowns({ redis, keys, logger });
  const domains = new DomainCounts({
    redis,
    keys,
    logger,
    writeTimeoutMs: settings.redisRequestTimeoutMs,
    topSites: settings.metricsTopSites,
  });
  const escalations = new Escalations({
    redis,
    keys,
    logger,
    script: await loadEscalationScript(),
    tiers: router,
  });
  router.useEscalations(escalations);
  writers.metering.start();
  cooldowns.start();
  domains.start();
  escalations.start();
  writers.failureLog.start();
  writers.captures.start();
  writers.poolEvidence.start();
  writers.poolHolds?.start();
  preflight.start();
  loopLag.start();
  // A client handed in is its owner's to close.
  const ownRedis = options.connection === undefined ? connection : undefined;
  const stopping: IsolateStop = {
    isolate,
    router,
    writers,
    preflight,
    cooldowns,
    domains,
    escalations,
    loopLag,
    logger,
    ownRedis,
  };
  return {
    router,
    serving: preflight.router,
    guard,
    admissionSteps: admissionSteps(settings, router, writers.requestRate),
    deviceAdmissionSteps: [
      projectLimitsStep({ router, dispatch: router.dispatch, rate: writers.requestRate }),
    ],
    hooks: writers.metering,
    cooldowns,
    domains,
    escalations,
    metering: writers.metering,
    rateLimiter: writers.rateLimiter,
    failureLog: writers.failureLog,
    loopLag,
    samples: () => [
      ...isolateSamples(isolate, router, writers, loopLag),
      ...preflight.samples(),
      ...cooldowns.samples(),
      ...domains.samples(),
      ...escalations.samples(),
      ...(ownRedis?.samples() ?? []),
    ],
    state: () => isolateState(isolate, writers, loopLag),
    owed: () => owedAtStop(writers, {}),
    stop: () => stopIsolate(stopping),
  };
}

function destinationGuard(settings: GatewaySettings): DestinationGuard {
  return createDestinationGuard({
    allowCidrs: settings.destinationAllowCidrs,
    resolution: settings.destinationResolution,
    resolve: dnsResolver(),
  });
}

/** Who may use a project from where, then the options its request headers ask, then its limits. */
function admissionSteps(
  settings: GatewaySettings,
  router: CoreRouter,
  rate: RequestRateLimiter,
): AdmissionStep[] {
  return [
    clientAddressStep({
      snapshot: () => router.snapshot,
      strict: listensBeyondLoopback(settings.host),
    }),
    headerOptionsStep(),
    projectLimitsStep({ router, dispatch: router.dispatch, rate }),
  ];
}

/** What an isolate's stop works on. */
interface IsolateStop {
  isolate: number;
  router: CoreRouter;
  writers: IsolateWriters;
  preflight: Preflight;
  cooldowns: Cooldowns;
  domains: DomainCounts;
  escalations: Escalations;
  loopLag: LoopLagTimer;
  logger: Logger;
  /** The isolate's own Redis connection, closed at the end; none when it was handed in. */
  ownRedis: RedisConnection | undefined;
}

async function stopIsolate(s: IsolateStop): Promise<void> {
  const { router, writers, logger } = s;
  s.loopLag.stop();
  router.close();
  const before = droppedSoFar(writers);
  try {
    // The listeners closed first, so every meter has finished. Each last send (sticky
    // writes, the rate windows, metering's final attempt, the failure examples) is bounded
    // by the request deadline, and they go together: a Redis that is gone costs the stop one
    // deadline, not one per writer.
    await Promise.all([
      router.drain(),
      writers.rateLimiter.close(),
      writers.metering.close(),
      writers.failureLog.close(),
      writers.captures.close(),
      writers.poolEvidence.close(),
      writers.poolHolds?.stop(),
      s.preflight.close(),
      s.cooldowns.close(),
      s.domains.close(),
      s.escalations.close(),
    ]);
  } finally {
    s.ownRedis?.close();
  }
  // One line with what Redis did not take (sizes only), whether or not anything is owed.
  const owed = owedAtStop(writers, before);
  const unsent = Object.values(owed).some((count) => count > 0);
  const message = unsent ? "Final sends: some counts not sent to Redis" : "Final sends: all sent";
  (unsent ? logger.warn : logger.info).call(logger, message, { isolate: s.isolate, ...owed });
}
