/**
 * One isolate's router (shared/routing/router.ts): feed passwords checked with the feed keys,
 * sticky bindings in Redis, and provisioning asked of the workers through their job stream.
 */
import type { GatewayRedis } from "../../shared/redis/contract.ts";
import { type FeedKeys, verifyPassword } from "../../shared/feed/codec.ts";
import { type RedisKeys, STREAM_CAPS } from "../../shared/redis-keys.ts";
import { JobKind } from "../../shared/roles.ts";
import type { GatewaySettings } from "../../shared/settings.ts";
import { Dispatch } from "../../shared/routing/dispatch.ts";
import { FeedFreshness } from "../../shared/routing/feed-freshness.ts";
import type { ProvisionRequests } from "../../shared/routing/provision.ts";
import { CoreRouter } from "../../shared/routing/router.ts";
import { withDeadline } from "../../shared/async/deadline.ts";
import { RedisStickyStore } from "../../shared/routing/sticky/redis-store.ts";
import type { Logger } from "../base/log.ts";

export interface IsolateRouterOptions {
  settings: GatewaySettings;
  logger: Logger;
  redis: GatewayRedis;
  keys: RedisKeys;
  feedKeys: FeedKeys;
  /** The counts to route on: a worker's follows the main isolate's (dispatch.ts `follow`). */
  dispatch?: Dispatch;
  /** When the process last read the feed: a worker's shares the main isolate's word. */
  freshness?: FeedFreshness;
}

export function buildIsolateRouter(o: IsolateRouterOptions): CoreRouter {
  const { settings, logger, redis, keys, feedKeys } = o;
  return new CoreRouter({
    verifyPassword: (password, digest) => verifyPassword(feedKeys, password, digest),
    log: { warn: (message, fields) => logger.warn(message, fields) },
    freshness: o.freshness ?? new FeedFreshness(settings.feedMaxStaleMs),
    // A worker isolate follows the main one's table, which holds the bound.
    dispatch: o.dispatch ?? new Dispatch({ maxProxySlots: settings.maxProxies }),
    // Sticky bindings in Redis, read under the request deadline and written by held tasks.
    sticky: {
      store: new RedisStickyStore(redis, keys),
      requestTimeoutMs: settings.redisRequestTimeoutMs,
    },
    // A country an "All countries" session pool has no group for asks a worker for one.
    provision: provisionRequests(redis, keys, settings.redisRequestTimeoutMs),
  });
}

/** Asks by adding a provision job for the key to the workers' stream, under the deadline. */
function provisionRequests(
  redis: GatewayRedis,
  keys: RedisKeys,
  timeoutMs: number,
): ProvisionRequests {
  return {
    ask: async (key) => {
      await withDeadline("provision request", timeoutMs, () =>
        redis.xadd(
          keys.jobStream(JobKind.provision),
          "MAXLEN",
          "~",
          STREAM_CAPS.work,
          "*",
          "key",
          key,
        ));
      return true;
    },
  };
}
