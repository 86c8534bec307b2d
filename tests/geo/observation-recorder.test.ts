/**
 * The observation recorder over real Redis: a part lands on the stream once however often it is
 * sent (the append script's batch identity), a half-full buffer is published before the
 * interval, and through a Redis outage (a private redis-server stopped and started) the recorder
 * holds the part Redis did not confirm and at most a full buffer of the newest observations,
 * then sends both once Redis is back. A close sends what is left and is safe twice.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { Redis } from "ioredis";
import { createRedis } from "../../control/core/redis.ts";
import { runScript } from "../../control/core/scripts.ts";
import { ObservationRecorder } from "../../control/geo/observation-recorder.ts";
import {
  decodeObservation,
  type Observation,
  OBSERVATION_FIELD,
} from "../../shared/geo/observation-wire.ts";
import { redisKeys, STREAM_CAPS } from "../../shared/redis-keys.ts";
import { LocalRedis } from "../../scripts/local-stores.ts";
import { captureLogger } from "../../testkit/logger.ts";
import { freePort } from "../../testkit/ports.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { waitUntil } from "../../testkit/wait.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function observation(n: number): Observation {
  return {
    observedAt: 1_700_000_000_000 + n,
    ip: `198.51.100.${n % 250}`,
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
  };
}

/** The process's kind of client (no offline queue), connected. */
async function setup(redisUrl = TEST_REDIS_URL) {
  const prefix = testPrefix();
  const keys = redisKeys(prefix);
  const redis = createRedis(redisUrl);
  await waitUntil(() => redis.status === "ready", { message: "Redis connected" });
  const { logger, lines } = captureLogger("api");
  cleanups.push(async () => {
    await deletePrefix(redisUrl, prefix).catch(() => {});
    redis.disconnect();
  });
  const recorder = (options: { intervalMs?: number; capacity?: number } = {}) => {
    const made = new ObservationRecorder({
      redis,
      keys,
      logger,
      instance: "t-obs",
      intervalMs: options.intervalMs ?? 60_000,
      sendTimeoutMs: 1_000,
      closeTimeoutMs: 2_000,
      capacity: options.capacity,
    });
    cleanups.push(() => made.close());
    return made;
  };
  return { keys, redis, lines, recorder };
}

/** The observed_at of every entry on the stream, oldest first. */
async function streamed(redis: Redis, stream: string): Promise<number[]> {
  const entries = await redis.xrange(stream, "-", "+");
  return entries.map(([, fields]) => {
    const decoded = decodeObservation(fields[fields.indexOf(OBSERVATION_FIELD) + 1]);
    if (!decoded.ok) throw new Error(decoded.reason);
    return decoded.observation.observedAt - 1_700_000_000_000;
  });
}

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

describe("the batch_append script", () => {
  it("appends a batch once however often it is sent", async () => {
    const { keys, redis } = await setup();
    const call = (batch: number, entries: string[]) =>
      runScript(redis, "batch_append", [
        keys.applied("w-1"),
        keys.observationsStream,
      ], [batch, 60, STREAM_CAPS.work, OBSERVATION_FIELD, ...entries]);
    const part = [JSON.stringify({ n: 1 }), JSON.stringify({ n: 2 })];
    expect(await call(1, part)).toEqual([1, 0]);
    // The reply was lost and the writer sends the same batch again: nothing more lands.
    expect(await call(1, part)).toEqual([0, 0]);
    expect(await redis.xlen(keys.observationsStream)).toBe(2);
    // A lower number is older still; the next number lands.
    expect(await call(0, part)).toEqual([0, 0]);
    expect(await call(2, [JSON.stringify({ n: 3 })])).toEqual([1, 0]);
    expect(await redis.xlen(keys.observationsStream)).toBe(3);
    expect(Number(await redis.get(keys.applied("w-1")))).toBe(2);
    expect(await redis.ttl(keys.applied("w-1"))).toBeGreaterThan(0);
  });
});

describe("the recorder", () => {
  it("publishes what it recorded as one part, and its writer's applied record says so", async () => {
    const { keys, redis, recorder } = await setup();
    const made = recorder();
    for (const n of range(0, 3)) made.record(observation(n));
    expect(await made.publishNow()).toBe(true);
    expect(await streamed(redis, keys.observationsStream)).toEqual([0, 1, 2]);
    expect(await redis.get(keys.applied(made.writer))).toBe("1");
    expect(made.snapshot()).toMatchObject({
      observations_recorded: 3,
      observations_published: 3,
      observations_dropped: 0,
      observations_buffered: 0,
      observations_owed: 0,
    });
  });

  it("publishes at half full without waiting for the interval", async () => {
    const { keys, redis, recorder } = await setup();
    const made = recorder({ intervalMs: 600_000, capacity: 10 });
    void made.start();
    // The loop's first wait is the whole interval: only the half-full wake ends it.
    for (const n of range(0, 5)) made.record(observation(n));
    await waitUntil(
      async () => (await redis.xlen(keys.observationsStream)) === 5 && made.snapshot().runs === 1,
      { message: "the half-full buffer on the stream, in the loop's first cycle" },
    );
  });

  it("holds the owed part and the newest full buffer through a Redis outage", async () => {
    const dir = await mkdtemp(join(tmpdir(), "ox-redis-"));
    const server = new LocalRedis({ dir, port: await freePort() });
    await server.start();
    cleanups.push(async () => {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    });
    const { keys, recorder, lines } = await setup(server.url);
    const made = recorder({ capacity: 10 });
    for (const n of range(0, 4)) made.record(observation(n));
    expect(await made.publishNow()).toBe(true);

    await server.stop();
    for (const n of range(4, 9)) made.record(observation(n));
    // Redis is away: the part cut now is owed, whole.
    expect(await made.publishNow()).toBe(false);
    for (const n of range(9, 34)) made.record(observation(n));
    expect(await made.publishNow()).toBe(false);
    // The owed part (4..8) and the ten newest since (24..33); fifteen dropped, oldest first.
    expect(made.counts()).toMatchObject({
      recorded: 34,
      published: 4,
      owed: 5,
      buffered: 10,
      dropped: 15,
    });

    // Back, empty (no persistence): both go, the owed part first.
    await server.start();
    await waitUntil(() => made.publishNow(), { message: "the recorder to reach Redis again" });
    const reader = createRedis(server.url);
    cleanups.push(() => reader.disconnect());
    await waitUntil(() => reader.status === "ready", { message: "a reader of the new Redis" });
    expect(await streamed(reader, keys.observationsStream)).toEqual([
      ...range(4, 9),
      ...range(24, 34),
    ]);
    expect(made.counts()).toMatchObject({ published: 19, owed: 0, buffered: 0, dropped: 15 });
    expect(lines.filter((line) => line.level === "error")).toEqual([]);
  });

  it("sends what is left when it closes, once however often it is closed", async () => {
    const { keys, redis, recorder } = await setup();
    const made = recorder();
    void made.start();
    made.record(observation(1));
    made.record(observation(2));
    await Promise.all([made.close(), made.close()]);
    await made.close();
    expect(await streamed(redis, keys.observationsStream)).toEqual([1, 2]);
    // Closed: what is recorded now stays in memory, and a start does nothing.
    made.record(observation(3));
    await made.start();
    expect(made.state).toBe("stopped");
    expect(await redis.xlen(keys.observationsStream)).toBe(2);
  });
});
