/**
 * The gateway's feed follower against feeds a real publisher writes: it applies only verified,
 * complete feeds, fetches only the sections that changed (carrying the others over by identity),
 * and keeps its snapshot when the feed is missing, of another schema, or not sealed with its
 * secret.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Redis } from "ioredis";
import type { SectionText } from "../../control/feed/compile.ts";
import { FeedPublisher } from "../../control/feed/publisher.ts";
import { FeedFollower, type FeedUpdate } from "../../gateway/feed/follower.ts";
import { blockingReader } from "../../gateway/redis/tcp.ts";
import { HttpRedis } from "../../gateway/redis/http.ts";
import { RestRequester } from "../../gateway/redis/rest-requester.ts";
import { startUpstashRest, type UpstashRest } from "../../testkit/upstreams/upstash-rest.ts";
import {
  deriveFeedKeys,
  type FeedKeys,
  manifestDigest,
  seal,
  sectionDigest,
} from "../../shared/feed/codec.ts";
import { headJson, manifestJson } from "../../shared/feed/manifest.ts";
import { SCHEMA_VERSION } from "../../shared/feed/models.ts";
import { TEST_REDIS_URL, testPrefix, testSecrets } from "../../testkit/stores.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { freePort } from "../../testkit/ports.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import { connector as feedConnector } from "../../testkit/gateway/feed-fixtures.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const connector = (id: string, hosts: string[]) => ({
  schema: SCHEMA_VERSION,
  connector: feedConnector(id, { project_id: "p" }),
  proxies: hosts.map((host, i) => ({
    id: `${id}-${i}`,
    scheme: "http",
    host,
    port: 3128,
    username: null,
    password: null,
    country: null,
    status: "healthy",
    max_concurrency: null,
  })),
});

const globalSection = (projects: string[] = []) => ({
  schema: SCHEMA_VERSION,
  default_strategy: "round_robin",
  projects: projects.map((id) => ({
    id,
    name: id,
    username: id,
    password_digest: "00",
    strategy: "round_robin",
    session_ttl_seconds: 300,
    sticky_quarantine: false,
    location_policy: "off",
    location_preflight: "off",
    connection_timeout_seconds: 30,
    max_retries: 2,
    traffic_quota: null,
    rate_limit: null,
    max_connections: null,
    allowed_cidrs: [],
    passwordless_cidrs: [],
    sequence: null,
  })),
});

const runtimeSection = (quarantined: string[] = []) => ({
  schema: SCHEMA_VERSION,
  quarantines: quarantined.map((proxy_id) => ({ proxy_id, until_ms: 1e13 })),
  traffic_blocks: [],
  project_blocks: [],
});

async function texts(keys: FeedKeys, content: Record<string, unknown>) {
  const out = new Map<string, SectionText>();
  for (const [name, value] of Object.entries(content)) {
    const json = JSON.stringify(value);
    out.set(name, { json, digest: await sectionDigest(keys, json) });
  }
  return out;
}

/** The HTTP transport's poll of the head in these tests. */
const POLL_MS = 200;

async function setup(
  options: {
    followerSecret?: string;
    backoff?: { initialMs: number; maxMs: number };
    /** Follow over the HTTP transport (a REST stand-in), polling the head every POLL_MS. */
    http?: boolean;
  } = {},
) {
  const bed: FeedBed = await feedBed();
  cleanups.push(() => bed.close());
  await bed.lead();
  const publisher = new FeedPublisher({
    redis: bed.redis,
    keys: bed.keys,
    feedKeys: bed.feedKeys,
    lease: bed.lease,
  });
  const updates: FeedUpdate[] = [];
  const gatewayRedis = new Redis(TEST_REDIS_URL);
  const logLines: { level: string; message: string; fields: Record<string, unknown> }[] = [];
  const log = (level: string) => (fields: Record<string, unknown>, message: string) =>
    logLines.push({ level, message, fields });
  let rest: UpstashRest | undefined;
  if (options.http) {
    rest = await startUpstashRest({ redisUrl: TEST_REDIS_URL, token: "follower-token-0123" });
    cleanups.push(() => rest!.close());
  }
  const follower = new FeedFollower({
    ...(rest === undefined
      ? {
        redis: gatewayRedis,
        wait: { blockingReader: () => blockingReader(gatewayRedis) },
      }
      : {
        redis: new HttpRedis(
          new RestRequester({ url: rest.url, token: rest.token, timeoutMs: 2_000 }),
        ),
        wait: { pollIntervalMs: POLL_MS },
      }),
    keys: bed.keys,
    feedKeys: options.followerSecret ? await deriveFeedKeys(options.followerSecret) : bed.feedKeys,
    logger: { info: log("info"), warn: log("warn"), error: log("error") },
    apply: (update) => {
      updates.push(update);
    },
    backoff: options.backoff ?? { initialMs: 50, maxMs: 200 },
  });
  cleanups.push(async () => {
    await follower.stop();
    await follower.stop(); // safe twice
    gatewayRedis.disconnect();
  });
  const publish = async (content: Record<string, unknown>, at = Date.now()) =>
    await publisher.publish(await texts(bed.feedKeys, content), at);
  return { bed, publisher, publish, follower, updates, logLines, rest };
}

