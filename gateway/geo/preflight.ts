/**
 * One isolate's preflight, built whole: the router the listeners ask (preflight-router.ts)
 * around the isolate's routing core, its checker, verdict cache and echo, the slots it retired,
 * and the publisher of its sightings. The isolate core starts it and closes it (the last
 * sightings sent under the request deadline).
 */
import type { GatewayRedis } from "../../shared/redis/contract.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import type { GatewaySettings } from "../../shared/settings.ts";
import type { CoreRouter } from "../../shared/routing/router.ts";
import type { Logger } from "../base/log.ts";
import type { MetricSample } from "../base/metrics.ts";
import type { GeoView } from "./contract.ts";
import { loadSightingsScript } from "./lua.ts";
import { VerdictCache } from "./preflight-cache.ts";
import { type Echo, PreflightChecker } from "./preflight-check.ts";
import { PreflightCounters } from "./preflight-counters.ts";
import { EchoError, echoThrough } from "./preflight-echo.ts";
import { PreflightRouter } from "./preflight-router.ts";
import { RetiredSlots } from "./retired-slots.ts";
import { SightingPublisher } from "./sightings.ts";

export interface Preflight {
  readonly router: PreflightRouter;
  readonly sightings: SightingPublisher;
  readonly retired: RetiredSlots;
  start(): void;
  /** Sends the sightings pending once more, under the request deadline; never rejects. */
  close(): Promise<void>;
  samples(): MetricSample[];
}

export interface PreflightOptions {
  settings: GatewaySettings;
  core: CoreRouter;
  redis: GatewayRedis;
  keys: RedisKeys;
  logger: Logger;
  /** The isolate as a writer and the sightings' instance: `<instance>:<isolate>`. */
  writer: string;
  /** The databases in force; undefined for an isolate that opens none. */
  geo?: GeoView;
}

function echoOf(settings: GatewaySettings): Echo {
  const url = settings.echoUrl === undefined ? undefined : new URL(settings.echoUrl);
  if (url === undefined) {
    return () => Promise.reject(new EchoError("no echo URL (OCTOPROX_GATEWAY_ECHO_URL)"));
  }
  return (upstream, timeoutMs) => echoThrough(upstream, url, timeoutMs);
}

export async function buildPreflight(o: PreflightOptions): Promise<Preflight> {
  const { settings, logger } = o;
  if (settings.echoUrl === undefined) {
    logger.info(
      "No echo for preflight (OCTOPROX_GATEWAY_ECHO_URL): projects asking it go on unchecked",
    );
  }
  const counters = new PreflightCounters();
  const retired = new RetiredSlots();
  const sightings = new SightingPublisher({
    redis: o.redis,
    keys: o.keys,
    script: await loadSightingsScript(),
    writer: o.writer,
    writeTimeoutMs: settings.redisRequestTimeoutMs,
    logger,
  });
  const checker = new PreflightChecker({
    cache: new VerdictCache({
      redis: o.redis,
      keys: o.keys,
      timeoutMs: settings.redisRequestTimeoutMs,
    }),
    echo: echoOf(settings),
    geo: o.geo,
    sightings,
    counters,
    instance: o.writer,
  });
  const router = new PreflightRouter({
    core: o.core,
    checker,
    retired,
    counters,
    connectTimeoutMs: settings.connectTimeoutMs,
    logger,
  });
  return {
    router,
    sightings,
    retired,
    start() {
      void sightings.start();
    },
    close: () => sightings.close(),
    samples: () => [...counters.samples(), ...sightings.samples()],
  };
}
