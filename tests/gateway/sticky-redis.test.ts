/**
 * Sticky bindings in a real Redis, on a prefix of the test's own: the store itself, two gateways
 * agreeing on a session, a restart, a flush, and a Redis that cannot be reached.
 */
import { createServer } from "node:net";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CoreRouter } from "../../shared/routing/router.ts";
import { type Client, isRefusal } from "../../shared/routing/contract.ts";
import { RedisStickyStore } from "../../shared/routing/sticky/redis-store.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import {
  client,
  feed,
  project,
  section,
  target,
  verifyPassword,
} from "../../testkit/gateway/feed-fixtures.ts";

const ROWS = Array.from({ length: 10 }, (_, i) => `x${i}`);
const prefix = testPrefix();
const keys = redisKeys(prefix);
let redis: Redis;

beforeAll(() => {
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
});
afterEach(() => deletePrefix(TEST_REDIS_URL, prefix));
afterAll(() => {
  redis.disconnect();
});

/** One gateway's router, its sticky store on the shared test Redis unless told otherwise. */
function gateway(store: RedisStickyStore | "no store" = new RedisStickyStore(redis, keys)) {
  const router = new CoreRouter({
    verifyPassword,
    log: { warn() {} },
    sticky: { store: store === "no store" ? undefined : store, requestTimeoutMs: 200 },
  });
  router.apply(feed([section("c", ROWS)], { projects: [project({ strategy: "sticky" })] }));
  return router;
}

const session = (sessionId: string): Client => client({ user: "shop", sessionId });

async function pick(router: CoreRouter, c: Client, exclude = new Set<string>()) {
  const result = await router.acquire(c, target(), exclude);
  if (isRefusal(result)) throw new Error(`refused: ${result.status} ${result.reason}`);
  result.release({ ok: true });
  return result.upstream.proxyId;
}

/** A gateway's session bound elsewhere than its hash would put it, written to Redis. */
async function boundAwayFromHash(router: CoreRouter, sessionId: string) {
  const byHash = await pick(gateway("no store"), session(sessionId));
  const bound = await pick(router, session(sessionId), new Set([byHash]));
  expect(bound).not.toBe(byHash);
  await router.drain();
  return { byHash, bound };
}

describe("RedisStickyStore", () => {
  it("sets with the session's life and gets the proxy id back", async () => {
    const store = new RedisStickyStore(redis, keys);
    const signal = new AbortController().signal;
    expect(await store.get("p1", "s1", signal)).toBeUndefined();
    await store.set("p1", "s1", "proxy-1", 300_000);
    expect(await store.get("p1", "s1", signal)).toBe("proxy-1");
    expect(await redis.get(`${prefix}sticky:p1:s1`)).toBe("proxy-1");
    const ttlMs = await redis.pttl(keys.sticky("p1", "s1"));
    expect(ttlMs).toBeGreaterThan(299_000);
    expect(ttlMs).toBeLessThanOrEqual(300_000);
  });

  it("gives up on an answer once its signal aborts", async () => {
    const store = new RedisStickyStore(redis, keys);
    const aborted = new AbortController();
    aborted.abort(new Error("deadline"));
    await expect(store.get("p1", "s1", aborted.signal)).rejects.toThrow("deadline");
  });
});

describe("sticky sessions across gateways", () => {
  it("two gateways on one Redis agree: the second reads the first's binding", async () => {
    const first = gateway();
    const { byHash, bound } = await boundAwayFromHash(first, "alpha");
    expect(await redis.get(keys.sticky("p1", "alpha"))).toBe(bound);
    const second = gateway();
    expect(await pick(second, session("alpha"))).toBe(bound);
    expect(await pick(second, session("alpha"))).toBe(bound);
    expect(bound).not.toBe(byHash);
  });

  it("a binding survives a gateway restart, and a Redis flush places the session afresh", async () => {
    const { byHash, bound } = await boundAwayFromHash(gateway(), "alpha");
    const restarted = gateway();
    expect(await pick(restarted, session("alpha"))).toBe(bound);
    await restarted.drain();

    await deletePrefix(TEST_REDIS_URL, prefix);
    const afterFlush = gateway();
    expect(await pick(afterFlush, session("alpha"))).toBe(byHash);
    await afterFlush.drain();
    expect(await redis.get(keys.sticky("p1", "alpha"))).toBe(byHash);
  });

  it("a Redis that cannot be reached places the session within the deadline", async () => {
    // A port that was just free: nothing listens there.
    const port = await new Promise<number>((resolve) => {
      const server = createServer();
      server.listen(0, "127.0.0.1", () => {
        const address = server.address();
        server.close(() =>
          resolve(typeof address === "object" && address !== null ? address.port : 0)
        );
      });
    });
    const away = new Redis(`redis://127.0.0.1:${port}`, {
      maxRetriesPerRequest: 1,
      retryStrategy: () => 50,
    });
    away.on("error", () => {});
    try {
      const router = gateway(new RedisStickyStore(away, keys));
      const started = performance.now();
      expect(ROWS).toContain(await pick(router, session("alpha")));
      expect(performance.now() - started).toBeLessThan(200 + 300);
      await router.drain();
    } finally {
      away.disconnect();
    }
  });
});
