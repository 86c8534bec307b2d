/**
 * A connector's rate limit across a real control plane (role all) and two real gateways, with
 * two tinyproxy exits (127.0.0.2 and .3), as an admin sets it up through the API:
 *
 * - through the first gateway each proxy serves max_requests, then rests in quarantine, and
 *   with both resting the client hears 429;
 * - the second gateway, which counted nothing, learns the quarantines through the feed and
 *   refuses too;
 * - the API shows each proxy quarantined with its time left, and lifting one puts it back into
 *   routing on both gateways while the other still rests;
 * - with Redis stopped (a PRIVATE Redis server this file starts), requests go through the lifted
 *   proxy uncounted, past its limit: a rate limit is a courtesy, never a reason to refuse.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LocalRedis } from "../../scripts/local-stores.ts";
import { freePort } from "../../testkit/ports.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { exitOf, viaProxy } from "../../testkit/clients/proxy-client.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import {
  createRoutedProject,
  type RoutedProject,
  untilAnswer,
  untilEveryExit,
} from "../../testkit/routing.ts";

const EXITS = ["127.0.0.2", "127.0.0.3"];
const MAX_REQUESTS = 4;
const REFUSAL = "All proxies are temporarily rate-limited. Retry later.";

let folder: string;
let redis: LocalRedis;
let cluster: Cluster;
let origin: Origin;
let tinyproxies: Tinyproxy[];
let first: Gateway;
let second: Gateway;
let project: RoutedProject;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-gw-rate-"));
  redis = new LocalRedis({ dir: join(folder, "redis"), port: await freePort() });
  [origin, tinyproxies] = await Promise.all([
    startOrigin(),
    Promise.all(EXITS.map((bindAddress) => startTinyproxy({ bindAddress }))),
    redis.start(),
  ]);
  cluster = await Cluster.create({ redisUrl: redis.url });
  await cluster.start("all");
  [first, second] = await Promise.all([cluster.startGateway(), cluster.startGateway()]);
  project = await createRoutedProject(cluster, tinyproxies.map((t) => t.url));
  await untilEveryExit(cluster, [first, second], project.credentials, ipUrl(), EXITS);

  // The limit, as an admin sets it: four requests a proxy in five minutes, then ten minutes' rest.
  const edited = await cluster.request(
    "PATCH",
    `/api/v1/projects/${project.projectId}/connectors/${project.connectorId}`,
    {
      rate_limit_config: {
        max_requests: MAX_REQUESTS,
        window_seconds: 300,
        quarantine_seconds_min: 600,
      },
    },
  );
  expect(edited.status, JSON.stringify(edited.body)).toBe(200);
  // A gateway has the limit once a request through it is counted in Redis.
  for (const gateway of [first, second]) {
    await cluster.until(() => countedRequest(gateway), {
      timeoutMs: 20_000,
      message: `${gateway.instance} to apply the rate limit`,
    });
  }
  // Those probes filled part of the windows: start them over for the test.
  for (const id of project.proxyIds) await cluster.redis.del(cluster.keys.proxyRequests(id));
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

const COUNTED = 'octoprox_gateway_rate_limit_requests_total{result="counted"}';
const WRITE_FAILURES = "octoprox_gateway_rate_limit_write_failures_total";
const ipUrl = () => `${origin.url}/ip`;

/** One GET through the gateway; true once its window write lands (within 2 s), else false. */
async function countedRequest(gateway: Gateway): Promise<boolean> {
  const before = await gateway.metric(COUNTED);
  await viaProxy(gateway.proxyPort, project.credentials, ipUrl(), { timeoutMs: 5_000 });
  return await cluster.until(async () => (await gateway.metric(COUNTED)) > before, {
    timeoutMs: 2_000,
    message: "the request's window write",
  }).then(() => true, () => false);
}

