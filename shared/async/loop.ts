/**
 * The base of every background loop, in both runtimes: it waits until its next duty (or a wake),
 * runs one cycle, and goes on until it is stopped. What every loop shares lives here: the job
 * stats, the failure streak's one log line, the back-off and the stop.
 *
 * A cycle is never cancelled: a stop cuts the waits between cycles and waits for the cycle in
 * hand to end. Cycles get the stop's signal so they may cut their own waits. The loop's task
 * never throws for a cycle's error; `stop()` (or `close()`) never raises and is safe twice.
 *
 * Web-standard: timers, promises and AbortSignal only, so the gateway (Deno) and the control
 * plane (Node) both run it. Log lines go to a logger of pino's `(fields, message)` shape; a
 * subclass may say a failure its own way by overriding `cycleFailed` and `cycleRecovered`.
 */
import { errorLabel, errorText } from "../errors.ts";
import { backoffDelayMs, type BackoffOptions } from "./retry.ts";
import { sleep } from "./sleep.ts";

/** What the base logs through: pino's `(fields, message)` shape; `child` binds the loop's name. */
export interface LoopLogger {
  info(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

const SILENT: LoopLogger = { info() {}, error() {} };

export const LoopState = {
  /** Not started yet, or stopped. */
  stopped: "stopped",
  running: "running",
  /** The loop's task itself ended with an exception (a bug: cycles' errors are caught). */
  failed: "failed",
} as const;
export type LoopState = (typeof LoopState)[keyof typeof LoopState];

/** The job stats of one loop, as the heartbeat snapshot and /metrics show them. */
export interface LoopSnapshot {
  name: string;
  state: LoopState;
  /** Cycles that returned, idle ones included. */
  runs: number;
  /** Cycles that returned having done nothing. */
  idle_runs: number;
  failures: number;
  consecutive_failures: number;
  last_run_at: string | null;
  last_error: string | null;
  last_duration_ms: number | null;
  avg_duration_ms: number | null;
  max_duration_ms: number | null;
}

export type { BackoffOptions };

/** One second after a failure, doubling to 30 s; no jitter. */
export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 1000, maxMs: 30_000 };

export interface LoopOptions<L extends LoopLogger = LoopLogger> {
  /** An identifier: the task's name, its job stats key and what the System page shows. */
  name: string;
  /** Where the loop's lines go (none when left out); a `child` method binds `{ loop: name }`. */
  logger?: L;
  backoff?: Partial<BackoffOptions>;
}

/**
 * What a cycle returns: `false` when it found nothing to do (counted as an idle run), `UNCOUNTED`
 * when the loop counts its runs itself (a group consumer's runs are its batches), anything else
 * when it did work.
 */
export const UNCOUNTED = "uncounted";
export type CycleResult = boolean | void | typeof UNCOUNTED;

const LOOP_NAME = /^[a-z][a-z0-9_]*$/;

/**
 * Waits `ms`, or less when the signal aborts; never rejects (a stop is not an error). Nothing
 * to wait (or a stop already) returns at once: a due cycle runs without a timer's turn.
 */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return Promise.resolve();
  return sleep(ms, signal).catch(() => {});
}

export abstract class Loop<L extends LoopLogger = LoopLogger> {
  readonly name: string;
  protected readonly logger: L;
  readonly #backoff: BackoffOptions;

  #state: LoopState = LoopState.stopped;
  #task: Promise<void> | undefined;
  #abort: AbortController | undefined;
  #wake: (() => void) | undefined;
  #woken = false;
  #stopRequested = false;

  #runs = 0;
  #idleRuns = 0;
  #failures = 0;
  #consecutiveFailures = 0;
  #lastRunAt: number | undefined;
  #lastError: string | undefined;
  #lastDurationMs: number | undefined;
  #totalDurationMs = 0;
  #maxDurationMs: number | undefined;
  /** The error the current streak last logged; a different one is logged again. */
  #streakError: string | undefined;

  constructor(options: LoopOptions) {
    if (!LOOP_NAME.test(options.name)) {
      throw new Error(`Loop name ${JSON.stringify(options.name)} is not an identifier`);
    }
    this.name = options.name;
    const logger = (options.logger ?? SILENT) as L & {
      child?: (bindings: Record<string, unknown>) => L;
    };
    this.logger = typeof logger.child === "function"
      ? logger.child({ loop: options.name })
      : logger;
    this.#backoff = { ...DEFAULT_BACKOFF, ...options.backoff };
  }

