/**
 * The traffic rules, in one place, for the traffic job's decisions, its log lines and the api's
 * usage answers alike: a limit's period (UTC day, week from a weekday, month from a day of the
 * month), the usage window (the period, cut at a manual reset inside it), the status of a
 * window's total (ok, warning, limit), whether it blocks and until when, and what it costs.
 * A connector's traffic_config and a project's traffic quota share the shape.
 */

export const TRAFFIC_PERIODS = ["day", "week", "month"] as const;
export type TrafficPeriod = (typeof TRAFFIC_PERIODS)[number];

export const TRAFFIC_ACTIONS = ["alert", "block", "interrupt"] as const;
export type TrafficAction = (typeof TRAFFIC_ACTIONS)[number];

/** What a limit is made of (connector traffic_config, project traffic_quota). */
export interface TrafficLimit {
  /** Null: counted and priced, never limited. */
  limit_bytes: number | null;
  period: TrafficPeriod;
  /** Month: 1-28; week: 1 (Monday) to 7 (Sunday); ignored for a day. */
  reset_day: number;
  action: TrafficAction;
  warn_percent: number;
  price_per_gb?: number | null;
  currency?: string;
}

export interface TimeWindow {
  startMs: number;
  /** Exclusive. */
  endMs: number;
}

const DAY_MS = 86_400_000;

/** The period holding `nowMs`, in UTC. */
export function periodBounds(limit: Pick<TrafficLimit, "period" | "reset_day">, nowMs: number) {
  const now = new Date(nowMs);
  const midnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  switch (limit.period) {
    case "day":
      return { startMs: midnight, endMs: midnight + DAY_MS };
    case "week": {
      // getUTCDay: 0 Sunday .. 6 Saturday; reset_day: 1 Monday .. 7 Sunday.
      const today = now.getUTCDay() === 0 ? 7 : now.getUTCDay();
      const back = (today - limit.reset_day + 7) % 7;
      const startMs = midnight - back * DAY_MS;
      return { startMs, endMs: startMs + 7 * DAY_MS };
    }
    case "month": {
      const year = now.getUTCFullYear();
      const month = now.getUTCMonth();
      const day = limit.reset_day;
      const thisMonth = Date.UTC(year, month, day);
      const startMs = nowMs >= thisMonth ? thisMonth : Date.UTC(year, month - 1, day);
      const start = new Date(startMs);
      const endMs = Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, day);
      return { startMs, endMs };
    }
  }
}

/** The window usage counts over: the period, from a manual reset inside it when there is one. */
export function usageWindow(
  limit: Pick<TrafficLimit, "period" | "reset_day">,
  resetAtMs: number | null,
  nowMs: number,
): TimeWindow {
  const period = periodBounds(limit, nowMs);
  if (resetAtMs !== null && resetAtMs > period.startMs && resetAtMs <= nowMs) {
    return { startMs: resetAtMs, endMs: period.endMs };
  }
  return period;
}

export type TrafficStatus = "ok" | "warning" | "limit";

/** The status a window's total gives: at the limit, past the warning line, or neither. */
export function trafficStatus(limit: TrafficLimit, bytes: number): TrafficStatus {
  if (limit.limit_bytes === null) return "ok";
  if (bytes >= limit.limit_bytes) return "limit";
  if (bytes * 100 >= limit.limit_bytes * limit.warn_percent) return "warning";
  return "ok";
}

/** Why a decision lifts or withholds a block (the release log line's reason). */
export type ReleaseReason = "under_limit" | "alert_only" | "no_limit" | "deleted";

export type Decision =
  | { blocked: true; untilMs: number }
  | { blocked: false; reason: ReleaseReason };

/**
 * Whether a window's total blocks: at the limit, with an action that blocks (`block`,
 * `interrupt`), until the window's end. `limit` undefined: the entity is gone.
 */
export function decide(
  limit: TrafficLimit | null | undefined,
  window: TimeWindow | undefined,
  bytes: number,
): Decision {
  if (limit === undefined) return { blocked: false, reason: "deleted" };
  if (limit === null || limit.limit_bytes === null || window === undefined) {
    return { blocked: false, reason: "no_limit" };
  }
  if (trafficStatus(limit, bytes) !== "limit") return { blocked: false, reason: "under_limit" };
  if (limit.action === "alert") return { blocked: false, reason: "alert_only" };
  return { blocked: true, untilMs: window.endMs };
}

/** What `decide` reads of a limit: only an edit of one of these can change a block. */
const DECIDING_FIELDS = ["limit_bytes", "period", "reset_day", "action"] as const;

/**
 * Whether an edit from `before` to `after` can change a decision, so a traffic decision is owed:
 * a limit set or cleared, or one of the fields `decide` reads changed. The price, the currency
 * and the warning line ask for none.
 */
export function changesDecision(
  before: TrafficLimit | null,
  after: TrafficLimit | null,
): boolean {
  if (before === null || after === null) return before !== after;
  return DECIDING_FIELDS.some((field) => before[field] !== after[field]);
}

/** Bytes in decimal GB times the price; null without one. */
export function costOf(limit: Pick<TrafficLimit, "price_per_gb">, bytes: number): number | null {
  const price = limit.price_per_gb;
  if (price === null || price === undefined) return null;
  return Math.round((bytes / 1e9) * price * 10_000) / 10_000;
}

/** A stored block's end, from the blocks hash's value (JSON `{"until_ms": …}` or a number). */
export function storedBlockEnd(value: string | null | undefined): number | undefined {
  if (value === null || value === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return undefined;
  }
  if (typeof parsed === "number" && Number.isFinite(parsed)) return parsed;
  if (typeof parsed === "object" && parsed !== null) {
    const until = (parsed as { until_ms?: unknown }).until_ms;
    if (typeof until === "number" && Number.isFinite(until)) return until;
  }
  return undefined;
}

/** A block in force at `nowMs`: stored, and its period not over (the end exclusive). */
export function blockedNow(value: string | null | undefined, nowMs: number): number | undefined {
  const until = storedBlockEnd(value);
  return until !== undefined && nowMs < until ? until : undefined;
}
