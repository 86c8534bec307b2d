/**
 * Readiness follows the heartbeat: a worker turns unready while its Redis or its Postgres does
 * not answer and ready again when it does, staying up throughout; an api stays ready without
 * Redis, since it serves its reads without the soft state.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalRedis } from "../../scripts/local-stores.ts";
import { freePort } from "../../testkit/ports.ts";
import {
  createTestDatabase,
  TEST_ADMIN_DATABASE_URL,
  type TestDatabase,
  testPrefix,
} from "../../testkit/stores.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { killAll, readyStatus, startControl, waitForReady } from "../../testkit/processes.ts";

let database: TestDatabase;
let redis: LocalRedis;
let redisDir: string;

beforeAll(async () => {
  database = await createTestDatabase();
  redisDir = await mkdtemp(join(tmpdir(), "octoprox-redis-"));
  redis = new LocalRedis({ dir: redisDir, port: await freePort() });
  await redis.start();
});

afterAll(async () => {
  await killAll();
  await redis?.stop();
  await database?.drop();
  if (redisDir) await rm(redisDir, { recursive: true, force: true });
});

async function reasons(url: string): Promise<string[]> {
  const response = await fetch(`${url}/ready`);
  const body = await response.json() as { reasons?: string[] };
  return body.reasons ?? [];
}

describe("readiness", () => {
  it("a worker is unready while its Redis is away, and ready again when it is back", async () => {
    const worker = await startControl({
      databaseUrl: database.url,
      redisUrl: redis.url,
      prefix: testPrefix(),
      role: "worker",
    });
    await waitForReady(worker);

    await redis.stop();
    await waitUntil(async () => (await readyStatus(worker.url)) === 503, {
      message: "the worker to turn unready",
    });
    expect(await reasons(worker.url)).toEqual(["redis: no answer to the last heartbeat"]);
    expect(worker.alive()).toBe(true);

    await redis.start();
    await waitForReady(worker);
    expect(worker.alive()).toBe(true);
    // The heartbeat's streak was logged once as it began, and its end once (the job runners
    // have streaks of their own during the outage).
    const heartbeat = worker.stdout.filter((line) => line.includes('"loop":"heartbeat"'));
    const failed = heartbeat.filter((line) => line.includes('"msg":"Loop cycle failed"'));
    expect(failed.length).toBeGreaterThanOrEqual(1);
    expect(failed.length).toBeLessThanOrEqual(2); // the error's text may change once mid-outage
    expect(heartbeat.filter((line) => line.includes('"msg":"Loop recovered"'))).toHaveLength(1);

    expect((await worker.stop()).code).toBe(0);
  });

  it("a worker is unready while Postgres does not answer, and ready again after", async () => {
    const own = await createTestDatabase();
    try {
      const worker = await startControl({
        databaseUrl: own.url,
        redisUrl: redis.url,
        prefix: testPrefix(),
        role: "worker",
      });
      await waitForReady(worker);

      // Dropping the database ends its sessions and refuses new ones: Postgres, as far as
      // this process can tell, no longer answers.
      await own.drop();
      await waitUntil(async () => (await readyStatus(worker.url)) === 503, {
        message: "the worker to turn unready",
      });
      expect(await reasons(worker.url)).toEqual(["postgres: no answer to the last heartbeat"]);

      const admin = postgres(TEST_ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} });
      await admin.unsafe(`create database ${own.name}`).finally(() => admin.end());
      await waitForReady(worker);
      expect(worker.alive()).toBe(true);
      expect((await worker.stop()).code).toBe(0);
    } finally {
      await own.drop();
    }
  });

  it("an api stays ready without Redis", async () => {
    const api = await startControl({
      databaseUrl: database.url,
      redisUrl: redis.url,
      prefix: testPrefix(),
      role: "api",
      extra: { OCTOPROX_ADMIN_PASSWORD: "a-test-password" },
    });
    await waitForReady(api);
    await redis.stop();
    try {
      // Wait until a beat has seen Redis gone, then check the api is still ready.
      await waitUntil(
        () => api.stdout.some((line) => line.includes('"msg":"Loop cycle failed"')),
        { message: "a heartbeat without Redis" },
      );
      expect(await readyStatus(api.url)).toBe(200);
    } finally {
      await redis.start();
    }
    expect((await api.stop()).code).toBe(0);
  });
});
