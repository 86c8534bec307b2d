/**
 * The gateway's rate limiter on the test bed's Redis (a prefix per test): requests counted in a
 * proxy's sliding window shared by every gateway, the request that fills it quarantining the
 * proxy (window started over, quarantine set, runtime entry for the controller), two gateways
 * counting one proxy tripping it once, and a Redis that does not answer letting every request
 * through uncounted.
 */
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { UpstreamChoice } from "../../shared/routing/contract.ts";
import { RequestMetering } from "../../gateway/metering/metering.ts";
import { quarantineMs, RateLimiter } from "../../gateway/metering/rate-limiter.ts";
import type { LuaScript } from "../../shared/lua/loader.ts";
import type { FeedRateLimit } from "../../shared/feed/models.ts";
import { type RedisKeys, redisKeys } from "../../shared/redis-keys.ts";
import { freePort } from "../../testkit/ports.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { loadMeteringScriptNode, loadScriptNode } from "../../testkit/metering.ts";

const T0 = 1_700_000_000_000;
const LIMIT: FeedRateLimit = {
  max_requests: 5,
  window_seconds: 60,
  quarantine_seconds_min: 30,
  quarantine_seconds_max: 90,
  sticky_quarantine: false,
};

let redis: Redis;
let script: LuaScript;
let keys: RedisKeys;
let now: number;

beforeAll(async () => {
  redis = new Redis(TEST_REDIS_URL);
  script = await loadScriptNode("rate_window");
});

afterEach(async () => {
  if (keys) await deletePrefix(TEST_REDIS_URL, keys.prefix);
});

afterAll(() => {
  redis.disconnect();
});

interface Trip {
  proxyId: string;
  untilMs: number;
}

function limiter(
  options: { writer?: string; client?: Redis; random?: () => number; timeoutMs?: number } = {},
) {
  const trips: Trip[] = [];
  const rateLimiter = new RateLimiter({
    redis: options.client ?? redis,
    keys,
    script,
    writer: options.writer ?? "gw-a:0:test",
    requestTimeoutMs: options.timeoutMs ?? 2_000,
    tripped: (proxyId, untilMs) => trips.push({ proxyId, untilMs }),
    random: options.random ?? (() => 0),
    nowMs: () => now,
  });
  return { rateLimiter, trips };
}

function countTimes(rateLimiter: RateLimiter, proxyId: string, times: number): void {
  for (let i = 0; i < times; i++) rateLimiter.count(proxyId, LIMIT);
}

async function runtimeEntries(): Promise<Record<string, string>[]> {
  const entries = await redis.xrange(keys.runtimeStream, "-", "+");
  return entries.map(([, fields]) => {
    const record: Record<string, string> = {};
    for (let i = 0; i < fields.length; i += 2) record[fields[i]] = fields[i + 1];
    return record;
  });
}

