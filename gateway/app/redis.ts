/**
 * The gateway's Redis clients (ioredis): the process's one (the feed follower, the heartbeat and
 * the main isolate's writers) and each worker isolate's own.
 */
import { Redis } from "ioredis";
import type { GatewaySettings } from "../../shared/settings.ts";

/** A client named `name` in Redis (CLIENT LIST), connecting at once. */
export function connectRedis(settings: GatewaySettings, name: string): Redis {
  const redis = new Redis(settings.redisUrl, {
    connectionName: name,
    // Commands wait for a connection at most one reconnect; the follower retries with back-off.
    maxRetriesPerRequest: 1,
    connectTimeout: 5_000,
    retryStrategy: (times) => Math.min(100 * times, 1_000),
    lazyConnect: false,
  });
  // Errors surface on the commands; an unheard 'error' event must not end the process.
  redis.on("error", () => {});
  return redis;
}
