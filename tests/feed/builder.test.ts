/**
 * The feed end to end on real stores: the leased builder compiles Postgres and publishes, a
 * follower applies; a change republishes only its connector, a runtime entry only the runtime
 * section; a wiped Redis is republished whole; a publish Redis refuses makes the leader unready.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Redis } from "ioredis";
import { FeedBuilder } from "../../control/feed/builder.ts";
import type { PublishResult } from "../../control/feed/publisher.ts";
import { FeedFollower, type FeedUpdate } from "../../gateway/feed/follower.ts";
import { blockingReader } from "../../gateway/redis/tcp.ts";
import { deletePrefix, TEST_REDIS_URL } from "../../testkit/stores.ts";
import { waitUntil } from "../../testkit/wait.ts";
import {
  type FeedBed,
  feedBed,
  type FeedDatabase,
  feedDatabase,
  insertConnector,
  insertProject,
  insertProxy,
} from "../../testkit/feed.ts";

let db: FeedDatabase;
const ids: Record<string, string> = {};

beforeAll(async () => {
  db = await feedDatabase();
  const sql = db.database.sql;
  ids.project = await insertProject(sql, { name: "P", username: "puser", password: "pw-1234567" });
  ids.a = await insertConnector(sql, ids.project, { name: "a" });
  ids.b = await insertConnector(sql, ids.project, { name: "b" });
  ids.a1 = await insertProxy(sql, ids.project, ids.a, { host: "10.0.0.1", ageSeconds: 2 });
  ids.a2 = await insertProxy(sql, ids.project, ids.a, { host: "10.0.0.2", ageSeconds: 1 });
  ids.b1 = await insertProxy(sql, ids.project, ids.b, { host: "10.0.1.1" });
});

afterAll(async () => {
  await db?.close();
});

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup() {
  const bed: FeedBed = await feedBed();
  cleanups.push(() => bed.close());
  const published: PublishResult[] = [];
  const builder = new FeedBuilder({
    database: db.database,
    redis: bed.redis,
    keys: bed.keys,
    lease: bed.lease,
    logger: bed.logger,
    compileIntervalMs: 50,
    reconcileIntervalMs: 3_600_000,
    internalSecret: bed.secret,
    defaultStrategy: "round_robin",
    onPublished: (result) => published.push(result),
  });
  cleanups.push(() => builder.stop());
  return { bed, builder, published };
}

function follower(bed: FeedBed) {
  const redis = new Redis(TEST_REDIS_URL);
  const updates: FeedUpdate[] = [];
  const noop = () => {};
  const made = new FeedFollower({
    redis,
    wait: { blockingReader: () => blockingReader(redis) },
    keys: bed.keys,
    feedKeys: bed.feedKeys,
    logger: { info: noop, warn: noop, error: noop },
    apply: (update) => {
      updates.push(update);
    },
    backoff: { initialMs: 50, maxMs: 200 },
  });
  cleanups.push(async () => {
    await made.stop();
    redis.disconnect();
  });
  made.start();
  return { follower: made, updates };
}

const change = (bed: FeedBed, kind: string, ref: string) =>
  bed.redis.xadd(bed.keys.changesStream, "*", "kind", kind, "ref", ref);

describe("feed builder", () => {
  it("publishes at its lead; a change republishes its connector, a runtime entry the runtime section", async () => {
    const t = await setup();
    t.builder.start();
    await t.bed.lead();
    const g = follower(t.bed);
    await waitUntil(() => g.follower.ready, { message: "the first feed" });
    expect(t.published[0]).toMatchObject({ headWasMissing: true, outcome: "appended" });
    expect(t.bed.lines.some((l) => l.msg === "Feed head found gone; published whole")).toBe(true);
    const first = g.updates[0].sections;
    expect([...first.connectors.keys()].sort()).toEqual([ids.a, ids.b].sort());
    expect(first.connectors.get(ids.a)!.proxies.map((p) => p.id)).toEqual([ids.a1, ids.a2]);
    // The producers still get their keys from the compile.
    expect([...t.builder.latest!.jobKeys.get("health")!].sort()).toEqual(
      [ids.a1, ids.a2, ids.b1].sort(),
    );

    // A change with nothing changed publishes nothing.
    const compiles = t.builder.snapshot().compiles;
    await change(t.bed, "project", ids.project);
    await waitUntil(() => t.builder.snapshot().compiles > compiles, { message: "a compile" });
    await waitUntil(() => t.published.length >= 2);
    expect(t.published.at(-1)!.outcome).toBe("unchanged");
    expect(await t.bed.redis.xlen(t.bed.keys.feedStream)).toBe(1);

    // A health flip: only its connector's section travels.
    await db.database.sql`update proxies set status = 'unhealthy' where id = ${ids.b1}`;
    await change(t.bed, "proxy", ids.b);
    await waitUntil(() => g.updates.length === 2, { message: "the flip to reach the gateway" });
    expect([...g.updates[1].changed]).toEqual([`connector:${ids.b}`]);
    expect(g.updates[1].sections.connectors.get(ids.b)!.proxies[0].status).toBe("unhealthy");
    expect(g.updates[1].sections.connectors.get(ids.a)).toBe(first.connectors.get(ids.a));

    // A quarantine and its runtime entry: only the runtime section, and no compile.
    const compilesBefore = t.builder.snapshot().compiles;
    await t.bed.redis.zadd(t.bed.keys.proxyQuarantined, Date.now() + 60_000, ids.a2);
    await t.bed.redis.xadd(t.bed.keys.runtimeStream, "*", "kind", "quarantine", "ref", ids.a2);
    await waitUntil(() => g.updates.length === 3, { message: "the quarantine" });
    expect([...g.updates[2].changed]).toEqual(["runtime"]);
    expect(g.updates[2].sections.runtime.quarantines.map((q) => q.proxy_id)).toEqual([ids.a2]);
    expect(t.builder.snapshot().compiles).toBe(compilesBefore);
    expect(t.published.at(-1)!.written).toEqual(["runtime"]);
  });

  it("republishes a wiped Redis whole, and the gateways apply it", async () => {
    const t = await setup();
    t.builder.start();
    await t.bed.lead();
    const g = follower(t.bed);
    await waitUntil(() => g.follower.ready);
    const digest = g.follower.stats().applied_digest;

    // Only the feed's keys lost: the next compile finds no head and writes the feed whole.
    await t.bed.redis.del(t.bed.keys.feedHead, t.bed.keys.feedManifest, t.bed.keys.feedSections);
    await change(t.bed, "connector", ids.a);
    await waitUntil(async () => (await t.bed.redis.exists(t.bed.keys.feedHead)) === 1, {
      message: "the feed written again",
    });
    expect(t.published.at(-1)).toMatchObject({ headWasMissing: true, headDigest: digest });
    expect((await t.bed.redis.hkeys(t.bed.keys.feedSections)).length).toBe(4);
    // Same definitions, same digest: the gateway had it already and reads nothing more.
    expect(await g.follower.syncNow()).toBe("current");

    // Everything under the prefix gone (lease and streams too), and an edit meanwhile. The new
    // lead's full read waits for the read its lost lead left blocked on the builder's own
    // connection (up to the follower's block, 5 s): see consumers.ts.
    await deletePrefix(TEST_REDIS_URL, t.bed.prefix);
    await db.database.sql`update proxies set host = '10.0.0.22' where id = ${ids.a2}`;
    try {
      await waitUntil(
        () =>
          g.follower.sections?.connectors.get(ids.a)?.proxies.some((p) => p.host === "10.0.0.22"),
        { message: "the rebuilt feed at the gateway", timeoutMs: 15_000 },
      );
      expect(t.bed.lease.leading).toBe(true);
      // A gateway that starts now reads the rebuilt feed in full.
      const late = follower(t.bed);
      await waitUntil(() => late.follower.ready, { message: "a new gateway's first feed" });
      expect(late.follower.stats().applied_digest).toBe(g.follower.stats().applied_digest);
      expect(late.updates[0].changed.size).toBe(4);
    } finally {
      await db.database.sql`update proxies set host = '10.0.0.2' where id = ${ids.a2}`;
    }
  });

  it("is unready as leader while the feed cannot be published, and recovers", async () => {
    const t = await setup();
    t.builder.start();
    await t.bed.lead();
    await waitUntil(() => t.published.length >= 1);
    expect(t.builder.publishProblem).toBeUndefined();
    // A key of the wrong type where the sections hash belongs: Redis refuses every publish.
    await t.bed.redis.del(t.bed.keys.feedSections);
    await t.bed.redis.set(t.bed.keys.feedSections, "not a hash");
    await change(t.bed, "connector", ids.a);
    await waitUntil(() => t.builder.publishProblem !== undefined, { message: "a failed publish" });
    expect(t.builder.publishProblem).toMatch(/WRONGTYPE/);
    await t.bed.redis.del(t.bed.keys.feedSections);
    await waitUntil(() => t.builder.publishProblem === undefined, {
      message: "the publish to work again",
      timeoutMs: 15_000,
    });
    expect(t.published.at(-1)!.rewrittenWhole).toBe("4 listed section(s) missing");
    expect((await t.bed.redis.hkeys(t.bed.keys.feedSections)).length).toBe(4);
  });
});
