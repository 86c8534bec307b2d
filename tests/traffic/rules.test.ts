/**
 * The traffic rules: periods in UTC (a day, a week from its weekday, a month from its day), the
 * usage window cut at a reset inside the period, the status of a total, the block decision and
 * its end, and the cost.
 */
import { describe, expect, it } from "vitest";
import {
  blockedNow,
  changesDecision,
  costOf,
  decide,
  periodBounds,
  type TrafficLimit,
  trafficStatus,
  usageWindow,
} from "../../control/traffic/rules.ts";

const at = (text: string) => Date.parse(text);
const iso = (ms: number) => new Date(ms).toISOString();

function limit(over: Partial<TrafficLimit> = {}): TrafficLimit {
  return {
    limit_bytes: 1_000,
    period: "month",
    reset_day: 1,
    action: "block",
    warn_percent: 80,
    price_per_gb: null,
    currency: "USD",
    ...over,
  };
}

describe("traffic periods", () => {
  it("a day runs midnight to midnight, UTC", () => {
    const { startMs, endMs } = periodBounds(limit({ period: "day" }), at("2026-12-01T23:59:59Z"));
    expect([iso(startMs), iso(endMs)]).toEqual([
      "2026-12-01T00:00:00.000Z",
      "2026-12-02T00:00:00.000Z",
    ]);
  });

  it("a week starts on its reset weekday (1 Monday to 7 Sunday)", () => {
    // 2026-12-01 is a Tuesday.
    const tuesday = at("2026-12-01T10:00:00Z");
    const monday = periodBounds(limit({ period: "week", reset_day: 1 }), tuesday);
    expect(iso(monday.startMs)).toBe("2026-11-30T00:00:00.000Z");
    expect(iso(monday.endMs)).toBe("2026-12-07T00:00:00.000Z");
    const sunday = periodBounds(limit({ period: "week", reset_day: 7 }), tuesday);
    expect(iso(sunday.startMs)).toBe("2026-11-29T00:00:00.000Z");
    const sameDay = periodBounds(limit({ period: "week", reset_day: 2 }), tuesday);
    expect(iso(sameDay.startMs)).toBe("2026-12-01T00:00:00.000Z");
    const wednesday = periodBounds(limit({ period: "week", reset_day: 3 }), tuesday);
    expect(iso(wednesday.startMs)).toBe("2026-11-25T00:00:00.000Z");
    expect(iso(wednesday.endMs)).toBe("2026-12-02T00:00:00.000Z");
  });

  it("a month starts on its reset day, across a year's end", () => {
    const early = periodBounds(limit({ reset_day: 15 }), at("2027-01-10T00:00:00Z"));
    expect([iso(early.startMs), iso(early.endMs)]).toEqual([
      "2026-12-15T00:00:00.000Z",
      "2027-01-15T00:00:00.000Z",
    ]);
    const late = periodBounds(limit({ reset_day: 28 }), at("2027-02-28T00:00:00Z"));
    expect([iso(late.startMs), iso(late.endMs)]).toEqual([
      "2027-02-28T00:00:00.000Z",
      "2027-03-28T00:00:00.000Z",
    ]);
  });

  it("the usage window starts at a reset inside the period, and ignores one before it", () => {
    const now = at("2026-12-20T00:00:00Z");
    const reset = at("2026-12-10T12:00:00Z");
    expect(usageWindow(limit(), reset, now).startMs).toBe(reset);
    expect(usageWindow(limit(), at("2026-11-20T00:00:00Z"), now).startMs).toBe(
      at("2026-12-01T00:00:00Z"),
    );
    expect(usageWindow(limit(), null, now).endMs).toBe(at("2027-01-01T00:00:00Z"));
  });
});

describe("traffic decisions", () => {
  const window = { startMs: 0, endMs: 5_000 };

  it("are owed by an edit of what decide reads, not of the price, currency or warning line", () => {
    expect(changesDecision(null, limit())).toBe(true);
    expect(changesDecision(limit(), null)).toBe(true);
    expect(changesDecision(null, null)).toBe(false);
    for (
      const edit of [
        { limit_bytes: 2_000 },
        { limit_bytes: null },
        { period: "day" as const },
        { reset_day: 15 },
        { action: "alert" as const },
      ]
    ) {
      expect(changesDecision(limit(), limit(edit)), JSON.stringify(edit)).toBe(true);
    }
    expect(changesDecision(limit(), limit({ price_per_gb: 3, currency: "EUR", warn_percent: 50 })))
      .toBe(false);
  });

  it("a status of ok, warning past the warning line, limit at the limit", () => {
    expect(trafficStatus(limit(), 799)).toBe("ok");
    expect(trafficStatus(limit(), 800)).toBe("warning");
    expect(trafficStatus(limit(), 1_000)).toBe("limit");
    expect(trafficStatus(limit({ limit_bytes: null }), 10 ** 12)).toBe("ok");
  });

  it("blocks at the limit until the window's end with block or interrupt, never with alert", () => {
    expect(decide(limit(), window, 1_000)).toEqual({ blocked: true, untilMs: 5_000 });
    expect(decide(limit({ action: "interrupt" }), window, 2_000)).toEqual({
      blocked: true,
      untilMs: 5_000,
    });
    expect(decide(limit({ action: "alert" }), window, 2_000)).toEqual({
      blocked: false,
      reason: "alert_only",
    });
    expect(decide(limit(), window, 999)).toEqual({ blocked: false, reason: "under_limit" });
    expect(decide(limit({ limit_bytes: null }), window, 5)).toEqual({
      blocked: false,
      reason: "no_limit",
    });
    expect(decide(null, undefined, 5)).toEqual({ blocked: false, reason: "no_limit" });
    expect(decide(undefined, undefined, 0)).toEqual({ blocked: false, reason: "deleted" });
  });

  it("a stored block holds until its end, the end exclusive", () => {
    expect(blockedNow(JSON.stringify({ until_ms: 100 }), 99)).toBe(100);
    expect(blockedNow(JSON.stringify({ until_ms: 100 }), 100)).toBeUndefined();
    expect(blockedNow("not json", 0)).toBeUndefined();
    expect(blockedNow(null, 0)).toBeUndefined();
  });

  it("costs bytes in decimal GB times the price", () => {
    expect(costOf(limit({ price_per_gb: 2.5 }), 3_000_000_000)).toBe(7.5);
    expect(costOf(limit(), 3_000_000_000)).toBeNull();
  });
});
