/**
 * The failure log against a real Redis (a prefix of this file's own): examples written to the
 * capped stream of their project and kind, a few distinct ones per cycle, scrubbed; a write that
 * fails drops its cycle and is counted; every kind counted from the start. Then the log wired to
 * request metering as the gateway wires it: each failure (a refusal, a failed attempt, a transfer
 * that ended failed) counted once under its failure key and described once; a success never.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FailureLog } from "../../gateway/metering/failure-log.ts";
import { RequestMetering } from "../../gateway/metering/metering.ts";
import type { PublisherLogger } from "../../gateway/metering/publisher.ts";
import type { LuaScript } from "../../shared/lua/loader.ts";
import { renderSamples } from "../../gateway/base/metrics.ts";
import { decodeFailureExample, type FailureExample } from "../../shared/failure-examples.ts";
import { FAILURE_KINDS } from "../../shared/failure-kinds.ts";
import { type RedisKeys, redisKeys, STREAM_CAPS } from "../../shared/redis-keys.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import {
  Clock,
  expectSameCounts,
  FAILED_TRANSFER,
  failedAttempt,
  loadMeteringScriptNode,
  plan,
  readRedis,
  refusal,
  SimTransfer,
  Tally,
} from "../../testkit/metering.ts";

let redis: Redis;
let script: LuaScript;
const prefixes: string[] = [];

function freshKeys(): RedisKeys {
  const prefix = testPrefix();
  prefixes.push(prefix);
  return redisKeys(prefix);
}

beforeAll(async () => {
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
  script = await loadMeteringScriptNode();
});

afterAll(async () => {
  for (const prefix of prefixes) await deletePrefix(TEST_REDIS_URL, prefix);
  redis.disconnect();
});

class Lines implements PublisherLogger {
  readonly lines: { level: string; msg: string; fields?: Readonly<Record<string, unknown>> }[] = [];
  info(msg: string, fields?: Readonly<Record<string, unknown>>): void {
    this.lines.push({ level: "info", msg, fields });
  }
  error(msg: string, fields?: Readonly<Record<string, unknown>>): void {
    this.lines.push({ level: "error", msg, fields });
  }
}

function example(over: Partial<FailureExample> = {}): FailureExample {
  return {
    atMs: Date.UTC(2030, 0, 1),
    kind: "upstream_unreachable",
    protocol: "http",
    clientStatus: 502,
    proxyStatus: "connection_refused",
    vendorStatus: null,
    connectorId: "c1",
    proxyId: "x1",
    target: "example.com:80",
    message: "GET http://example.com/: Upstream proxy refused the connection",
    ...over,
  };
}

/** Every example in a project's and kind's stream, oldest first. */
async function stream(keys: RedisKeys, projectId: string, kind: string) {
  const entries = await redis.xrange(keys.failures(projectId, kind), "-", "+");
  return entries.map(([, fields]) => decodeFailureExample(fields));
}

