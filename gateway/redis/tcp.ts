/**
 * The TCP transport: ioredis, whose client is the gateway's Redis interface as it is
 * (shared/redis/contract.ts), plus the feed's blocking stream reads on a connection of their own.
 */
import { Redis } from "ioredis";
import type { BlockingStreamReader, GatewayRedis } from "../../shared/redis/contract.ts";
import type { RedisConnection } from "./transport.ts";

/** A client named `name` in Redis (CLIENT LIST), connecting at once. */
export function connectTcpRedis(url: string, name: string): RedisConnection {
  const redis = new Redis(url, {
    connectionName: name,
    // Commands wait for a connection at most one reconnect; the follower retries with back-off.
    maxRetriesPerRequest: 1,
    connectTimeout: 5_000,
    retryStrategy: (times) => Math.min(100 * times, 1_000),
    lazyConnect: false,
  });
  // Errors surface on the commands; an unheard 'error' event must not end the process.
  redis.on("error", () => {});
  const commands: GatewayRedis = redis;
  return {
    transport: "tcp",
    redis: commands,
    blockingReader: () => blockingReader(redis),
    samples: () => [],
    close: () => redis.disconnect(),
  };
}

/**
 * The blocking reads of a stream on a duplicate of `redis` (a blocked XREAD holds its
 * connection). Closing it ends a read under way: a blocked read cannot be cancelled on its
 * connection, and a read queued while the client reconnects would otherwise wait for ever.
 */
export function blockingReader(redis: Redis): BlockingStreamReader {
  const reader = redis.duplicate();
  reader.on("error", () => {});
  return {
    async tail(key) {
      const last = await reader.xrevrange(key, "+", "-", "COUNT", 1);
      return last[0]?.[0] ?? "0-0";
    },
    async after(key, id, blockMs) {
      const reply = await reader.xread("COUNT", 1000, "BLOCK", blockMs, "STREAMS", key, id);
      const entries = reply?.[0]?.[1];
      return entries && entries.length > 0 ? entries[entries.length - 1][0] : undefined;
    },
    close: () => reader.disconnect(),
  };
}
