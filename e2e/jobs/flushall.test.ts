/**
 * A Redis wiped empty heals itself: an api, a controller and a worker on a PRIVATE Redis server
 * this file starts (a FLUSHALL must never reach the test bed's shared Redis). After the wipe the
 * worker's groups are created again, the controller takes the lease again as a new term, the
 * producers refill the health stream and the checks rebuild soft health, with no manual step.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LocalRedis } from "../../scripts/local-stores.ts";
import { freePort } from "../../testkit/ports.ts";
import { WORKERS_GROUP } from "../../shared/redis-keys.ts";
import { JobKind } from "../../shared/roles.ts";
import { TEST_REDIS_URL } from "../../testkit/stores.ts";
import { Cluster, type Member } from "../../testkit/cluster.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";

let folder: string;
let redis: LocalRedis;
let cluster: Cluster;
let controller: Member;
let worker: Member;
let tinyproxy: Tinyproxy;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-flush-"));
  redis = new LocalRedis({ dir: join(folder, "redis"), port: await freePort() });
  await redis.start();
  cluster = await Cluster.create({ redisUrl: redis.url });
  const api = await cluster.start("api");
  [controller, worker, tinyproxy] = await Promise.all([
    cluster.start("controller"),
    cluster.start("worker", { env: { OCTOPROX_ECHO_URL: `${api.url}/echo` } }),
    startTinyproxy({ bindAddress: "127.0.0.5" }),
  ]);
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await tinyproxy?.close();
  await redis?.stop();
  if (folder) await rm(folder, { recursive: true, force: true });
});

async function leaseTerm(): Promise<number | undefined> {
  const snapshot = await cluster.snapshot(controller);
  const runtimes = snapshot?.runtimes as Record<string, { lease?: Record<string, unknown> }>;
  const lease = runtimes?.controller?.lease;
  return lease?.state === "leading" ? Number(lease.term) : undefined;
}

async function groups(stream: string): Promise<string[]> {
  try {
    const rows = (await cluster.redis.xinfo("GROUPS", stream)) as unknown[][];
    return rows.map((row) => String(row[row.indexOf("name") + 1]));
  } catch {
    return []; // no stream
  }
}

describe("a Redis wiped empty", () => {
  it("gets its groups, its lease and its periodic work back by itself", async () => {
    const health = cluster.keys.jobStream(JobKind.health);
    const hygiene = cluster.keys.jobStream(JobKind.indexHygiene);
    const connector = await cluster.createConnector();
    const id = await cluster.addProxy(connector, tinyproxy.url);
    await cluster.until(async () => (await cluster.status(id)) === "healthy", {
      message: "the proxy to turn healthy",
    });
    expect(await cluster.until(leaseTerm, { message: "the controller to lead" })).toBe(1);
    expect(await groups(health)).toEqual([WORKERS_GROUP]);

    // Only ever this file's own server.
    expect(cluster.redisUrl).toBe(redis.url);
    expect(cluster.redisUrl).not.toBe(TEST_REDIS_URL);
    await cluster.redis.flushall();
    const flushedAt = Date.now();
    expect(await cluster.leaseHolder()).toBeNull();

    await cluster.until(
      async () =>
        (await groups(health)).includes(WORKERS_GROUP) &&
        (await groups(hygiene)).includes(WORKERS_GROUP),
      { message: "the worker to create its groups again" },
    );
    // A new term: the lead found its key gone, stood by, and took it again.
    await cluster.until(async () => (await leaseTerm()) === 2, {
      message: "the controller to take the lease again as a new term",
    });
    expect((await cluster.leaseHolder())?.startsWith(`${controller.instance}:`)).toBe(true);
    // The producers refill the streams and the checks rebuild soft health.
    await cluster.until(
      async () =>
        (await cluster.entriesAdded(health)) > 0 && (await cluster.entriesAdded(hygiene)) > 0,
      { message: "periodic entries after the wipe" },
    );
    await cluster.until(
      async () => Number((await cluster.softHealth(id))?.checked_at ?? 0) >= flushedAt,
      { message: "a check to write soft health again" },
    );
    expect(await cluster.softHealth(id)).toMatchObject({ failures: "0" });
    expect(await cluster.status(id)).toBe("healthy");
    // Both processes say what happened.
    expect(
      worker.logs().filter((line) =>
        line.msg === "Stream consumer group was missing; created again"
      )
        .length,
    ).toBeGreaterThanOrEqual(1);
    // The lead ends once, found by the refresh (key gone) or by the fenced feed publish.
    expect(controller.logs().filter((line) => line.msg === "Controller lead lost")).toEqual([
      expect.objectContaining({ term: 1 }),
    ]);

    // Run-now work flows too.
    const added = await cluster.addProxy(await cluster.createConnector(), tinyproxy.url);
    await cluster.until(async () => (await cluster.status(added)) === "healthy", {
      message: "a proxy added after the wipe to turn healthy",
    });
  });
});
