/**
 * A project's demand as the scale job reads it: the requests and rejections its gateways count
 * per minute, in one small Redis hash per project and minute. The rate over the window is the
 * usual sliding-window estimate: the current minute with what it holds so far, the minutes
 * before it in full, and the oldest for the share of it still inside the window, exact while
 * traffic is steady. Levels move with hysteresis, so a rate near a threshold does not flap.
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../../shared/redis-keys.ts";
import { DEMAND_FIELDS, demandMinute, readCounts } from "../../../shared/metric-windows.ts";

export const DemandLevel = { low: "low", medium: "medium", high: "high" } as const;
export type DemandLevel = (typeof DemandLevel)[keyof typeof DemandLevel];
export const DEMAND_LEVELS: readonly DemandLevel[] = Object.values(DemandLevel);

/** Requests a minute per instance at which the level moves (up above, down below). */
export const LEVEL_THRESHOLDS = {
  lowToMedium: 12,
  mediumToLow: 8,
  toHigh: 35,
  highToMedium: 25,
} as const;

export interface Demand {
  /** Requests and rejections a minute over the window (the sliding estimate). */
  ratePerMinute: number;
  /** What the last 60 seconds held, by the same estimate: scale-up needs some. */
  lastMinute: number;
}

/** The demand of `projectId` over the last `windowMinutes` minutes, at `nowMs`. */
export async function readDemand(
  redis: Redis,
  keys: RedisKeys,
  projectId: string,
  windowMinutes: number,
  nowMs: number,
): Promise<Demand> {
  const current = demandMinute(nowMs);
  const pipeline = redis.pipeline();
  // The current minute first, then back to the oldest the window reaches into.
  for (let back = 0; back <= windowMinutes; back++) {
    pipeline.hgetall(keys.demand(projectId, current - back));
  }
  const replies = (await pipeline.exec()) ?? [];
  const perMinute = replies.map(([error, reply]) => {
    if (error) throw error;
    const counts = readCounts(DEMAND_FIELDS, reply as Record<string, string>);
    return counts.requests + counts.rejections;
  });
  return slidingDemand(perMinute, windowMinutes, (nowMs % 60_000) / 60_000);
}

/**
 * The sliding estimate from counts per minute, newest first (`perMinute[0]` the current minute,
 * `elapsed` its share gone by, 0 to 1).
 */
export function slidingDemand(
  perMinute: readonly number[],
  windowMinutes: number,
  elapsed: number,
): Demand {
  const at = (i: number) => perMinute[i] ?? 0;
  let total = at(0);
  for (let back = 1; back < windowMinutes; back++) total += at(back);
  total += at(windowMinutes) * (1 - elapsed);
  return {
    ratePerMinute: total / windowMinutes,
    lastMinute: at(0) + at(1) * (1 - elapsed),
  };
}

/** The level a rate per instance reaches from `previous`, with hysteresis. */
export function nextLevel(previous: DemandLevel, ratePerInstance: number): DemandLevel {
  const t = LEVEL_THRESHOLDS;
  if (ratePerInstance > t.toHigh) return DemandLevel.high;
  let level = previous;
  if (level === DemandLevel.high && ratePerInstance < t.highToMedium) level = DemandLevel.medium;
  if (level === DemandLevel.medium && ratePerInstance < t.mediumToLow) level = DemandLevel.low;
  if (level === DemandLevel.low && ratePerInstance > t.lowToMedium) level = DemandLevel.medium;
  return level;
}

/** The instances a level asks for: the minimum, the midpoint, the maximum. */
export function levelTarget(level: DemandLevel, min: number, max: number): number {
  if (level === DemandLevel.high) return max;
  if (level === DemandLevel.medium) return Math.ceil((min + max) / 2);
  return min;
}

/** A step's size: a third of the range up, a sixth down, one at least. */
export function stepSize(direction: "up" | "down", min: number, max: number): number {
  const range = Math.max(1, max - min);
  return Math.max(1, Math.ceil(range / (direction === "up" ? 3 : 6)));
}
