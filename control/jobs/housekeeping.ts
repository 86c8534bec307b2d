/**
 * Install-wide housekeeping kinds, each published once per period under the key `all`. None
 * keeps a record of what it did: each checks what is needed and does it.
 */
import type { Redis } from "ioredis";
import { type RedisKeys, WORK_STREAMS } from "../../shared/redis-keys.ts";
import { JobKind } from "../../shared/roles.ts";
import type { Logger } from "../core/logging.ts";
import { consumersOf } from "../core/work-streams.ts";
import { WORKERS_GROUP } from "../../shared/redis-keys.ts";
import type { Job, WorkBatch } from "../core/job.ts";
import type { JobQueue } from "../core/job-queue.ts";
import { blockedOrPending } from "../traffic/asks.ts";
import { returnEndedLeases } from "../provider-api/extraction/leases.ts";

/** Ended extraction leases one hygiene run returns at most (the next run returns the rest). */
export const ENDED_LEASES_PER_RUN = 5000;

export interface IndexHygieneOptions {
  redis: Redis;
  keys: RedisKeys;
  /** Where step 4 asks for traffic decisions. */
  jobs: JobQueue;
  logger: Logger;
  /** A consumer with nothing pending and idle this long belongs to a stopped process. */
  stoppedConsumerIdleMs?: number;
  now?: () => number;
}

/**
 * index_hygiene, every minute, in steps; a failed step ends the run and the next minute's run
 * repeats every step:
 * 1. the instance index loses the members whose registry keys expired, and the tunnel carriers
 *    index those whose status keys did;
 * 2. stopped consumers of the work streams (nothing pending, idle an hour) are removed; a live
 *    worker resets its idle time at least every 20 seconds, and consumer names are fresh for
 *    each process, so only stopped processes qualify;
 * 3. ended quarantines are trimmed (readers skip them anyway);
 * 4. a traffic decision is asked for every subject blocked or pending, each once, ended blocks
 *    included: a decision lost, trimmed or given up leaves a block or a pending mark for about a
 *    minute at most;
 * 5. extraction leases whose end has passed are ended: their proxies retire, or go back to
 *    checking where the connector reuses released proxies, and a pool run is asked for those
 *    connectors (the api's extractions end some as they come; this step is the bound when none
 *    come).
 */
export class IndexHygieneJob implements Job {
  readonly kind = JobKind.indexHygiene;
  readonly #o: IndexHygieneOptions;

  constructor(options: IndexHygieneOptions) {
    this.#o = options;
  }

  async run(_batch: WorkBatch): Promise<void> {
    const pruned = await this.pruneInstances();
    const removed = await this.removeStoppedConsumers();
    const trimmed = await this.trimQuarantines();
    if (pruned + removed + trimmed > 0) {
      this.#o.logger.info({ pruned, removed, trimmed }, "Index hygiene removed stale entries");
    }
    await this.askTrafficDecisions();
    const ended = await this.returnEndedLeases();
    if (ended.leases > 0) {
      this.#o.logger.info(
        { leases: ended.leases, returned: ended.entries, retired: ended.retired },
        "Extraction leases past their end ended",
      );
    }
  }

  /** Step 5: leases past their end end. */
  returnEndedLeases() {
    const now = (this.#o.now ?? Date.now)();
    return returnEndedLeases(this.#o, { nowMs: now, limit: ENDED_LEASES_PER_RUN });
  }

  /** Step 4: one traffic decision asked for each subject blocked or pending. */
  async askTrafficDecisions(): Promise<number> {
    const subjects = await blockedOrPending(this.#o.redis, this.#o.keys);
    if (subjects.length === 0) return 0;
    if (!await this.#o.jobs.request(JobKind.traffic, subjects)) {
      throw new Error("Traffic decisions not asked: Redis did not take the requests");
    }
    return subjects.length;
  }

  async pruneInstances(): Promise<number> {
    const { keys } = this.#o;
    return await this.#prune(keys.instanceIndex, keys.instance) +
      await this.#prune(keys.tunnelCarriers, keys.tunnelStatus);
  }

  /** Removes from `index` the members whose key (`keyOf`) expired. */
  async #prune(index: string, keyOf: (id: string) => string): Promise<number> {
    const { redis } = this.#o;
    const members = await redis.smembers(index);
    if (members.length === 0) return 0;
    const pipeline = redis.pipeline();
    for (const id of members) pipeline.exists(keyOf(id));
    const replies = (await pipeline.exec()) ?? [];
    const gone = members.filter((_, i) => {
      const [error, exists] = replies[i] ?? [];
      if (error) throw error;
      return Number(exists) === 0;
    });
    if (gone.length > 0) await redis.srem(index, ...gone);
    return gone.length;
  }

  async removeStoppedConsumers(): Promise<number> {
    const { redis, keys } = this.#o;
    const idleMs = this.#o.stoppedConsumerIdleMs ?? 3_600_000;
    let removed = 0;
    for (const name of WORK_STREAMS) {
      const stream = keys.workStream(name);
      for (const consumer of await consumersOf(redis, stream)) {
        if (consumer.pending > 0 || consumer.idleMs < idleMs) continue;
        await redis.xgroup("DELCONSUMER", stream, WORKERS_GROUP, consumer.name);
        removed += 1;
      }
    }
    return removed;
  }

  async trimQuarantines(): Promise<number> {
    const now = (this.#o.now ?? Date.now)();
    return await this.#o.redis.zremrangebyscore(this.#o.keys.proxyQuarantined, "-inf", now);
  }
}
