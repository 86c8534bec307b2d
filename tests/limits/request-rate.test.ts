/**
 * A project's request-rate limit over a real Redis: gateways (limiters) sharing one bucket
 * admit together no more than the rate times the time plus the burst, and close to it; a
 * request under the limit needs no Redis call of its own; a project over its limit is refused
 * without a call per refusal; Redis away, each falls back to a local bucket of the same rate.
 */
import { readFileSync } from "node:fs";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emptyWaitMs, RequestRateLimiter } from "../../gateway/limits/request-rate.ts";
import { type LuaScript, registerScript, type ScriptClient } from "../../shared/lua/loader.ts";
import { type RedisKeys, redisKeys } from "../../shared/redis-keys.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { waitUntil } from "../../testkit/wait.ts";

let redis: Redis;
let script: LuaScript;
const prefixes: string[] = [];

beforeAll(async () => {
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
  script = await registerScript(
    "project_rate_lease",
    readFileSync(new URL("../../shared/lua/project_rate_lease.lua", import.meta.url), "utf8"),
  );
});

afterAll(async () => {
  for (const prefix of prefixes) await deletePrefix(TEST_REDIS_URL, prefix);
  redis.disconnect();
});

function freshKeys(): RedisKeys {
  const prefix = testPrefix();
  prefixes.push(prefix);
  return redisKeys(prefix);
}

/** Counts every script call, to show a request under the limit makes none. */
class CountingClient implements ScriptClient {
  calls = 0;
  readonly inner: ScriptClient;
  constructor(inner: ScriptClient) {
    this.inner = inner;
  }
  evalsha(sha1: string, n: number, ...rest: string[]) {
    this.calls++;
    return this.inner.evalsha(sha1, n, ...rest);
  }
  eval(lua: string, n: number, ...rest: string[]) {
    return this.inner.eval(lua, n, ...rest);
  }
}

const limiter = (keys: RedisKeys, client: ScriptClient = redis) =>
  new RequestRateLimiter({ redis: client, keys, script, requestTimeoutMs: 1_000 });

async function admitted(results: (boolean | Promise<boolean>)[]): Promise<number> {
  return (await Promise.all(results)).filter(Boolean).length;
}

