/**
 * Builds the routing core the socket layer runs on: the router (gateway/core/router.ts), the
 * destination guard (gateway/core/guard.ts) and the feed follower (gateway/feed/follower.ts)
 * over one Redis client. The gateway reads only Redis (OCTOPROX_REDIS_URL, its prefix) and the
 * internal secret the feed keys derive from; never Postgres.
 */
import { Redis } from "ioredis";
import { deriveFeedKeys, verifyPassword } from "../../shared/feed/codec.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import type { GatewaySettings } from "../../shared/settings.ts";
import { createDestinationGuard } from "../core/guard.ts";
import { CoreRouter } from "../core/router.ts";
import { FeedFollower, type FeedLogger } from "../feed/follower.ts";
import { RedisStickyStore } from "../sticky/redis-store.ts";
import type { RoutingCore } from "./gateway.ts";
import type { Logger } from "./log.ts";

/** Every address a name resolves to (A and AAAA), for the guard; none when it does not. */
async function resolveAddresses(host: string): Promise<string[]> {
  const [v4, v6] = await Promise.allSettled([
    Deno.resolveDns(host, "A"),
    Deno.resolveDns(host, "AAAA"),
  ]);
  return [
    ...(v4.status === "fulfilled" ? v4.value : []),
    ...(v6.status === "fulfilled" ? v6.value : []),
  ];
}

/** The follower logs pino-style, `(fields, message)`. */
function feedLogger(logger: Logger): FeedLogger {
  return {
    info: (fields, message) => logger.info(message, fields),
    warn: (fields, message) => logger.warn(message, fields),
    error: (fields, message) => logger.error(message, fields),
  };
}

export async function buildRoutingCore(
  settings: GatewaySettings,
  logger: Logger,
  instance: string,
): Promise<RoutingCore> {
  const feedKeys = await deriveFeedKeys(settings.internalSecret);
  const redis = new Redis(settings.redisUrl, {
    connectionName: `octoprox-gateway:${instance}`,
    // Commands wait for a connection at most one reconnect; the follower retries with back-off.
    maxRetriesPerRequest: 1,
    connectTimeout: 5_000,
    retryStrategy: (times) => Math.min(100 * times, 1_000),
    lazyConnect: false,
  });
  // Errors surface on the commands; an unheard 'error' event must not end the process.
  redis.on("error", () => {});
  const keys = redisKeys(settings.redisPrefix);
  const router = new CoreRouter({
    verifyPassword: (password, digest) => verifyPassword(feedKeys, password, digest),
    log: { warn: (message, fields) => logger.warn(message, fields) },
    // Sticky bindings in Redis, read under the request deadline and written by held tasks.
    sticky: {
      store: new RedisStickyStore(redis, keys),
      requestTimeoutMs: settings.redisRequestTimeoutMs,
    },
  });
  const guard = createDestinationGuard({
    allowCidrs: settings.destinationAllowCidrs,
    resolve: resolveAddresses,
  });

  let markApplied: () => void = () => {};
  const firstApplied = new Promise<void>((resolve) => {
    markApplied = resolve;
  });
  const follower = new FeedFollower({
    redis,
    keys,
    feedKeys,
    logger: feedLogger(logger),
    apply: (update) => {
      const started = performance.now();
      const snapshot = router.apply(update.sections);
      logger.info(update.first ? "First feed applied" : "Feed applied", {
        digest: update.digest.slice(0, 16),
        changed: update.changed.size,
        applyMs: Math.round((performance.now() - started) * 100) / 100,
        projects: snapshot.projectsById.size,
      });
      markApplied();
    },
  });

  return {
    router,
    guard,
    firstApplied,
    start: () => follower.start(),
    async stop() {
      await follower.stop();
      // Sticky binding writes still under way, each bounded by the request deadline.
      await router.drain();
      redis.disconnect();
    },
    metrics() {
      const stats = follower.stats();
      return [
        "# TYPE octoprox_gateway_feed_applies_total counter",
        `octoprox_gateway_feed_applies_total ${stats.applies}`,
        "# TYPE octoprox_gateway_feed_failures_total counter",
        `octoprox_gateway_feed_failures_total ${stats.failures}`,
        "# TYPE octoprox_gateway_feed_consecutive_failures gauge",
        `octoprox_gateway_feed_consecutive_failures ${stats.consecutive_failures}`,
        "",
      ].join("\n");
    },
  };
}
