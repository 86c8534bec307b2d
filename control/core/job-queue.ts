/**
 * Run-now requests: any role asks for a job by appending its keys to the kind's stream, each key
 * once, 500 to a pipeline, under the request deadline. The first pipeline that fails ends the
 * call, logged and dropped: the producers' periods and later writes bring the work back.
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { FIRST_LANE_KINDS, type JobKind } from "../../shared/roles.ts";
import { errorText } from "../../shared/errors.ts";
import type { Logger } from "./logging.ts";
import { redisDeadline } from "./redis.ts";
import { appendWork } from "./work-streams.ts";

export interface JobQueueOptions {
  redis: Redis;
  keys: RedisKeys;
  logger: Logger;
  deadlineMs: number;
}

export class JobQueue {
  readonly #o: JobQueueOptions;

  constructor(options: JobQueueOptions) {
    this.#o = options;
  }

  /**
   * Asks for a run of `kind` for each key now; with `first`, on the kind's first lane (ahead of
   * its periodic runs; kinds without one take it on their regular stream). True when Redis took
   * every key.
   */
  async request(
    kind: JobKind,
    keys: Iterable<string>,
    options: { first?: boolean } = {},
  ): Promise<boolean> {
    const unique = [...new Set(keys)];
    if (unique.length === 0) return true;
    const stream = options.first === true && FIRST_LANE_KINDS.includes(kind)
      ? this.#o.keys.jobFirstStream(kind)
      : this.#o.keys.jobStream(kind);
    try {
      await redisDeadline(
        this.#o.deadlineMs,
        () => appendWork(this.#o.redis, stream, unique.map((key) => ({ key }))),
      );
      return true;
    } catch (error) {
      this.#o.logger.warn(
        { kind, keys: unique.length, error: errorText(error) },
        "Run-now request not taken by Redis; the periodic run covers it",
      );
      return false;
    }
  }
}
