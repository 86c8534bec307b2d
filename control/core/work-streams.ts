/**
 * The Redis side of a work stream, taken through the one consumer group `workers`: read new
 * entries, complete handled ones (acknowledge and delete in one transaction, so the stream keeps
 * nothing handled), reclaim what a dead consumer left (paged XAUTOCLAIM), keep running entries
 * alive, and recreate a group a wipe removed. The loops that drive these live in consumers.ts.
 */
import type { Redis } from "ioredis";
import { STREAM_CAPS, WORKERS_GROUP } from "../../shared/redis-keys.ts";

export interface StreamEntry {
  id: string;
  fields: Record<string, string>;
}

export interface ClaimedEntry extends StreamEntry {
  /** How many times the group has delivered this entry, this delivery included. */
  deliveries: number;
}

type RawEntry = [id: string, fields: string[] | null];

function toEntry([id, raw]: RawEntry): StreamEntry {
  const fields: Record<string, string> = {};
  if (raw) { for (let i = 0; i + 1 < raw.length; i += 2) fields[raw[i]] = raw[i + 1]; }
  return { id, fields };
}

/** Redis answered "no such consumer group" (or its stream is gone): NOGROUP. */
export function isMissingGroup(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("NOGROUP");
}

/** Redis answered "no such key" for a stream command. */
export function isMissingKey(error: unknown): boolean {
  return error instanceof Error && /no such key|ERR The XGROUP subcommand requires the key/.test(
    error.message,
  );
}

/** Creates the group from the start of the stream (making the stream); true when it was missing. */
export async function ensureGroup(redis: Redis, stream: string): Promise<boolean> {
  try {
    await redis.xgroup("CREATE", stream, WORKERS_GROUP, "0", "MKSTREAM");
    return true;
  } catch (error) {
    if (error instanceof Error && error.message.startsWith("BUSYGROUP")) return false;
    throw error;
  }
}

/** Appends work entries, 500 to a pipeline; raises when Redis refuses any of them. */
export async function appendWork(
  redis: Redis,
  stream: string,
  entries: readonly Record<string, string>[],
): Promise<void> {
  for (let start = 0; start < entries.length; start += 500) {
    const pipeline = redis.pipeline();
    for (const fields of entries.slice(start, start + 500)) {
      pipeline.xadd(stream, "MAXLEN", "~", STREAM_CAPS.work, "*", ...Object.entries(fields).flat());
    }
    const replies = await pipeline.exec();
    const failed = replies?.find(([error]) => error !== null);
    if (!replies || failed) throw failed?.[0] ?? new Error("Pipeline returned nothing");
  }
}

/** New entries for this consumer, waiting up to `blockMs` for some. */
export async function readNew(
  redis: Redis,
  stream: string,
  consumer: string,
  count: number,
  blockMs: number,
): Promise<StreamEntry[]> {
  const reply = (await redis.xreadgroup(
    "GROUP",
    WORKERS_GROUP,
    consumer,
    "COUNT",
    count,
    "BLOCK",
    blockMs,
    "STREAMS",
    stream,
    ">",
  )) as [string, RawEntry[]][] | null;
  if (!reply) return [];
  return reply[0][1].map(toEntry);
}

/** Acknowledges and deletes handled entries in one transaction. */
export async function complete(
  redis: Redis,
  stream: string,
  ids: readonly string[],
): Promise<void> {
  if (ids.length === 0) return;
  const replies = await redis.multi().xack(stream, WORKERS_GROUP, ...ids).xdel(stream, ...ids)
    .exec();
  const failed = replies?.find(([error]) => error !== null);
  if (!replies || failed) throw failed?.[0] ?? new Error("Transaction aborted");
}

export interface ReclaimPage {
  cursor: string;
  entries: ClaimedEntry[];
  /** Pending ids whose entries were deleted from the stream (acknowledged here). */
  deleted: number;
}

/**
 * One page of reclaim: takes up to `count` entries idle for at least `minIdleMs` from any
 * consumer, starting at `cursor`, and reads their delivery counts. Entries deleted meanwhile are
 * acknowledged, so they leave the pending list.
 */
export async function reclaimPage(
  redis: Redis,
  stream: string,
  consumer: string,
  minIdleMs: number,
  cursor: string,
  count: number,
): Promise<ReclaimPage> {
  const reply = (await redis.xautoclaim(
    stream,
    WORKERS_GROUP,
    consumer,
    minIdleMs,
    cursor,
    "COUNT",
    count,
  )) as unknown as [string, RawEntry[], string[]?];
  const [next, raw, deletedIds = []] = reply;
  if (deletedIds.length > 0) await redis.xack(stream, WORKERS_GROUP, ...deletedIds);
  const entries = raw.filter(([, fields]) => fields !== null).map(toEntry);
  if (entries.length === 0) return { cursor: next, entries: [], deleted: deletedIds.length };
  const deliveries = await deliveryCounts(redis, stream, consumer, entries.map((e) => e.id));
  return {
    cursor: next,
    entries: entries.map((entry) => ({ ...entry, deliveries: deliveries.get(entry.id) ?? 1 })),
    deleted: deletedIds.length,
  };
}