describe("a project's request-rate limit", () => {
  it("admits a full bucket's burst at once, then refuses without asking Redis each time", async () => {
    const keys = freshKeys();
    const client = new CountingClient(redis);
    const gate = limiter(keys, client);
    // A slow refill, so what the bucket regains while a loaded machine runs the test is
    // bounded by the elapsed time and stays far below the burst.
    const rate = { requests_per_second: 5, burst: 100 };
    const started = performance.now();
    const refilled = () =>
      Math.floor((rate.requests_per_second * (performance.now() - started)) / 1_000);
    const first = await admitted(Array.from({ length: 150 }, () => gate.admit("p1", rate)));
    expect(first).toBeGreaterThanOrEqual(100);
    expect(first).toBeLessThanOrEqual(100 + refilled());
    const calls = client.calls;
    // Over the limit: refused from memory, no call per refusal.
    const refused = await admitted(Array.from({ length: 200 }, () => gate.admit("p1", rate)));
    expect(refused).toBeLessThanOrEqual(refilled() - (first - 100));
    expect(client.calls - calls).toBeLessThanOrEqual(1);
  });

  it("serves a request under the limit from leased tokens, without a call of its own", async () => {
    const keys = freshKeys();
    const client = new CountingClient(redis);
    const gate = limiter(keys, client);
    const rate = { requests_per_second: 1_000, burst: 1_000 };
    // 100 ms of the rate per lease: 100 tokens a call.
    let served = 0;
    for (let i = 0; i < 500; i++) if (await gate.admit("p1", rate)) served++;
    expect(served).toBe(500);
    expect(client.calls).toBeLessThanOrEqual(8);
  });

  it("two gateways sharing a project admit no more than the rate over time plus the burst", async () => {
    const keys = freshKeys();
    const gates = [limiter(keys), limiter(keys)];
    const rate = { requests_per_second: 200, burst: 50 };
    const started = Date.now();
    let total = 0;
    // Each gateway offers 3x the rate for 2 s, in 10 ms ticks.
    while (Date.now() - started < 2_000) {
      const tick = gates.flatMap((gate) => Array.from({ length: 3 }, () => gate.admit("p", rate)));
      total += await admitted(tick);
      // Pacing the offered load, not waiting for anything: the ticks are the behaviour.
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const elapsedS = (Date.now() - started) / 1000;
    const ceiling = rate.requests_per_second * elapsedS + rate.burst;
    expect(total).toBeLessThanOrEqual(Math.ceil(ceiling));
    // Close to it: at most a chunk (20 tokens) per gateway a lease life held back.
    expect(total).toBeGreaterThanOrEqual(Math.floor(ceiling * 0.8));
  });

  it("shares an exhausted bucket between gateways asking in lockstep, none winning every token", async () => {
    const keys = freshKeys();
    const gates = [limiter(keys), limiter(keys)];
    const rate = { requests_per_second: 100, burst: 100 };
    const admittedBy = [0, 0];
    const started = Date.now();
    // Both offer 2x the rate in 5 ms ticks, the first gateway always a moment ahead, as
    // clients started together are: whoever asks first after a refill would take it all.
    while (Date.now() - started < 3_000) {
      for (const [index, gate] of gates.entries()) {
        if (await gate.admit("p", rate)) admittedBy[index]++;
      }
      // Pacing the offered load, not waiting for anything: the ticks are the behaviour.
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const total = admittedBy[0] + admittedBy[1];
    expect(total).toBeGreaterThan(200);
    // Asked in this order with no jitter, the second gets under a fifth; with it, near a third.
    for (const count of admittedBy) expect(count).toBeGreaterThan(0.24 * total);
  });

  it("waits out an empty bucket's refill and a random share of one token's time", () => {
    expect(emptyWaitMs(10, 20, 0)).toBe(10);
    expect(emptyWaitMs(10, 20, 0.999)).toBe(59);
    expect(emptyWaitMs(0, 1_000, 0.5)).toBe(1);
  });

  it("fails open with a local bound when Redis does not answer", async () => {
    const keys = freshKeys();
    const dead = new Redis("redis://127.0.0.1:1", {
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      lazyConnect: true,
    });
    dead.on("error", () => {});
    try {
      const gate = limiter(keys, dead);
      const rate = { requests_per_second: 20, burst: 30 };
      const first = await admitted(Array.from({ length: 50 }, () => gate.admit("p", rate)));
      // The local bucket starts full: its burst goes, the rest is refused.
      expect(first).toBe(30);
      expect(gate.stats()).toMatchObject({ admittedLocally: 30 });
      expect(gate.stats().leaseFailures).toBeGreaterThanOrEqual(1);
    } finally {
      dead.disconnect();
    }
  });

  it("once on its local bucket, never makes a request wait on Redis, and goes back when Redis answers", async () => {
    const keys = freshKeys();
    // A Redis that takes calls and never answers, until it is let through.
    let answering = false;
    const hanging: ScriptClient = {
      evalsha: (sha1, n, ...rest) =>
        answering ? redis.evalsha(sha1, n, ...rest) : new Promise(() => {}),
      eval: (lua, n, ...rest) => (answering ? redis.eval(lua, n, ...rest) : new Promise(() => {})),
    };
    let nowMs = 1_000_000;
    const gate = new RequestRateLimiter({
      redis: hanging,
      keys,
      script,
      requestTimeoutMs: 50,
      fallbackMs: 100,
      nowMs: () => nowMs,
    });
    const rate = { requests_per_second: 1_000, burst: 1_000 };
    // The first request waits for the lease's deadline, then the local bucket answers.
    expect(await gate.admit("p", rate)).toBe(true);
    expect(gate.stats()).toMatchObject({ leaseFailures: 1, admittedLocally: 1 });
    // Past the fallback's time: Redis is asked again, and the request is answered at once.
    nowMs += 200;
    const leases = gate.stats().leases;
    expect(gate.admit("p", rate)).toBe(true);
    expect(gate.stats().leases).toBe(leases + 1);
    await waitUntil(() => gate.stats().leaseFailures === 2, { message: "the second ask failing" });
    // Redis answers again: the next ask's lease ends the fallback.
    answering = true;
    nowMs += 200;
    expect(gate.admit("p", rate)).toBe(true);
    // Served from the shared bucket again (not locally) once that lease answered.
    await waitUntil(() => {
      const local = gate.stats().admittedLocally;
      return gate.admit("p", rate) === true && gate.stats().admittedLocally === local;
    }, { message: "a request served from the shared bucket" });
    expect(Number(await redis.hget(keys.projectRate("p"), "tokens"))).toBeLessThan(1_000);
  });
});
