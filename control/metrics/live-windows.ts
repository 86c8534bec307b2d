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
  DeviceWindows,
  ProjectWindows,
  ProxyWindows,
  readCounts,
  windowKey,
} from "../../shared/metric-windows.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import type { Logger } from "../core/logging.ts";
import { redisDeadline } from "../core/redis.ts";
import { type Counts, type CountsOf, countsShape, type UsageKind } from "./usage-model.ts";

export interface LiveWindowsOptions {
  redis: Redis;
  keys: RedisKeys;
  logger: Logger;
  deadlineMs: number;
}

export type LiveKind = UsageKind;

/** Each kind's windows: a device's hold its own fields beside the transfer counts. */
const KINDS = {
  project: ProjectWindows,
  connector: ConnectorWindows,
  proxy: ProxyWindows,
  device: DeviceWindows,
} as const satisfies Record<LiveKind, unknown>;

export interface LiveRead<C extends Counts = Counts> {
  /** The window's counts per id (ids without a window are absent). */
  counts: Map<string, C>;
  /** False when Redis did not answer: the view shows its totals alone. */
  included: boolean;
}

export class LiveWindows {
  readonly #o: LiveWindowsOptions;
  #failing = false;

  constructor(options: LiveWindowsOptions) {
    this.#o = options;
  }

  async read<K extends LiveKind>(kind: K, ids: readonly string[]): Promise<LiveRead<CountsOf<K>>> {
    const counts = new Map<string, CountsOf<K>>();
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
      const shape = countsShape(kind);
      replies.forEach((fields, i) => {
        if (Object.keys(fields).length === 0) return;
        counts.set(ids[i], shape.ofRow(readCounts(KINDS[kind].fields, fields)));
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
