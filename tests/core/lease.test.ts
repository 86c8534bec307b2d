import { afterEach, describe, expect, it } from "vitest";
import { Redis } from "ioredis";
import { ControllerLease } from "../../control/core/lease.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import { captureLogger } from "../../testkit/logger.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { waitUntil } from "../../testkit/wait.ts";

const prefix = testPrefix();
const keys = redisKeys(prefix);
const clients: Redis[] = [];
const leases: ControllerLease[] = [];

function lease(
  holderId: string,
  overrides: Partial<{ ttlMs: number; refreshMs: number; pollMs: number }> = {},
) {
  const redis = new Redis(TEST_REDIS_URL);
  clients.push(redis);
  const { logger, lines } = captureLogger("controller");
  const made = new ControllerLease({
    redis,
    keys,
    holderId,
    logger,
    ttlMs: 3000,
    refreshMs: 200,
    pollMs: 100,
    ...overrides,
  });
  leases.push(made);
  return { lease: made, redis, lines };
}

afterEach(async () => {
  await Promise.all(leases.splice(0).map((l) => l.stop()));
  for (const client of clients.splice(0)) client.disconnect();
  await deletePrefix(TEST_REDIS_URL, prefix);
});

describe("controller lease", () => {
  it("one of two controllers leads; the standby leads within a poll of a clean stop", async () => {
    const a = lease("a");
    a.lease.start();
    await waitUntil(() => a.lease.leading, { message: "a to lead" });
    const b = lease("b");
    b.lease.start();
    // b keeps polling while a holds the key.
    await waitUntil(async () => (await a.redis.get(keys.controllerLease)) === "a");
    expect(b.lease.leading).toBe(false);

    const leadA = a.lease.lead!;
    await a.lease.stop();
    expect(leadA.signal.aborted).toBe(true);
    const stoppedAt = performance.now();
    await waitUntil(() => b.lease.leading, { message: "b to lead", timeoutMs: 2000 });
    // Within a poll (100 ms) plus the time a take takes.
    expect(performance.now() - stoppedAt).toBeLessThan(600);
    expect(b.lease.term).toBe(1);
  });

  it("a killed holder is replaced within the TTL plus a poll", async () => {
    const a = lease("a", { ttlMs: 1000 });
    a.lease.start();
    await waitUntil(() => a.lease.leading);
    const b = lease("b", { ttlMs: 1000 });
    b.lease.start();
    // A crash: the keeper stops refreshing and nothing is released.
    const killedAt = performance.now();
    a.redis.disconnect();
    await waitUntil(() => b.lease.leading, { message: "b to lead", timeoutMs: 3000 });
    // TTL plus a poll, with room for a loaded machine's scheduling.
    expect(performance.now() - killedAt).toBeLessThan(1000 + 100 + 1500);
    // The dead holder's cover ran out on its own clock, so it no longer believes it leads.
    await waitUntil(() => !a.lease.leading, { message: "a's cover to run out" });
  });

  it("a key taken by another holder ends the lead at once on the next refresh", async () => {
    const a = lease("a");
    a.lease.start();
    const lead = await a.lease.waitForLead(AbortSignal.timeout(2000));
    await a.redis.set(keys.controllerLease, "intruder", "PX", 5000);
    await waitUntil(() => lead.signal.aborted, { message: "the lead to end" });
    expect(a.lease.leading).toBe(false);
    // It takes the lease again as a new term once the other holder's key is gone.
    await a.redis.del(keys.controllerLease);
    const next = await a.lease.waitForLead(AbortSignal.timeout(2000));
    expect(next.term).toBe(lead.term + 1);
  });

  it("markLost ends the lead immediately and stop is safe twice", async () => {
    const a = lease("a");
    a.lease.start();
    const lead = await a.lease.waitForLead(AbortSignal.timeout(2000));
    a.lease.markLost("publish found another holder");
    expect(lead.signal.aborted).toBe(true);
    expect(a.lease.leading).toBe(false);
    await a.lease.stop();
    await a.lease.stop();
  });
});
