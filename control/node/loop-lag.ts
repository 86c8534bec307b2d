/**
 * The loop-lag monitor: a timer every half second that fires late by what every other await
 * in the process is paying. Each minute's worst and mean lateness go into the heartbeat
 * snapshot (and /metrics); a timer over a second late is logged as it fires, once a minute at
 * most, so a stall is in the log when it happens rather than when its minute ends. The windows
 * are the gateway's too (shared/loop-lag.ts); here they run as a PeriodicLoop, so the System page
 * shows the monitor among the node's loops.
 */
import {
  LOOP_LAG_INTERVAL_MS,
  type LoopLagSnapshot,
  LoopLagWindows,
} from "../../shared/loop-lag.ts";
import { type CycleResult, PeriodicLoop } from "../../shared/async/loop.ts";
import type { Logger } from "../core/logging.ts";

export type { LoopLagSnapshot };

export interface LoopLagOptions {
  logger: Logger;
  intervalMs?: number;
  windowMs?: number;
  /** A timer later than this is logged. */
  warnMs?: number;
}

export class LoopLagMonitor extends PeriodicLoop<Logger> {
  readonly #windows: LoopLagWindows;

  constructor(options: LoopLagOptions) {
    super({
      name: "loop_lag",
      logger: options.logger,
      intervalMs: options.intervalMs ?? LOOP_LAG_INTERVAL_MS,
    });
    this.#windows = new LoopLagWindows({
      windowMs: options.windowMs,
      warnMs: options.warnMs,
      lagging: (lateMs, meanMs) =>
        this.logger.warn({ late_ms: lateMs, mean_ms: meanMs }, "Event loop lagging"),
    });
  }

  protected override cycle(): Promise<CycleResult> {
    const now = Date.now();
    this.#windows.note(now - (this.dueAt ?? now));
    return Promise.resolve(true);
  }

  snapshotLag(): LoopLagSnapshot {
    return this.#windows.snapshot();
  }
}
