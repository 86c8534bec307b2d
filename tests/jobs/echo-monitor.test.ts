/**
 * The health job's echo monitor on a clock the test moves: failed checks of the echo count only
 * when the echo answered after they failed, and an outage is asked about once every ten seconds.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ECHO_FRESH_MS, EchoMonitor } from "../../control/jobs/health.ts";
import { type Echo, startEcho } from "../../testkit/upstreams/echo.ts";
import { captureLogger } from "../../testkit/logger.ts";

let echo: Echo;

beforeAll(async () => {
  echo = await startEcho();
});

afterAll(async () => {
  await echo?.close();
});

function monitor() {
  let now = 1_000_000;
  const { logger, lines } = captureLogger("worker");
  const echoMonitor = new EchoMonitor(new URL(echo.url), 2_000, logger, () => now);
  const asks = () => [...echo.requests.values()].reduce((a, b) => a + b, 0);
  return {
    echoMonitor,
    lines,
    asks,
    advance(ms: number) {
      now += ms;
      return now;
    },
  };
}

describe("the echo monitor", () => {
  it("takes no answer from before a failure as proof: the outage may have begun between", async () => {
    const m = monitor();
    echo.setUp(true);
    m.echoMonitor.noteAnswer(m.advance(0));
    echo.setUp(false);
    const failedAt = m.advance(500);
    const before = m.asks();
    expect(await m.echoMonitor.isUp(failedAt)).toBe(false);
    expect(m.asks() - before).toBe(1);
    expect(m.lines.map((line) => line.msg)).toContain(
      "Echo endpoint does not answer; failed checks of it are not counted",
    );
  });

  it("takes an answer to a check sent after the failure as proof, asking nothing", async () => {
    const m = monitor();
    echo.setUp(true);
    const failedAt = m.advance(100);
    m.echoMonitor.noteAnswer(m.advance(100));
    const before = m.asks();
    expect(await m.echoMonitor.isUp(failedAt)).toBe(true);
    expect(m.asks()).toBe(before);
  });

  it("takes no answer to a check sent before the failure as proof, though it came back after", async () => {
    const m = monitor();
    echo.setUp(false);
    const sentAt = m.advance(0);
    const failedAt = m.advance(100);
    m.advance(100);
    // The slow check's answer arrives now, but was made before the failure: it proves nothing.
    m.echoMonitor.noteAnswer(sentAt);
    const before = m.asks();
    expect(await m.echoMonitor.isUp(failedAt)).toBe(false);
    expect(m.asks() - before).toBe(1);
  });

  it("asks an outage once every ten seconds, and again once it is over", async () => {
    const m = monitor();
    echo.setUp(false);
    const before = m.asks();
    expect(await m.echoMonitor.isUp(m.advance(10))).toBe(false);
    expect(await m.echoMonitor.isUp(m.advance(ECHO_FRESH_MS - 100))).toBe(false);
    expect(m.asks() - before).toBe(1);

    echo.setUp(true);
    expect(await m.echoMonitor.isUp(m.advance(200))).toBe(true);
    expect(m.asks() - before).toBe(2);
    expect(m.lines.map((line) => line.msg)).toContain(
      "Echo endpoint answers again; its checks count again",
    );
    // While it answers, an answer older than a failure is asked about again.
    expect(await m.echoMonitor.isUp(m.advance(1))).toBe(true);
    expect(m.asks() - before).toBe(3);
  });
});
