/**
 * Request metering against a real Redis (the test bed's, under a prefix of this file's own):
 * exact counts, a tunnel device's own window (with its connections closed as encrypted DNS),
 * bytes reported mid-transfer, batches applied once after a lost reply, the host cap, the stop,
 * and the script as the gateway loads it under Deno.
 */
import { execFile } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import * as v from "valibot";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { applyPart, type MeteringPart } from "../../gateway/metering/apply.ts";
import { meteredHost, RequestMetering } from "../../gateway/metering/metering.ts";
import { renderSamples } from "../../gateway/base/metrics.ts";
import type { LuaScript, ScriptClient } from "../../shared/lua/loader.ts";
import { type RedisKeys, redisKeys } from "../../shared/redis-keys.ts";
import {
  DEMAND_TTL_SECONDS,
  DEVICE_FIELDS,
  OTHER_HOST,
  readCounts,
  TRANSFER_FIELDS,
} from "../../shared/metric-windows.ts";
import { DeviceDirectory } from "../../gateway/tunnel-plane/devices.ts";
import { FeedTunnelDeviceSchema } from "../../shared/feed/models.ts";
import type { ProjectEntry } from "../../shared/routing/snapshot.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { waitUntil } from "../../testkit/wait.ts";
import {
  Clock,
  expectSameCounts,
  failedAttempt,
  loadMeteringScriptNode,
  partCounts,
  plan,
  readRedis,
  refusal,
  SimTransfer,
  Tally,
  type TransferPlan,
} from "../../testkit/metering.ts";

const run = promisify(execFile);

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

function metering(
  keys: RedisKeys,
  clock: Clock,
  extra: Partial<ConstructorParameters<typeof RequestMetering>[0]> = {},
): RequestMetering {
  return new RequestMetering({
    redis,
    keys,
    script,
    instance: "gw-test",
    intervalMs: 60_000,
    now: clock.now,
    ...extra,
  });
}