async function deliveryCounts(
  redis: Redis,
  stream: string,
  consumer: string,
  ids: readonly string[],
): Promise<Map<string, number>> {
  const sorted = [...ids].sort(compareIds);
  const rows = (await redis.xpending(
    stream,
    WORKERS_GROUP,
    sorted[0],
    sorted[sorted.length - 1],
    ids.length * 2 + 10,
    consumer,
  )) as [string, string, number, number][];
  return new Map(rows.map(([id, , , deliveries]) => [id, Number(deliveries)]));
}

/**
 * Resets the idle time of entries this consumer is running, without counting a delivery, so no
 * other worker reclaims a long job.
 */
export async function keepAlive(
  redis: Redis,
  stream: string,
  consumer: string,
  ids: readonly string[],
): Promise<void> {
  if (ids.length === 0) return;
  await redis.xclaim(stream, WORKERS_GROUP, consumer, 0, ...ids, "JUSTID");
}

/** Stream ids compare by their millisecond part, then their sequence. */
export function compareIds(a: string, b: string): number {
  const [am, as] = a.split("-").map(BigInt);
  const [bm, bs] = b.split("-").map(BigInt);
  if (am !== bm) return am < bm ? -1 : 1;
  if (as !== bs) return as < bs ? -1 : 1;
  return 0;
}

export interface WorkStreamStats {
  length: number;
  pending: number;
  /** Length less pending: never Redis's group lag, which goes null once entries are deleted. */
  backlog: number;
  consumers: number;
  /** Age of the oldest entry on Redis's clock, or null when the stream is empty. */
  oldestAgeMs: number | null;
  groupMissing: boolean;
}

/** Depth of several streams in one pipeline: XLEN, XINFO GROUPS, the oldest entry, TIME. */
export async function workStreamStats(
  redis: Redis,
  streams: readonly string[],
): Promise<WorkStreamStats[]> {
  const pipeline = redis.pipeline();
  for (const stream of streams) {
    pipeline.xlen(stream);
    pipeline.xinfo("GROUPS", stream);
    pipeline.xrange(stream, "-", "+", "COUNT", 1);
  }
  pipeline.time();
  const replies = await pipeline.exec();
  if (!replies) throw new Error("Pipeline returned nothing");
  const [timeError, time] = replies[replies.length - 1];
  if (timeError) throw timeError;
  const [seconds, micros] = time as [string, string];
  const nowMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  return streams.map((_, index) => {
    const [lenError, len] = replies[index * 3];
    const [groupsError, groups] = replies[index * 3 + 1];
    const [, oldest] = replies[index * 3 + 2];
    const length = lenError ? 0 : Number(len);
    let pending = 0;
    let consumers = 0;
    let groupMissing = true;
    if (!groupsError && Array.isArray(groups)) {
      for (const group of groups as unknown[][]) {
        const info = new Map<string, unknown>();
        for (let i = 0; i + 1 < group.length; i += 2) info.set(String(group[i]), group[i + 1]);
        if (info.get("name") !== WORKERS_GROUP) continue;
        groupMissing = false;
        pending = Number(info.get("pending") ?? 0);
        consumers = Number(info.get("consumers") ?? 0);
      }
    }
    const first = (oldest as RawEntry[] | null)?.[0];
    const oldestAgeMs = first ? Math.max(0, nowMs - Number(first[0].split("-")[0])) : null;
    return {
      length,
      pending,
      backlog: Math.max(0, length - pending),
      consumers,
      oldestAgeMs,
      groupMissing,
    };
  });
}

export interface ConsumerInfo {
  name: string;
  pending: number;
  idleMs: number;
}

export async function consumersOf(redis: Redis, stream: string): Promise<ConsumerInfo[]> {
  try {
    const rows = (await redis.xinfo("CONSUMERS", stream, WORKERS_GROUP)) as unknown[][];
    return rows.map((row) => {
      const info = new Map<string, unknown>();
      for (let i = 0; i + 1 < row.length; i += 2) info.set(String(row[i]), row[i + 1]);
      return {
        name: String(info.get("name")),
        pending: Number(info.get("pending") ?? 0),
        idleMs: Number(info.get("idle") ?? 0),
      };
    });
  } catch (error) {
    if (isMissingGroup(error) || isMissingKey(error)) return [];
    throw error;
  }
}
