/**
 * Loop lag: a timer asked for every half second fires late by what every other await of the
 * process is paying, so its lateness shows how far behind the event loop runs. Each minute's
 * worst and mean lateness are kept (the last full minute is what a snapshot shows), and a tick
 * over a second late is reported as it comes, once a minute at most, so a stall is in the log
 * when it happens rather than when its minute ends.
 *
 * Runtime-neutral: the control plane's monitor (control/node/loop-lag.ts) runs the windows from
 * a PeriodicLoop of its own, the gateway's (one per isolate) from `LoopLagTimer` below.
 */

/** What a process reports of its loop lag (the heartbeat snapshot's `loop_lag`). */
export interface LoopLagSnapshot {
  /** The last full minute (the current one until a minute has passed). */
  window_started_at: string;
  worst_ms: number;
  mean_ms: number;
  samples: number;
}

export const LOOP_LAG_INTERVAL_MS = 500;
export const LOOP_LAG_WINDOW_MS = 60_000;
/** A tick later than this is reported (the first of its window). */
export const LOOP_LAG_WARN_MS = 1_000;

export interface LoopLagWindowsOptions {
  windowMs?: number;
  warnMs?: number;
  /** The clock windows start by (ms since the epoch). */
  now?: () => number;
  /**
   * Told of a tick later than `warnMs`, the first of its window only: how late it came, and the
   * window's mean so far.
   */
  lagging?: (lateMs: number, meanMs: number) => void;
}

interface Window {
  startedAt: number;
  worstMs: number;
  totalMs: number;
  samples: number;
  reported: boolean;
}

const emptyWindow = (startedAt: number): Window => ({
  startedAt,
  worstMs: 0,
  totalMs: 0,
  samples: 0,
  reported: false,
});

const tenths = (value: number): number => Math.round(value * 10) / 10;

/** Each minute's lateness: fed one sample per timer tick, read as the last full minute. */
export class LoopLagWindows {
  readonly #windowMs: number;
  readonly #warnMs: number;
  readonly #now: () => number;
  readonly #lagging: ((lateMs: number, meanMs: number) => void) | undefined;
  #current: Window;
  #last: Window | undefined;

  constructor(options: LoopLagWindowsOptions = {}) {
    this.#windowMs = options.windowMs ?? LOOP_LAG_WINDOW_MS;
    this.#warnMs = options.warnMs ?? LOOP_LAG_WARN_MS;
    this.#now = options.now ?? Date.now;
    this.#lagging = options.lagging;
    this.#current = emptyWindow(this.#now());
  }

  /** One tick that came `lateMs` after it was due. */
  note(lateMs: number): void {
    const now = this.#now();
    if (now - this.#current.startedAt >= this.#windowMs) {
      this.#last = this.#current;
      this.#current = emptyWindow(now);
    }
    const late = Number.isFinite(lateMs) ? Math.max(0, lateMs) : 0;
    const window = this.#current;
    window.samples += 1;
    window.totalMs += late;
    if (late > window.worstMs) window.worstMs = late;
    if (late > this.#warnMs && !window.reported) {
      window.reported = true;
      try {
        this.#lagging?.(tenths(late), tenths(window.totalMs / window.samples));
      } catch {
        // A report's failure must not stop the measuring.
      }
    }
  }

  snapshot(): LoopLagSnapshot {
    const window = this.#last ?? this.#current;
    return {
      window_started_at: new Date(window.startedAt).toISOString(),
      worst_ms: tenths(window.worstMs),
      mean_ms: window.samples === 0 ? 0 : tenths(window.totalMs / window.samples),
      samples: window.samples,
    };
  }
}

export interface LoopLagTimerOptions extends LoopLagWindowsOptions {
  intervalMs?: number;
}

/**
 * The timer on its own: a timeout every interval, each measured against when it was due. The
 * next one is asked for from the tick itself, so a tick that came late is not followed by a
 * burst of catching up. `stop` is safe twice.
 */
export class LoopLagTimer {
  readonly windows: LoopLagWindows;
  readonly #intervalMs: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;

  constructor(options: LoopLagTimerOptions = {}) {
    this.windows = new LoopLagWindows(options);
    this.#intervalMs = options.intervalMs ?? LOOP_LAG_INTERVAL_MS;
  }

  start(): void {
    if (this.#timer !== undefined || this.#stopped) return;
    this.#arm();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  snapshot(): LoopLagSnapshot {
    return this.windows.snapshot();
  }

  #arm(): void {
    const dueAt = Date.now() + this.#intervalMs;
    this.#timer = setTimeout(() => {
      if (this.#stopped) return;
      this.windows.note(Date.now() - dueAt);
      this.#arm();
    }, this.#intervalMs);
  }
}
