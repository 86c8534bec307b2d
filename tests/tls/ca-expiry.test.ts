/**
 * The TLS interception CA's expiry notices (shared/tls/ca-expiry.ts), on a clock run by hand: a
 * CA with more than 30 days left says nothing; within 30 days a warning at start and again each
 * day; past its end an error each day; the days left rounded down; stopping ends the checks.
 */
import { describe, expect, test } from "vitest";
import {
  daysLeft,
  EXPIRY_CHECK_INTERVAL_MS,
  EXPIRY_WARNING_DAYS,
  expiryNotice,
  watchExpiry,
} from "../../shared/tls/ca-expiry.ts";

const DAY_MS = 86_400_000;
const START = Date.UTC(2030, 0, 1, 12);

function ca(daysFromStart: number) {
  return { notAfter: new Date(START + daysFromStart * DAY_MS), spkiSha256: "spki=" };
}

describe("expiry notices", () => {
  test("count whole days left, rounded down", () => {
    expect(daysLeft(new Date(START + 30 * DAY_MS - 1), new Date(START))).toBe(29);
    expect(daysLeft(new Date(START + 30 * DAY_MS), new Date(START))).toBe(30);
    expect(daysLeft(new Date(START - 1), new Date(START))).toBe(-1);
  });

  test("say nothing with 30 days or more left, warn within them, and err past the end", () => {
    const now = new Date(START);
    expect(EXPIRY_WARNING_DAYS).toBe(30);
    expect(expiryNotice(ca(400), now)).toBeUndefined();
    expect(expiryNotice(ca(30), now)).toBeUndefined();
    expect(expiryNotice(ca(29.5), now)).toEqual({
      level: "warn",
      msg: "The TLS interception CA expires within 30 days; rotate it (docs/tls-interception.md)",
      fields: {
        not_after: new Date(START + 29.5 * DAY_MS).toISOString(),
        days_left: 29,
        spki_sha256: "spki=",
      },
    });
    expect(expiryNotice(ca(0), now)?.level).toBe("error");
    expect(expiryNotice(ca(-3), now)).toMatchObject({
      level: "error",
      msg: expect.stringMatching(/^The TLS interception CA has expired/),
      fields: { days_left: -3 },
    });
  });

  test("are said at start and once a day after, until stopped", () => {
    let now = START;
    const said: [string, number][] = [];
    let tick: (() => void) | undefined;
    let every = 0;
    let stopped = false;
    const stop = watchExpiry(ca(31.5), {
      warn: (_, fields) => said.push(["warn", fields.days_left as number]),
      error: (_, fields) => said.push(["error", fields.days_left as number]),
    }, {
      now: () => new Date(now),
      every: (check, ms) => {
        tick = check;
        every = ms;
        return () => {
          stopped = true;
        };
      },
    });
    expect(every).toBe(EXPIRY_CHECK_INTERVAL_MS);
    expect(said).toEqual([]); // 31 days left at start
    for (let day = 1; day <= 33; day++) {
      now = START + day * DAY_MS;
      tick!();
    }
    // Day 2 leaves 29.5 days: warned from then, daily, then an error each day past the end.
    expect(said.filter(([level]) => level === "warn").map(([, left]) => left)).toEqual(
      Array.from({ length: 30 }, (_, i) => 29 - i),
    );
    expect(said.filter(([level]) => level === "error").map(([, left]) => left)).toEqual([-1, -2]);
    stop();
    expect(stopped).toBe(true);
  });
});
