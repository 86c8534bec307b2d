/**
 * The last health check of each proxy, as the api shows it: the health job keeps it in the
 * proxy's soft-health hash in Redis (`checked_at`, epoch ms), never in Postgres. Read after the
 * Postgres read it decorates, like the quarantines; without Redis a view shows no check time
 * (logged) and never fails for it.
 */
import { errorText } from "../../shared/errors.ts";
import type { ControlDeps } from "../core/deps.ts";
import { redisDeadline } from "../core/redis.ts";

type HealthViewDeps = Pick<ControlDeps, "redis" | "keys" | "settings" | "logger">;

/** Each proxy's last check (epoch ms), for those checked within the soft health's day. */
export async function readLastChecks(
  deps: HealthViewDeps,
  proxyIds: readonly string[],
): Promise<Map<string, number>> {
  const found = new Map<string, number>();
  if (proxyIds.length === 0) return found;
  try {
    const pipeline = deps.redis.pipeline();
    for (const id of proxyIds) pipeline.hget(deps.keys.proxyHealth(id), "checked_at");
    const replies = await redisDeadline(
      deps.settings.redisRequestTimeoutMs,
      async () => (await pipeline.exec()) ?? [],
    );
    replies.forEach(([error, value], i) => {
      const ms = error === null && typeof value === "string" ? Number(value) : NaN;
      if (Number.isFinite(ms) && ms > 0) found.set(proxyIds[i], ms);
    });
  } catch (error) {
    deps.logger.warn(
      { what: "health checks", error: errorText(error) },
      "Runtime state unavailable, shown without it",
    );
  }
  return found;
}

/** A last check as an answer carries it: ISO time, or null when none is known. */
export function lastCheckView(ms: number | undefined): string | null {
  return ms === undefined ? null : new Date(ms).toISOString();
}
