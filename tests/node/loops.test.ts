/**
 * The Loop base: job stats, the failure streak's one log line, the back-off, the periodic
 * schedule and the stop. Fake timers where time matters; real ones where a stop must be prompt.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createLogger } from "../../control/core/logging.ts";
import {
  type BackoffOptions,
  type CycleResult,
  Loop,
  type LoopOptions,
  PeriodicLoop,
} from "../../shared/async/loop.ts";
import { TaskSet } from "../../control/core/tasks.ts";

interface Line {
  level: string;
  msg: string;
  loop?: string;
  error?: string;
  failures?: number;
}

function capture() {
  const lines: Line[] = [];
  const logger = createLogger({
    level: "debug",
    instance: "test",
    role: "test",
    destination: { write: (text: string) => void lines.push(JSON.parse(text) as Line) },
  });
  return { lines, logger };
}

type Step = "ok" | "idle" | Error | (() => Promise<void>);

/** A periodic loop whose cycles follow a script (then succeed), recording when each ran. */
class ScriptedLoop extends PeriodicLoop {
  readonly calls: number[] = [];
  readonly #script: Step[];

  constructor(options: LoopOptions & { intervalMs: number }, script: Step[]) {
    super(options);
    this.#script = [...script];
  }

  protected override async cycle(): Promise<CycleResult> {
    this.calls.push(Date.now());
    const step = this.#script.shift() ?? "ok";
    if (step instanceof Error) throw step;
    if (typeof step === "function") return await step();
    return step !== "idle";
  }
}

/** A loop with no schedule of its own whose every cycle fails: only the back-off spaces it. */
class FailingLoop extends Loop {
  readonly calls: number[] = [];

  protected override nextDuty(signal: AbortSignal): Promise<void> {
    return this.waitFor(0, signal);
  }

  protected override cycle(): Promise<CycleResult> {
    this.calls.push(Date.now());
    return Promise.reject(new Error("always"));
  }
}

const gaps = (times: number[]) => times.slice(1).map((time, i) => time - times[i]);

