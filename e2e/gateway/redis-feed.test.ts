/**
 * The feed in Redis going wrong under two real gateways and a control plane (role all), all on
 * a PRIVATE Redis server this file starts (a FLUSHALL must never reach the test bed's Redis):
 *
 * - Redis wiped: clients notice nothing (every request through both gateways succeeds
 *   throughout), the controller publishes the feed whole again, and an edit after the wipe
 *   reaches both gateways;
 * - a feed written without the secret (every part sealed and digested under another secret),
 *   and a section sealed under another secret behind a head and manifest that verify: each is
 *   refused, the gateways keep routing on their snapshot and count and log the refusal; the
 *   controller's next publish repairs the feed and the gateways follow it.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LocalRedis } from "../../scripts/local-stores.ts";
import { freePort } from "../../testkit/ports.ts";
import {
  deriveFeedKeys,
  type FeedKeys,
  manifestDigest,
  open,
  seal,
  sectionDigest,
} from "../../shared/feed/codec.ts";
import { headJson, manifestJson } from "../../shared/feed/manifest.ts";
import { connectorSectionName } from "../../shared/feed/models.ts";
import { TEST_REDIS_URL } from "../../testkit/stores.ts";
import { Cluster, type Gateway, type Member } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { exitOf, viaProxy } from "../../testkit/clients/proxy-client.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import {
  createRoutedProject,
  exitsThrough,
  type RoutedProject,
  SteadyLoad,
  untilAnswer,
  untilEveryExit,
  withOptions,
} from "../../testkit/routing.ts";

const EXITS = ["127.0.0.2", "127.0.0.3"];
const FAILURES = "octoprox_gateway_feed_failures_total";

let folder: string;
let redis: LocalRedis;
let cluster: Cluster;
let control: Member;
let gateways: Gateway[];
let origin: Origin;
let tinyproxies: Tinyproxy[];
let project: RoutedProject;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-gw-redis-"));
  redis = new LocalRedis({ dir: join(folder, "redis"), port: await freePort() });
  [origin, tinyproxies] = await Promise.all([
    startOrigin(),
    Promise.all(EXITS.map((bindAddress) => startTinyproxy({ bindAddress }))),
    redis.start(),
  ]);
  cluster = await Cluster.create({ redisUrl: redis.url });
  control = await cluster.start("all");
  gateways = await Promise.all([cluster.startGateway(), cluster.startGateway()]);
  project = await createRoutedProject(cluster, tinyproxies.map((t) => t.url));
  await untilEveryExit(cluster, gateways, project.credentials, ipUrl(), EXITS);
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([origin, ...(tinyproxies ?? [])].map((server) => server?.close()));
  await redis?.stop();
  if (folder) await rm(folder, { recursive: true, force: true });
});

const ipUrl = () => `${origin.url}/ip`;

/** Moves one proxy to `country` through the API; waits until both gateways route by it. */
async function moveAndFollow(index: number, country: string): Promise<number> {
  const answer = await cluster.request(
    "PATCH",
    `/api/v1/projects/${project.projectId}/proxies/${project.proxyIds[index]}`,
    { country },
  );
  expect(answer.status).toBe(200);
  const answeredAt = performance.now();
  const credentials = withOptions(project.credentials, `-cc-${country.toLowerCase()}`);
  const reached = await Promise.all(gateways.map(async (gateway) => {
    await untilAnswer(
      cluster,
      gateway,
      credentials,
      ipUrl(),
      (a) => a.status === 200 && exitOf(a) === EXITS[index],
      { probes: 4 },
    );
    return performance.now() - answeredAt;
  }));
  return Math.round(Math.max(...reached));
}

describe("Redis wiped under the gateways", () => {
  it("keeps every request succeeding, and the feed is published whole again", async () => {
    // Only ever this file's own server.
    expect(cluster.redisUrl).toBe(redis.url);
    expect(cluster.redisUrl).not.toBe(TEST_REDIS_URL);
    const load = new SteadyLoad(gateways, project.credentials, ipUrl());
    try {
      await cluster.until(() => load.leastOk >= 5, { message: "requests before the wipe" });
      await cluster.redis.flushall();
      const atWipe = new Map(load.ok);
      expect(await cluster.redis.get(cluster.keys.feedHead)).toBeNull();

      // The controller leads again as a new term and publishes the whole feed.
      await cluster.until(async () => (await cluster.redis.get(cluster.keys.feedHead)) !== null, {
        timeoutMs: 20_000,
        message: "the feed head to be published again",
      });
      await cluster.until(
        () => control.logs().some((line) => line.msg === "Feed head found gone; published whole"),
        { message: "the controller to log the whole publish" },
      );
      // An edit after the wipe reaches both gateways.
      const latency = await moveAndFollow(1, "DE");
      console.info(`edit after the wipe reached both gateways in ${latency} ms`);
      // Requests went on through both gateways all along.
      await cluster.until(
        () => gateways.every((g) => load.ok.get(g.instance)! >= atWipe.get(g.instance)! + 5),
        { message: "requests after the wipe" },
      );
    } finally {
      await load.stop();
    }
    expect(load.failures).toEqual([]);
    for (const gateway of gateways) {
      const ready = await fetch(`${gateway.url}/ready`);
      await ready.body?.cancel();
      expect(ready.status).toBe(200);
    }
  });
});