describe("feed follower over HTTP", () => {
  it("polls the head, fetches the changed sections' bytes, and applies each edit within a poll", async () => {
    const t = await setup({ http: true });
    await t.publish({
      global: globalSection(["p"]),
      runtime: runtimeSection(),
      "connector:a": connector("a", ["10.0.0.1"]),
    });
    t.follower.start();
    await waitUntil(() => t.follower.ready, { message: "the first feed over HTTP" });
    expect(t.updates[0].sections.connectors.get("a")!.proxies.map((p) => p.host)).toEqual([
      "10.0.0.1",
    ]);
    for (const host of ["10.0.0.2", "10.0.0.3"]) {
      const published = await t.publish({
        global: globalSection(["p"]),
        runtime: runtimeSection(),
        "connector:a": connector("a", [host]),
      });
      const publishedAt = performance.now();
      await waitUntil(() => t.follower.stats().applied_digest === published.headDigest, {
        intervalMs: 5,
        message: "the edit over HTTP",
      });
      // One interval, and the reads (each a request to the REST server).
      expect(performance.now() - publishedAt).toBeLessThan(POLL_MS + 500);
      expect([...t.updates.at(-1)!.changed]).toEqual(["connector:a"]);
      expect(t.updates.at(-1)!.sections.connectors.get("a")!.proxies[0].host).toBe(host);
    }
    // Idle, a poll is one request: a GET of the head.
    const before = t.rest!.total;
    const reads = t.follower.stats().head_reads;
    await waitUntil(() => t.follower.stats().head_reads >= reads + 5, {
      message: "five polls",
    });
    const polls = t.follower.stats().head_reads - reads;
    expect(t.rest!.total - before).toBeLessThanOrEqual(polls + 1);
    expect(t.follower.stats().failures).toBe(0);
  });
});

