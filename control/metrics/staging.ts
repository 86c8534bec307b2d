/**
 * A metrics flush's staging hash in Redis (`metrics:taken:<flush id>`): the live windows are
 * moved into it by shared/lua/metrics_take.lua, read back in pages, and deleted once the flush
 * committed; a flush given up unrecorded hands them back to the live windows with
 * shared/lua/metrics_restore.lua. Every window kind and field type comes from
 * shared/metric-windows.ts, the declarations gateway metering writes through.
 */
import type { Redis } from "ioredis";
import {
  fieldNames,
  FieldType,
  METERED_WINDOW_KINDS,
  type MeteredWindowKind,
  WINDOW_SAFETY_TTL_SECONDS,
} from "../../shared/metric-windows.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import {
  metricsRestoreResult,
  metricsTakeResult,
  runScript,
  runScripts,
  type ScriptCall,
} from "../core/scripts.ts";

/** Fields read back a page at a time, so thousands of windows never come back as one reply. */
export const STAGING_PAGE_FIELDS = 1000;
/** Windows per take script call: a call holds Redis for well under a millisecond. */
const TAKE_KEYS_PER_CALL = 500;
/** Index members read per SSCAN page (a hint: Redis may answer more or fewer). */
const INDEX_PAGE = 1000;
/** A staging hash outlives any retry of its flush; it bounds one whose worker vanished. */
export const STAGING_TTL_SECONDS = 86_400;

/** One window as a flush took it. */
export interface StagedWindow {
  kind: MeteredWindowKind;
  /** The part of the window key after `metrics:<kind>:`. */
  keyText: string;
  /** Field values in the kind's declaration order. */
  values: number[];
}

export interface TakeStats {
  staged: number;
  /** Staged under this flush by an earlier delivery: left listed for the next flush. */
  skipped: number;
  /** Empty or missing windows taken out of their index. */
  unlisted: number;
}

export interface StagingOptions {
  redis: Redis;
  keys: RedisKeys;
}

const KIND_BY_NAME = new Map<string, MeteredWindowKind>(
  METERED_WINDOW_KINDS.map((kind) => [kind.name, kind]),
);

export class FlushStaging {
  readonly #redis: Redis;
  readonly #keys: RedisKeys;

  constructor(options: StagingOptions) {
    this.#redis = options.redis;
    this.#keys = options.keys;
  }

  /** Moves every listed window of every kind into the flush's staging hash. */
  async take(flushId: string, signal?: AbortSignal): Promise<TakeStats> {
    const total: TakeStats = { staged: 0, skipped: 0, unlisted: 0 };
    for (const kind of METERED_WINDOW_KINDS) {
      const stats = await this.#takeKind(flushId, kind, signal);
      total.staged += stats.staged;
      total.skipped += stats.skipped;
      total.unlisted += stats.unlisted;
    }
    return total;
  }

  async #takeKind(
    flushId: string,
    kind: MeteredWindowKind,
    signal?: AbortSignal,
  ): Promise<TakeStats> {
    const staging = this.#keys.metricsTaken(flushId);
    const index = this.#keys.metricIndex(kind.name);
    const args = [kind.name, String(STAGING_TTL_SECONDS), ...fieldNames(kind.fields)];
    const stats: TakeStats = { staged: 0, skipped: 0, unlisted: 0 };
    // SSCAN rather than one SMEMBERS: memory stays a page whatever the index holds. A member
    // seen twice is harmless (a staged window is skipped), and one listed during the scan that
    // it misses goes to the next flush.
    let cursor = "0";
    do {
      signal?.throwIfAborted();
      const [next, members] = await this.#redis.sscan(index, cursor, "COUNT", INDEX_PAGE);
      cursor = next;
      const calls: ScriptCall[] = [];
      for (let start = 0; start < members.length; start += TAKE_KEYS_PER_CALL) {
        const windows = members.slice(start, start + TAKE_KEYS_PER_CALL);
        calls.push({ keys: [staging, index, ...windows], args });
      }
      for (const reply of await runScripts(this.#redis, "metrics_take", calls)) {
        const result = metricsTakeResult(reply);
        stats.staged += result.staged;
        stats.skipped += result.skipped;
        stats.unlisted += result.unlisted;
      }
    } while (cursor !== "0");
    return stats;
  }

  /**
   * The staged windows, a page at a time. HSCAN may hand a field out twice; each window is
   * yielded once (the flush commits it once), the seen set costing a key per window.
   */
  async *read(flushId: string, signal?: AbortSignal): AsyncGenerator<StagedWindow[]> {
    const staging = this.#keys.metricsTaken(flushId);
    const seen = new Set<string>();
    let cursor = "0";
    do {
      signal?.throwIfAborted();
      const [next, flat] = await this.#redis.hscan(staging, cursor, "COUNT", STAGING_PAGE_FIELDS);
      cursor = next;
      const page: StagedWindow[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const windowKey = flat[i];
        if (seen.has(windowKey)) continue;
        seen.add(windowKey);
        const staged = this.#decode(windowKey, flat[i + 1]);
        if (staged) page.push(staged);
      }
      if (page.length > 0) yield page;
    } while (cursor !== "0");
  }

  #decode(windowKey: string, value: string): StagedWindow | undefined {
    const parts = value.split(",");
    const kind = KIND_BY_NAME.get(parts[0]);
    if (kind === undefined) return undefined;
    const prefix = this.#keys.metricWindow(kind.name, "");
    if (!windowKey.startsWith(prefix)) return undefined;
    const names = fieldNames(kind.fields);
    const values = names.map((_, i) => {
      const number = Number(parts[i + 1] ?? "0");
      return Number.isFinite(number) ? number : 0;
    });
    return { kind, keyText: windowKey.slice(prefix.length), values };
  }

  /** How many windows the flush's staging hash holds. */
  async size(flushId: string): Promise<number> {
    return await this.#redis.hlen(this.#keys.metricsTaken(flushId));
  }

  /** Deletes the staging hash: the flush committed (or another delivery did). */
  async clear(flushId: string): Promise<void> {
    await this.#redis.del(this.#keys.metricsTaken(flushId));
  }

  /**
   * Hands the staged counts back to the live windows, each field by its type, and deletes the
   * staging hash, in one script: the next flush writes them. Answers the windows given back.
   */
  async restore(flushId: string): Promise<{ restored: number; lost: number }> {
    const scriptKeys = [this.#keys.metricsTaken(flushId)];
    const args = [String(WINDOW_SAFETY_TTL_SECONDS), String(METERED_WINDOW_KINDS.length)];
    for (const kind of METERED_WINDOW_KINDS) {
      scriptKeys.push(this.#keys.metricIndex(kind.name));
      const names = fieldNames(kind.fields);
      args.push(kind.name, String(names.length));
      for (const name of names) {
        const type = (kind.fields as Record<string, FieldType>)[name];
        args.push(name, type === FieldType.float ? "f" : "i");
      }
    }
    const result = metricsRestoreResult(
      await runScript(this.#redis, "metrics_restore", scriptKeys, args),
    );
    return { restored: result.restored, lost: result.unknown + result.refused };
  }
}