describe("a feed written without the secret", () => {
  const realKeys = () => cluster.feedKeys();

  /**
   * Writes a forged feed over the stored one: the project's connector section disabled, sealed
   * with `sealKeys`, listed under `digestKeys`; the head's digest under `digestKeys`; and a
   * stream entry, so every follower reads it at once.
   */
  async function forge(sealKeys: FeedKeys, digestKeys: FeedKeys): Promise<void> {
    const keys = cluster.keys;
    const name = connectorSectionName(project.connectorId);
    const stored = await cluster.redis.hgetBuffer(keys.feedSections, name);
    const section = JSON.parse(await open(await realKeys(), stored!));
    expect(section.connector.enabled).toBe(true);
    section.connector.enabled = false;
    const json = JSON.stringify(section);
    const manifest = JSON.parse((await cluster.redis.get(keys.feedManifest))!) as {
      sections: Record<string, string>;
    };
    const digests = new Map(Object.entries(manifest.sections));
    digests.set(name, await sectionDigest(digestKeys, json));
    const manifestText = manifestJson(digests);
    const headDigest = await manifestDigest(digestKeys, manifestText);
    await cluster.redis.multi()
      .hset(keys.feedSections, name, Buffer.from(await seal(sealKeys, json)))
      .set(keys.feedManifest, manifestText)
      .set(keys.feedHead, headJson(headDigest, Date.now()))
      .xadd(keys.feedStream, "*", "digest", headDigest)
      .exec();
  }

  /**
   * Waits until every gateway has refused the forged feed three times (read, then read again
   * after each back-off: 0.5 s, then 1 s, so it is waiting out a 2 s back-off now).
   */
  async function refusedRepeatedly(before: number[], error: string): Promise<void> {
    for (const [index, gateway] of gateways.entries()) {
      await cluster.until(async () => (await gateway.metric(FAILURES)) >= before[index] + 3, {
        message: `${gateway.instance} to refuse the forged feed three times`,
      });
      expect(
        gateway.logs().some((line) =>
          line.msg === "Feed read failed; keeping the feed applied" && line.error === error
        ),
      ).toBe(true);
    }
  }

  /** Both gateways still route the project through both proxies, and say they are ready. */
  async function stillRouting(): Promise<void> {
    for (const gateway of gateways) {
      const exits = await exitsThrough(gateway, project.credentials, ipUrl(), 4);
      expect(new Set(exits)).toEqual(new Set(EXITS));
      const ready = await fetch(`${gateway.url}/ready`);
      await ready.body?.cancel();
      expect(ready.status).toBe(200);
    }
  }

  const failures = () => Promise.all(gateways.map((gateway) => gateway.metric(FAILURES)));

  it("is refused whole, and the gateways keep routing on their snapshot", async () => {
    const other = await deriveFeedKeys("another install's secret, not this one's");
    const before = await failures();
    await forge(other, other);
    // The window: until each gateway has read the forged head three times and refused it
    // each time; the connector it disables stays in use meanwhile.
    await refusedRepeatedly(before, "Feed manifest does not verify with this secret");
    await stillRouting();

    // The controller's next publish finds a feed that does not verify and writes it whole;
    // its stream entry ends the gateways' back-off at once.
    const latency = await moveAndFollow(0, "FR");
    console.info(`edit after a forged feed reached both gateways in ${latency} ms`);
    expect(latency).toBeLessThan(1_000);
    expect(
      control.logs().some((line) => line.msg === "Stored feed did not verify; published whole"),
    )
      .toBe(true);
  });

  it("refuses a section sealed under another secret behind a head that verifies", async () => {
    const other = await deriveFeedKeys("another install's secret, not this one's");
    const before = await failures();
    await forge(other, await realKeys());
    await refusedRepeatedly(
      before,
      "Sealed section does not open: altered, or sealed with another secret",
    );
    await stillRouting();

    // The next compile's section differs from the listed digest: written again, followed.
    const latency = await moveAndFollow(1, "NL");
    console.info(`edit after a forged section reached both gateways in ${latency} ms`);
    expect(latency).toBeLessThan(1_000);
    for (const gateway of gateways) {
      const nl = await viaProxy(
        gateway.proxyPort,
        withOptions(project.credentials, "-cc-nl"),
        ipUrl(),
      );
      expect(exitOf(nl)).toBe(EXITS[1]);
    }
  });
});