describe("Loop with fake timers", () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(0);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("logs a failure streak once, again when its error changes, and its end once", async () => {
    const { lines, logger } = capture();
    const a = () => new Error("A broke");
    const b = () => new TypeError("B broke");
    const loop = new ScriptedLoop(
      { name: "scripted", logger, intervalMs: 100 },
      [a(), a(), a(), b(), b(), "ok", "idle", a(), "ok"],
    );
    void loop.start();
    await vi.advanceTimersByTimeAsync(100 * 10);
    await loop.stop();

    const failed = lines.filter((line) => line.msg === "Loop cycle failed");
    expect(failed.map((line) => [line.level, line.error, line.failures])).toEqual([
      ["error", "A broke", 1],
      ["error", "B broke", 4],
      ["error", "A broke", 1],
    ]);
    expect(failed.every((line) => line.loop === "scripted")).toBe(true);
    const recovered = lines.filter((line) => line.msg === "Loop recovered");
    expect(recovered.map((line) => [line.level, line.failures])).toEqual([["info", 5], [
      "info",
      1,
    ]]);

    const stats = loop.snapshot();
    expect(stats).toMatchObject({
      name: "scripted",
      state: "stopped",
      failures: 6,
      consecutive_failures: 0,
      idle_runs: 1,
      last_error: "Error: A broke",
    });
    expect(stats.runs).toBeGreaterThanOrEqual(3);
    expect(stats.last_run_at).not.toBeNull();
    expect(stats.avg_duration_ms).toBe(0);
  });

  it("counts the streak in the stats while it lasts", async () => {
    const { logger } = capture();
    const loop = new ScriptedLoop({ name: "streak", logger, intervalMs: 100 }, [
      new Error("x"),
      new Error("x"),
    ]);
    void loop.start();
    await vi.advanceTimersByTimeAsync(150);
    expect(loop.snapshot()).toMatchObject({
      state: "running",
      runs: 0,
      failures: 2,
      consecutive_failures: 2,
      last_error: "Error: x",
    });
    await loop.stop();
  });

  it("backs off 1 s doubling to 30 s", async () => {
    const { logger } = capture();
    const loop = new FailingLoop({ name: "failing", logger });
    void loop.start();
    await vi.advanceTimersByTimeAsync(200_000);
    await loop.stop();
    expect(gaps(loop.calls).slice(0, 8)).toEqual([
      1000,
      2000,
      4000,
      8000,
      16_000,
      30_000,
      30_000,
      30_000,
    ]);
  });

  it("takes its back-off bounds as options", async () => {
    const { logger } = capture();
    const backoff: BackoffOptions = { initialMs: 10, maxMs: 40 };
    const loop = new FailingLoop({ name: "failing", logger, backoff });
    void loop.start();
    await vi.advanceTimersByTimeAsync(200);
    await loop.stop();
    expect(gaps(loop.calls).slice(0, 5)).toEqual([10, 20, 40, 40, 40]);
  });

  it("logs an endless failure once, however long it lasts", async () => {
    const { lines, logger } = capture();
    const loop = new FailingLoop({ name: "failing", logger });
    void loop.start();
    await vi.advanceTimersByTimeAsync(300_000);
    await loop.stop();
    expect(lines.filter((line) => line.msg === "Loop cycle failed")).toHaveLength(1);
    expect(loop.calls.length).toBeGreaterThan(10);
  });

  it("a failing periodic loop still comes every interval", async () => {
    const { logger } = capture();
    const always = Array.from({ length: 50 }, () => new Error("down"));
    const loop = new ScriptedLoop({ name: "beat", logger, intervalMs: 5000 }, always);
    void loop.start();
    await vi.advanceTimersByTimeAsync(5000 * 8);
    await loop.stop();
    expect(loop.calls.slice(0, 8)).toEqual([
      0,
      5000,
      10_000,
      15_000,
      20_000,
      25_000,
      30_000,
      35_000,
    ]);
  });

  it("a periodic loop holds a longer back-off to its interval", async () => {
    const { logger } = capture();
    const always = Array.from({ length: 50 }, () => new Error("down"));
    const loop = new ScriptedLoop(
      { name: "beat", logger, intervalMs: 1000, backoff: { initialMs: 20_000, maxMs: 60_000 } },
      always,
    );
    void loop.start();
    await vi.advanceTimersByTimeAsync(4500);
    await loop.stop();
    expect(loop.calls).toEqual([0, 1000, 2000, 3000, 4000]);
  });

  it("schedules start to start, and runs at once after an overrun", async () => {
    const { logger } = capture();
    const slow = (ms: number) => () => new Promise<void>((resolve) => setTimeout(resolve, ms));
    const loop = new ScriptedLoop({ name: "slow", logger, intervalMs: 1000 }, [
      slow(300),
      slow(300),
      slow(1500),
      "ok",
      "ok",
    ]);
    void loop.start();
    await vi.advanceTimersByTimeAsync(4600);
    await loop.stop();
    expect(loop.calls).toEqual([0, 1000, 2000, 3500, 4500]);
    expect(loop.snapshot().max_duration_ms).toBe(1500);
  });

  it("a wake runs the next cycle now", async () => {
    const { logger } = capture();
    const loop = new ScriptedLoop({ name: "woken", logger, intervalMs: 60_000 }, []);
    void loop.start();
    await vi.advanceTimersByTimeAsync(10);
    expect(loop.calls).toEqual([0]);
    loop.wake();
    await vi.advanceTimersByTimeAsync(10);
    expect(loop.calls).toEqual([0, 10]);
    await loop.stop();
  });
});

