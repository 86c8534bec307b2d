/**
 * The process's Redis client and the request deadline every Redis step outside a loop runs
 * under. Commands fail fast while Redis is away (no offline queue): callers keep what they must
 * and try again, so a dead Redis never piles up commands in memory.
 */
import { Redis } from "ioredis";
import { StoreUnavailableError } from "../../shared/errors.ts";
import { withDeadline } from "../../shared/async/deadline.ts";

export { Redis };

export interface RedisOptions {
  /** Shown in CLIENT LIST; the consumer names of a worker derive from the process id anyway. */
  connectionName?: string;
  /** Keep commands queued while disconnected (blocking readers want this off too). */
  offlineQueue?: boolean;
}

export function createRedis(url: string, options: RedisOptions = {}): Redis {
  const client = new Redis(url, {
    connectionName: options.connectionName,
    enableOfflineQueue: options.offlineQueue ?? false,
    maxRetriesPerRequest: 1,
    connectTimeout: 5000,
    // Reconnect forever, at most a second apart: Redis coming back must be noticed quickly.
    retryStrategy: (times) => Math.min(100 * times, 1000),
    lazyConnect: false,
  });
  // Errors surface on the commands; an unhandled 'error' event would crash the process.
  client.on("error", () => {});
  return client;
}

/**
 * Runs one Redis step under the shared deadline; a step that fails or outlives it fails as
 * unavailable, with the step's error (or the `DeadlineError`) as the cause.
 */
export async function redisDeadline<T>(ms: number, step: () => Promise<T>): Promise<T> {
  try {
    return await withDeadline("Redis step", ms, () => step());
  } catch (error) {
    if (error instanceof StoreUnavailableError) throw error;
    throw new StoreUnavailableError("redis", { cause: error });
  }
}