describe("the failure log", () => {
  it("writes a few distinct, scrubbed examples per project and kind each cycle to their capped stream", async () => {
    const keys = freshKeys();
    const log = new FailureLog({ redis, keys, writeTimeoutMs: 2_000, intervalMs: 60_000 });
    // Seven failures of one project and kind: six messages, one of them twice.
    for (let i = 0; i < 6; i++) log.record("p1", example({ message: `failure ${i}` }));
    log.record("p1", example({ message: "failure 0" }));
    log.record("p1", example({ kind: "upstream_timeout", clientStatus: 504, message: "slow" }));
    log.record(
      "p2",
      example({
        kind: "first_byte_timeout",
        vendorStatus: 407,
        message: "GET http://user:hunter2@shop.example/cart?token=s3cr3t#top: no answer",
      }),
    );
    // Not known yet: counted, kept nowhere.
    log.record(null, example({ kind: "unauthenticated", connectorId: null, proxyId: null }));
    expect(log.stats().pendingExamples).toBe(7);
    await log.publishNow();

    const unreachable = await stream(keys, "p1", "upstream_unreachable");
    expect(unreachable.map((e) => e?.message)).toEqual([
      "failure 0",
      "failure 1",
      "failure 2",
      "failure 3",
      "failure 4",
    ]);
    expect(unreachable[0]).toEqual(example({ message: "failure 0" }));
    expect((await stream(keys, "p1", "upstream_timeout")).map((e) => e?.clientStatus)).toEqual([
      504,
    ]);
    const [scrubbed] = await stream(keys, "p2", "first_byte_timeout");
    expect(scrubbed?.message).toBe("GET http://shop.example/cart: no answer");
    expect(scrubbed?.vendorStatus).toBe(407);
    expect(await redis.keys(`${keys.prefix}failures:*:unauthenticated`)).toEqual([]);

    const stats = log.stats();
    expect(stats).toMatchObject({
      recorded: 10,
      examplesWritten: 7,
      examplesCapped: 2,
      examplesDropped: 0,
      writeFailures: 0,
      pendingExamples: 0,
    });
    expect(stats.byKind.upstream_unreachable).toBe(7);
    expect(stats.byKind.unauthenticated).toBe(1);

    // The next cycle takes five more of the same kind: a cap per cycle, not for ever.
    for (let i = 0; i < 6; i++) log.record("p1", example({ message: `later ${i}` }));
    await log.publishNow();
    expect(await stream(keys, "p1", "upstream_unreachable")).toHaveLength(10);
    await log.close();
    await log.close();
  });

  it("keeps each stream near its cap", async () => {
    const keys = freshKeys();
    const log = new FailureLog({
      redis,
      keys,
      writeTimeoutMs: 2_000,
      intervalMs: 60_000,
      maxExamplesPerCycle: 1_000,
    });
    const total = STREAM_CAPS.failures * 3;
    for (let i = 0; i < total; i++) log.record("p1", example({ message: `failure ${i}` }));
    await log.publishNow();
    const length = await redis.xlen(keys.failures("p1", "upstream_unreachable"));
    // MAXLEN ~ trims whole nodes: near the cap, never the whole history.
    expect(length).toBeGreaterThanOrEqual(STREAM_CAPS.failures);
    expect(length).toBeLessThan(total);
    const newest = await redis.xrevrange(
      keys.failures("p1", "upstream_unreachable"),
      "+",
      "-",
      "COUNT",
      1,
    );
    expect(decodeFailureExample(newest[0][1])?.message).toBe(`failure ${total - 1}`);
    await log.close();
  });

  it("drops a cycle whose write fails, counts it, logs the streak once, and never sends it again", async () => {
    const keys = freshKeys();
    // Nothing listens there: every write fails.
    const dead = new Redis("redis://127.0.0.1:1", {
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      lazyConnect: true,
    });
    dead.on("error", () => {});
    const logger = new Lines();
    const log = new FailureLog({
      redis: dead,
      keys,
      writeTimeoutMs: 1_000,
      intervalMs: 60_000,
      logger,
    });
    for (let i = 0; i < 3; i++) log.record("p1", example({ message: `failure ${i}` }));
    await log.publishNow();
    expect(log.stats()).toMatchObject({
      examplesWritten: 0,
      examplesDropped: 3,
      writeFailures: 1,
      consecutiveFailures: 1,
      pendingExamples: 0,
    });
    log.record("p1", example({ message: "failure 3" }));
    await log.publishNow();
    // The first cycle's examples were not kept for the second.
    expect(log.stats()).toMatchObject({ examplesDropped: 4, writeFailures: 2 });
    expect(logger.lines.filter((line) => line.level === "error")).toHaveLength(1);
    expect(renderSamples([log.samples()])).toContain(
      'octoprox_gateway_failure_examples_total{result="dropped"} 4',
    );
    await log.close();
    dead.disconnect();
    expect(await redis.keys(`${keys.prefix}*`)).toEqual([]);
  });

  it("exports every failure kind from the start, at 0", () => {
    const log = new FailureLog({ redis, keys: freshKeys(), writeTimeoutMs: 2_000 });
    const text = renderSamples([log.samples()]);
    for (const kind of FAILURE_KINDS) {
      expect(text).toContain(`octoprox_gateway_failures_total{kind="${kind}"} 0`);
    }
    expect(text).toContain("# HELP octoprox_gateway_failures_total ");
  });
});