  /** One cycle of the loop's work. Throwing counts a failure and backs off. */
  protected abstract cycle(signal: AbortSignal): Promise<CycleResult>;

  /**
   * Waits until the next duty. Resolves early on a wake or a stop; `waitFor` does both for a
   * subclass that has its own schedule.
   */
  protected abstract nextDuty(signal: AbortSignal): Promise<void>;

  get state(): LoopState {
    return this.#state;
  }

  get consecutiveFailures(): number {
    return this.#consecutiveFailures;
  }

  /**
   * Starts the loop's task and returns it. The task resolves when the loop stops and rejects
   * only when the loop itself broke (never for a cycle's error); a TaskSet watches it. Starting
   * a loop that runs returns the same task; a stopped loop does not start again.
   */
  start(): Promise<void> {
    if (this.#task) return this.#task;
    if (this.#stopRequested) return Promise.resolve();
    const abort = new AbortController();
    this.#abort = abort;
    this.#state = LoopState.running;
    this.#task = this.#run(abort.signal).then(
      () => {
        this.#state = LoopState.stopped;
      },
      (error: unknown) => {
        this.#state = LoopState.failed;
        this.#lastError = errorLabel(error);
        throw error;
      },
    );
    // The caller (a TaskSet) reports a broken loop; this keeps an unwatched one from crashing
    // the process as an unhandled rejection.
    this.#task.catch(() => {});
    return this.#task;
  }

  /** Cuts the wait for the next duty short, so a cycle runs now. */
  wake(): void {
    this.#woken = true;
    this.#wake?.();
  }

  /**
   * Stops the loop: cuts its waits, lets the cycle in hand finish. Never raises; a second call
   * waits for the same stop.
   */
  async stop(): Promise<void> {
    this.#stopRequested = true;
    this.#abort?.abort();
    this.#wake?.();
    await this.#task?.catch(() => {});
  }

  /** The same as `stop()`: never raises, safe twice. */
  close(): Promise<void> {
    return this.stop();
  }

  snapshot(): LoopSnapshot {
    const measured = this.#runs + this.#failures;
    return {
      name: this.name,
      state: this.#state,
      runs: this.#runs,
      idle_runs: this.#idleRuns,
      failures: this.#failures,
      consecutive_failures: this.#consecutiveFailures,
      last_run_at: this.#lastRunAt === undefined ? null : new Date(this.#lastRunAt).toISOString(),
      last_error: this.#lastError ?? null,
      last_duration_ms: this.#lastDurationMs ?? null,
      avg_duration_ms: measured === 0 ? null : round(this.#totalDurationMs / measured),
      max_duration_ms: this.#maxDurationMs ?? null,
    };
  }

  /**
   * Waits `ms`, cut short by a wake or the stop. For subclasses' `nextDuty`: a wake that came
   * while a cycle ran is not lost, the next wait returns at once.
   */
  protected async waitFor(ms: number, signal: AbortSignal): Promise<void> {
    if (this.#woken || signal.aborted) {
      this.#woken = false;
      return;
    }
    const woken = new AbortController();
    const onAbort = () => woken.abort();
    signal.addEventListener("abort", onAbort, { once: true });
    this.#wake = () => woken.abort();
    try {
      await pause(ms, woken.signal);
    } finally {
      this.#wake = undefined;
      this.#woken = false;
      signal.removeEventListener("abort", onAbort);
    }
  }

  /**
   * How long to wait after the `failures`-th failure in a row: the initial wait doubling to
   * the cap. `cycleStartedAt` lets a periodic loop measure the wait from the cycle's start.
   */
  protected backoffDelayMs(failures: number, _cycleStartedAt: number): number {
    return backoffDelayMs(failures, this.#backoff);
  }

  /**
   * Waits out the back-off after a failed cycle, cut short by the stop. A subclass may end it
   * sooner (the feed follower ends it on a new stream entry); it must not throw.
   */
  protected backOff(delayMs: number, signal: AbortSignal): Promise<void> {
    return pause(delayMs, signal);
  }

  /**
   * Told of every failed cycle, with the streak's length so far. By default one line per streak
   * and error: the first failure, and any that differs from the one logged last.
   */
  protected cycleFailed(error: unknown, consecutiveFailures: number): void {
    const label = errorLabel(error);
    if (label === this.#streakError) return;
    this.#streakError = label;
    this.logger.error(
      { error: errorText(error), failures: consecutiveFailures },
      "Loop cycle failed",
    );
  }

  /** Told when a cycle succeeds after `failures` failed in a row. */
  protected cycleRecovered(failures: number): void {
    this.logger.info({ failures }, "Loop recovered");
  }

  /** Counts a run the loop measured itself (see `UNCOUNTED`). */
  protected recordRun(startedAt: number, idle = false): void {
    this.#succeeded(startedAt, idle);
  }

  /** Counts a failure the loop measured itself; logged as any cycle's failure is. */
  protected recordFailure(startedAt: number, error: unknown): void {
    this.#failed(startedAt, error);
  }

  /**
   * Ends a failure streak without a success: a standby resets it, since a peer runs the loop
   * now and the streak no longer says anything about this process.
   */
  protected resetStreak(): void {
    this.#consecutiveFailures = 0;
    this.#streakError = undefined;
  }

  async #run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.nextDuty(signal);
      if (signal.aborted) break;
      const startedAt = Date.now();
      let failed = false;
      try {
        const result = await this.cycle(signal);
        if (result !== UNCOUNTED) this.#succeeded(startedAt, result === false);
      } catch (error) {
        failed = true;
        this.#failed(startedAt, error);
      }
      if (failed && !signal.aborted) {
        await this.backOff(this.backoffDelayMs(this.#consecutiveFailures, startedAt), signal);
      }
    }
  }

  #measure(startedAt: number): void {
    const now = Date.now();
    const durationMs = now - startedAt;
    this.#lastRunAt = now;
    this.#lastDurationMs = durationMs;
    this.#totalDurationMs += durationMs;
    this.#maxDurationMs = Math.max(this.#maxDurationMs ?? 0, durationMs);
  }

  #succeeded(startedAt: number, idle: boolean): void {
    this.#measure(startedAt);
    this.#runs += 1;
    if (idle) this.#idleRuns += 1;
    const failures = this.#consecutiveFailures;
    this.#consecutiveFailures = 0;
    this.#streakError = undefined;
    if (failures > 0) this.#quietly(() => this.cycleRecovered(failures));
  }

  /** A hook's failure must never end the loop. */
  #quietly(hook: () => void): void {
    try {
      hook();
    } catch {
      // Logging about the loop is not the loop's work.
    }
  }

  #failed(startedAt: number, error: unknown): void {
    this.#measure(startedAt);
    this.#failures += 1;
    this.#consecutiveFailures += 1;
    this.#lastError = errorLabel(error);
    const failures = this.#consecutiveFailures;
    this.#quietly(() => this.cycleFailed(error, failures));
  }
}

