/**
 * Sightings over real Postgres and Redis: the gateway's publisher (gateway/geo/sightings.ts, run
 * here under Node with the same script) appends a part once however often a lost reply makes it
 * send it, and holds a bounded buffer while Redis is away; the workers' sighting ingest, two
 * consumers in the group taking the same proxies' sightings in opposite orders, leaves each row
 * at its newest sighting, rotates a vendor session slot whose exit contradicts its claim under
 * retry (one delete, one sync asked of its connector) and keeps one under report, and completes
 * entries it cannot read; a worker's /metrics shows what its ingest did.
 */
import { readFileSync } from "node:fs";
import net from "node:net";
import { eq, inArray } from "drizzle-orm";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectors, proxies } from "../../db/schema.ts";
import { Attributor } from "../../control/geo/attribution.ts";
import type { GeoJudging, GeoJudgingSource } from "../../control/geo/judging.ts";
import { SightingIngest } from "../../control/geo/sighting-ingest.ts";
import { SightingPublisher } from "../../gateway/geo/sightings.ts";
import { DEFAULT_POLICY } from "../../shared/geo/attribute.ts";
import { openGeofeed } from "../../shared/geo/geofeed.ts";
import { encodeSighting, type Sighting, SIGHTING_FIELD } from "../../shared/geo/sighting-wire.ts";
import { GeoStack } from "../../shared/geo/stack.ts";
import { registerScript } from "../../shared/lua/loader.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import { JobKind } from "../../shared/roles.ts";
import type { ProcessSnapshot } from "../../control/node/heartbeat.ts";
import { Telemetry } from "../../control/node/telemetry/telemetry.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";
import { parseSamples, promtoolCheck, requirePromtool, samplesOf } from "../../testkit/promtool.ts";
import { captureLogger } from "../../testkit/logger.ts";
import { GatedClient } from "../../testkit/metering.ts";
import { refusingAddress } from "../../testkit/ports.ts";
import { waitUntil } from "../../testkit/wait.ts";

const GB_EXIT = "198.51.100.7";
const US_EXIT = "203.0.113.9";
const BASE = Date.UTC(2026, 11, 5, 12);
const at = (seconds: number) => BASE + seconds * 1000;

/** The databases in force: a geofeed placing the two exits. */
const databases: GeoJudgingSource = {
  judging: (): Promise<GeoJudging> =>
    Promise.resolve({
      policy: DEFAULT_POLICY,
      stack: new GeoStack([
        openGeofeed("exits", `${GB_EXIT}/32,GB,,,\n${US_EXIT}/32,US,,,\n`),
      ]),
    }),
};

let h: ApiHarness;
let projectId: string;
let connectorId: string;
/** Three vendor session slots, each promised GB. */
let slots: string[];
/** The last test's loop, whose counts /metrics shows. */
let lastLoop: SightingIngest;

const sightingScript = () =>
  registerScript(
    "batch_append",
    readFileSync(new URL("../../shared/lua/batch_append.lua", import.meta.url), "utf8"),
  );

function sighting(proxyId: string, ip: string, seconds: number, mode = "report"): Sighting {
  return {
    observedAt: at(seconds),
    projectId,
    connectorId,
    proxyId,
    ip,
    instanceId: "gateway-1:0",
    requirement: "GB",
    mode,
    judged: { country: ip === GB_EXIT ? "GB" : "US", source: "database", database: "exits" },
    endpoint: null,
  };
}

async function rows(ids: string[]) {
  const found = await h.deps.database.db.select().from(proxies).where(inArray(proxies.id, ids));
  return new Map(found.map((row) => [row.id, row]));
}

/** A worker's ingest, started; stopped by the caller. */
function worker(consumer: string, logger = captureLogger("worker").logger): SightingIngest {
  const loop = new SightingIngest({
    deps: h.deps,
    attributor: new Attributor({ deps: h.deps, geo: databases }),
    redis: h.deps.redis,
    keys: h.deps.keys,
    settings: h.settings,
    logger,
    consumer,
  });
  void loop.start();
  return loop;
}

/** Appends entries and waits until the loop handled every one of them. */
async function feed(loop: SightingIngest, values: string[]): Promise<void> {
  const stream = h.deps.keys.sightingsStream;
  const before = loop.snapshot().keys_done;
  // In one transaction: the worker's loop reads them in one batch, not some before the rest.
  const appending = h.deps.redis.multi();
  for (const value of values) appending.xadd(stream, "*", SIGHTING_FIELD, value);
  await appending.exec();
  await waitUntil(
    async () => (await h.deps.redis.xlen(stream)) === 0 && loop.snapshot().keys_done > before,
    { message: "the sightings to be handled and completed" },
  );
}

