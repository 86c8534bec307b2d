/**
 * The sticky bindings in Redis: one string key per session (`redisKeys(prefix).sticky`), the
 * bound proxy id, expiring with the session's life. Works on any client with ioredis's `get` and
 * `set` (Deno and Node alike); the gateway passes its shared command client.
 */
import type { GatewayRedis } from "../../redis/contract.ts";
import type { RedisKeys } from "../../redis-keys.ts";
import type { StickyStore } from "./store.ts";

/** The two commands this store sends. */
export type StickyRedis = Pick<GatewayRedis, "get" | "set">;

/** Proxy ids are UUIDs; anything far longer in the key is not ours and is ignored. */
const MAX_PROXY_ID_LENGTH = 256;

export class RedisStickyStore implements StickyStore {
  private readonly redis: StickyRedis;
  private readonly keys: Pick<RedisKeys, "sticky">;

  constructor(redis: StickyRedis, keys: Pick<RedisKeys, "sticky">) {
    this.redis = redis;
    this.keys = keys;
  }

  get(projectId: string, sessionId: string, signal: AbortSignal): Promise<string | undefined> {
    if (signal.aborted) return Promise.reject(signal.reason);
    // A command cannot be taken back from ioredis's queue; giving up on its answer is what we can.
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      this.redis.get(this.keys.sticky(projectId, sessionId)).then((value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(
          value === null || value === "" || value.length > MAX_PROXY_ID_LENGTH ? undefined : value,
        );
      }, (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      });
    });
  }

  async set(projectId: string, sessionId: string, proxyId: string, ttlMs: number): Promise<void> {
    await this.redis.set(
      this.keys.sticky(projectId, sessionId),
      proxyId,
      "PX",
      Math.max(1, Math.round(ttlMs)),
    );
  }
}
