/**
 * The worker's scale counts, by cloud: calls by operation and outcome, scaling steps and the
 * instances they moved, rotations, and unrecorded instances terminated. Kept in memory, read by
 * the worker's snapshot (its heartbeat and /metrics).
 */
import type { CloudFailure } from "../../../shared/errors.ts";

export interface ScaleMetricsSnapshot {
  /** `<cloud>\t<operation>\t<outcome>` → calls (outcome `ok` or a CloudFailure, or `other`). */
  calls: Record<string, number>;
  /** `<cloud>\t<up|down>` → steps taken. */
  steps: Record<string, number>;
  /** `<cloud>\t<up|down>` → instances a step created or drained. */
  stepInstances: Record<string, number>;
  /** `<cloud>` → instances replaced by rotation. */
  rotations: Record<string, number>;
  /** `<cloud>` → listed instances with no row, terminated. */
  unrecorded: Record<string, number>;
  /** Runs finished, and runs that failed. */
  runs: number;
  failedRuns: number;
  /** Worker CPU spent in runs (user + system), microseconds. */
  cpuMicros: number;
}

const add = (record: Record<string, number>, key: string, by = 1) => {
  record[key] = (record[key] ?? 0) + by;
};

export class ScaleMetrics {
  readonly #s: ScaleMetricsSnapshot = {
    calls: {},
    steps: {},
    stepInstances: {},
    rotations: {},
    unrecorded: {},
    runs: 0,
    failedRuns: 0,
    cpuMicros: 0,
  };

  call(cloud: string, operation: string, failure: CloudFailure | "other" | undefined): void {
    add(this.#s.calls, `${cloud}\t${operation}\t${failure ?? "ok"}`);
  }

  step(cloud: string, direction: "up" | "down", instances: number): void {
    add(this.#s.steps, `${cloud}\t${direction}`);
    add(this.#s.stepInstances, `${cloud}\t${direction}`, instances);
  }

  rotation(cloud: string): void {
    add(this.#s.rotations, cloud);
  }

  unrecorded(cloud: string): void {
    add(this.#s.unrecorded, cloud);
  }

  ran(failed: boolean, cpuMicros: number): void {
    this.#s.runs++;
    if (failed) this.#s.failedRuns++;
    this.#s.cpuMicros += cpuMicros;
  }

  snapshot(): ScaleMetricsSnapshot {
    return structuredClone(this.#s);
  }
}
