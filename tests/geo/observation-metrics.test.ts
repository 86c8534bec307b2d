/**
 * The observation families of a control process's /metrics, rendered by its Telemetry from a
 * snapshot holding a real recorder's and ingest's loop rows: promtool finds nothing to say, a
 * worker shows both, an api the recorder's only, a controller none, and the counts are the
 * loops' own.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Redis } from "ioredis";
import { createRedis } from "../../control/core/redis.ts";
import { ObservationIngest } from "../../control/geo/observation-ingest.ts";
import { ObservationRecorder } from "../../control/geo/observation-recorder.ts";
import type { ProcessSnapshot } from "../../control/node/heartbeat.ts";
import { Telemetry } from "../../control/node/telemetry/telemetry.ts";
import type { RuntimeName } from "../../control/roles/runtime.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import type { Role } from "../../shared/roles.ts";
import { captureLogger } from "../../testkit/logger.ts";
import {
  declaredTypes,
  parseSamples,
  promtoolCheck,
  requirePromtool,
  samplesOf,
} from "../../testkit/promtool.ts";
import { testSettings } from "../../testkit/settings.ts";
import {
  deletePrefix,
  TEST_ADMIN_DATABASE_URL,
  TEST_REDIS_URL,
  testPrefix,
} from "../../testkit/stores.ts";
import { createDatabase, type Database } from "../../db/client.ts";
import { waitUntil } from "../../testkit/wait.ts";

const prefix = testPrefix();
let redis: Redis;
let recorder: ObservationRecorder;
let ingest: ObservationIngest;
let database: Database;

beforeAll(async () => {
  requirePromtool();
  redis = createRedis(TEST_REDIS_URL);
  await waitUntil(() => redis.status === "ready", { message: "Redis connected" });
  const keys = redisKeys(prefix);
  const { logger } = captureLogger("worker");
  database = createDatabase(TEST_ADMIN_DATABASE_URL, { poolSize: 1 });
  recorder = new ObservationRecorder({
    redis,
    keys,
    logger,
    instance: "t-metrics",
    intervalMs: 60_000,
    sendTimeoutMs: 1_000,
    capacity: 4,
  });
  ingest = new ObservationIngest({
    // Never queried here: no batch is read.
    database,
    redis,
    keys,
    settings: testSettings({ prefix }),
    logger,
    consumer: "t-metrics:1",
  });
  // Six recorded into a buffer of four: two dropped; four published.
  for (let n = 0; n < 6; n++) {
    recorder.record({
      observedAt: 1_700_000_000_000 + n,
      ip: "198.51.100.1",
      projectId: null,
      connectorId: null,
      proxyId: null,
      source: "lookup",
      country: null,
      region: null,
      city: null,
      asn: null,
      claimedCountry: null,
      sources: [],
    });
  }
  expect(await recorder.publishNow()).toBe(true);
});

afterAll(async () => {
  await recorder?.close();
  await ingest?.stop();
  await database?.close();
  await deletePrefix(TEST_REDIS_URL, prefix).catch(() => {});
  redis?.disconnect();
});

function snapshotOf(role: Role, loops: ProcessSnapshot["loops"]): ProcessSnapshot {
  return {
    instance: "t-metrics",
    role,
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
    loops,
    runtimes: {},
    loop_lag: { window_started_at: new Date().toISOString(), worst_ms: 0, mean_ms: 0, samples: 0 },
  };
}

async function render(role: Role, runtimes: RuntimeName[], withIngest: boolean) {
  const loops = [
    ...(runtimes.length > 0 && role !== "controller"
      ? [{ ...recorder.snapshot(), owner: "node" }]
      : []),
    ...(withIngest ? [{ ...ingest.snapshot(), owner: "worker" }] : []),
  ];
  const telemetry = new Telemetry({
    role,
    runtimes,
    snapshot: () => snapshotOf(role, loops),
    processMetrics: false,
  });
  const { body } = await telemetry.render();
  return { text: body, samples: parseSamples(body), types: declaredTypes(body) };
}

const value = (samples: ReturnType<typeof parseSamples>, name: string) => {
  const found = samplesOf(samples, name, {});
  expect(found, name).toHaveLength(1);
  return found[0].value;
};

describe("the observation families", () => {
  it("a worker's: the recorder's counts and the ingest's, well formed", async () => {
    const { text, samples } = await render("worker", ["worker"], true);
    expect(await promtoolCheck(text)).toEqual({ code: 0, output: "" });
    expect(value(samples, "octoprox_observations_recorded_total")).toBe(6);
    expect(value(samples, "octoprox_observations_published_total")).toBe(4);
    expect(value(samples, "octoprox_observations_dropped_total")).toBe(2);
    expect(value(samples, "octoprox_observations_trimmed_total")).toBe(0);
    expect(value(samples, "octoprox_observations_waiting")).toBe(0);
    expect(value(samples, "octoprox_observations_ingested_total")).toBe(0);
    expect(value(samples, "octoprox_observations_malformed_total")).toBe(0);
    expect(value(samples, "octoprox_observation_hand_outs_total")).toBe(0);
  });

  it("an api's: the recorder's only; a controller's: none", async () => {
    const api = await render("api", ["api"], false);
    expect(await promtoolCheck(api.text)).toEqual({ code: 0, output: "" });
    expect(value(api.samples, "octoprox_observations_recorded_total")).toBe(6);
    expect(api.types.has("octoprox_observations_ingested_total")).toBe(false);
    const controller = await render("controller", ["controller"], false);
    expect(controller.types.has("octoprox_observations_recorded_total")).toBe(false);
  });
});
