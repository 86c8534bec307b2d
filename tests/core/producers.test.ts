import { afterEach, describe, expect, it } from "vitest";
import { Redis } from "ioredis";
import { ControllerLease } from "../../control/core/lease.ts";
import { JobProducer } from "../../control/jobs/producers.ts";
import { slotSecond } from "../../control/jobs/slots.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import { JobKind } from "../../shared/roles.ts";
import { captureLogger } from "../../testkit/logger.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { waitUntil } from "../../testkit/wait.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function setup() {
  const prefix = testPrefix();
  const keys = redisKeys(prefix);
  const redis = new Redis(TEST_REDIS_URL);
  const { logger } = captureLogger("controller");
  const lease = new ControllerLease({
    redis,
    keys,
    holderId: `c-${prefix}`,
    logger,
    ttlMs: 5000,
    refreshMs: 200,
    pollMs: 100,
  });
  cleanups.push(async () => {
    await lease.stop();
    await deletePrefix(TEST_REDIS_URL, prefix);
    redis.disconnect();
  });
  return { keys, redis, lease, logger };
}

async function published(redis: Redis, stream: string) {
  const entries = await redis.xrange(stream, "-", "+");
  return entries.map(([id, fields]) => ({
    second: Math.floor(Number(id.split("-")[0]) / 1000),
    key: fields[1],
  }));
}

describe("job producers", () => {
  it("publishes each key at its own slot second of the period", async () => {
    const t = setup();
    const keys = Array.from({ length: 40 }, (_, i) => `proxy-${i}`);
    const producer = new JobProducer({
      kind: JobKind.health,
      periodMs: 3000,
      keys: () => keys,
      redis: t.redis,
      redisKeys: t.keys,
      lease: t.lease,
      logger: t.logger,
    });
    cleanups.push(() => producer.stop());
    t.lease.start();
    producer.start();
    const stream = t.keys.jobStream(JobKind.health);
    // Two whole periods after the first publish.
    await waitUntil(
      async () => new Set((await published(t.redis, stream)).map((e) => e.second)).size >= 7,
      {
        timeoutMs: 12_000,
        message: "two periods of publishing",
      },
    );
    const entries = await published(t.redis, stream);
    for (const { second, key } of entries) {
      // Appended within the second it was due (or the next, when a cycle ran late).
      const slot = slotSecond(JobKind.health, key, 3);
      expect([slot, (slot + 1) % 3]).toContain(second % 3);
    }
    // Spread over the period rather than all at once.
    const perSecond = new Map<number, number>();
    for (const e of entries) perSecond.set(e.second, (perSecond.get(e.second) ?? 0) + 1);
    expect(Math.max(...perSecond.values())).toBeLessThan(40);
    // Every key came round within two periods.
    expect(new Set(entries.map((e) => e.key)).size).toBe(40);
  });

  it("publishes the compile's first-lane keys on the kind's first lane, the rest on its stream", async () => {
    const t = setup();
    const keys = Array.from({ length: 20 }, (_, i) => `proxy-${i}`);
    const suspects = new Set(["proxy-3", "proxy-11"]);
    const producer = new JobProducer({
      kind: JobKind.health,
      periodMs: 1000,
      keys: () => keys,
      firstLane: () => suspects,
      redis: t.redis,
      redisKeys: t.keys,
      lease: t.lease,
      logger: t.logger,
    });
    cleanups.push(() => producer.stop());
    t.lease.start();
    producer.start();
    const first = t.keys.jobFirstStream(JobKind.health);
    const regular = t.keys.jobStream(JobKind.health);
    await waitUntil(async () => (await t.redis.xlen(first)) >= 2, {
      timeoutMs: 10_000,
      message: "a period published",
    });
    await waitUntil(async () => (await t.redis.xlen(regular)) >= 18, {
      timeoutMs: 10_000,
      message: "the regular keys published",
    });
    expect(new Set((await published(t.redis, first)).map((e) => e.key))).toEqual(suspects);
    const rest = new Set((await published(t.redis, regular)).map((e) => e.key));
    expect(rest.has("proxy-3") || rest.has("proxy-11")).toBe(false);
    expect(rest.size).toBe(18);
  });

  it("publishes nothing for a keyed kind before the first compile, and catches up at most five seconds", async () => {
    const t = setup();
    const compiled: { keys?: string[] } = {};
    let clock = 1_000_000_000_000;
    const producer = new JobProducer({
      kind: JobKind.health,
      periodMs: 10_000,
      keys: () => compiled.keys,
      redis: t.redis,
      redisKeys: t.keys,
      lease: t.lease,
      logger: t.logger,
      now: () => clock,
    });
    cleanups.push(() => producer.stop());
    t.lease.start();
    producer.start();
    await waitUntil(() => producer.snapshot().runs >= 2, { message: "a few cycles" });
    const stream = t.keys.jobStream(JobKind.health);
    expect(await t.redis.xlen(stream)).toBe(0);
    // One key per slot second of a 10 s period; then the clock jumps a whole period (a stall).
    const keys = Array.from({ length: 400 }, (_, i) => `k${i}`);
    compiled.keys = keys;
    const slots = new Set(keys.map((k) => slotSecond(JobKind.health, k, 10)));
    expect(slots.size).toBe(10);
    const before = producer.snapshot().runs;
    clock += 10_000;
    await waitUntil(() => producer.snapshot().runs > before + 1);
    const entries = await t.redis.xrange(stream, "-", "+");
    const seconds = new Set(
      entries.map(([, f]) => slotSecond(JobKind.health, f[1], 10)),
    );
    // Only the last five seconds' slots were published, not the whole period.
    expect(seconds.size).toBe(5);
  });

  it("pauses without a leader and resumes under a new lead", async () => {
    const t = setup();
    const producer = new JobProducer({
      kind: JobKind.indexHygiene,
      periodMs: 1000,
      redis: t.redis,
      redisKeys: t.keys,
      lease: t.lease,
      logger: t.logger,
    });
    cleanups.push(() => producer.stop());
    producer.start();
    const stream = t.keys.jobStream(JobKind.indexHygiene);
    // No lease: standby publishes nothing.
    const until = Date.now() + 1500;
    await waitUntil(() => Date.now() > until, { timeoutMs: 3000 });
    expect(await t.redis.xlen(stream)).toBe(0);
    t.lease.start();
    await waitUntil(async () => (await t.redis.xlen(stream)) >= 2, {
      message: "publishing under the lead",
    });
    // The lead lost: publishing stops within a cycle.
    t.lease.markLost("test");
    await t.redis.set(t.keys.controllerLease, "someone-else", "PX", 60_000);
    const settled = await t.redis.xlen(stream);
    const later = Date.now() + 1500;
    await waitUntil(() => Date.now() > later, { timeoutMs: 3000 });
    expect(await t.redis.xlen(stream)).toBeLessThanOrEqual(settled + 1);
    const entries = await t.redis.xrange(stream, "-", "+");
    expect(entries.every(([, f]) => f[1] === "all")).toBe(true);
  });
});