describe("the rate window", () => {
  it("counts requests under the limit; the one that fills the window quarantines the proxy", async () => {
    keys = redisKeys(testPrefix());
    now = T0;
    const { rateLimiter, trips } = limiter();
    countTimes(rateLimiter, "p1", 4);
    await rateLimiter.flush();
    expect(await redis.zcard(keys.proxyRequests("p1"))).toBe(4);
    expect(await redis.zscore(keys.proxyQuarantined, "p1")).toBeNull();
    expect(trips).toEqual([]);

    rateLimiter.count("p1", LIMIT);
    await rateLimiter.flush();
    // random 0: the shortest rest the connector allows.
    expect(trips).toEqual([{ proxyId: "p1", untilMs: T0 + 30_000 }]);
    expect(Number(await redis.zscore(keys.proxyQuarantined, "p1"))).toBe(T0 + 30_000);
    expect(await redis.exists(keys.proxyRequests("p1"))).toBe(0);
    expect(await runtimeEntries()).toEqual([{ kind: "quarantine", ref: "p1" }]);
    expect(rateLimiter.stats()).toMatchObject({ counted: 5, dropped: 0, trips: 1 });
    await rateLimiter.close();
  });

  it("two gateways counting one proxy trip it once, at the request that fills the window", async () => {
    keys = redisKeys(testPrefix());
    now = T0;
    const a = limiter({ writer: "gw-a:0:aaaa" });
    const b = limiter({ writer: "gw-b:0:bbbb" });
    // Ten requests, five on each gateway, finishing in the same turns: two full windows.
    for (let i = 0; i < 5; i++) {
      a.rateLimiter.count("p1", LIMIT);
      b.rateLimiter.count("p1", LIMIT);
      await Promise.all([a.rateLimiter.flush(), b.rateLimiter.flush()]);
    }
    expect(a.trips.length + b.trips.length).toBe(2);
    expect(await runtimeEntries()).toHaveLength(2);
    expect(await redis.zcard(keys.proxyRequests("p1"))).toBe(0);
    // Four more: counted, the window not full.
    countTimes(a.rateLimiter, "p1", 2);
    countTimes(b.rateLimiter, "p1", 2);
    await Promise.all([a.rateLimiter.flush(), b.rateLimiter.flush()]);
    expect(await redis.zcard(keys.proxyRequests("p1"))).toBe(4);
    expect(a.trips.length + b.trips.length).toBe(2);
  });

  it("the window slides: requests older than it no longer count", async () => {
    keys = redisKeys(testPrefix());
    now = T0;
    const { rateLimiter, trips } = limiter();
    countTimes(rateLimiter, "p1", 4);
    await rateLimiter.flush();
    // A minute later the first four have left the window: four more leave room for one.
    now = T0 + 60_001;
    countTimes(rateLimiter, "p1", 4);
    await rateLimiter.flush();
    expect(trips).toEqual([]);
    expect(await redis.zcard(keys.proxyRequests("p1"))).toBe(4);
    // Within the window of the last four, a fifth fills it.
    now = T0 + 70_000;
    rateLimiter.count("p1", LIMIT);
    await rateLimiter.flush();
    expect(trips.map((trip) => trip.proxyId)).toEqual(["p1"]);
    // Each proxy has a window of its own.
    countTimes(rateLimiter, "p2", 4);
    await rateLimiter.flush();
    expect(await redis.zcard(keys.proxyRequests("p2"))).toBe(4);
    expect(trips).toHaveLength(1);
  });

  it("a longer quarantine already held is never shortened", async () => {
    keys = redisKeys(testPrefix());
    now = T0;
    await redis.zadd(keys.proxyQuarantined, T0 + 3_600_000, "p1");
    const { rateLimiter, trips } = limiter();
    countTimes(rateLimiter, "p1", 5);
    await rateLimiter.flush();
    expect(trips).toEqual([{ proxyId: "p1", untilMs: T0 + 3_600_000 }]);
    expect(Number(await redis.zscore(keys.proxyQuarantined, "p1"))).toBe(T0 + 3_600_000);
  });

  it("a proxy rests a whole number of seconds between the connector's min and max", () => {
    expect(quarantineMs(LIMIT, () => 0)).toBe(30_000);
    expect(quarantineMs(LIMIT, () => 0.5)).toBe(60_000);
    expect(quarantineMs(LIMIT, () => 0.999999)).toBe(90_000);
    const fixed = { ...LIMIT, quarantine_seconds_min: 45, quarantine_seconds_max: 45 };
    expect(quarantineMs(fixed, () => 0.7)).toBe(45_000);
  });

  it("a Redis that does not answer lets every request through uncounted, within the deadline", async () => {
    keys = redisKeys(testPrefix());
    now = T0;
    const away = new Redis(`redis://127.0.0.1:${await freePort()}`, {
      maxRetriesPerRequest: 1,
      retryStrategy: () => 100,
    });
    away.on("error", () => {});
    try {
      const { rateLimiter, trips } = limiter({ client: away, timeoutMs: 300 });
      expect(() => countTimes(rateLimiter, "p1", 7)).not.toThrow();
      const started = Date.now();
      await rateLimiter.close();
      expect(Date.now() - started).toBeLessThan(2_000);
      expect(trips).toEqual([]);
      expect(rateLimiter.stats()).toMatchObject({ counted: 0, dropped: 7, trips: 0 });
      expect(rateLimiter.stats().writeFailures).toBeGreaterThanOrEqual(1);
      // A second close does nothing more.
      await rateLimiter.close();
    } finally {
      away.disconnect();
    }
  });
});

describe("metering and the rate limiter", () => {
  it("each finished transfer through a rate-limited connector is counted once; others are not", async () => {
    keys = redisKeys(testPrefix());
    now = T0;
    const { rateLimiter, trips } = limiter();
    const metering = new RequestMetering({
      redis,
      keys,
      script: await loadMeteringScriptNode(),
      instance: "gw-a:0",
      rateLimiter,
    });
    const upstream = (proxyId: string, rateLimit: FeedRateLimit | null): UpstreamChoice => ({
      proxyId,
      connectorId: "c1",
      scheme: "http",
      host: "127.0.0.1",
      port: 3128,
      username: null,
      password: null,
      rateLimit,
    });
    const client = { projectId: "p", options: { user: "u" } };
    const transfer = (choice: UpstreamChoice, ok: boolean) => {
      const meter = metering.begin({
        kind: "http",
        client,
        target: { host: "example.com", port: 80 },
        upstream: choice,
        latencyMs: 1,
      });
      meter?.bytes(10, 20);
      meter?.finish({ ok });
      meter?.finish({ ok });
    };
    transfer(upstream("limited", LIMIT), true);
    transfer(upstream("limited", LIMIT), false);
    transfer(upstream("free", null), true);
    await rateLimiter.flush();
    expect(await redis.zcard(keys.proxyRequests("limited"))).toBe(2);
    expect(await redis.exists(keys.proxyRequests("free"))).toBe(0);
    for (let i = 0; i < 3; i++) transfer(upstream("limited", LIMIT), true);
    await rateLimiter.flush();
    expect(trips.map((trip) => trip.proxyId)).toEqual(["limited"]);
    await rateLimiter.close();
    await metering.close();
  });
});