export interface PeriodicLoopOptions<L extends LoopLogger = LoopLogger> extends LoopOptions<L> {
  intervalMs: number;
  /** Run the first cycle at once (the default) rather than after one interval. */
  runAtStart?: boolean;
}

/**
 * A loop with a cycle every `intervalMs`, measured start to start, so a slow cycle does not
 * push the schedule back; a cycle longer than the interval is followed at once by the next (no
 * burst to catch up). A failing periodic loop holds its back-off to its interval: a failing
 * cycle still comes every interval.
 */
export abstract class PeriodicLoop<L extends LoopLogger = LoopLogger> extends Loop<L> {
  readonly intervalMs: number;
  readonly #runAtStart: boolean;
  #dueAt: number | undefined;

  constructor(options: PeriodicLoopOptions<L>) {
    super(options);
    if (!(options.intervalMs > 0)) throw new Error(`Loop ${options.name} needs an interval`);
    this.intervalMs = options.intervalMs;
    this.#runAtStart = options.runAtStart ?? true;
  }

  /** When the cycle in hand (or the next) was due, in `Date.now()` milliseconds. */
  protected get dueAt(): number | undefined {
    return this.#dueAt;
  }

  protected override async nextDuty(signal: AbortSignal): Promise<void> {
    const now = Date.now();
    if (this.#dueAt === undefined) {
      this.#dueAt = this.#runAtStart ? now : now + this.intervalMs;
    } else {
      // Start to start; after an overrun the next cycle is due now.
      this.#dueAt = Math.max(this.#dueAt + this.intervalMs, now);
    }
    await this.waitFor(this.#dueAt - now, signal);
  }

  protected override backoffDelayMs(failures: number, cycleStartedAt: number): number {
    const heldMs = Math.min(super.backoffDelayMs(failures, cycleStartedAt), this.intervalMs);
    return Math.max(0, cycleStartedAt + heldMs - Date.now());
  }
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}
