/**
 * What the upstream keep-alive pool learns of an upstream's closing (closing-habits.ts): one
 * that closes every connection as soon as it answered (tinyproxy answers HTTP/1.1 without
 * `Connection: close`, then closes) is not kept after three such closes in a row, for a while;
 * one close, or one a while after the answer, or a connection that carried a second request,
 * teaches nothing. The pool over real sockets is in forward.test.ts.
 */
import { describe, expect, it } from "vitest";
import { ClosingHabits } from "../../gateway/net/io/closing-habits.ts";
import {
  UPSTREAM_POOL_CLOSED_AT_ONCE_MS,
  UPSTREAM_POOL_CLOSED_AT_ONCE_TIMES,
  UPSTREAM_POOL_UNKEPT_MS,
} from "../../gateway/net/io/pool-bounds.ts";

function clock() {
  let now = 1_000_000;
  return { now: () => now, pass: (ms: number) => (now += ms) };
}

describe("an upstream's closing habits", () => {
  it("keep no connection of one that closed three in a row at once, for a while", () => {
    const time = clock();
    const habits = new ClosingHabits(time.now);
    for (let i = 0; i < UPSTREAM_POOL_CLOSED_AT_ONCE_TIMES; i++) {
      expect(habits.keeps("tiny")).toBe(true);
      time.pass(5);
      habits.closedIdle("tiny", time.now() - 2, false);
    }
    expect(habits.keeps("tiny")).toBe(false);
    // Another upstream is not touched.
    expect(habits.keeps("other")).toBe(true);
    time.pass(UPSTREAM_POOL_UNKEPT_MS);
    expect(habits.keeps("tiny")).toBe(true);
  });

  it("learn nothing from a close a while after the answer, or of a reused connection", () => {
    const time = clock();
    const habits = new ClosingHabits(time.now);
    const atOnce = () => habits.closedIdle("keeps", time.now() - 1, false);
    for (let i = 0; i < UPSTREAM_POOL_CLOSED_AT_ONCE_TIMES - 1; i++) atOnce();
    habits.closedIdle("keeps", time.now() - UPSTREAM_POOL_CLOSED_AT_ONCE_MS, false);
    for (let i = 0; i < UPSTREAM_POOL_CLOSED_AT_ONCE_TIMES - 1; i++) atOnce();
    expect(habits.keeps("keeps")).toBe(true);
    habits.closedIdle("keeps", time.now() - 1, true);
    for (let i = 0; i < UPSTREAM_POOL_CLOSED_AT_ONCE_TIMES - 1; i++) atOnce();
    habits.reused("keeps");
    atOnce();
    expect(habits.keeps("keeps")).toBe(true);
  });
});
