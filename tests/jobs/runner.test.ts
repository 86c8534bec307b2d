import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { Redis } from "ioredis";
import { JobRunner } from "../../control/jobs/runner.ts";
import { JobQueue } from "../../control/core/job-queue.ts";
import type { Job, WorkBatch } from "../../control/core/job.ts";
import { workStreamStats } from "../../control/core/work-streams.ts";
import { redisKeys, WORKERS_GROUP } from "../../shared/redis-keys.ts";
import { JobKind } from "../../shared/roles.ts";
import { LocalRedis } from "../../scripts/local-stores.ts";
import { freePort } from "../../testkit/ports.ts";
import { captureLogger } from "../../testkit/logger.ts";
import { testSettings } from "../../testkit/settings.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { waitUntil } from "../../testkit/wait.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A job whose behaviour the test scripts, recording every batch it saw. */
function scriptedJob(run: (batch: WorkBatch, signal: AbortSignal) => Promise<void>) {
  const batches: WorkBatch[] = [];
  const givenUp: WorkBatch[] = [];
  const job: Job = {
    kind: JobKind.traffic, // batch size 100, concurrency 1: a kind with no handler of its own yet
    run: (batch, signal) => {
      batches.push(batch);
      return run(batch, signal);
    },
    giveUp: (batch) => {
      givenUp.push(batch);
      return Promise.resolve();
    },
  };
  return { job, batches, givenUp };
}

/** A Redis server of the test's own (it may be flushed or stopped), gone after the test. */
async function privateRedis(): Promise<LocalRedis> {
  const dir = await mkdtemp(join(tmpdir(), "ox-redis-"));
  const server = new LocalRedis({ dir, port: await freePort() });
  await server.start();
  cleanups.push(async () => {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  });
  return server;
}

function setup(redisUrl = TEST_REDIS_URL) {
  const prefix = testPrefix();
  const keys = redisKeys(prefix);
  const settings = testSettings({
    prefix,
    redisUrl,
    OCTOPROX_CLAIM_TIMEOUT: "0.4",
    OCTOPROX_RECLAIM_INTERVAL: "0.1",
    OCTOPROX_STOP_GRACE: "1",
  });
  const redis = new Redis(redisUrl);
  const { logger, lines } = captureLogger("worker");
  const queue = new JobQueue({ redis, keys, logger, deadlineMs: 2000 });
  cleanups.push(async () => {
    await deletePrefix(redisUrl, prefix).catch(() => {});
    redis.disconnect();
  });
  const runner = (job: Job, consumer: string) => {
    const made = new JobRunner({ job, redis, keys, settings, logger, consumer });
    cleanups.push(() => made.stop());
    return made;
  };
  return { keys, redis, queue, runner, lines, stream: keys.jobStream(JobKind.traffic) };
}

