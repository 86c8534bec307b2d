/**
 * A connector's rate limit through the real gateway (gateway/main.ts under Deno) on a hand-made
 * feed and the test bed's Redis: each proxy serves max_requests in its window, then rests in
 * quarantine (the window started over, the quarantine and a runtime entry in Redis), excluded by
 * this gateway at once though no controller publishes it here; with every proxy resting the
 * client hears 429. Once a feed carries the quarantine the feed's copy rules, so the feed's lift
 * frees the proxies again. A connector without a limit counts nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { waitUntil } from "../../testkit/wait.ts";
import type { FeedRateLimit } from "../../shared/feed/models.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";
import {
  type FeedGateway,
  publishApplied,
  startLoopbackGateway,
} from "../../testkit/gateway/feed-gateway.ts";
import { curl } from "../../testkit/clients/curl.ts";
import { getVia } from "../../testkit/clients/raw-http.ts";

const LIMIT: FeedRateLimit = {
  max_requests: 3,
  window_seconds: 60,
  quarantine_seconds_min: 60,
  quarantine_seconds_max: 120,
  sticky_quarantine: false,
};

let bed: FeedBed;
let origin: Origin;
let proxyA: FaultProxy;
let proxyB: FaultProxy;
let proxyFree: FaultProxy;
let gateway: FeedGateway;
let proxyPort: number;

const feedSpec = (quarantines: { proxy_id: string; until_ms: number }[] = []) => ({
  projects: [
    { id: "limited", username: "limited", password: "limited-pass" },
    { id: "free", username: "free", password: "free-pass" },
  ],
  connectors: [
    {
      id: "c-limited",
      projectId: "limited",
      rateLimit: LIMIT,
      proxies: [proxyA, proxyB].map((proxy, i) => ({
        id: `limited-${i === 0 ? "a" : "b"}`,
        scheme: "http" as const,
        host: proxy.host,
        port: proxy.port,
      })),
    },
    {
      id: "c-free",
      projectId: "free",
      proxies: [{
        id: "free",
        scheme: "http" as const,
        host: proxyFree.host,
        port: proxyFree.port,
      }],
    },
  ],
  quarantines,
});

beforeAll(async () => {
  [bed, origin, proxyA, proxyB, proxyFree] = await Promise.all([
    feedBed(),
    startOrigin(),
    startFaultProxy({ mode: FaultMode.pass }),
    startFaultProxy({ mode: FaultMode.pass }),
    startFaultProxy({ mode: FaultMode.pass }),
  ]);
  ({ gateway, proxyPort } = await startLoopbackGateway(bed, feedSpec()));
});

afterAll(async () => {
  expect(await gateway?.stop()).toBe(0);
  await Promise.all([proxyA?.close(), proxyB?.close(), proxyFree?.close(), origin?.close()]);
  await bed?.close();
});

const get = (login: string) => getVia(proxyPort, `${origin.url}/ip`, login);

const counted = () =>
  gateway.metric('octoprox_gateway_rate_limit_requests_total{result="counted"}');

/** Waits until the gateway's rate limiter has written `total` requests to their windows. */
async function untilCounted(total: number): Promise<void> {
  await waitUntil(async () => (await counted()) >= total, {
    timeoutMs: 5_000,
    message: `${total} requests in the rate windows`,
  });
}

describe("a connector's rate limit", () => {
  it("each proxy serves max_requests, then rests; with every proxy resting the client hears 429", async () => {
    const startedMs = Date.now();
    // Round robin over the two proxies; each request's window write lands before the next.
    for (let i = 1; i <= 6; i++) {
      expect((await get("limited:limited-pass")).status).toBe(200);
      await untilCounted(i);
    }
    expect(proxyA.requests).toHaveLength(3);
    expect(proxyB.requests).toHaveLength(3);

    // Both rest in Redis for 60 to 120 s, each announced on the runtime stream for the
    // controller, their windows started over.
    for (const id of ["limited-a", "limited-b"]) {
      const untilMs = Number(await bed.redis.zscore(bed.keys.proxyQuarantined, id));
      expect(untilMs).toBeGreaterThanOrEqual(startedMs + 60_000);
      expect(untilMs).toBeLessThanOrEqual(Date.now() + 120_000);
      expect(await bed.redis.exists(bed.keys.proxyRequests(id))).toBe(0);
    }
    const entries = await bed.redis.xrange(bed.keys.runtimeStream, "-", "+");
    expect(entries.map(([, fields]) => fields).sort()).toEqual([
      ["kind", "quarantine", "ref", "limited-a"],
      ["kind", "quarantine", "ref", "limited-b"],
    ]);
    expect(await gateway.metric("octoprox_gateway_rate_limit_trips_total")).toBe(2);

    // No controller publishes here: this gateway excludes them itself.
    expect(await gateway.metric("octoprox_gateway_local_quarantines")).toBe(2);
    const refused = await get("limited:limited-pass");
    expect(refused.status).toBe(429);
    expect(refused.body.toString()).toContain(
      "All proxies are temporarily rate-limited. Retry later.",
    );
    const viaCurl = await curl([
      "-s",
      "-o",
      "/dev/null",
      "-w",
      "%{http_code}",
      "-x",
      `http://limited:limited-pass@127.0.0.1:${proxyPort}`,
      `${origin.url}/ip`,
    ]);
    expect(viaCurl.stdout).toBe("429");
    expect(proxyA.requests.length + proxyB.requests.length).toBe(6);
  });

  it("once the feed carries the quarantines they rule, and the feed's lift frees the proxies", async () => {
    const restUntilMs = Date.now() + 60_000;
    await publishApplied(
      bed,
      gateway,
      feedSpec(["limited-a", "limited-b"].map((proxy_id) => ({ proxy_id, until_ms: restUntilMs }))),
    );
    // Handed over: the local copies are gone, the feed's keep the proxies out.
    expect(await gateway.metric("octoprox_gateway_local_quarantines")).toBe(0);
    expect((await get("limited:limited-pass")).status).toBe(429);

    // A lift (the api's, compiled into the next feed): served again at once.
    await publishApplied(bed, gateway, feedSpec());
    const before = proxyA.requests.length + proxyB.requests.length;
    const countedBefore = await counted();
    expect((await get("limited:limited-pass")).status).toBe(200);
    expect((await get("limited:limited-pass")).status).toBe(200);
    expect(proxyA.requests.length + proxyB.requests.length).toBe(before + 2);
    // And counted in their fresh windows.
    await untilCounted(countedBefore + 2);
  });

  it("a connector without a rate limit counts nothing in Redis", async () => {
    const before = await counted();
    for (let i = 0; i < 5; i++) expect((await get("free:free-pass")).status).toBe(200);
    expect(proxyFree.requests).toHaveLength(5);
    expect(await bed.redis.exists(bed.keys.proxyRequests("free"))).toBe(0);
    expect(await counted()).toBe(before);
  });
});
