/**
 * metrics_flush: the gateways' Redis windows into the Postgres history and totals. The
 * producer publishes one entry every OCTOPROX_METRICS_FLUSH_INTERVAL; the entry's id names the
 * flush, so every delivery of it is the same flush.
 *
 * 1. Recorded already? A delivery whose flush is in metric_flushes only deletes its staging
 *    hash: it takes nothing, so no window is taken under an id that can no longer commit.
 * 2. Take: every listed window moves into the staging hash, each in one script step.
 * 3. Commit: one transaction records the flush first (another delivery that committed first
 *    leaves this one writing nothing), then reads the staging hash back a page of 1,000 at a
 *    time and writes each page's windows into the history and the totals.
 * 4. Clear: the staging hash is deleted.
 *
 * Then the per-site judging counts of today and yesterday are copied from Redis into
 * domain_metrics (control/metrics/domain-history.ts: a copy again changes nothing).
 *
 * A give-up (the delivery after the last) clears a committed flush, and hands an uncommitted
 * one's staged counts back to the live windows for the next flush; with Postgres unreadable it
 * raises and is given up again at the next reclaim. A flush that took nothing records nothing.
 */
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import { translatePostgresError } from "../../db/errors.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { JobKind } from "../../shared/roles.ts";
import type { Logger } from "../core/logging.ts";
import {
  commitFlush,
  type CommitResult,
  flushBucket,
  flushRecorded,
} from "../metrics/history-writer.ts";
import { FlushStaging, type TakeStats } from "../metrics/staging.ts";
import { copyDomainCounts } from "../metrics/domain-history.ts";
import type { Job, WorkBatch } from "../core/job.ts";

export interface MetricsFlushOptions {
  database: Database;
  redis: Redis;
  keys: RedisKeys;
  logger: Logger;
}

/** What one delivery did, for logs and tests. */
export interface FlushOutcome {
  flushId: string;
  /** `recorded`: committed before; `empty`: nothing taken or staged; `lost`: another delivery won. */
  result: "committed" | "recorded" | "empty" | "lost";
  take?: TakeStats;
  windows: number;
  unreadable: number;
  written?: CommitResult["written"];
}

export class MetricsFlushJob implements Job {
  readonly kind = JobKind.metricsFlush;
  readonly #o: MetricsFlushOptions;
  readonly #staging: FlushStaging;

  constructor(options: MetricsFlushOptions) {
    this.#o = options;
    this.#staging = new FlushStaging({ redis: options.redis, keys: options.keys });
  }

  async run(batch: WorkBatch, signal: AbortSignal): Promise<void> {
    for (const flushId of batch.ids) await this.flush(flushId, signal);
    // The per-site judging counts too: copied whole each time, so any delivery may do it.
    await copyDomainCounts(this.#o);
  }

  /** One delivery of one flush. Raises (leaving the entry pending) when a store fails. */
  async flush(flushId: string, signal?: AbortSignal): Promise<FlushOutcome> {
    const sql = this.#o.database.sql;
    if (await this.#postgres(() => flushRecorded(sql, flushId))) {
      await this.#staging.clear(flushId);
      return { flushId, result: "recorded", windows: 0, unreadable: 0 };
    }
    const take = await this.#staging.take(flushId, signal);
    if (await this.#staging.size(flushId) === 0) {
      // Nothing taken, nothing staged by an earlier delivery: nothing to record.
      await this.#staging.clear(flushId);
      return { flushId, result: "empty", take, windows: 0, unreadable: 0 };
    }
    signal?.throwIfAborted();
    const commit = await this.#postgres(() =>
      commitFlush(sql, flushId, flushBucket(flushId), this.#staging.read(flushId, signal))
    );
    if (commit.unreadable > 0) {
      this.#o.logger.warn(
        { flush: flushId, unreadable: commit.unreadable },
        "Metric windows this release cannot read were dropped",
      );
    }
    await this.#staging.clear(flushId);
    const outcome: FlushOutcome = {
      flushId,
      result: commit.committed ? "committed" : "lost",
      take,
      windows: commit.windows,
      unreadable: commit.unreadable,
      written: commit.written,
    };
    this.#o.logger.debug({ ...outcome }, "Metrics flushed");
    return outcome;
  }

  async giveUp(batch: WorkBatch): Promise<void> {
    const sql = this.#o.database.sql;
    for (const flushId of batch.ids) {
      if (await this.#postgres(() => flushRecorded(sql, flushId))) {
        await this.#staging.clear(flushId);
        continue;
      }
      const { restored, lost } = await this.#staging.restore(flushId);
      this.#o.logger.warn(
        { flush: flushId, restored, lost },
        "Metrics flush given up; its counts go back to the live windows for the next flush",
      );
    }
  }

  async #postgres<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      throw translatePostgresError(error);
    }
  }
}
