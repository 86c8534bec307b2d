/**
 * What one isolate writes to Redis, each through a batch writer of its own: request metering,
 * the proxies' rate windows, the projects' request-rate buckets and the failure examples; and
 * what they still owe Redis (counts, never contents) when the isolate stops.
 */
import type { GatewayRedis } from "../../shared/redis/contract.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import type { GatewaySettings } from "../../shared/settings.ts";
import type { CoreRouter } from "../../shared/routing/router.ts";
import { RequestRateLimiter } from "../limits/request-rate.ts";
import { FailureLog } from "../metering/failure-log.ts";
import { MitmCaptureLog } from "../metering/mitm-captures.ts";
import { PoolEvidence } from "../metering/pool-evidence.ts";
import { PoolHolds } from "../metering/pool-holds.ts";
import { ConnectorKind } from "../../shared/roles.ts";
import {
  loadMeteringScript,
  loadProjectRateScript,
  loadRateWindowScript,
} from "../metering/lua.ts";
import { randomSuffix, RequestMetering } from "../metering/metering.ts";
import { RateLimiter } from "../metering/rate-limiter.ts";
import type { Logger } from "../base/log.ts";

export interface IsolateWriters {
  /** Counts requests through rate-limited connectors into their proxies' windows. */
  rateLimiter: RateLimiter;
  /** Spends a project's request rate from tokens leased from its Redis bucket. */
  requestRate: RequestRateLimiter;
  /** Keeps examples of this isolate's failed requests. */
  failureLog: FailureLog;
  /** Writes this isolate's intercepted exchanges to their projects' Inspector streams. */
  captures: MitmCaptureLog;
  /** Reports connect failures through pool proxies to their pool job. */
  poolEvidence: PoolEvidence;
  /** Reports what the process holds through pool proxies (the main isolate's alone). */
  poolHolds?: PoolHolds;
  /** This isolate's request metering, also its transfer hooks. */
  metering: RequestMetering;
}

export interface IsolateWritersOptions {
  settings: GatewaySettings;
  logger: Logger;
  redis: GatewayRedis;
  keys: RedisKeys;
  router: CoreRouter;
  /** The isolate as a writer: `<instance>:<isolate>`. */
  writer: string;
  /** Hands a quarantine this isolate's rate limiter tripped to the process's other isolates. */
  shareTrip?: (proxyId: string, untilMs: number) => void;
  /** The process's instance id, given to the main isolate: it reports the process's holds. */
  mainOf?: string;
}

/** The writers, built but not started (the isolate core starts metering and the failure log). */
export async function buildIsolateWriters(o: IsolateWritersOptions): Promise<IsolateWriters> {
  const { settings, logger, redis, keys, router } = o;
  // Each finished request through a rate-limited connector goes to its proxy's window in Redis
  // (a held write, never awaited by the request); a trip excludes the proxy here at once.
  const rateLimiter = new RateLimiter({
    redis,
    keys,
    script: await loadRateWindowScript(),
    writer: `${o.writer}:${randomSuffix()}`,
    requestTimeoutMs: settings.redisRequestTimeoutMs,
    tripped: (proxyId, untilMs) => {
      router.quarantineLocally(proxyId, untilMs);
      o.shareTrip?.(proxyId, untilMs);
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
  // Connect failures through provider-API proxies, for their pool job, every second.
  const poolEvidence = new PoolEvidence({
    redis,
    keys,
    isPool: (connectorId) =>
      router.snapshot?.connectors.get(connectorId)?.connector.kind === ConnectorKind.providerApi,
    writeTimeoutMs: settings.redisRequestTimeoutMs,
    logger,
  });
  // Intercepted exchanges for the Inspector, every second, by a held write.
  const captures = new MitmCaptureLog({
    redis,
    keys,
    writeTimeoutMs: settings.redisRequestTimeoutMs,
    logger,
  });
  const metering = await buildMetering(o, rateLimiter, failureLog, poolEvidence, captures);
  // What the process holds through pool proxies, for the refill plans, every second.
  const poolHolds = o.mainOf === undefined ? undefined : new PoolHolds({
    redis,
    keys,
    instance: o.mainOf,
    snapshot: () => router.snapshot,
    writeTimeoutMs: settings.redisRequestTimeoutMs,
  });
  return { rateLimiter, requestRate, failureLog, captures, poolEvidence, poolHolds, metering };
}

/**
 * Counts in memory per proxy, project, connector and host; one round trip every 5 s. Each
 * isolate is a writer of its own, so its batches are applied once whatever the others do.
 */
async function buildMetering(
  o: IsolateWritersOptions,
  rateLimiter: RateLimiter,
  failureLog: FailureLog,
  evidence: PoolEvidence,
  captures: MitmCaptureLog,
): Promise<RequestMetering> {
  const { router } = o;
  return new RequestMetering({
    redis: o.redis,
    keys: o.keys,
    script: await loadMeteringScript(),
    instance: o.writer,
    logger: o.logger,
    // A stop's final attempt gets the request deadline, like every other last send to Redis.
    closeTimeoutMs: o.settings.redisRequestTimeoutMs,
    rateLimiter,
    // A running transfer through a connector blocked with the interrupt action stops at its
    // next report (the snapshot in force says so).
    interrupts: (connectorId, projectId) => router.interrupts(connectorId, projectId),
    trafficLimits: {
      connector: (connectorId) => router.trafficLimited(connectorId),
      project: (projectId) => router.quotaLimited(projectId),
    },
    failureLog,
    evidence,
    captures,
  });
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

/** What the writers had dropped so far: a stop counts only what it drops on top. */
export interface DroppedBefore {
  rate?: number;
  failures?: number;
}

export function droppedSoFar(writers: IsolateWriters): DroppedBefore {
  return {
    rate: writers.rateLimiter.stats().dropped,
    failures: writers.failureLog.stats().examplesDropped,
  };
}

export function owedAtStop(writers: IsolateWriters, before: DroppedBefore): OwedAtStop {
  const owed = writers.metering.owed();
  const rate = writers.rateLimiter.stats();
  const failures = writers.failureLog.stats();
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
