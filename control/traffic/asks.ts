/**
 * Asking for traffic decisions. The api, after a reset or an edit of what decides a block, marks
 * the subject pending and appends its job entry in one MULTI, so no reader sees the mark without
 * the ask; the mark is a token of its own, which only a decision whose reads began after it
 * clears (shared/lua/traffic_set_block.lua). Index hygiene asks for every blocked or pending
 * subject each minute, without a mark. Gateways ask from their metering script.
 */
import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { type RedisKeys, STREAM_CAPS } from "../../shared/redis-keys.ts";
import { JobKind } from "../../shared/roles.ts";
import { redisDeadline } from "../core/redis.ts";

type AskDeps = { redis: Redis; keys: RedisKeys };

/**
 * Marks each subject pending and asks for its decision, in one MULTI, under the deadline. Raises
 * (StoreUnavailableError) when Redis does not take it: the caller's write already stands, and
 * index hygiene covers nothing that was never marked, so the api says so in its log.
 */
export async function askPending(
  deps: AskDeps,
  subjects: readonly string[],
  deadlineMs: number,
): Promise<void> {
  if (subjects.length === 0) return;
  const { redis, keys } = deps;
  await redisDeadline(deadlineMs, async () => {
    const multi = redis.multi();
    for (const subject of subjects) {
      multi.hset(keys.trafficPending, subject, randomUUID());
      multi.xadd(
        keys.jobStream(JobKind.traffic),
        "MAXLEN",
        "~",
        STREAM_CAPS.work,
        "*",
        "key",
        subject,
      );
    }
    const replies = await multi.exec();
    const failed = replies?.find(([error]) => error !== null);
    if (!replies || failed) throw failed?.[0] ?? new Error("Transaction discarded");
  });
}

/** Every subject blocked or pending now (ended blocks included), each once. */
export async function blockedOrPending(redis: Redis, keys: RedisKeys): Promise<string[]> {
  const [blocked, pending] = await Promise.all([
    redis.hkeys(keys.trafficBlocked),
    redis.hkeys(keys.trafficPending),
  ]);
  return [...new Set([...blocked, ...pending])].sort();
}
