/**
 * The async toolkit (shared/async): sleep with an abort, a deadline's expiry and its cause, retry's
 * back-off and abort, the Loop base's close and its failing cycles, Serial's order. Fake timers where time
 * matters, so nothing guesses how long a real wait takes.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { abortable, anySignal } from "../../shared/async/abort.ts";
import { DeadlineError, withDeadline } from "../../shared/async/deadline.ts";
import { type CycleResult, Loop, LoopState } from "../../shared/async/loop.ts";
import { backoffDelayMs, retry } from "../../shared/async/retry.ts";
import { Serial } from "../../shared/async/serial.ts";
import { sleep } from "../../shared/async/sleep.ts";
import { ErrorCode, OctoproxError, StoreUnavailableError } from "../../shared/errors.ts";

beforeEach(() => {
  vi.useFakeTimers();
});

afterEach(() => {
  vi.useRealTimers();
});

describe("sleep", () => {
  it("resolves once its time has passed, not before", async () => {
    let done = false;
    const slept = sleep(1000).then(() => (done = true));
    await vi.advanceTimersByTimeAsync(999);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await slept;
    expect(done).toBe(true);
  });

  it("rejects with the signal's reason when aborted during the wait, and clears its timer", async () => {
    const controller = new AbortController();
    const slept = sleep(60_000, controller.signal);
    const reason = new Error("stop");
    controller.abort(reason);
    await expect(slept).rejects.toBe(reason);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("rejects at once when the signal has already aborted", async () => {
    const reason = new Error("already");
    await expect(sleep(10, AbortSignal.abort(reason))).rejects.toBe(reason);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("withDeadline", () => {
  it("rejects with a DeadlineError from the catalogue and aborts the call's signal", async () => {
    let callSignal: AbortSignal | undefined;
    const pending = withDeadline("store read", 500, (signal) => {
      callSignal = signal;
      return new Promise<never>(() => {});
    });
    const outcome = pending.catch((error: unknown) => error);
    await vi.advanceTimersByTimeAsync(500);
    const error = await outcome;
    expect(error).toBeInstanceOf(DeadlineError);
    expect(error).toBeInstanceOf(OctoproxError);
    expect((error as DeadlineError).code).toBe(ErrorCode.deadline);
    expect((error as DeadlineError).message).toMatch(/^No reply within 500 ms/);
    expect(callSignal?.aborted).toBe(true);
    expect(callSignal?.reason).toBe(error);
  });

  it("answers what the call answers in time, and leaves no timer behind", async () => {
    await expect(withDeadline("quick", 500, () => Promise.resolve(7))).resolves.toBe(7);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("is chained as the cause of a store's error", async () => {
    const outcome = withDeadline("Redis step", 100, () => new Promise<never>(() => {})).catch(
      (error: unknown) => new StoreUnavailableError("redis", { cause: error }),
    );
    await vi.advanceTimersByTimeAsync(100);
    const error = await outcome;
    expect(error.code).toBe(ErrorCode.storeUnavailable);
    expect(error.cause).toBeInstanceOf(DeadlineError);
  });

  it("ends on the caller's own signal with its reason", async () => {
    const controller = new AbortController();
    const pending = withDeadline("read", 60_000, () => new Promise<never>(() => {}), {
      signal: controller.signal,
    });
    const reason = new Error("caller gone");
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("abort helpers", () => {
  it("abortable rejects with the reason once the signal aborts; the pending promise is left", async () => {
    const controller = new AbortController();
    let settle: (value: number) => void = () => {};
    const pending = new Promise<number>((resolve) => (settle = resolve));
    const waited = abortable(pending, controller.signal);
    controller.abort("stopped");
    await expect(waited).rejects.toBe("stopped");
    settle(1);
    await expect(pending).resolves.toBe(1);
  });

  it("anySignal aborts when any of its signals does, with that one's reason", () => {
    const a = new AbortController();
    const b = new AbortController();
    const any = anySignal([a.signal, undefined, b.signal]);
    expect(any.aborted).toBe(false);
    b.abort("b");
    expect(any.aborted).toBe(true);
    expect(any.reason).toBe("b");
  });
});

describe("retry", () => {
  it("doubles its wait to the cap, with jitter only shortening it", () => {
    const options = { initialMs: 100, maxMs: 1000 };
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffDelayMs(n, options))).toEqual([
      100,
      200,
      400,
      800,
      1000,
      1000,
    ]);
    expect(backoffDelayMs(2, { ...options, jitter: 0.5, random: () => 0.999 })).toBeCloseTo(100.1);
    expect(backoffDelayMs(2, { ...options, jitter: 0.5, random: () => 0 })).toBe(200);
  });

  it("tries as often as told, waiting the back-off between attempts", async () => {
    const waits: number[] = [];
    let calls = 0;
    const outcome = retry(
      () => {
        calls++;
        return Promise.reject(new Error(`attempt ${calls}`));
      },
      {
        attempts: 4,
        initialMs: 100,
        maxMs: 250,
        onRetry: (_error, _attempt, delayMs) => waits.push(delayMs),
      },
    ).catch((error: unknown) => error);
    await vi.advanceTimersByTimeAsync(100 + 200 + 250);
    const error = await outcome;
    expect(calls).toBe(4);
    expect(waits).toEqual([100, 200, 250]);
    expect((error as Error).message).toBe("attempt 4");
  });

  it("answers the first success, and never retries what is not retryable", async () => {
    let calls = 0;
    const succeeded = retry(
      () => (++calls < 3 ? Promise.reject(new Error("no")) : Promise.resolve("yes")),
      {
        attempts: 5,
        initialMs: 10,
        maxMs: 10,
      },
    );
    await vi.advanceTimersByTimeAsync(20);
    await expect(succeeded).resolves.toBe("yes");
    expect(calls).toBe(3);

    let final = 0;
    await expect(
      retry(() => {
        final++;
        return Promise.reject(new Error("final"));
      }, { attempts: 5, initialMs: 10, maxMs: 10, retryable: () => false }),
    ).rejects.toThrow("final");
    expect(final).toBe(1);
  });

  it("stops on an abort during its back-off, with the signal's reason", async () => {
    const controller = new AbortController();
    let calls = 0;
    const outcome = retry(() => {
      calls++;
      return Promise.reject(new Error("down"));
    }, { attempts: 10, initialMs: 1000, maxMs: 1000, signal: controller.signal }).catch(
      (error: unknown) => error,
    );
    await vi.advanceTimersByTimeAsync(1500);
    expect(calls).toBe(2);
    controller.abort("stop");
    expect(await outcome).toBe("stop");
    await vi.advanceTimersByTimeAsync(10_000);
    expect(calls).toBe(2);
  });
});

class ThrowingLoop extends Loop {
  cycles = 0;
  readonly lines: { fields: Record<string, unknown>; message: string }[] = [];

  constructor() {
    super({
      name: "throwing",
      backoff: { initialMs: 100, maxMs: 100 },
      logger: {
        info: (fields, message) => this.lines.push({ fields, message }),
        error: (fields, message) => this.lines.push({ fields, message }),
      },
    });
  }

  protected override nextDuty(signal: AbortSignal): Promise<void> {
    return this.waitFor(1000, signal);
  }

  protected override cycle(): Promise<CycleResult> {
    this.cycles++;
    return Promise.reject(new Error("broken"));
  }
}

describe("Loop", () => {
  it("never throws for a failing cycle: it counts, logs once per streak and goes on", async () => {
    const loop = new ThrowingLoop();
    const task = loop.start();
    await vi.advanceTimersByTimeAsync(3 * 1100);
    expect(loop.cycles).toBe(3);
    expect(loop.state).toBe(LoopState.running);
    expect(loop.consecutiveFailures).toBe(3);
    expect(loop.snapshot().failures).toBe(3);
    expect(loop.lines.map((line) => line.message)).toEqual(["Loop cycle failed"]);
    await loop.close();
    await expect(task).resolves.toBeUndefined();
    expect(loop.state).toBe(LoopState.stopped);
  });

  it("closes twice safely, cuts its wait, and does not start again", async () => {
    const loop = new ThrowingLoop();
    void loop.start();
    await vi.advanceTimersByTimeAsync(1000);
    expect(loop.cycles).toBe(1);
    const first = loop.close();
    const second = loop.close();
    await expect(Promise.all([first, second])).resolves.toEqual([undefined, undefined]);
    await expect(loop.close()).resolves.toBeUndefined();
    await loop.start();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(loop.cycles).toBe(1);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("Serial", () => {
  it("starts each task once the one before settled, a failure reaching only its caller", async () => {
    const serial = new Serial();
    const events: string[] = [];
    let finishFirst!: () => void;
    const first = serial.run(async () => {
      events.push("first started");
      await new Promise<void>((resolve) => (finishFirst = resolve));
      events.push("first ended");
      throw new Error("first failed");
    });
    const second = serial.run(() => {
      events.push("second started");
      return Promise.resolve(2);
    });
    let settled = false;
    const all = serial.settled().then(() => (settled = true));
    await vi.advanceTimersByTimeAsync(0);
    expect(events).toEqual(["first started"]);
    expect(settled).toBe(false);

    finishFirst();
    await expect(first).rejects.toThrow("first failed");
    expect(await second).toBe(2);
    await all;
    expect(events).toEqual(["first started", "first ended", "second started"]);
    expect(settled).toBe(true);
  });
});
