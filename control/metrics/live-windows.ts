/**
 * The live windows as the api reads them: the counts gateways added since the last flush took
 * them. Read after the Postgres part of a view, under the request deadline, softly: without
 * Redis a view shows its totals alone, and the outage is logged once, when it begins (again
 * after Redis has answered in between).
 */
import type { Redis } from "ioredis";
import { errorText } from "../../shared/errors.ts";
import {
  ConnectorWindows,
  type EntityWindows,
  ProjectWindows,
  ProxyWindows,
  readCounts,
  TRANSFER_FIELDS,
  windowKey,
} from "../../shared/metric-windows.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import type { Logger } from "../core/logging.ts";
import { redisDeadline } from "../core/redis.ts";
import type { Counts } from "./usage-model.ts";

export interface LiveWindowsOptions {
  redis: Redis;
  keys: RedisKeys;
  logger: Logger;
  deadlineMs: number;
}

export type LiveKind = "project" | "connector" | "proxy";

const KINDS: Readonly<Record<LiveKind, EntityWindows<string>>> = {
  project: ProjectWindows,
  connector: ConnectorWindows,
  proxy: ProxyWindows,
};

export interface LiveRead {
  /** The window's counts per id (ids without a window are absent). */
  counts: Map<string, Counts>;
  /** False when Redis did not answer: the view shows its totals alone. */
  included: boolean;
}

export class LiveWindows {
  readonly #o: LiveWindowsOptions;
  #failing = false;

  constructor(options: LiveWindowsOptions) {
    this.#o = options;
  }

  async read(kind: LiveKind, ids: readonly string[]): Promise<LiveRead> {
    const counts = new Map<string, Counts>();
    if (ids.length === 0) return { counts, included: true };
    const { redis, keys, deadlineMs } = this.#o;
    try {
      const replies = await redisDeadline(deadlineMs, async () => {
        const pipeline = redis.pipeline();
        for (const id of ids) pipeline.hgetall(windowKey(keys, KINDS[kind], id));
        return ((await pipeline.exec()) ?? []).map(([error, hash]) => {
          if (error) throw error;
          return hash as Record<string, string>;
        });
      });
      replies.forEach((fields, i) => {
        if (Object.keys(fields).length === 0) return;
        const c = readCounts(TRANSFER_FIELDS, fields);
        counts.set(ids[i], {
          requests: c.requests,
          successes: c.successes,
          failures: c.failures,
          bytesSent: c.bytes_sent,
          bytesReceived: c.bytes_received,
          latencySumMs: c.latency_sum_ms,
        });
      });
      this.#failing = false;
      return { counts, included: true };
    } catch (error) {
      if (!this.#failing) {
        this.#failing = true;
        this.#o.logger.warn(
          { what: "live metric windows", error: errorText(error) },
          "Runtime state unavailable, shown without it",
        );
      }
      return { counts: new Map(), included: false };
    }
  }
}