describe("the failure log under request metering", () => {
  it("counts each failure once under its key and describes it once; a success never", async () => {
    const keys = freshKeys();
    const clock = new Clock();
    const tally = new Tally(keys, { now: clock.now });
    const log = new FailureLog({ redis, keys, writeTimeoutMs: 2_000, intervalMs: 60_000 });
    const m = new RequestMetering({
      redis,
      keys,
      script,
      instance: "gw-failures",
      intervalMs: 60_000,
      now: clock.now,
      failureLog: log,
    });
    // A success: counted as a transfer, never as a failure.
    const ok = new SimTransfer(m, tally, plan({ host: "ok.example" }));
    ok.bytes(10, 20);
    ok.finish();
    // A failed attempt, then a retry that went through on another proxy: the client got 200.
    const attempt = plan({ proxyId: "x2", host: "retry.example", latencyMs: 40, ok: false });
    m.attemptFailed(failedAttempt(attempt, { clientStatus: 200, proxyStatus: "" }));
    tally.attemptFailed(attempt, "upstream_unreachable", null);
    const retried = new SimTransfer(m, tally, plan({ host: "retry.example" }));
    retried.finish();
    // An attempt the proxy refused with its own status, answered 502.
    const refusedBy = plan({ proxyId: "x3", connectorId: "c2", ok: false });
    m.attemptFailed(failedAttempt(refusedBy, { kind: "upstream_refused", vendorStatus: 403 }));
    tally.attemptFailed(refusedBy, "upstream_refused", 403);
    // A transfer that began and ended failed.
    const broken = new SimTransfer(m, tally, plan({ proxyId: "x4", ok: false }));
    broken.bytes(5, 5);
    broken.finish();
    // Refusals of several kinds, one of a client not known yet.
    const client = { projectId: "p1", options: { user: "u" } };
    for (const reason of ["destination_prohibited", "no_proxy_available"] as const) {
      m.rejected(refusal(reason), client, { host: "10.0.0.1", port: 80 }, "http");
      tally.rejected("p1", reason);
    }
    m.rejected(refusal("all_proxies_busy"), client, { host: "busy.example", port: 443 }, "socks5");
    tally.rejected("p1", "all_proxies_busy");
    m.rejected(refusal("unauthenticated"), undefined, undefined, "http");

    expect(await m.publishNow()).toBe(true);
    await log.publishNow();
    expectSameCounts(await readRedis(redis, keys), tally.counts);
    expect(await redis.hgetall(keys.metricWindow("proxy", "x2"))).toMatchObject({
      requests: "1",
      failures: "1",
      latency_sum_ms: "40",
    });

    const examples = new Map<string, (FailureExample | undefined)[]>();
    for (const key of await redis.keys(`${keys.prefix}failures:*`)) {
      const kind = key.slice(`${keys.prefix}failures:p1:`.length);
      examples.set(kind, await stream(keys, "p1", kind));
    }
    expect([...examples.keys()].sort()).toEqual([
      "all_proxies_busy",
      "destination_prohibited",
      "no_proxy_available",
      "transfer_broken",
      "upstream_refused",
      "upstream_unreachable",
    ]);
    for (const list of examples.values()) expect(list).toHaveLength(1);
    expect(examples.get("upstream_unreachable")![0]).toMatchObject({
      clientStatus: 200,
      proxyId: "x2",
      connectorId: "c1",
      target: "retry.example:443",
    });
    expect(examples.get("upstream_refused")![0]).toMatchObject({
      vendorStatus: 403,
      connectorId: "c2",
    });
    expect(examples.get("transfer_broken")![0]).toMatchObject({
      message: FAILED_TRANSFER.message,
      clientStatus: 200,
      proxyId: "x4",
    });
    expect(examples.get("all_proxies_busy")![0]).toMatchObject({
      protocol: "socks5",
      connectorId: null,
      proxyId: null,
      target: "busy.example:443",
      clientStatus: 502,
    });
    const byKind = log.stats().byKind;
    expect(byKind.unauthenticated).toBe(1);
    expect(Object.values(byKind).reduce((a, b) => a + b, 0)).toBe(7);
    // The success is in no failure stream (and under no failure key: the tally has none).
    expect(JSON.stringify([...examples.values()])).not.toContain("ok.example");
    await m.close();
    await log.close();
  });
});