describe("job runners on work streams", () => {
  it("runs each key once per batch and deletes handled entries", async () => {
    const t = setup();
    const { job, batches } = scriptedJob(() => Promise.resolve());
    await t.queue.request(JobKind.traffic, ["a", "b"]);
    await t.queue.request(JobKind.traffic, ["a", "c"]);
    t.runner(job, "w1").start();
    await waitUntil(async () => (await t.redis.xlen(t.stream)) === 0, {
      message: "the stream to empty",
    });
    const keys = batches.flatMap((b) => b.keys);
    expect(new Set(keys)).toEqual(new Set(["a", "b", "c"]));
    // Read together, the two "a" entries ran once; every entry id was completed.
    if (batches.length === 1) expect(batches[0].keys).toEqual(["a", "b", "c"]);
    expect(batches.flatMap((b) => b.ids)).toHaveLength(4);
    const [stats] = await workStreamStats(t.redis, [t.stream]);
    expect(stats).toMatchObject({ length: 0, pending: 0, backlog: 0 });
  });

  it("a failing batch is delivered again after the claim timeout and given up at the sixth delivery", async () => {
    const t = setup();
    const { job, batches, givenUp } = scriptedJob(() => Promise.reject(new Error("vendor down")));
    await t.queue.request(JobKind.traffic, ["k"]);
    const runner = t.runner(job, "w1");
    runner.start();
    await waitUntil(() => givenUp.length === 1, { timeoutMs: 20_000, message: "the give-up" });
    expect(batches.map((b) => b.deliveries)).toEqual([1, 2, 3, 4, 5]);
    expect(givenUp[0]).toMatchObject({ keys: ["k"], deliveries: 6 });
    await waitUntil(async () => (await t.redis.xlen(t.stream)) === 0, { message: "completion" });
    // The streak was logged once, not once per delivery.
    expect(t.lines.filter((l) => l.msg === "Loop cycle failed")).toHaveLength(1);
    await waitUntil(() => runner.snapshot().dropped === 1, { message: "the drop to be counted" });
    expect(runner.snapshot()).toMatchObject({ failures: 5, dropped: 1 });
  });

  it("a live worker keeps a long job; a dead worker's entries run elsewhere after the claim timeout", async () => {
    const t = setup();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const slow = scriptedJob(() => held);
    const other = scriptedJob(() => Promise.resolve());
    await t.queue.request(JobKind.traffic, ["long"]);
    const first = t.runner(slow.job, "w1");
    first.start();
    await waitUntil(() => slow.batches.length === 1);
    const second = t.runner(other.job, "w2");
    second.start();
    // Three claim timeouts pass: keep-alives stop the second worker from taking the entry.
    const until = Date.now() + 1300;
    await waitUntil(() => Date.now() > until, { timeoutMs: 3000 });
    expect(other.batches).toHaveLength(0);
    release();
    await waitUntil(async () => (await t.redis.xlen(t.stream)) === 0);

    // Now a worker that dies mid-job: its runner stops taking and keeps nothing alive.
    await Promise.all([first.stop(), second.stop()]);
    const stuck = scriptedJob(() => new Promise<void>(() => {}));
    const dying = t.runner(stuck.job, "w3");
    await t.queue.request(JobKind.traffic, ["orphan"]);
    dying.start();
    await waitUntil(() => stuck.batches.length === 1);
    await dying.stop(); // gives up after the stop grace, hands nothing back
    const pending = await t.redis.xpending(t.stream, WORKERS_GROUP);
    expect(Number((pending as unknown[])[0])).toBe(1);
    const third = scriptedJob(() => Promise.resolve());
    t.runner(third.job, "w4").start();
    await waitUntil(() => third.batches.length === 1, { timeoutMs: 5000, message: "the reclaim" });
    expect(third.batches[0]).toMatchObject({ keys: ["orphan"], deliveries: 2 });
  });

  it("groups come back after a FLUSHALL, and work resumes", async () => {
    const server = await privateRedis();
    const t = setup(server.url);
    const { job, batches } = scriptedJob(() => Promise.resolve());
    t.runner(job, "w1").start();
    await t.queue.request(JobKind.traffic, ["before"]);
    await waitUntil(() => batches.length === 1);
    await t.redis.flushall();
    await t.queue.request(JobKind.traffic, ["after"]);
    await waitUntil(() => batches.some((b) => b.keys.includes("after")), {
      message: "work after the flush",
    });
    expect(t.lines.some((l) => l.msg === "Stream consumer group was missing; created again")).toBe(
      true,
    );
  });
});

describe("a job runner stopping without Redis", () => {
  it("stops at once when Redis went away while its read waited to be sent again", async () => {
    const server = await privateRedis();
    const prefix = testPrefix();
    const keys = redisKeys(prefix);
    const settings = testSettings({ prefix, redisUrl: server.url, OCTOPROX_STOP_GRACE: "1" });
    // Commands fail at once without Redis, as the process's own client does; the runner's
    // reader (its duplicate, with a queue) holds a read for the client's many retries.
    const redis = new Redis(server.url, { enableOfflineQueue: false });
    redis.on("error", () => {});
    cleanups.push(() => redis.disconnect());
    await waitUntil(() => redis.status === "ready", { message: "the client to connect" });
    const { logger } = captureLogger("worker");
    const { job, batches } = scriptedJob(() => Promise.resolve());
    const runner = new JobRunner({ job, redis, keys, settings, logger, consumer: "w1" });
    cleanups.push(() => runner.stop());
    runner.start();
    await new JobQueue({ redis, keys, logger, deadlineMs: 2000 }).request(JobKind.traffic, ["a"]);
    await waitUntil(() => batches.length === 1, { message: "the runner to read" });
    await server.stop();
    await waitUntil(() => redis.status === "reconnecting", { message: "Redis to be gone" });
    let stopped = false;
    void runner.stop().then(() => (stopped = true));
    await waitUntil(() => stopped, { timeoutMs: 3_000, message: "the stop to end within 3 s" });
    expect(stopped, "the stop ended within 3 s").toBe(true);
  });
});

afterAll(() => {});
