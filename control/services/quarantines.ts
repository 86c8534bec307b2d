/**
 * Quarantines as the api sees them: the gateways' rate limiters trip them into one sorted set
 * (proxy id scored by the epoch ms it rests until), and the api reads them softly for its views
 * and lifts them. A lift and the runtime entry announcing it go in one MULTI, so the controller
 * never reads the entry without the lift, and the next feed frees the proxy on every gateway.
 *
 * Reads are Redis only and come after the Postgres read they decorate is over, so a slow Redis
 * never holds a pooled Postgres connection; without Redis a view shows no quarantines (logged)
 * and never fails for it. A lift writes Redis alone, so without Redis it is a 503.
 */
import { ConflictError, errorText } from "../../shared/errors.ts";
import { STREAM_CAPS } from "../../shared/redis-keys.ts";
import type { ControlDeps } from "../core/deps.ts";
import { redisDeadline } from "../core/redis.ts";

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

/**
 * Ends a proxy's quarantine now. ConflictError (400) when it is not quarantined; a Redis that
 * does not answer is StoreUnavailableError (503).
 */
export async function liftQuarantine(
  deps: QuarantineDeps,
  proxyId: string,
  nowMs = Date.now(),
): Promise<void> {
  const { redis, keys } = deps;
  const deadlineMs = deps.settings.redisRequestTimeoutMs;
  const score = await redisDeadline(deadlineMs, () => redis.zscore(keys.proxyQuarantined, proxyId));
  if (score === null || Number(score) <= nowMs) {
    throw new ConflictError("The proxy is not quarantined");
  }
  const replies = await redisDeadline(
    deadlineMs,
    () =>
      redis.multi()
        .zrem(keys.proxyQuarantined, proxyId)
        .xadd(
          keys.runtimeStream,
          "MAXLEN",
          "~",
          STREAM_CAPS.runtime,
          "*",
          "kind",
          RuntimeEntryKind.quarantineLifted,
          "ref",
          proxyId,
        )
        .exec(),
  );
  const failed = replies?.find(([error]) => error !== null)?.[0];
  if (failed) throw failed;
}