describe("Loop stop", () => {
  it("returns promptly from a back-off", async () => {
    const { logger } = capture();
    const loop = new FailingLoop({
      name: "failing",
      logger,
      backoff: { initialMs: 60_000, maxMs: 60_000 },
    });
    void loop.start();
    await vi.waitFor(() => expect(loop.calls).toHaveLength(1));
    const startedAt = performance.now();
    await loop.stop();
    expect(performance.now() - startedAt).toBeLessThan(500);
    expect(loop.state).toBe("stopped");
  });

  it("returns promptly from the wait for the next duty", async () => {
    const { logger } = capture();
    const loop = new ScriptedLoop({ name: "idle", logger, intervalMs: 60_000 }, []);
    void loop.start();
    await vi.waitFor(() => expect(loop.calls).toHaveLength(1));
    const startedAt = performance.now();
    await loop.stop();
    expect(performance.now() - startedAt).toBeLessThan(500);
  });

  it("is safe twice, before a start, and a stopped loop does not start again", async () => {
    const { logger } = capture();
    const never = new ScriptedLoop({ name: "never", logger, intervalMs: 10 }, []);
    await never.stop();
    await never.start();
    expect(never.calls).toEqual([]);
    expect(never.state).toBe("stopped");

    const loop = new ScriptedLoop({ name: "twice", logger, intervalMs: 10 }, []);
    void loop.start();
    await vi.waitFor(() => expect(loop.calls.length).toBeGreaterThan(0));
    await Promise.all([loop.stop(), loop.stop()]);
    await loop.stop();
    const calls = loop.calls.length;
    void loop.start();
    // Nothing may happen within the window: letting time pass is what is checked.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(loop.calls.length).toBe(calls);
    expect(loop.state).toBe("stopped");
  });

  it("lets the cycle in hand finish rather than cancelling it", async () => {
    const { logger } = capture();
    let finish: () => void = () => {};
    let finished = false;
    const loop = new ScriptedLoop({ name: "busy", logger, intervalMs: 10 }, [
      () =>
        new Promise<void>((resolve) => {
          finish = () => {
            finished = true;
            resolve();
          };
        }),
    ]);
    void loop.start();
    await vi.waitFor(() => expect(loop.calls).toHaveLength(1));
    let stopped = false;
    const stopping = loop.stop().then(() => (stopped = true));
    // The stop must not end within the window while the cycle runs: time passing is the check.
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(stopped).toBe(false);
    finish();
    await stopping;
    expect(finished).toBe(true);
    expect(loop.snapshot().runs).toBe(1);
  });

  it("rejects names that are not identifiers", () => {
    const { logger } = capture();
    expect(() => new ScriptedLoop({ name: "Not A Name", logger, intervalMs: 10 }, [])).toThrow(
      /identifier/,
    );
  });
});

describe("TaskSet", () => {
  class BrokenLoop extends Loop {
    protected override nextDuty(): Promise<void> {
      return Promise.reject(new Error("the wait itself broke"));
    }
    protected override cycle(): Promise<CycleResult> {
      return Promise.resolve();
    }
  }

  it("logs a loop whose task ends with an error and keeps it listed as failed", async () => {
    const { lines, logger } = capture();
    const tasks = new TaskSet(logger);
    const healthy = new ScriptedLoop({ name: "healthy", logger, intervalMs: 10 }, []);
    tasks.start(new BrokenLoop({ name: "broken", logger }));
    tasks.start(healthy);
    await vi.waitFor(() => expect(lines.some((line) => line.msg === "Loop task ended")).toBe(true));

    const ended = lines.find((line) => line.msg === "Loop task ended");
    expect(ended).toMatchObject({ level: "error", loop: "broken", error: "the wait itself broke" });
    expect(tasks.snapshot().map((loop) => [loop.name, loop.state])).toEqual([
      ["broken", "failed"],
      ["healthy", "running"],
    ]);
    await tasks.stop();
    await tasks.stop();
    expect(tasks.snapshot().map((loop) => [loop.name, loop.state])).toEqual([
      ["broken", "failed"],
      ["healthy", "stopped"],
    ]);
  });

  it("refuses two loops of one name", () => {
    const { logger } = capture();
    const tasks = new TaskSet(logger);
    tasks.start(new ScriptedLoop({ name: "same", logger, intervalMs: 1000 }, []));
    expect(() => tasks.start(new ScriptedLoop({ name: "same", logger, intervalMs: 1000 }, [])))
      .toThrow(/already/);
    return tasks.stop();
  });
});
