/**
 * Health verdicts written in groups, against a real Redis: the first verdict after a quiet spell
 * is written at once; those that come within the group time are written together, soft health in
 * one pipeline and the status changes in one call of the status writer (one transaction, one
 * change entry); a group whose write fails rejects its verdicts and leaves the next group alone.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Verdict, VerdictWriter } from "../../control/jobs/health-verdicts.ts";
import type { StatusChange } from "../../control/services/proxy-status.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { captureLogger } from "../../testkit/logger.ts";

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

const verdict = (proxyId: string, to?: string): Verdict => ({
  proxyId,
  health: { failures: to === "degraded" ? 1 : 0, latency_ms: 5, checked_at: 1, error: "" },
  ...(to === undefined
    ? {}
    : { change: { id: proxyId, connectorId: "c", from: "initializing", to } }),
});

describe("verdict groups", () => {
  it("writes the first verdict at once, then those of a second together", async () => {
    const calls: (readonly StatusChange[])[] = [];
    const writer = new VerdictWriter({
      redis,
      keys,
      logger: captureLogger().logger,
      groupMs: 300,
      writeStatuses: (changes) => {
        calls.push(changes);
        return Promise.resolve(changes);
      },
    });
    const startedAt = Date.now();
    await writer.submit(verdict("p1", "healthy"));
    expect(Date.now() - startedAt).toBeLessThan(250);
    expect(await redis.hget(keys.proxyHealth("p1"), "failures")).toBe("0");
    // Five verdicts within the group time: one group, one status write with the three changes.
    await Promise.all([
      writer.submit(verdict("p2", "healthy")),
      writer.submit(verdict("p3")),
      writer.submit(verdict("p4", "degraded")),
      writer.submit(verdict("p5")),
      writer.submit(verdict("p6", "healthy")),
    ]);
    expect(calls.map((c) => c.map((change) => change.id))).toEqual([["p1"], ["p2", "p4", "p6"]]);
    expect(writer.groups).toBe(2);
    expect(await redis.ttl(keys.proxyHealth("p3"))).toBeGreaterThan(86_000);
  });

  it("rejects a group whose write failed, and writes the next one", async () => {
    let fail = true;
    const writer = new VerdictWriter({
      redis,
      keys,
      logger: captureLogger().logger,
      groupMs: 50,
      writeStatuses: (changes) =>
        fail ? Promise.reject(new Error("database away")) : Promise.resolve(changes),
    });
    await expect(writer.submit(verdict("q1", "healthy"))).rejects.toThrow("database away");
    fail = false;
    await writer.submit(verdict("q2", "healthy"));
    expect(writer.groups).toBe(1);
  });
});
