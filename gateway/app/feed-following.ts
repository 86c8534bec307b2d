/**
 * The routing feed, followed once per process in the main isolate: the follower
 * (gateway/feed/follower.ts) applies each verified feed to the main isolate's router, hands its
 * delta to the process's other isolates, and holds the listeners back until the first one is
 * applied (or refused: strict mode).
 */
import type { FeedKeys } from "../../shared/feed/codec.ts";
import type { FeedSections } from "../../shared/feed/models.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import type { GatewaySettings } from "../../shared/settings.ts";
import type { FeedFreshness } from "../../shared/routing/feed-freshness.ts";
import { type SectionsDelta, sectionsDelta } from "../../shared/routing/feed-share.ts";
import type { CoreRouter } from "../../shared/routing/router.ts";
import type { RoutingSnapshot } from "../../shared/routing/snapshot.ts";
import type { Logger } from "../base/log.ts";
import type { RedisConnection } from "../redis/connection.ts";
import { FeedFollower, type FeedLogger, type FeedUpdate } from "../feed/follower.ts";
import { strictModeCheck } from "./feed-strict-mode.ts";

/** The follower reads the feed's head at least this often (less with OCTOPROX_FEED_MAX_STALE). */
const FEED_RECHECK_MS = 30_000;

export interface FeedFollowingOptions {
  settings: GatewaySettings;
  logger: Logger;
  /** The process's connection, shared with the main isolate. */
  connection: RedisConnection;
  keys: RedisKeys;
  feedKeys: FeedKeys;
  /** The main isolate's router, which each feed is applied to. */
  router: CoreRouter;
  /** Told of every read of the head that verified it. */
  freshness: FeedFreshness;
  /** Told of every snapshot applied, after the router has it (the IP database sync). */
  onApplied?: (snapshot: RoutingSnapshot) => void;
}

export interface FeedFollowing {
  follower: FeedFollower;
  /** Resolves once the first feed is applied; rejects with `StartRefused` (strict mode). */
  firstApplied: Promise<void>;
  /** Hands every feed applied from now on (as its delta) to `receiver`. */
  shareWith(receiver: (delta: SectionsDelta) => void): void;
}

export function followFeed(o: FeedFollowingOptions): FeedFollowing {
  const { settings, logger, freshness } = o;
  const first = firstFeedGate();
  const sharing = new FeedSharing(logger);
  const strict = strictModeCheck(settings.host, logger);
  const follower = new FeedFollower({
    redis: o.connection.redis,
    // TCP wakes on the feed's stream; HTTP cannot block, so it reads the head every interval.
    wait: o.connection.blockingReader === undefined
      ? { pollIntervalMs: settings.feedPollIntervalMs }
      : { blockingReader: o.connection.blockingReader },
    keys: o.keys,
    feedKeys: o.feedKeys,
    stopWaitMs: settings.redisRequestTimeoutMs,
    // With a bound on staleness, a gateway whose reads succeed must read well within it.
    recheckIntervalMs: freshness.recheckIntervalMs(FEED_RECHECK_MS),
    onRead: () => freshness.read(Date.now()),
    logger: feedLogger(logger),
    apply: (update) => {
      const started = performance.now();
      const snapshot = o.router.apply(update.sections);
      sharing.hand(snapshot);
      logApplied(logger, update, snapshot, started);
      o.onApplied?.(snapshot);
      const refused = strict?.(snapshot, update.first);
      if (refused !== undefined) {
        // The listeners never bind: the process stops with this one line (gateway.ts).
        first.refuse(refused);
        return;
      }
      first.applied();
    },
  });
  return {
    follower,
    firstApplied: first.promise,
    shareWith(receiver) {
      sharing.receiver = receiver;
    },
  };
}

/** The first feed's promise, with what settles it. */
function firstFeedGate(): {
  promise: Promise<void>;
  applied: () => void;
  refuse: (error: Error) => void;
} {
  let applied: () => void = () => {};
  let refuse: (error: Error) => void = () => {};
  const promise = new Promise<void>((resolve, reject) => {
    applied = resolve;
    refuse = reject;
  });
  return { promise, applied, refuse };
}

/** Hands each applied snapshot's sections to the other isolates, as a delta on what they have. */
class FeedSharing {
  receiver: ((delta: SectionsDelta) => void) | undefined;
  readonly #logger: Logger;
  /** The sections the other isolates have: each delta is taken against them. */
  #shared: FeedSections | undefined;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  hand(snapshot: RoutingSnapshot): void {
    if (this.receiver === undefined) return;
    try {
      this.receiver(sectionsDelta(this.#shared, snapshot));
      this.#shared = snapshot.sections;
    } catch (error) {
      // The other isolates keep their last feed; the next delta is taken against it.
      this.#logger.error("Handing the feed to the other isolates failed", { error });
    }
  }
}

function logApplied(
  logger: Logger,
  update: FeedUpdate,
  snapshot: RoutingSnapshot,
  startedMs: number,
): void {
  logger.info(update.first ? "First feed applied" : "Feed applied", {
    digest: update.digest.slice(0, 16),
    changed: update.changed.size,
    applyMs: Math.round((performance.now() - startedMs) * 100) / 100,
    projects: snapshot.projectsById.size,
  });
  const refused = snapshot.stats.proxiesRefused;
  if (refused > 0) {
    const slots = snapshot.dispatch.proxySlots;
    logger.warn("Proxy table full: proxies of the feed are not routed by this gateway", {
      refused,
      capacity: slots.capacity,
      hint: "raise OCTOPROX_GATEWAY_MAX_PROXIES",
    });
  }
}

/** The follower logs pino-style, `(fields, message)`. */
function feedLogger(logger: Logger): FeedLogger {
  return {
    info: (fields, message) => logger.info(message, fields),
    warn: (fields, message) => logger.warn(message, fields),
    error: (fields, message) => logger.error(message, fields),
  };
}