describe("a connector's rate limit across gateways", () => {
  it("each proxy serves max_requests through one gateway, then both gateways refuse with 429", async () => {
    const exits: string[] = [];
    for (let i = 0; i < 2 * MAX_REQUESTS; i++) {
      const before = await first.metric(COUNTED);
      const answer = await viaProxy(first.proxyPort, project.credentials, ipUrl());
      expect(answer.status).toBe(200);
      exits.push(exitOf(answer));
      // Each request's window write lands before the next request.
      await cluster.until(async () => (await first.metric(COUNTED)) > before, {
        timeoutMs: 5_000,
        message: "the request's window write",
      });
    }
    for (const exit of EXITS) expect(exits.filter((seen) => seen === exit)).toHaveLength(4);
    expect(await first.metric("octoprox_gateway_rate_limit_trips_total")).toBe(2);

    const refused = await viaProxy(first.proxyPort, project.credentials, ipUrl());
    expect(refused.status).toBe(429);
    expect(refused.body).toContain(REFUSAL);

    // The second gateway tripped nothing itself: the feed brings it both quarantines.
    await untilAnswer(cluster, second, project.credentials, ipUrl(), (a) => a.status === 429, {
      timeoutMs: 5_000,
      message: "the second gateway to refuse through the feed",
    });
    expect(await second.metric("octoprox_gateway_rate_limit_trips_total")).toBe(0);
    expect(await second.metric("octoprox_gateway_local_quarantines")).toBe(0);
  });

  it("the API shows both resting; a lift puts one back on both gateways", async () => {
    const proxies = await cluster.request("GET", `/api/v1/projects/${project.projectId}/proxies`);
    expect(proxies.status).toBe(200);
    for (const row of proxies.body.items) {
      expect(row.quarantined).toBe(true);
      expect(row.quarantine_remaining_seconds).toBeGreaterThan(500);
      expect(row.quarantine_remaining_seconds).toBeLessThanOrEqual(600);
    }

    const [lifted, resting] = project.proxyIds;
    const answer = await cluster.request(
      "POST",
      `/api/v1/projects/${project.projectId}/proxies/${lifted}/unquarantine`,
    );
    expect(answer.status).toBe(200);
    // Refused (429, counted nowhere) until the feed carries the lift, then served through the
    // lifted proxy alone: one request each, under the limit.
    for (const gateway of [first, second]) {
      const served = await untilAnswer(
        cluster,
        gateway,
        project.credentials,
        ipUrl(),
        (a) => a.status !== 429,
        {
          timeoutMs: 30_000,
          requestTimeoutMs: 30_000,
          message: `${gateway.instance} to route through the lifted proxy`,
        },
      );
      expect(served.status).toBe(200);
      expect(exitOf(served)).toBe(EXITS[0]);
    }
    const row = await cluster.request(
      "GET",
      `/api/v1/projects/${project.projectId}/proxies/${resting}`,
    );
    expect(row.body.quarantined).toBe(true);
  });

  it("with Redis stopped, requests go through uncounted, past the limit", async () => {
    // The lifted proxy took a request through each gateway since its window started over (a
    // probe served while the feed reached the gateway may count once more), under the limit.
    // Each gateway writes its count after answering, so the second write may land a moment later.
    const window = cluster.keys.proxyRequests(project.proxyIds[0]);
    const counted = await cluster.until(async () => {
      const held = await cluster.redis.zcard(window);
      return held >= 2 ? held : undefined;
    }, {
      timeoutMs: 10_000,
      message: "both gateways' requests counted in the lifted proxy's window",
    });
    expect(counted).toBeLessThan(4);
    await redis.stop();
    const failuresBefore = await first.metric(WRITE_FAILURES);
    // Six more through the first gateway would fill its window of four; none waits on Redis.
    const startedMs = Date.now();
    for (let i = 0; i < 6; i++) {
      const answer = await viaProxy(first.proxyPort, project.credentials, ipUrl());
      expect(answer.status).toBe(200);
      expect(exitOf(answer)).toBe(EXITS[0]);
    }
    // Each write gives up at the request deadline (2 s), in the background.
    expect(Date.now() - startedMs).toBeLessThan(2_000);
    await cluster.until(async () => (await first.metric(WRITE_FAILURES)) > failuresBefore, {
      timeoutMs: 10_000,
      message: "the rate limiter to see Redis away",
    });
    expect(await first.metric("octoprox_gateway_rate_limit_trips_total")).toBe(2);
  });
});
