/**
 * The fake-IP mapping on the test bed's Redis (a prefix per test): two gateways' mappings agree
 * on every name's address and read each other's names back; the block never hands out its
 * network or broadcast address; once full, the least recently used name gives its address up,
 * both in Redis and in a gateway's own copy; and with Redis away a gateway answers from its own
 * copy at once, never waiting on Redis per query, and shares again once Redis answers.
 */
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { FakeIps, LocalFakeIps } from "../../gateway/tunnel-plane/fake-ips.ts";
import type { LuaScript } from "../../shared/lua/loader.ts";
import { formatIPv4, parseIPv4 } from "../../shared/net/ip.ts";
import { parseFakeIpRange } from "../../shared/net/fake-ip-range.ts";
import { type RedisKeys, redisKeys } from "../../shared/redis-keys.ts";
import { freePort } from "../../testkit/ports.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { Clock, loadScriptNode } from "../../testkit/metering.ts";

let redis: Redis;
let scripts: { assign: LuaScript; lookup: LuaScript };
let keys: RedisKeys;

beforeAll(async () => {
  redis = new Redis(TEST_REDIS_URL);
  const [assign, lookup] = await Promise.all([
    loadScriptNode("fake_ip_assign"),
    loadScriptNode("fake_ip_lookup"),
  ]);
  scripts = { assign, lookup };
});

afterEach(async () => {
  if (keys) await deletePrefix(TEST_REDIS_URL, keys.prefix);
});

afterAll(() => {
  redis.disconnect();
});

function mapping(
  block: string,
  options: { client?: Redis; clock?: Clock; timeoutMs?: number } = {},
) {
  return new FakeIps({
    range: parseFakeIpRange(block),
    redis: options.client ?? redis,
    keys,
    assignScript: scripts.assign,
    lookupScript: scripts.lookup,
    requestTimeoutMs: options.timeoutMs ?? 2_000,
    nowMs: options.clock?.now,
  });
}

const ip = (text: string) => parseIPv4(text) as number;

describe("the block", () => {
  it("reads an IPv4 block from /8 to /30 and names it by its network address", () => {
    expect(parseFakeIpRange("198.18.0.0/15")).toMatchObject({
      cidr: "198.18.0.0/15",
      capacity: 131_070,
      lastOffset: 131_070,
    });
    expect(parseFakeIpRange("10.1.2.3/24").cidr).toBe("10.1.2.0/24");
    for (const bad of ["198.18.0.0", "198.18.0.0/31", "10.0.0.0/7", "fd00::/64", "nonsense/15"]) {
      expect(() => parseFakeIpRange(bad), bad).toThrow();
    }
  });
});

