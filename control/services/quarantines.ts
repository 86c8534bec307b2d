/**
 * Quarantines as the api sees them: the gateways' rate limiters trip them into one sorted set
 * (proxy id scored by the epoch ms it rests until), and the api reads them softly for its views
 * and lifts them. A lift and the runtime entry announcing it go in one MULTI, so the controller
 * never reads the entry without the lift, and the next feed frees the proxy on every gateway.
 *
 * Reads are Redis only and come after the Postgres read they decorate is over, so a slow Redis
 * never holds a pooled Postgres connection; without Redis a view shows no quarantines (logged)
 * and never fails for it. A lift writes Redis alone, so without Redis it is a 503; the lift an
 * edit of a connector's rate limits owes reads the connector's proxy ids first.
 */
import { ConflictError, errorText } from "../../shared/errors.ts";
import { STREAM_CAPS } from "../../shared/redis-keys.ts";
import type { ControlDeps } from "../core/deps.ts";
import { redisDeadline } from "../core/redis.ts";
import type { ServiceDeps } from "../core/store.ts";
import { connectorProxyIds } from "./proxies.ts";

type QuarantineDeps = Pick<ControlDeps, "redis" | "keys" | "settings" | "logger">;

/**
 * Runtime entry kinds the control plane appends (the gateways append `quarantine` when they trip
 * one; the pool job appends `pool` when a provider-API pool's routed entries changed).
 */
export const RuntimeEntryKind = {
  quarantine: "quarantine",
  quarantineLifted: "quarantine_lifted",
  pool: "pool",
} as const;

/** A proxy's quarantine as a view shows it. */
export interface QuarantineView {
  quarantined: boolean;
  /** Whole seconds left, rounded up; 0 when not quarantined. */
  quarantine_remaining_seconds: number;
}

const NOT_QUARANTINED: QuarantineView = Object.freeze({
  quarantined: false,
  quarantine_remaining_seconds: 0,
});

export function quarantineView(untilMs: number | undefined, nowMs: number): QuarantineView {
  if (untilMs === undefined || untilMs <= nowMs) return NOT_QUARANTINED;
  return { quarantined: true, quarantine_remaining_seconds: Math.ceil((untilMs - nowMs) / 1000) };
}

/**
 * Each proxy's quarantine end (epoch ms) for those quarantined now; an empty map, logged, when
 * Redis does not answer within the request deadline.
 */
export async function readQuarantines(
  deps: QuarantineDeps,
  proxyIds: readonly string[],
  nowMs = Date.now(),
): Promise<Map<string, number>> {
  const found = new Map<string, number>();
  if (proxyIds.length === 0) return found;
  try {
    const scores = await redisDeadline(
      deps.settings.redisRequestTimeoutMs,
      () => deps.redis.zmscore(deps.keys.proxyQuarantined, ...proxyIds),
    );
    scores.forEach((score, i) => {
      const untilMs = score === null ? NaN : Number(score);
      if (untilMs > nowMs) found.set(proxyIds[i], untilMs);
    });
  } catch (error) {
    deps.logger.warn(
      { what: "quarantines", error: errorText(error) },
      "Runtime state unavailable, shown without it",
    );
  }
  return found;
}

/** Proxies lifted per MULTI: each a ZREM and a runtime entry. */
const LIFT_BATCH = 500;

/**
 * Ends the quarantines of those of `proxyIds` quarantined now, each with its runtime entry in the
 * same MULTI as its removal; answers how many. Redis not answering is StoreUnavailableError.
 */
export async function liftQuarantines(
  deps: QuarantineDeps,
  proxyIds: readonly string[],
  nowMs = Date.now(),
): Promise<number> {
  const { redis, keys } = deps;
  const deadlineMs = deps.settings.redisRequestTimeoutMs;
  let lifted = 0;
  for (let start = 0; start < proxyIds.length; start += LIFT_BATCH) {
    const batch = proxyIds.slice(start, start + LIFT_BATCH);
    const scores = await redisDeadline(
      deadlineMs,
      () => redis.zmscore(keys.proxyQuarantined, ...batch),
    );
    const resting = batch.filter((_, i) => scores[i] !== null && Number(scores[i]) > nowMs);
    if (resting.length === 0) continue;
    const multi = redis.multi().zrem(keys.proxyQuarantined, ...resting);
    for (const proxyId of resting) {
      multi.xadd(
        keys.runtimeStream,
        "MAXLEN",
        "~",
        STREAM_CAPS.runtime,
        "*",
        "kind",
        RuntimeEntryKind.quarantineLifted,
        "ref",
        proxyId,
      );
    }
    const replies = await redisDeadline(deadlineMs, () => multi.exec());
    const failed = replies?.find(([error]) => error !== null)?.[0];
    if (failed) throw failed;
    lifted += resting.length;
  }
  return lifted;
}

/**
 * Ends a proxy's quarantine now. ConflictError (400) when it is not quarantined; a Redis that
 * does not answer is StoreUnavailableError (503).
 */
export async function liftQuarantine(
  deps: QuarantineDeps,
  proxyId: string,
  nowMs = Date.now(),
): Promise<void> {
  if (await liftQuarantines(deps, [proxyId], nowMs) === 0) {
    throw new ConflictError("The proxy is not quarantined");
  }
}

/**
 * The follow-up an edit of a connector's rate limits owes: the quarantines the old limits tripped
 * on its proxies are lifted, since they were judged by limits that no longer hold. Never throws:
 * the edit stands when Redis is away, and the quarantines then end at their own time (logged).
 */
export async function liftConnectorQuarantines(
  deps: QuarantineDeps & ServiceDeps,
  connectorId: string,
): Promise<void> {
  try {
    const lifted = await liftQuarantines(deps, await connectorProxyIds(deps, connectorId));
    if (lifted > 0) {
      deps.logger.info(
        { connector: connectorId, lifted },
        "Rate limits edited; the quarantines they tripped are lifted",
      );
    }
  } catch (error) {
    deps.logger.warn(
      { connector: connectorId, error: errorText(error) },
      "Rate limits edited, but their quarantines were not lifted; they end at their own time",
    );
  }
}