describe("request metering", () => {
  it("stops a running transfer through a connector blocked with the interrupt action, once, at its next report", async () => {
    const keys = freshKeys();
    const blocked = new Set<string>();
    const m = metering(keys, new Clock(), {
      interrupts: (connectorId) => blocked.has(connectorId),
      reportBytes: 1000,
    });
    const stopped: string[] = [];
    const begin = (connectorId: string) =>
      m.begin({
        kind: "http",
        client: { projectId: "p1", options: { user: "u" } },
        target: { host: "example.com", port: 80 },
        upstream: {
          proxyId: `${connectorId}-x`,
          connectorId,
          scheme: "http",
          host: "127.0.0.1",
          port: 1,
          username: null,
          password: null,
        },
        latencyMs: 1,
        interrupt: () => stopped.push(connectorId),
      })!;
    const cut = begin("cut");
    const free = begin("free");
    cut.bytes(10, 10);
    blocked.add("cut");
    // Under the report size nothing is asked yet; a report (1000 bytes here) stops it.
    cut.bytes(10, 10);
    expect(stopped).toEqual([]);
    cut.bytes(0, 1000);
    expect(stopped).toEqual(["cut"]);
    // Asked once: later reports, and the window's cut, do not stop it again.
    cut.bytes(0, 1000);
    expect(await m.publishNow()).toBe(true);
    expect(stopped).toEqual(["cut"]);
    // A transfer with no bytes moving is stopped by the window's cut.
    const idle = begin("cut");
    expect(await m.publishNow()).toBe(true);
    expect(stopped).toEqual(["cut", "cut"]);
    // Finishing never interrupts, and the rest is counted as usual.
    for (const meter of [cut, free, idle]) meter.finish({ ok: true });
    expect(stopped).toEqual(["cut", "cut"]);
    expect(m.stats().transfersInterrupted).toBe(2);
    await m.close();
  });

  it("counts in Redis exactly what was metered, running transfers' bytes included", async () => {
    const keys = freshKeys();
    const clock = new Clock();
    const tally = new Tally(keys, { now: clock.now, hostOf: (p) => meteredHost(p.host) });
    const m = metering(keys, clock);

    const short = new SimTransfer(m, tally, plan({ host: "Example.COM." }));
    short.bytes(100, 2_000);
    short.bytes(0, 35);
    short.finish();
    short.finishAgain(); // counts nothing

    // A long transfer: its first MiB is reported on its own, before it ends.
    const long = new SimTransfer(
      m,
      tally,
      plan({ proxyId: "x2", host: "[2001:DB8::1]", latencyMs: 12.5, ok: false }),
    );
    long.bytes(512 * 1024, 512 * 1024);
    expect(await m.publishNow()).toBe(true);
    let stored = await readRedis(redis, keys);
    expectSameCounts(stored, tally.counts);
    expect(stored.get(keys.metricWindow("proxy", "x2"))).toEqual({
      bytes_sent: 512 * 1024,
      bytes_received: 512 * 1024,
    });

    // Under the report size: the cut itself reports what the transfer carried since.
    long.bytes(10, 20);
    clock.ms += 60_000; // a later minute: a second demand hash
    const other = new SimTransfer(m, tally, plan({ projectId: "p2", connectorId: "c2" }));
    other.bytes(1, 1);
    expect(await m.publishNow()).toBe(true);
    expectSameCounts(await readRedis(redis, keys), tally.counts);

    long.finish(); // a fractional latency: HINCRBYFLOAT
    other.finish();
    const client = { projectId: "p1", options: { user: "u" } };
    m.rejected(refusal("no_proxy_available"), client, undefined);
    tally.rejected("p1", "no_proxy_available", Math.floor(clock.ms / 60_000));
    m.rejected(refusal("unauthenticated"), undefined, undefined); // no project: not counted
    m.rejected(
      { status: 400, proxyStatus: "http_request_error", reason: "Bad" },
      client,
      undefined,
    );
    const after = new SimTransfer(m, tally, plan({ proxyId: "x2", latencyMs: 3 }));
    after.finish(); // an integer after a fraction still adds
    expect(await m.publishNow()).toBe(true);
    stored = await readRedis(redis, keys);
    expectSameCounts(stored, tally.counts);
    expect(stored.get(keys.metricWindow("proxy", "x2"))).toMatchObject({
      requests: 2,
      failures: 1,
      successes: 1,
      latency_sum_ms: 15.5,
    });
    expect(stored.has(keys.metricWindow("host", "p1:c1:2001:db8::1"))).toBe(true);
    expect(stored.has(keys.metricWindow("host", "p1:c1:example.com"))).toBe(true);

    // Lives: windows and indexes carry the safety TTL, demand hashes the demand window's.
    const windowTtl = await redis.ttl(keys.metricWindow("project", "p1"));
    expect(windowTtl).toBeGreaterThan(86_000);
    expect(await redis.ttl(keys.metricIndex("host"))).toBeGreaterThan(86_000);
    const demandTtl = await redis.ttl(keys.demand("p1", Math.floor(clock.ms / 60_000)));
    expect(demandTtl).toBeGreaterThan(0);
    expect(demandTtl).toBeLessThanOrEqual(DEMAND_TTL_SECONDS);
    expect(await redis.get(keys.applied(m.writer))).toBe("3");
    expect(await redis.ttl(keys.applied(m.writer))).toBeGreaterThan(86_000);

    const stats = m.stats();
    expect(stats.finishedTwice).toBe(1);
    expect(stats.rejectionsWithoutProject).toBe(1);
    expect(stats.metersOpen).toBe(0);
    expect(stats.confirmed).toBe(3);
    expect(renderSamples([m.samples()])).toContain(
      'octoprox_gateway_metering_sends_total{result="confirmed"} 3',
    );
    await m.close();
  });

  it("counts a tunnel device's connections in its own window too, failed attempts and encrypted DNS closed included", async () => {
    const keys = freshKeys();
    const clock = new Clock();
    const tally = new Tally(keys, { now: clock.now });
    const m = metering(keys, clock);
    // A device's client, as the gateway admits the device by its tunnel address.
    const directory = new DeviceDirectory({
      project: (id) => (id === "p1" ? { id: "p1", username: "acme" } as ProjectEntry : undefined),
    });
    // Read as a gateway reads the feed's device.
    const device = v.parse(FeedTunnelDeviceSchema, {
      id: "d1",
      project_id: "p1",
      protocol: "wireguard",
      name: "phone",
      address: "10.66.0.2",
      enabled: true,
      public_key: null,
      preshared_key: null,
      country: null,
      state: null,
      city: null,
      session_id: null,
    });
    directory.apply([device], new Set(["wireguard"]));
    const client = directory.admit("10.66.0.2")!.client;
    expect(client.deviceId).toBe("d1");

    const phone = plan({ deviceId: "d1", host: "shop.example", latencyMs: 7.5 });
    const first = new SimTransfer(m, tally, phone, client);
    first.bytes(300, 4_000);
    first.finish();
    const second = new SimTransfer(m, tally, { ...phone, proxyId: "x2", ok: false }, client);
    second.bytes(20, 0);
    second.finish();
    m.attemptFailed(failedAttempt(phone));
    tally.attemptFailed(phone, "upstream_unreachable", null);
    // Two connections closed as encrypted DNS: counted for the device, and no request.
    m.encryptedDnsClosed(client);
    m.encryptedDnsClosed(client);
    tally.encryptedDnsClosed("d1");
    tally.encryptedDnsClosed("d1");
    // A client that logged in by username counts in no device's window.
    const other = new SimTransfer(m, tally, plan({ host: "shop.example" }));
    other.bytes(1, 1);
    other.finish();
    m.encryptedDnsClosed({ projectId: "p1", options: { user: "u" } });
    expect(await m.publishNow()).toBe(true);

    expectSameCounts(await readRedis(redis, keys), tally.counts);
    const window = keys.metricWindow("device", "d1");
    expect(await redis.smembers(keys.metricIndex("device"))).toEqual([window]);
    expect(readCounts(DEVICE_FIELDS, await redis.hgetall(window))).toEqual({
      requests: 3,
      successes: 1,
      failures: 2,
      bytes_sent: 320,
      bytes_received: 4_000,
      latency_sum_ms: 22.5,
      encrypted_dns_closed: 2,
    });
    // The project and its demand count no request for them.
    expect(readCounts(TRANSFER_FIELDS, await redis.hgetall(keys.metricWindow("project", "p1"))))
      .toMatchObject({ requests: 4 });

    // A window of encrypted DNS closed alone is written and listed as any other.
    m.encryptedDnsClosed(client);
    expect(await m.publishNow()).toBe(true);
    expect(await redis.hget(window, "encrypted_dns_closed")).toBe("3");
    expect(await redis.smembers(keys.metricIndex("device"))).toEqual([window]);
    await m.close();
  });

  it("reports a running transfer's bytes every MiB, and every interval by itself", async () => {
    const keys = freshKeys();
    const clock = new Clock();
    const tally = new Tally(keys, { now: clock.now });
    const m = metering(keys, clock, { intervalMs: 100 });
    m.start();
    const transfer = new SimTransfer(m, tally, plan());
    for (let i = 0; i < 40; i++) transfer.bytes(64 * 1024, 0); // 2.5 MiB
    await waitUntil(async () => {
      const row = (await readRedis(redis, keys)).get(keys.metricWindow("proxy", "x1"));
      return row?.bytes_sent === 40 * 64 * 1024;
    }, { message: "the running transfer's bytes in Redis" });
    transfer.bytes(7, 9);
    transfer.finish();
    await waitUntil(async () => {
      expectSameCounts(await readRedis(redis, keys), tally.counts);
      return true;
    }, { message: "the finished transfer in Redis" });
    await m.close();
    expectSameCounts(await readRedis(redis, keys), tally.counts);
  });

  it("applies a batch once however often it is sent", async () => {
    const keys = freshKeys();
    const appliedKey = keys.applied("gw-direct:abcd");
    const part = (number: number): MeteringPart => ({
      number,
      rows: [
        { kind: "proxy", key: keys.metricWindow("proxy", "x1"), values: [1, 1, 0, 10, 20, 2.5] },
        { kind: "demand", key: keys.demand("p1", 100), values: [1, 0] },
      ],
      asks: [],
    });
    const apply = async (p: MeteringPart) =>
      (await applyPart(redis, script, keys, appliedKey, p)).outcome;
    expect(await apply(part(1))).toBe("applied");
    expect(await apply(part(1))).toBe("applied_before");
    expect(await apply(part(2))).toBe("applied");
    expect(await apply(part(1))).toBe("applied_before");
    expect(await redis.hgetall(keys.metricWindow("proxy", "x1"))).toEqual({
      requests: "2",
      successes: "2",
      bytes_sent: "20",
      bytes_received: "40",
      latency_sum_ms: "5",
    });
    expect(await redis.smembers(keys.metricIndex("proxy"))).toEqual([
      keys.metricWindow("proxy", "x1"),
    ]);
    // Redis lost its script cache (a restart): EVAL once, EVALSHA again after.
    await redis.script("FLUSH");
    expect(await apply(part(3))).toBe("applied");

    // A foreign write of another type loses that window's increments, not the batch.
    await redis.set(keys.metricWindow("proxy", "x7"), "not a hash");
    const mixed: MeteringPart = {
      number: 4,
      asks: [],
      rows: [
        { kind: "proxy", key: keys.metricWindow("proxy", "x7"), values: [1, 0, 1, 5, 0, 0] },
        { kind: "proxy", key: keys.metricWindow("proxy", "x1"), values: [1, 1, 0, 0, 0, 0] },
      ],
    };
    expect(await applyPart(redis, script, keys, appliedKey, mixed)).toEqual({
      outcome: "applied",
      refused: 3,
    });
    expect(await redis.hget(keys.metricWindow("proxy", "x1"), "requests")).toBe("4");
    expect(await redis.smembers(keys.metricIndex("proxy"))).toEqual([
      keys.metricWindow("proxy", "x1"),
    ]);
    expect(await apply(mixed)).toBe("applied_before");
  });

  it("sends a part whose reply was lost again, unchanged and alone, and Redis counts it once", async () => {
    const keys = freshKeys();
    const clock = new Clock();
    const tally = new Tally(keys, { now: clock.now });
    const sent: string[][] = [];
    let loseReplies = 2;
    // The first sends reach Redis and are applied, but their replies never come back in time.
    const lossy: ScriptClient = {
      async evalsha(sha1, n, ...rest) {
        sent.push(rest);
        const reply = await redis.evalsha(sha1, n, ...rest);
        if (loseReplies-- > 0) {
          // The injected fault: a reply later than the send timeout, not a wait.
          await new Promise((resolve) => setTimeout(resolve, 300));
        }
        return reply;
      },
      eval: (lua, n, ...rest) => redis.eval(lua, n, ...rest),
    };
    const confirmed: MeteringPart[] = [];
    const m = metering(keys, clock, {
      redis: lossy,
      sendTimeoutMs: 100,
      onConfirmed: (part) => confirmed.push(part),
    });
    const first = new SimTransfer(m, tally, plan());
    first.bytes(1_000, 2_000);
    first.finish();
    expect(await m.publishNow()).toBe(false);
    expect(m.stats().owedParts).toBe(1);

    // New traffic meanwhile goes into the next window, not into the owed part.
    const second = new SimTransfer(m, tally, plan({ proxyId: "x9" }));
    second.bytes(5, 6);
    second.finish();
    expect(await m.publishNow()).toBe(false);
    expect(await m.publishNow()).toBe(true);

    // Each call: KEYS (applied, 5 indexes, hashes) then ARGV starting with the batch number.
    const numbers = sent.map((rest) => {
      const keyCount = rest.findIndex((arg) => !arg.startsWith(keys.prefix));
      return rest[keyCount];
    });
    expect(numbers).toEqual(["1", "1", "1", "2"]);
    expect(sent[0]).toEqual(sent[1]);
    expect(sent[1]).toEqual(sent[2]);
    expect(confirmed.map((part) => part.number)).toEqual([1, 2]);
    expect(confirmed[0].rows.some((row) => row.key.endsWith(":x9"))).toBe(false);
    expectSameCounts(await readRedis(redis, keys), tally.counts);
    expectSameCounts(partCounts(confirmed), tally.counts);
    await m.close();
  });

  it("keeps one row per entity through an outage and folds hosts past the cap into (other)", async () => {
    const keys = freshKeys();
    const clock = new Clock();
    const seen = new Set<string>();
    const maxHosts = 50;
    // Each window (cut) admits the first 50 hosts it meets; every window here meets h0.. in order.
    const tally = new Tally(keys, {
      now: clock.now,
      hostOf: (p: TransferPlan) => {
        if (seen.has(p.host) || seen.size < maxHosts) {
          seen.add(p.host);
          return p.host;
        }
        return OTHER_HOST;
      },
    });
    let down = true;
    const flaky: ScriptClient = {
      evalsha: (sha1, n, ...rest) =>
        down ? Promise.reject(new Error("connect ECONNREFUSED")) : redis.evalsha(sha1, n, ...rest),
      eval: (lua, n, ...rest) => redis.eval(lua, n, ...rest),
    };
    const m = metering(keys, clock, { redis: flaky, caps: { maxHosts } });
    let requests = 0;
    for (let round = 0; round < 5; round++) {
      for (let i = 0; i < 200; i++) {
        const transfer = new SimTransfer(m, tally, plan({ host: `h${i}.example` }));
        transfer.bytes(i, 2 * i);
        transfer.finish();
        requests++;
      }
      expect(await m.publishNow()).toBe(false);
      // One owed part (the first window) and one pending window, each 50 hosts and (other).
      const stats = m.stats();
      expect(stats.owedParts).toBe(1);
      expect(stats.pendingRows).toBeLessThanOrEqual(maxHosts + 1 + 3 + 1);
    }
    expect(requests).toBe(1_000);
    expect(m.stats().hostsFolded).toBeGreaterThan(0);
    down = false;
    expect(await m.publishNow()).toBe(true);
    const stored = await readRedis(redis, keys);
    expectSameCounts(stored, tally.counts);
    const hosts = await redis.smembers(keys.metricIndex("host"));
    expect(hosts).toHaveLength(maxHosts + 1);
    expect(stored.get(keys.metricWindow("host", `p1:c1:${OTHER_HOST}`))?.requests).toBe(750);
    await m.close();
  });

  it("a close sends what is owed and pending, once; a close against a dead Redis keeps its deadline", async () => {
    const keys = freshKeys();
    const clock = new Clock();
    const tally = new Tally(keys, { now: clock.now });
    const m = metering(keys, clock);
    m.start();
    const transfer = new SimTransfer(m, tally, plan());
    transfer.bytes(3, 4);
    transfer.finish();
    await Promise.all([m.close(), m.close()]);
    await m.close();
    expectSameCounts(await readRedis(redis, keys), tally.counts);
    expect(m.stats().confirmed).toBe(1);

    const hanging: ScriptClient = {
      evalsha: () => new Promise(() => {}),
      eval: () => new Promise(() => {}),
    };
    const stuck = metering(freshKeys(), clock, { redis: hanging, closeTimeoutMs: 300 });
    stuck.start();
    new SimTransfer(stuck, new Tally(keys), plan()).finish();
    const started = Date.now();
    await stuck.close();
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(stuck.stats().partsAbandoned).toBe(1);
  });

  it("receivers never raise, whatever they are handed", () => {
    const m = metering(freshKeys(), new Clock());
    const broken = { kind: "http", client: undefined } as unknown as Parameters<
      RequestMetering["begin"]
    >[0];
    expect(m.begin(broken)).toBeUndefined();
    const meter = m.begin({
      kind: "http",
      client: { projectId: "p1", options: { user: "u" } },
      target: { host: "a.example", port: 80 },
      upstream: {
        proxyId: "x1",
        connectorId: "c1",
        scheme: "http",
        host: "h",
        port: 1,
        username: null,
        password: null,
      },
      latencyMs: Number.NaN,
    })!;
    meter.bytes(Number.NaN, -5);
    meter.bytes(Number.POSITIVE_INFINITY, 1);
    meter.finish({ ok: true });
    meter.finish({ ok: false });
    meter.bytes(10, 10);
    m.rejected(
      undefined as unknown as Parameters<RequestMetering["rejected"]>[0],
      undefined,
      undefined,
    );
    expect(m.stats().finishedTwice).toBe(1);
  });

  it("the gateway's Deno loader registers the same script", async () => {
    const root = fileURLToPath(new URL("../../", import.meta.url));
    const loader = pathToFileURL(`${root}gateway/metering/lua.ts`).href;
    const code = `import { loadMeteringScript } from "${loader}";` +
      "console.log((await loadMeteringScript()).sha1);";
    const { stdout } = await run(`${root}node_modules/.bin/deno`, ["eval", code], {
      cwd: root,
      env: { ...process.env, DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" },
    });
    expect(stdout.trim()).toBe(script.sha1);
  });
});
