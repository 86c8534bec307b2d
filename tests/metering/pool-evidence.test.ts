/**
 * The gateway's pool evidence against a real Redis (a prefix of this file's own): connect
 * failures through provider-API proxies are added to their pool's evidence hash, by entry, with a
 * TTL; failures of other kinds, or through other connectors, are not; a write that fails drops its
 * counts and is counted; memory is bounded; a close writes what is pending once more.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  MAX_PENDING_ENTRIES,
  POOL_EVIDENCE_TTL_MS,
  PoolEvidence,
} from "../../gateway/metering/pool-evidence.ts";
import { renderSamples } from "../../gateway/base/metrics.ts";
import { AttemptFailureKind } from "../../shared/failure-kinds.ts";
import { type RedisKeys, redisKeys } from "../../shared/redis-keys.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { freePort } from "../../testkit/ports.ts";

let redis: Redis;
const prefixes: string[] = [];

function freshKeys(): RedisKeys {
  const prefix = testPrefix();
  prefixes.push(prefix);
  return redisKeys(prefix);
}

beforeAll(() => {
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  for (const prefix of prefixes) await deletePrefix(TEST_REDIS_URL, prefix);
  redis.disconnect();
});

const POOL = "pool-connector";
const STATIC = "static-connector";

function evidence(keys: RedisKeys, client: Pick<Redis, "pipeline"> = redis): PoolEvidence {
  return new PoolEvidence({
    redis: client,
    keys,
    isPool: (connectorId) => connectorId === POOL,
    writeTimeoutMs: 2000,
  });
}

describe("pool evidence", () => {
  it("adds connect failures through pool proxies to their pool's evidence, by entry", async () => {
    const keys = freshKeys();
    const log = evidence(keys);
    const at = (proxyId: string, connectorId = POOL) => ({ connectorId, proxyId });
    log.attemptFailed(at("e1"), AttemptFailureKind.upstreamUnreachable);
    log.attemptFailed(at("e1"), AttemptFailureKind.upstreamTimeout);
    log.attemptFailed(at("e2"), AttemptFailureKind.upstreamClosed);
    // Not the proxy's absence: a refusal, a bad status, a broken transfer are the checks' to judge.
    log.attemptFailed(at("e3"), AttemptFailureKind.upstreamRefused);
    log.attemptFailed(at("e3"), AttemptFailureKind.transferBroken);
    // Not a pool's proxy.
    log.attemptFailed(at("s1", STATIC), AttemptFailureKind.upstreamUnreachable);
    await log.publishNow();
    expect(await redis.hgetall(keys.poolEvidence(POOL))).toEqual({ e1: "2", e2: "1" });
    expect(await redis.exists(keys.poolEvidence(STATIC))).toBe(0);
    const ttl = await redis.pttl(keys.poolEvidence(POOL));
    expect(ttl).toBeGreaterThan(POOL_EVIDENCE_TTL_MS - 5000);
    expect(ttl).toBeLessThanOrEqual(POOL_EVIDENCE_TTL_MS);
    // Later failures add to what the pool job has not taken yet.
    log.attemptFailed(at("e1"), AttemptFailureKind.upstreamUnreachable);
    await log.close();
    await log.close();
    expect(await redis.hget(keys.poolEvidence(POOL), "e1")).toBe("3");
    expect(log.stats()).toMatchObject({ written: 4, dropped: 0 });
    // Closed, it takes nothing more.
    log.attemptFailed(at("e9"), AttemptFailureKind.upstreamUnreachable);
    expect(log.stats().written + log.stats().dropped).toBe(4);
  });

  it("drops and counts what a failed write carried, and what is past its memory bound", async () => {
    const keys = freshKeys();
    // A Redis that is not there: nothing listens on the port.
    const broken = new Redis({
      host: "127.0.0.1",
      port: await freePort(),
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    broken.on("error", () => {});
    const log = evidence(keys, broken);
    for (let i = 0; i < MAX_PENDING_ENTRIES + 5; i++) {
      log.attemptFailed({ connectorId: POOL, proxyId: `e${i}` }, "upstream_unreachable");
    }
    expect(log.stats().dropped).toBe(5);
    await log.publishNow();
    expect(log.stats()).toMatchObject({ written: 0, dropped: MAX_PENDING_ENTRIES + 5 });
    expect(renderSamples([log.samples()])).toContain(
      `octoprox_gateway_pool_evidence_total{result="dropped"} ${MAX_PENDING_ENTRIES + 5}`,
    );
    await log.close();
    broken.disconnect();
  });
});
