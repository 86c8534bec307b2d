/**
 * The probe bound: at most `limit` holders, waiters in order, urgent ones first, and a reserve
 * only urgent holders take, so periodic checks that all hang leave room for a new proxy's.
 */
import { describe, expect, it } from "vitest";
import { Semaphore } from "../../control/core/semaphore.ts";

/** Acquires in the background; answers whether it got the slot yet. */
function take(gate: Semaphore, urgent = false): { got: () => boolean; done: Promise<void> } {
  let got = false;
  const done = gate.acquire(urgent).then(() => {
    got = true;
  });
  return { got: () => got, done };
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

describe("semaphore", () => {
  it("keeps the reserve for urgent holders and serves them first", async () => {
    const gate = new Semaphore(4, { urgentReserve: 1 });
    const ordinary = [take(gate), take(gate), take(gate), take(gate)];
    await tick();
    // Three ordinary holders; the fourth waits although a slot is free: it is the reserve.
    expect(ordinary.map((t) => t.got())).toEqual([true, true, true, false]);
    const urgent = take(gate, true);
    await tick();
    expect(urgent.got()).toBe(true);
    expect(gate.held).toBe(4);
    // A second urgent one waits ahead of the ordinary waiter and takes the next slot freed.
    const second = take(gate, true);
    gate.release();
    await tick();
    expect(second.got()).toBe(true);
    expect(ordinary[3].got()).toBe(false);
    // An urgent holder leaving frees the reserve, not a slot for the ordinary waiter...
    gate.release();
    await tick();
    expect(ordinary[3].got()).toBe(false);
    expect(gate.held).toBe(3);
    // ...which gets the next ordinary slot freed.
    gate.release();
    await tick();
    expect(ordinary[3].got()).toBe(true);
    expect(gate.held).toBe(3);
  });

  it("without a reserve, serves waiters in order with urgent ones first", async () => {
    const gate = new Semaphore(1);
    await gate.acquire();
    const order: string[] = [];
    const a = gate.run(() => Promise.resolve(void order.push("a")));
    const b = gate.run(() => Promise.resolve(void order.push("b")), true);
    gate.release();
    await Promise.all([a, b]);
    expect(order).toEqual(["b", "a"]);
    expect(gate.held).toBe(0);
  });
});