beforeAll(async () => {
  h = await startHarness();
  projectId = (await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Sightings", username: "sightings", location_preflight: "retry" },
  })).body.id;
  const [connector] = await h.deps.database.db.insert(connectors).values({
    projectId,
    name: "sessions",
    kind: "vendor",
    provider: "oxylabs",
    countries: ["GB"],
  }).returning({ id: connectors.id });
  connectorId = connector.id;
  const added = await h.deps.database.db.insert(proxies).values(
    ["aaaa", "bbbb", "cccc"].map((session, index) => ({
      projectId,
      connectorId,
      scheme: "http",
      host: "127.0.0.1",
      port: 7777,
      username: `customer-acme-cc-GB-sessid-${session}`,
      country: "GB",
      countrySource: "vendor",
      vendorCountry: "GB",
      metadata: { session_id: session, group: "GB", index, slot: `group:GB:${index}` },
      status: "healthy",
    })),
  ).returning({ id: proxies.id });
  slots = added.map((row) => row.id);
});

afterAll(async () => {
  await h?.close();
});

describe("the sighting ingest", () => {
  it("leaves each row at its newest sighting, whichever worker saw which first", async () => {
    const [a, b] = slots;
    // Worker one takes A's newer sighting and B's older one; worker two the others, later.
    const one = worker("t-worker:1");
    try {
      await feed(one, [
        encodeSighting(sighting(a, US_EXIT, 20)),
        encodeSighting(sighting(b, GB_EXIT, 10)),
      ]);
    } finally {
      await one.stop();
    }
    const two = worker("t-worker:2");
    try {
      await feed(two, [
        encodeSighting(sighting(a, GB_EXIT, 10)),
        encodeSighting(sighting(b, US_EXIT, 20)),
      ]);
    } finally {
      await two.stop();
    }
    const stored = await rows([a, b]);
    for (const id of [a, b]) {
      expect(stored.get(id)).toMatchObject({
        // The database and the vendor disagree; consensus on a tie takes the database.
        country: "US",
        countrySource: "database",
        vendorCountry: "GB",
        locationConflict: true,
        location: { ip: US_EXIT },
        locationCheckedAt: new Date(at(20)),
      });
    }
    // Seen under report: told, never rotated.
    expect(stored.size).toBe(2);
    expect(one.snapshot().sightings_ingested + two.snapshot().sightings_ingested).toBe(4);
  });

  it("rotates a slot whose exit contradicts its claim under retry: one delete, one sync", async () => {
    const c = slots[2];
    const before = (await h.changes()).length;
    const syncs = h.deps.keys.jobStream(JobKind.sync);
    await h.deps.redis.del(syncs);
    const loop = worker("t-worker:3");
    try {
      await feed(loop, [
        // An older sighting in GB, then the newest in the US: the newest decides.
        encodeSighting(sighting(c, GB_EXIT, 30, "retry")),
        encodeSighting(sighting(c, US_EXIT, 40, "retry")),
      ]);
      expect(loop.snapshot().slots_rotated).toBe(1);
    } finally {
      await loop.stop();
    }
    expect((await rows([c])).size).toBe(0);
    const changes = (await h.changes()).slice(before);
    expect(changes).toContainEqual({ kind: "proxy", ref: connectorId });
    const asked = await h.deps.redis.xrange(syncs, "-", "+");
    expect(asked.map(([, fields]) => fields[1])).toEqual([connectorId]);
  });

  it("completes the entries it cannot read, once a batch in the log", async () => {
    const { logger, lines } = captureLogger("worker");
    const loop = worker("t-worker:4", logger);
    try {
      await feed(loop, ["{not json", JSON.stringify({ v: 9 }), "[]"]);
      await feed(loop, [encodeSighting(sighting(slots[0], US_EXIT, 25))]);
    } finally {
      await loop.stop();
    }
    lastLoop = loop;
    expect(loop.snapshot()).toMatchObject({ sightings_malformed: 3, sightings_ingested: 1 });
    const warned = lines.filter((line) => line.msg.startsWith("Sightings this release cannot"));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ malformed: 3 });
    // The readable one, older than the row's last judgement, moved nothing.
    const [row] = await h.deps.database.db.select().from(proxies).where(eq(proxies.id, slots[0]));
    expect(row.location?.ip).toBe(US_EXIT);
    expect(row.locationCheckedAt).toEqual(new Date(at(20)));
  });

  it("a worker's /metrics counts what its ingest did, well formed", async () => {
    requirePromtool();
    const snapshot = {
      instance: "t-worker",
      role: "worker",
      version: "0.0.0-test",
      pid: process.pid,
      hostname: "test",
      started_at: new Date().toISOString(),
      beat_at: new Date().toISOString(),
      ready: true,
      reasons: [],
      stores: {
        postgres: { ok: true, last_ok_at: null, error: null },
        redis: { ok: true, last_ok_at: null, error: null },
      },
      loops: [{ ...lastLoop.snapshot(), owner: "worker" }],
      runtimes: {},
      loop_lag: {
        window_started_at: new Date().toISOString(),
        worst_ms: 0,
        mean_ms: 0,
        samples: 0,
      },
    } satisfies ProcessSnapshot;
    const telemetry = new Telemetry({
      role: "worker",
      runtimes: ["worker"],
      snapshot: () => snapshot,
      processMetrics: false,
    });
    const { body } = await telemetry.render();
    expect(await promtoolCheck(body)).toEqual({ code: 0, output: "" });
    const samples = parseSamples(body);
    const value = (name: string) => samplesOf(samples, name, {})[0]?.value;
    expect(value("octoprox_sightings_ingested_total")).toBe(1);
    expect(value("octoprox_sightings_malformed_total")).toBe(3);
    expect(value("octoprox_sightings_written_total")).toBe(0);
    expect(value("octoprox_sighting_slots_rotated_total")).toBe(0);
  });
});

