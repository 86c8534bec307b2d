/**
 * OCTOPROX_FEED_MAX_STALE under a real outage: two gateways on a PRIVATE Redis this file starts
 * and stops, one bounded (2 s, and two isolates, so a worker isolate must refuse too) and one
 * with the default (off). With Redis gone the bounded gateway keeps serving until its last
 * good read is 2 s old, then answers new HTTP and CONNECT requests 503 with the reason and says
 * so on /ready and /metrics; the other keeps routing on its last feed. With Redis back (empty:
 * the controller publishes the feed again) the bounded gateway serves again by itself.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LocalRedis } from "../../scripts/local-stores.ts";
import { freePort } from "../../testkit/ports.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { connectVia, viaProxy } from "../../testkit/clients/proxy-client.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { curl } from "../../testkit/clients/curl.ts";
import {
  createRoutedProject,
  loggedPort,
  type RoutedProject,
  untilEveryExit,
} from "../../testkit/routing.ts";

const EXIT = "127.0.0.2";
const MAX_STALE_S = 2;

let folder: string;
let redis: LocalRedis;
let cluster: Cluster;
let bounded: Gateway;
let unbounded: Gateway;
let origin: Origin;
let tinyproxy: Tinyproxy;
let project: RoutedProject;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-gw-stale-"));
  redis = new LocalRedis({ dir: join(folder, "redis"), port: await freePort() });
  [origin, tinyproxy] = await Promise.all([
    startOrigin(),
    startTinyproxy({ bindAddress: EXIT }),
    redis.start(),
  ]);
  cluster = await Cluster.create({ redisUrl: redis.url });
  await cluster.start("all");
  [bounded, unbounded] = await Promise.all([
    cluster.startGateway({
      env: { OCTOPROX_FEED_MAX_STALE: String(MAX_STALE_S), OCTOPROX_GATEWAY_ISOLATES: "2" },
    }),
    cluster.startGateway(),
  ]);
  project = await createRoutedProject(cluster, [tinyproxy.url]);
  await untilEveryExit(cluster, [bounded, unbounded], project.credentials, ipUrl(), [EXIT]);
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  // Redis first, so the cluster's own stop finds it there.
  await redis?.start().catch(() => {});
  await cluster?.close();
  await Promise.all([origin?.close(), tinyproxy?.close()]);
  await redis?.stop();
  if (folder) await rm(folder, { recursive: true, force: true });
});

function ipUrl(): string {
  return `${origin.url}/ip`;
}

async function ready(gateway: Gateway): Promise<{ status: number; body: { reasons?: string[] } }> {
  const answer = await fetch(`${gateway.url}/ready`);
  return { status: answer.status, body: await answer.json() };
}

/** Several requests at once, each on its own connection (the isolates share them out). */
async function statuses(gateway: Gateway, count = 6): Promise<number[]> {
  return await Promise.all(
    Array.from(
      { length: count },
      () =>
        viaProxy(gateway.proxyPort, project.credentials, ipUrl(), { timeoutMs: 5_000 })
          .then((answer) => answer.status, () => 0),
    ),
  );
}

/** A GET through the gateway's SOCKS5 listener with curl: its exit code (0: served). */
async function socksGet(gateway: Gateway): Promise<number> {
  const { username, password } = project.credentials;
  const port = loggedPort(gateway, "SOCKS5 listener bound");
  const answer = await curl(
    ["-x", `socks5h://${username}:${password}@127.0.0.1:${port}`, ipUrl()],
    10_000,
  );
  return answer.code;
}

describe("a bound on a stale feed", () => {
  it("refuses new requests past the bound while the feed cannot be read, and serves when it can again", async () => {
    // Fresh: both serve, both ready; the bounded one reads well within its bound.
    expect(await statuses(bounded)).toEqual(Array(6).fill(200));
    expect((await ready(bounded)).status).toBe(200);
    expect(await socksGet(bounded)).toBe(0);
    const readAge = await bounded.metric("octoprox_gateway_feed_read_age_seconds");
    expect(readAge).toBeLessThan(MAX_STALE_S);

    await redis.stop({ kill: true });
    const stoppedAt = Date.now();

    // Past the bound, every new request through the bounded gateway (both isolates) is a 503
    // naming the stale feed, over HTTP and CONNECT alike.
    await cluster.until(async () => (await statuses(bounded)).every((s) => s === 503), {
      timeoutMs: 20_000,
      message: "the bounded gateway to refuse every request",
    });
    const refusedAfterMs = Date.now() - stoppedAt;
    // The last good read came at most a quarter of the bound before the stop (the follower
    // reads the head that often with a bound set).
    expect(refusedAfterMs).toBeGreaterThanOrEqual(MAX_STALE_S * 1000 * 0.75 - 500);
    const refused = await viaProxy(bounded.proxyPort, project.credentials, ipUrl());
    expect(refused.status).toBe(503);
    expect(refused.body).toMatch(/routing feed is stale: not read for \d+ s/);
    expect(refused.headers["proxy-status"]).toMatch(/proxy_internal_error/);
    const target = new URL(origin.url);
    const tunnel = await connectVia(bounded.proxyPort, project.credentials, target.host);
    tunnel.socket?.destroy();
    expect(tunnel.status).toBe(503);
    expect(tunnel.body).toMatch(/routing feed is stale/);
    // SOCKS5 refuses too (curl's 97: the proxy's reply was a failure).
    expect(await socksGet(bounded)).toBe(97);
    const unready = await ready(bounded);
    expect(unready.status).toBe(503);
    expect(unready.body.reasons?.join(" ")).toMatch(/routing feed stale: not read for \d+ s/);
    expect(await bounded.metric("octoprox_gateway_ready")).toBe(0);
    expect(await bounded.metric("octoprox_gateway_feed_read_age_seconds"))
      .toBeGreaterThan(MAX_STALE_S);

    // The default keeps routing on its last feed through the same outage.
    expect(await statuses(unbounded)).toEqual(Array(6).fill(200));
    expect((await ready(unbounded)).status).toBe(200);

    // Redis back, empty: the controller publishes the feed again and the bounded gateway
    // serves once it has read it, with no restart.
    await redis.start();
    const backAt = Date.now();
    await cluster.until(async () => (await statuses(bounded)).every((s) => s === 200), {
      timeoutMs: 30_000,
      message: "the bounded gateway to serve again",
    });
    console.log(
      `feed max stale ${MAX_STALE_S} s: refused ${refusedAfterMs} ms after Redis stopped; ` +
        `served again ${Date.now() - backAt} ms after Redis came back`,
    );
    expect((await ready(bounded)).status).toBe(200);
    expect(await socksGet(bounded)).toBe(0);
  });
});
