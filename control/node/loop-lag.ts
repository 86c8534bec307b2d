/**
 * The loop-lag monitor: a timer every half second that fires late by what every other await
 * in the process is paying. Each minute's worst and mean lateness go into the heartbeat
 * snapshot (and /metrics); a timer over a second late is logged as it fires, once a minute at
 * most, so a stall is in the log when it happens rather than when its minute ends.
 */
import { type CycleResult, PeriodicLoop } from "../core/loops.ts";
import type { Logger } from "../core/logging.ts";

export interface LoopLagSnapshot {
  /** The last full minute (the current one until a minute has passed). */
  window_started_at: string;
  worst_ms: number;
  mean_ms: number;
  samples: number;
}

export interface LoopLagOptions {
  logger: Logger;
  intervalMs?: number;
  windowMs?: number;
  /** A timer later than this is logged (the first of its window). */
  warnMs?: number;
}

interface Window {
  startedAt: number;
  worstMs: number;
  totalMs: number;
  samples: number;
  warned: boolean;
}

const emptyWindow = (startedAt: number): Window => ({
  startedAt,
  worstMs: 0,
  totalMs: 0,
  samples: 0,
  warned: false,
});

export class LoopLagMonitor extends PeriodicLoop {
  readonly #windowMs: number;
  readonly #warnMs: number;
  #current: Window = emptyWindow(Date.now());
  #last: Window | undefined;

  constructor(options: LoopLagOptions) {
    super({ name: "loop_lag", logger: options.logger, intervalMs: options.intervalMs ?? 500 });
    this.#windowMs = options.windowMs ?? 60_000;
    this.#warnMs = options.warnMs ?? 1000;
  }

  protected override cycle(): Promise<CycleResult> {
    const now = Date.now();
    const lateMs = Math.max(0, now - (this.dueAt ?? now));
    if (now - this.#current.startedAt >= this.#windowMs) {
      this.#last = this.#current;
      this.#current = emptyWindow(now);
    }
    const window = this.#current;
    window.samples += 1;
    window.totalMs += lateMs;
    window.worstMs = Math.max(window.worstMs, lateMs);
    if (lateMs > this.#warnMs && !window.warned) {
      window.warned = true;
      this.logger.warn(
        { late_ms: lateMs, mean_ms: Math.round(window.totalMs / window.samples) },
        "Event loop lagging",
      );
    }
    return Promise.resolve(true);
  }

  snapshotLag(): LoopLagSnapshot {
    const window = this.#last ?? this.#current;
    return {
      window_started_at: new Date(window.startedAt).toISOString(),
      worst_ms: window.worstMs,
      mean_ms: window.samples === 0 ? 0 : Math.round((window.totalMs / window.samples) * 10) / 10,
      samples: window.samples,
    };
  }
}