describe("the gateway's sighting publisher", () => {
  it("appends a part once, however often a lost reply makes it send it again", async () => {
    // Keys of their own: no ingest takes this stream.
    const keys = redisKeys(`${h.deps.keys.prefix}pub:`);
    const client = new GatedClient(h.deps.redis);
    const publisher = new SightingPublisher({
      redis: client,
      keys,
      script: await sightingScript(),
      writer: "gateway-1:0",
      writeTimeoutMs: 2_000,
    });
    publisher.record(sighting(slots[0], GB_EXIT, 50));
    publisher.record(sighting(slots[1], GB_EXIT, 51));
    const lost = client.loseNextReply();
    await publisher.publishNow();
    await lost;
    // Redis applied it; the publisher never heard so, and owes it.
    expect(await h.deps.redis.xlen(keys.sightingsStream)).toBe(2);
    expect(publisher.stats()).toMatchObject({ owed: 2, published: 0 });
    publisher.record(sighting(slots[0], US_EXIT, 52));
    await publisher.publishNow();
    expect(publisher.stats()).toMatchObject({ owed: 0, buffered: 0, published: 3 });
    const entries = await h.deps.redis.xrange(keys.sightingsStream, "-", "+");
    expect(entries.map(([, fields]) => JSON.parse(fields[1]).observed_at)).toEqual([
      at(50),
      at(51),
      at(52),
    ]);
    expect(await h.deps.redis.get(keys.applied(publisher.writer))).toBe("2");
    await publisher.close();
  });

  it("holds at most its capacity through a Redis outage, dropping the oldest", async () => {
    // A port held on 127.0.0.1 alone: the same port on another loopback address refuses.
    const held = net.createServer();
    await new Promise<void>((resolve) => held.listen(0, "127.0.0.1", resolve));
    const gone = new Redis({
      ...refusingAddress((held.address() as net.AddressInfo).port),
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    const publisher = new SightingPublisher({
      redis: gone,
      keys: h.deps.keys,
      script: await sightingScript(),
      writer: "gateway-2:0",
      writeTimeoutMs: 500,
      capacity: 3,
    });
    try {
      for (let i = 0; i < 3; i++) publisher.record(sighting(slots[0], GB_EXIT, 60 + i));
      await publisher.publishNow();
      // The part cut from the buffer is owed; the buffer takes at most three newer ones.
      for (let i = 0; i < 5; i++) publisher.record(sighting(slots[0], GB_EXIT, 70 + i));
      await publisher.publishNow();
      expect(publisher.stats()).toMatchObject({
        recorded: 8,
        owed: 3,
        buffered: 3,
        dropped: 2,
        published: 0,
      });
      expect(publisher.stats().writeFailures).toBeGreaterThanOrEqual(2);
    } finally {
      await publisher.close();
      gone.disconnect();
      held.close();
    }
  });
});