describe("feed follower", () => {
  it("applies the first feed, then fetches only the sections that changed", async () => {
    const t = await setup();
    const first = await t.publish({
      global: globalSection(["p"]),
      runtime: runtimeSection(),
      "connector:a": connector("a", ["10.0.0.1", "10.0.0.2"]),
      "connector:b": connector("b", ["10.0.1.1"]),
    });
    expect(t.follower.ready).toBe(false);
    t.follower.start();
    await waitUntil(() => t.follower.ready, { message: "the first feed" });
    expect(t.updates).toHaveLength(1);
    const u1 = t.updates[0];
    expect(u1.first).toBe(true);
    expect(u1.digest).toBe(first.headDigest);
    expect([...u1.changed].sort()).toEqual(["connector:a", "connector:b", "global", "runtime"]);
    expect([...u1.sections.connectors.keys()]).toEqual(["a", "b"]);
    expect(u1.sections.connectors.get("a")!.proxies.map((p) => p.host)).toEqual([
      "10.0.0.1",
      "10.0.0.2",
    ]);
    expect(t.follower.stats()).toMatchObject({
      ready: true,
      applied_digest: first.headDigest,
      applies: 1,
      sections_fetched: 4,
      failures: 0,
    });

    // One connector changes, one is added: only those two are fetched.
    const second = await t.publish({
      global: globalSection(["p"]),
      runtime: runtimeSection(),
      "connector:a": connector("a", ["10.0.0.1", "10.0.0.2"]),
      "connector:b": connector("b", ["10.0.1.1", "10.0.1.2"]),
      "connector:c": connector("c", ["10.0.2.1"]),
    });
    await waitUntil(() => t.updates.length === 2, { message: "the second feed" });
    const u2 = t.updates[1];
    expect(u2.first).toBe(false);
    expect(u2.digest).toBe(second.headDigest);
    expect([...u2.changed].sort()).toEqual(["connector:b", "connector:c"]);
    expect(t.follower.stats().sections_fetched).toBe(6);
    // Carried over by identity, so the snapshot keeps their indexes.
    expect(u2.sections.global).toBe(u1.sections.global);
    expect(u2.sections.runtime).toBe(u1.sections.runtime);
    expect(u2.sections.connectors.get("a")).toBe(u1.sections.connectors.get("a"));
    expect(u2.sections.connectors.get("b")).not.toBe(u1.sections.connectors.get("b"));

    // A connector removed: nothing fetched but the manifest; the update says what left.
    await t.publish({
      global: globalSection(["p"]),
      runtime: runtimeSection(),
      "connector:b": connector("b", ["10.0.1.1", "10.0.1.2"]),
      "connector:c": connector("c", ["10.0.2.1"]),
    });
    await waitUntil(() => t.updates.length === 3, { message: "the third feed" });
    const u3 = t.updates[2];
    expect([...u3.changed]).toEqual([]);
    expect([...u3.removedConnectors]).toEqual(["a"]);
    expect([...u3.sections.connectors.keys()]).toEqual(["b", "c"]);
    expect(u3.sections.connectors.get("c")).toBe(u2.sections.connectors.get("c"));

    // An unchanged publish wakes nobody; a head read finds the applied digest and stops there.
    const reads = t.follower.stats().head_reads;
    expect(await t.follower.syncNow()).toBe("current");
    expect(t.follower.stats().head_reads).toBe(reads + 1);
    expect(t.updates).toHaveLength(3);
  });

  it("refuses a feed written with another secret and keeps its snapshot", async () => {
    const t = await setup();
    const good = await t.publish({
      global: globalSection(),
      runtime: runtimeSection(),
      "connector:a": connector("a", ["10.0.0.1"]),
    });
    t.follower.start();
    await waitUntil(() => t.follower.ready);
    const applied = t.follower.sections;

    // Someone with Redis but not the secret writes a whole feed of their own.
    const forger = await deriveFeedKeys(testSecrets().internal);
    const forged = await texts(forger, {
      global: globalSection(),
      runtime: runtimeSection(),
      "connector:a": connector("a", ["6.6.6.6"]),
    });
    const forgedManifest = manifestJson(new Map([...forged].map(([n, s]) => [n, s.digest])));
    const forgedDigest = await manifestDigest(forger, forgedManifest);
    const { redis, keys } = t.bed;
    await redis.hset(
      keys.feedSections,
      "connector:a",
      Buffer.from(await seal(forger, forged.get("connector:a")!.json)),
    );
    await redis.set(keys.feedManifest, forgedManifest);
    await redis.set(keys.feedHead, headJson(forgedDigest, Date.now()));
    await redis.xadd(keys.feedStream, "*", "digest", forgedDigest);
    await waitUntil(() => t.follower.stats().failures >= 1, { message: "the refusal" });
    expect(t.follower.stats()).toMatchObject({
      ready: true,
      applied_digest: good.headDigest,
      applies: 1,
      last_error: "Feed manifest does not verify with this secret",
    });
    expect(t.follower.sections).toBe(applied);
    expect(t.updates).toHaveLength(1);
    expect(t.logLines.some((l) => l.message === "Feed read failed; keeping the feed applied"))
      .toBe(true);
  });

  it("reads a publish that follows a refused feed at once, not after its back-off", async () => {
    // A back-off far longer than the test's deadline: only the stream entry can wake it.
    const t = await setup({ backoff: { initialMs: 30_000, maxMs: 30_000 } });
    const content = {
      global: globalSection(),
      runtime: runtimeSection(),
      "connector:a": connector("a", ["10.0.0.1"]),
    };
    await t.publish(content);
    t.follower.start();
    await waitUntil(() => t.follower.ready);

    const forger = await deriveFeedKeys(testSecrets().internal);
    const forgedManifest = manifestJson(new Map([["global", "00"], ["runtime", "00"]]));
    const forgedDigest = await manifestDigest(forger, forgedManifest);
    const { redis, keys } = t.bed;
    await redis.set(keys.feedManifest, forgedManifest);
    await redis.set(keys.feedHead, headJson(forgedDigest, Date.now()));
    await redis.xadd(keys.feedStream, "*", "digest", forgedDigest);
    await waitUntil(() => t.follower.stats().failures === 1, { message: "the refusal" });

    // The genuine publish rewrites the feed whole and appends its entry, which ends the wait.
    const repaired = await t.publish({
      ...content,
      "connector:a": connector("a", ["10.0.0.2"]),
    });
    expect(repaired.rewrittenWhole).toBeDefined();
    await waitUntil(() => t.follower.stats().applied_digest === repaired.headDigest, {
      timeoutMs: 5_000,
      message: "the publish after the refusal",
    });
    expect(t.follower.stats().failures).toBe(1);
    expect(t.follower.sections!.connectors.get("a")!.proxies[0].host).toBe("10.0.0.2");
  });

  it("refuses a listed section sealed with another secret, then applies the repaired feed", async () => {
    const t = await setup();
    await t.publish({
      global: globalSection(),
      runtime: runtimeSection(),
      "connector:a": connector("a", ["10.0.0.1"]),
    });
    // Driven by hand until the repair, so no wake-up reads the genuine bytes first.
    expect(await t.follower.syncNow()).toBe("applied");
    const applied = t.follower.sections;
    // A genuine publish whose changed section is then overwritten in place by bytes sealed
    // with another secret: the manifest verifies, the section does not.
    const { redis, keys } = t.bed;
    const forger = await deriveFeedKeys(testSecrets().internal);
    const content = {
      global: globalSection(),
      runtime: runtimeSection(),
      "connector:a": connector("a", ["10.0.0.9"]),
    };
    const second = await t.publish(content);
    await redis.hset(
      keys.feedSections,
      "connector:a",
      Buffer.from(await seal(forger, JSON.stringify(connector("a", ["6.6.6.6"])))),
    );
    await expect(t.follower.syncNow()).rejects.toThrow(/altered, or sealed with another secret/);
    expect(t.follower.sections).toBe(applied);
    expect(t.follower.stats().applied_digest).not.toBe(second.headDigest);

    // A plain publish trusts the manifest; one that verifies the sections (the builder's full
    // reads) finds the altered one and rewrites the feed whole, under the same head.
    expect((await t.publisher.publish(await texts(t.bed.feedKeys, content), 1)).outcome)
      .toBe("unchanged");
    const repaired = await t.publisher.publish(await texts(t.bed.feedKeys, content), 2, {
      verifySections: true,
    });
    expect(repaired).toMatchObject({
      outcome: "written",
      rewrittenWhole: "section connector:a does not verify",
      headDigest: second.headDigest,
    });
    // No entry (the head's digest did not change): a gateway's retry or re-check finds it.
    t.follower.start();
    await waitUntil(() => t.follower.stats().applied_digest === second.headDigest, {
      message: "the repaired feed",
    });
    expect(t.follower.sections!.connectors.get("a")!.proxies[0].host).toBe("10.0.0.9");
  });

  it("keeps its feed while the head is missing or of another schema, and stays ready", async () => {
    const t = await setup();
    const { redis, keys } = t.bed;
    // No feed yet: not ready, nothing applied, no failure.
    t.follower.start();
    await waitUntil(() => t.follower.stats().holding === "no head");
    expect(t.follower.ready).toBe(false);
    const good = await t.publish({
      global: globalSection(),
      runtime: runtimeSection(),
      "connector:a": connector("a", ["10.0.0.1"]),
    });
    await waitUntil(() => t.follower.ready, { message: "the feed once published" });

    await redis.set(keys.feedHead, JSON.stringify({ schema: 99, digest: "x", compiled_at: 1 }));
    expect(await t.follower.syncNow()).toBe("other_schema");
    await redis.del(keys.feedHead);
    expect(await t.follower.syncNow()).toBe("no_head");
    expect(t.follower.stats()).toMatchObject({
      ready: true,
      applied_digest: good.headDigest,
      failures: 0,
      holding: "no head",
    });
    expect(t.updates).toHaveLength(1);
  });

  it("applies nothing when a listed section is missing", async () => {
    const t = await setup();
    const { redis, keys } = t.bed;
    await t.publish({
      global: globalSection(),
      runtime: runtimeSection(),
      "connector:a": connector("a", ["10.0.0.1"]),
    });
    await redis.hdel(keys.feedSections, "connector:a");
    await expect(t.follower.syncNow()).rejects.toThrow(/connector:a is listed but missing/);
    expect(t.follower.ready).toBe(false);
    expect(t.updates).toHaveLength(0);
  });

  it("refuses to apply with another secret from the start (never ready)", async () => {
    const t = await setup({ followerSecret: testSecrets().internal });
    await t.publish({ global: globalSection(), runtime: runtimeSection() });
    await expect(t.follower.syncNow()).rejects.toThrow(/does not verify with this secret/);
    expect(t.follower.ready).toBe(false);
  });
});

describe("feed follower without Redis", () => {
  it("stops within its wait while its read is queued on a client that cannot connect", async () => {
    // Nothing listens there, and the clients wait a minute before reconnecting: a read queued
    // meanwhile stays queued, and ioredis leaves it pending for ever once the client is closed.
    const port = await freePort();
    const redis = new Redis(`redis://127.0.0.1:${port}`, {
      maxRetriesPerRequest: 1,
      retryStrategy: () => 60_000,
    });
    redis.on("error", () => {});
    cleanups.push(() => redis.disconnect());
    const follower = new FeedFollower({
      redis,
      wait: { blockingReader: () => blockingReader(redis) },
      keys: redisKeys(testPrefix()),
      feedKeys: await deriveFeedKeys(testSecrets().internal),
      logger: { info: () => {}, warn: () => {}, error: () => {} },
      apply: () => {},
      stopWaitMs: 500,
    });
    follower.start();
    await waitUntil(() => redis.status === "reconnecting", { message: "the client to reconnect" });
    const started = performance.now();
    await follower.stop();
    expect(performance.now() - started).toBeLessThan(1_500);
  });
});