describe("the shared mapping", () => {
  it("gives two gateways one address per name, and each reads the other's names back", async () => {
    keys = redisKeys(testPrefix());
    const [a, b] = [mapping("198.18.0.0/15"), mapping("198.18.0.0/15")];
    const shop = await a.assign("shop.example");
    expect(formatIPv4(shop)).toBe("198.18.0.1");
    expect(await b.assign("shop.example")).toBe(shop);
    const news = await b.assign("news.example");
    expect(formatIPv4(news)).toBe("198.18.0.2");
    expect(await a.lookup(news)).toBe("news.example");
    expect(await a.lookup(shop)).toBe("shop.example");
    expect(await a.lookup(ip("198.18.0.77"))).toBeUndefined();
    expect(await a.lookup(ip("10.0.0.1"))).toBeUndefined();
    expect(a.stats()).toMatchObject({
      assignedShared: 1,
      lookupsLocal: 1,
      lookupsShared: 1,
      lookupsUnknown: 1,
    });
  });

  it("never answers the network or broadcast address; a full block hands out its least recently used name's", async () => {
    keys = redisKeys(testPrefix());
    const clock = new Clock();
    const [a, b] = [mapping("10.9.0.0/29", { clock }), mapping("10.9.0.0/29", { clock })];
    const names = ["n1", "n2", "n3", "n4", "n5", "n6"].map((n) => `${n}.example`);
    const addresses: string[] = [];
    for (const name of names) {
      clock.ms += 1_000;
      addresses.push(formatIPv4(await a.assign(name)));
    }
    expect(addresses).toEqual([
      "10.9.0.1",
      "10.9.0.2",
      "10.9.0.3",
      "10.9.0.4",
      "10.9.0.5",
      "10.9.0.6",
    ]);
    // n1 is used again (a query through the other gateway), so n2 is the least recently used.
    clock.ms += 1_000;
    expect(formatIPv4(await b.assign("n1.example"))).toBe("10.9.0.1");
    clock.ms += 1_000;
    expect(formatIPv4(await b.assign("n7.example"))).toBe("10.9.0.2");
    // Both directions moved: n2 no longer has an address, and 10.9.0.2 names n7 on both.
    const shared = keys.fakeIp("10.9.0.0/29");
    expect(await redis.hget(shared.names, "n2.example")).toBeNull();
    expect(await redis.hlen(shared.names)).toBe(6);
    expect(await b.lookup(ip("10.9.0.2"))).toBe("n7.example");
    // a's copy still says n2: what it answered itself is read without a round trip.
    expect(await a.lookup(ip("10.9.0.2"))).toBe("n2.example");
    // A name given an address again through a updates its copy.
    clock.ms += 1_000;
    expect(formatIPv4(await a.assign("n7.example"))).toBe("10.9.0.2");
    expect(await a.lookup(ip("10.9.0.2"))).toBe("n7.example");
    // A connection to a name marks it used: n3 stays while n4 goes.
    clock.ms += 1_000;
    const fresh = mapping("10.9.0.0/29", { clock });
    expect(await fresh.lookup(ip("10.9.0.3"))).toBe("n3.example");
    clock.ms += 1_000;
    expect(formatIPv4(await fresh.assign("n8.example"))).toBe("10.9.0.4");
  });

  it("keeps its keys a day without a query", async () => {
    keys = redisKeys(testPrefix());
    await mapping("198.18.0.0/15").assign("ttl.example");
    const shared = keys.fakeIp("198.18.0.0/15");
    for (const key of [shared.names, shared.offsets, shared.recency, shared.next]) {
      const ttl = await redis.pttl(key);
      expect(ttl, key).toBeGreaterThan(23 * 3600_000);
      expect(ttl, key).toBeLessThanOrEqual(24 * 3600_000);
    }
  });
});

describe("with Redis away", () => {
  it("answers from the gateway's own copy at once, then shares again once Redis answers", async () => {
    keys = redisKeys(testPrefix());
    const port = await freePort();
    const away = new Redis(`redis://127.0.0.1:${port}`, {
      maxRetriesPerRequest: 1,
      retryStrategy: () => 100,
      lazyConnect: true,
    });
    away.on("error", () => {});
    const clock = new Clock();
    try {
      const gateway = mapping("198.18.0.0/15", { client: away, clock, timeoutMs: 300 });
      const first = await gateway.assign("first.example");
      // Every later query within the retry pause is answered without trying Redis.
      const started = Date.now();
      const more = [];
      for (let i = 0; i < 50; i++) more.push(await gateway.assign(`n${i}.example`));
      expect(Date.now() - started).toBeLessThan(200);
      expect(new Set([first, ...more]).size).toBe(51);
      expect(await gateway.assign("first.example")).toBe(first);
      expect(await gateway.lookup(more[7])).toBe("n7.example");
      expect(gateway.stats()).toMatchObject({
        assignedShared: 0,
        assignedLocal: 52,
        redisFailures: 1,
      });
      expect(gateway.samples()).toContainEqual(
        expect.objectContaining({
          name: "octoprox_gateway_tunnel_fake_ip_assignments_total",
          labels: 'mapping="local"',
          value: 52,
        }),
      );
    } finally {
      away.disconnect();
    }
  });

  it("a gateway's own copy gives the least recently used name's address up once full", () => {
    const local = new LocalFakeIps(parseFakeIpRange("10.9.0.0/30"));
    expect(local.allocate("a")).toBe(1);
    expect(local.allocate("b")).toBe(2);
    expect(local.nameAt(1)).toBe("a");
    expect(local.allocate("c")).toBe(2);
    expect(local.nameAt(2)).toBe("c");
    expect(local.offsetOf("b")).toBeUndefined();
    // What Redis says replaces what the copy held, both ways.
    local.put("d", 1);
    expect(local.offsetOf("a")).toBeUndefined();
    expect(local.nameAt(1)).toBe("d");
    expect(local.size).toBe(2);
  });
});
