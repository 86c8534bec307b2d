/**
 * The gateway's pool holds against a real Redis: what the process holds through each
 * provider-API connector's proxies (reserved and active, from the dispatch counts) is written to
 * the pool's held hash under this instance, with its time; a static connector's is not; a
 * connector that empties is written once at zero, then left alone.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PoolHolds } from "../../gateway/metering/pool-holds.ts";
import { CoreRouter } from "../../shared/routing/router.ts";
import { isRefusal } from "../../shared/routing/contract.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import {
  client,
  connector,
  feed,
  project,
  section,
  target,
  verifyPassword,
} from "../../testkit/gateway/feed-fixtures.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";

let redis: Redis;
const prefix = testPrefix();
const keys = redisKeys(prefix);

beforeAll(() => {
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  await deletePrefix(TEST_REDIS_URL, prefix);
  redis.disconnect();
});

describe("pool holds", () => {
  it("writes what the process holds through each pool connector, and a zero once it empties", async () => {
    const router = new CoreRouter({ verifyPassword, nowMs: () => Date.now() });
    router.apply(feed([
      section(connector("pool", { kind: "provider_api", provider: "provider_api" }), ["e1"]),
      section(connector("static", { weight: 1 }), ["s1"]),
    ], { projects: [project({ strategy: "round_robin" })] }));
    const leases = [];
    for (let i = 0; i < 4; i++) {
      const lease = await router.acquire(client(), target());
      if (isRefusal(lease)) throw new Error(lease.reason);
      leases.push(lease);
    }
    const onPool = leases.filter((l) => l.upstream.connectorId === "pool");
    expect(onPool.length).toBeGreaterThan(0);
    onPool[0].commit();
    let at = 1_000_000;
    const holds = new PoolHolds({
      redis,
      keys,
      instance: "gw-1",
      snapshot: () => router.snapshot,
      writeTimeoutMs: 2000,
      now: () => at,
    });
    expect(await holds.writeNow()).toBe(true);
    expect(await redis.hgetall(keys.poolHeld("pool"))).toEqual({
      "gw-1": `${onPool.length}:1000000`,
    });
    expect(await redis.exists(keys.poolHeld("static"))).toBe(0);
    expect(await redis.pttl(keys.poolHeld("pool"))).toBeGreaterThan(0);

    // Released: written once at zero, then no more.
    for (const lease of leases) lease.release({ ok: true });
    at = 2_000_000;
    expect(await holds.writeNow()).toBe(true);
    expect(await redis.hget(keys.poolHeld("pool"), "gw-1")).toBe("0:2000000");
    at = 3_000_000;
    expect(await holds.writeNow()).toBe(false);
    expect(await redis.hget(keys.poolHeld("pool"), "gw-1")).toBe("0:2000000");
  });
});
