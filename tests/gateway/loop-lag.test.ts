/**
 * Loop lag (shared/loop-lag.ts): each minute's worst and mean lateness of a half-second timer,
 * the last full minute shown, a tick over a second late reported as it comes, once a minute at
 * most; and the timer on a real event loop that a busy stretch of work holds up.
 */
import { describe, expect, it } from "vitest";
import { LoopLagTimer, LoopLagWindows } from "../../shared/loop-lag.ts";
import { waitUntil } from "../../testkit/wait.ts";

describe("loop lag windows", () => {
  it("show the current minute until one is full, then the last full one, and report a late tick once a minute", () => {
    let now = Date.UTC(2030, 0, 1, 12, 0, 0);
    const reported: [number, number][] = [];
    const windows = new LoopLagWindows({
      now: () => now,
      lagging: (worst, mean) => reported.push([worst, mean]),
    });
    expect(windows.snapshot()).toEqual({
      window_started_at: "2030-01-01T12:00:00.000Z",
      worst_ms: 0,
      mean_ms: 0,
      samples: 0,
    });
    for (const late of [2, 4, 1_500, -3, Number.NaN, 1_200]) {
      now += 500;
      windows.note(late);
    }
    // Reported as it came, with the mean so far; the second late tick of the minute is not.
    expect(reported).toEqual([[1_500, 502]]);
    // The minute in progress, until it is over: negative and unreadable lateness counts as none.
    expect(windows.snapshot()).toEqual({
      window_started_at: "2030-01-01T12:00:00.000Z",
      worst_ms: 1_500,
      mean_ms: 451,
      samples: 6,
    });
    now += 60_000;
    windows.note(7);
    expect(reported).toEqual([[1_500, 502]]);
    // The full minute stays what is shown while the next one fills.
    now += 500;
    windows.note(9);
    expect(windows.snapshot().worst_ms).toBe(1_500);
    now += 60_000;
    windows.note(0);
    expect(windows.snapshot()).toEqual({
      window_started_at: "2030-01-01T12:01:03.000Z",
      worst_ms: 9,
      mean_ms: 8,
      samples: 2,
    });
    // That minute was fine: nothing more reported.
    expect(reported).toHaveLength(1);
  });
});

describe("the loop lag timer", () => {
  it("measures a stretch of work that holds the event loop up", async () => {
    const reported: number[] = [];
    const timer = new LoopLagTimer({
      intervalMs: 20,
      windowMs: 300,
      warnMs: 100,
      lagging: (worst) => reported.push(worst),
    });
    timer.start();
    try {
      // Wait for a tick, then hold the loop for 250 ms: the next tick comes that late.
      await waitUntil(() => timer.snapshot().samples > 0, { message: "a first tick" });
      const until = Date.now() + 250;
      while (Date.now() < until) {
        // Busy: no timer fires meanwhile.
      }
      await waitUntil(() => reported.length > 0, { message: "the late tick reported" });
      expect(reported[0]).toBeGreaterThanOrEqual(200);
      // The snapshot shows it once its window is the last full one.
      await waitUntil(() => timer.snapshot().worst_ms >= 200, { message: "the late window shown" });
    } finally {
      timer.stop();
      timer.stop();
    }
  });
});
