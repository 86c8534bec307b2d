/**
 * The delivery back-off: the base delay after the first failure, doubling to an hour, and no
 * try later than a day after the delivery was owed (given up instead); the loop's poll from its
 * base delay.
 */
import { describe, expect, test } from "vitest";
import { GIVE_UP_AFTER_MS, MAX_RETRY_DELAY_MS, nextTryAt } from "../../control/alerts/backoff.ts";
import { deliveryPollMs } from "../../control/alerts/deliverer.ts";

describe("the delivery back-off", () => {
  test("doubles from the base delay to an hour", () => {
    const delays = [1, 2, 3, 4, 5].map((failures) => nextTryAt(100, failures, 0, 0));
    expect(delays).toEqual([100, 200, 400, 800, 1600]);
    expect(nextTryAt(30_000, 1, 0, 0)).toBe(30_000);
    expect(nextTryAt(30_000, 8, 0, 0)).toBe(MAX_RETRY_DELAY_MS);
    expect(nextTryAt(30_000, 40, 0, 0)).toBe(MAX_RETRY_DELAY_MS);
  });

  test("gives up rather than try past a day after the delivery was owed", () => {
    const owedAt = 1_000_000;
    const late = owedAt + GIVE_UP_AFTER_MS - MAX_RETRY_DELAY_MS;
    expect(nextTryAt(30_000, 20, owedAt, late)).toBe(owedAt + GIVE_UP_AFTER_MS);
    expect(nextTryAt(30_000, 20, owedAt, late + 1)).toBeUndefined();
  });

  test("a production schedule makes about 30 tries in its day", () => {
    let nowMs = 0;
    let tries = 1;
    for (;;) {
      const next = nextTryAt(30_000, tries, 0, nowMs);
      if (next === undefined) break;
      nowMs = next;
      tries += 1;
    }
    expect(tries).toBeGreaterThan(25);
    expect(tries).toBeLessThan(35);
  });

  test("the delivery loop polls a tenth of the base delay, from 50 ms to a second", () => {
    expect(deliveryPollMs(100)).toBe(50);
    expect(deliveryPollMs(5_000)).toBe(500);
    expect(deliveryPollMs(30_000)).toBe(1000);
  });
});
