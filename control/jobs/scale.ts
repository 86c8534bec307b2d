/**
 * scale: one cloud connector a batch, every OCTOPROX_SCALE_INTERVAL (about 30 s) at its slot
 * second, and at once after a connector create or edit, after a cloud proxy is marked
 * terminating and after a deletion run that terminated instances (control/cloud/scale/run.ts).
 * Every cloud connector gets runs, enabled or not: a disabled or deleted one is drained and
 * emptied by them.
 */
import { setMaxListeners } from "node:events";
import type { Redis } from "ioredis";
import { errorText } from "../../shared/errors.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { JobKind } from "../../shared/roles.ts";
import type { Logger } from "../core/logging.ts";
import { isUuid, type ServiceDeps } from "../core/store.ts";
import type { Job, WorkBatch } from "../core/job.ts";
import type { ScaleMetrics } from "../cloud/scale/metrics.ts";
import { ScaleRun } from "./scale-run.ts";

export interface ScaleJobOptions {
  deps: ServiceDeps;
  redis: Redis;
  keys: RedisKeys;
  logger: Logger;
  metrics?: ScaleMetrics;
}

export class ScaleJob implements Job {
  readonly kind = JobKind.scale;
  readonly #o: ScaleJobOptions;
  readonly #run: ScaleRun;

  constructor(options: ScaleJobOptions) {
    this.#o = options;
    this.#run = new ScaleRun(options);
  }

  async run(batch: WorkBatch, signal: AbortSignal): Promise<void> {
    for (const key of batch.keys) {
      signal.throwIfAborted();
      if (!isUuid(key)) {
        this.#o.logger.warn({ key }, "Scale key skipped: not a connector id");
        continue;
      }
      const started = process.cpuUsage();
      let failed = true;
      // One run hands its signal to every cloud call it makes (an SDK adds a listener each):
      // a signal of its own, allowed as many as a run of a large pool makes.
      const runSignal = AbortSignal.any([signal]);
      setMaxListeners(1000, runSignal);
      try {
        const outcome = await this.#run.run(key.toLowerCase(), runSignal);
        failed = false;
        this.#o.logger.debug(outcome, "Scale run");
      } catch (error) {
        if (!signal.aborted) {
          this.#o.logger.warn(
            { connector: key, error: errorText(error) },
            "Scale run failed; the next one tries again",
          );
        }
        throw error;
      } finally {
        const used = process.cpuUsage(started);
        this.#o.metrics?.ran(failed, used.user + used.system);
      }
    }
  }
}
