/**
 * Builds the routing core the socket layer runs on (RoutingCore in gateway.ts): the main
 * isolate's core (isolate-core.ts: the router of shared/routing/router.ts, the destination guard,
 * the Redis writers) and the feed follower (feed-following.ts), over one Redis client. The gateway
 * reads only Redis (OCTOPROX_REDIS_URL, its prefix) and the internal secret the feed keys derive
 * from; never Postgres. The follower runs once per process, in the main isolate, which hands each
 * applied feed to the others (`shareWith`).
 */
import { deriveFeedKeys } from "../../shared/feed/codec.ts";
import { DEFAULT_FEED_GEO, NO_FEED_TUNNELS } from "../../shared/feed/models.ts";
import { TunnelPlane } from "../tunnel-plane/plane.ts";
import { loadFakeIpScripts } from "../tunnel-plane/lua.ts";
import { geoMetrics } from "../geo/metrics.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import type { GatewaySettings } from "../../shared/settings.ts";
import { FeedFreshness } from "../../shared/routing/feed-freshness.ts";
import type { SectionsDelta } from "../../shared/routing/feed-share.ts";
import type { CoreRouter } from "../../shared/routing/router.ts";
import type { Logger } from "../base/log.ts";
import { renderSamples } from "../base/metrics.ts";
import { followFeed } from "./feed-following.ts";
import { feedMetrics, feedState, feedUnready } from "./feed-status.ts";
import type { RoutingCore } from "./gateway.ts";
import { redisInstanceStore } from "./instance-store.ts";
import { buildIsolateCore } from "./isolate-core.ts";
import type { OwedAtStop } from "./isolate-writers.ts";
import { connectRedis } from "../redis/connection.ts";
import { geoSync } from "./geo-wiring.ts";
import type { GeoView } from "../geo/contract.ts";

/** The main isolate's core: its own isolate core plus the feed follower, once per process. */
export interface WiredCore extends RoutingCore {
  readonly router: CoreRouter;
  /** What the main isolate's writers owe Redis now (the workers log their own at their stop). */
  owed(): OwedAtStop;
  /**
   * Hands every feed applied from now on (as its delta) to `receiver`, before the first one
   * binds the listeners: the process's other isolates build their snapshots from it.
   */
  shareWith(receiver: (delta: SectionsDelta) => void): void;
  /** Hands every quarantine the main isolate's rate limiter trips to `receiver` (the workers). */
  shareTripsWith(receiver: (proxyId: string, untilMs: number) => void): void;
  /** When the follower last read the feed (its buffer goes to the worker isolates). */
  readonly freshness: FeedFreshness;
  /** The IP databases in force in this (the main) isolate. */
  readonly geo: GeoView;
}

export async function buildRoutingCore(
  settings: GatewaySettings,
  logger: Logger,
  instance: string,
): Promise<WiredCore> {
  const feedKeys = await deriveFeedKeys(settings.internalSecret);
  const connection = connectRedis(settings, `octoprox-gateway:${instance}`);
  const keys = redisKeys(settings.redisPrefix);
  // Set by shareTripsWith once the workers exist, which is after the core is built.
  let shareTrip: ((proxyId: string, untilMs: number) => void) | undefined;
  const freshness = new FeedFreshness(settings.feedMaxStaleMs);
  const geo = geoSync(settings, logger, feedKeys);
  const isolate = await buildIsolateCore(settings, logger, instance, {
    connection,
    shareTrip: (proxyId, untilMs) => shareTrip?.(proxyId, untilMs),
    freshness,
    // Preflight judges exits with the databases in force here, in the main isolate.
    geo,
  });
  const { router } = isolate;
  // Before the first feed: its global section hands the plane its devices.
  const tunnels = settings.wireguardEnabled || settings.openvpnEnabled
    ? new TunnelPlane({
      settings,
      redis: connection.redis,
      keys,
      scripts: await loadFakeIpScripts(),
      projects: router,
      logger,
      instance,
    })
    : undefined;
  const feed = followFeed({
    settings,
    logger,
    connection,
    keys,
    feedKeys,
    router,
    freshness,
    onApplied: (snapshot) => {
      geo.offer(snapshot.sections.global.geo ?? DEFAULT_FEED_GEO);
      void tunnels?.apply(snapshot.sections.global.tunnels ?? NO_FEED_TUNNELS);
    },
  });
  const { follower } = feed;
  return {
    router,
    serving: isolate.serving,
    guard: isolate.guard,
    admissionSteps: isolate.admissionSteps,
    deviceAdmissionSteps: isolate.deviceAdmissionSteps,
    tunnels,
    hooks: isolate.hooks,
    cooldowns: isolate.cooldowns,
    domains: isolate.domains,
    escalations: isolate.escalations,
    firstApplied: feed.firstApplied,
    instances: redisInstanceStore(connection.redis, keys, instance, settings.redisRequestTimeoutMs),
    feedState: () => feedState(follower.stats()),
    freshness,
    geo,
    unready: () => feedUnready(freshness),
    isolateState: () => isolate.state(),
    shareWith: (receiver) => feed.shareWith(receiver),
    shareTripsWith(receiver) {
      shareTrip = receiver;
    },
    start() {
      void geo.start();
      tunnels?.start();
      return follower.start();
    },
    owed: () => isolate.owed(),
    async stop() {
      try {
        // Together: each is bounded by the request deadline, so the core's stop takes one.
        await Promise.all([
          follower.stop(),
          isolate.stop(),
          geo.stop(),
          tunnels?.stop() ?? Promise.resolve(),
        ]);
      } finally {
        connection.close();
      }
    },
    metrics: (others = []) =>
      feedMetrics(follower.stats(), freshness) + geoMetrics(geo.stats()) +
      renderSamples([
        isolate.samples(),
        connection.samples(),
        tunnels?.samples() ?? [],
        ...others,
      ]),
  };
}
