/**
 * A rate-limit trip in a gateway serving from two isolates (OCTOPROX_GATEWAY_ISOLATES=2) on a
 * hand-made feed, with no controller to carry the quarantine: the isolate whose request filled
 * the window hands the quarantine to the other, so the whole process excludes the proxy at once,
 * whichever isolate the kernel gives a new connection to.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";
import { type FeedGateway, startLoopbackGateway } from "../../testkit/gateway/feed-gateway.ts";
import { getVia } from "../../testkit/clients/raw-http.ts";

let bed: FeedBed;
let origin: Origin;
let proxies: FaultProxy[];
let gateway: FeedGateway;
let proxyPort: number;
const PROXY_IDS = ["iso-a", "iso-b"];

beforeAll(async () => {
  [bed, origin, ...proxies] = await Promise.all([
    feedBed(),
    startOrigin(),
    startFaultProxy({ mode: FaultMode.pass }),
    startFaultProxy({ mode: FaultMode.pass }),
  ]);
  ({ gateway, proxyPort } = await startLoopbackGateway(bed, {
    projects: [{ id: "iso", username: "iso", password: "iso-pass" }],
    connectors: [{
      id: "c-iso",
      projectId: "iso",
      rateLimit: {
        max_requests: 3,
        window_seconds: 60,
        quarantine_seconds_min: 60,
        quarantine_seconds_max: 60,
        sticky_quarantine: false,
      },
      proxies: proxies.map((proxy, i) => ({
        id: PROXY_IDS[i],
        scheme: "http" as const,
        host: proxy.host,
        port: proxy.port,
      })),
    }],
  }, { OCTOPROX_GATEWAY_ISOLATES: "2" }));
});

afterAll(async () => {
  expect(await gateway?.stop()).toBe(0);
  await Promise.all([...(proxies ?? []), origin].map((server) => server?.close()));
  await bed?.close();
});

/** `count` GETs at once, each on a connection of its own (spread over the isolates). */
async function statuses(count: number): Promise<number[]> {
  const answers = await Promise.all(
    Array.from({ length: count }, () => getVia(proxyPort, `${origin.url}/ip`, "iso:iso-pass")),
  );
  return answers.map((answer) => answer.status);
}

/** How many of the proxies rest in Redis now. */
async function quarantinedCount(): Promise<number> {
  const scores = await Promise.all(
    PROXY_IDS.map((id) => bed.redis.zscore(bed.keys.proxyQuarantined, id)),
  );
  return scores.filter((score) => score !== null).length;
}

/** Requests Redis has taken: a tripped proxy's full window (started over) and every window. */
async function requestsCounted(): Promise<number> {
  const windows = await Promise.all(
    PROXY_IDS.map((id) => bed.redis.zcard(bed.keys.proxyRequests(id))),
  );
  return 3 * await quarantinedCount() + windows.reduce((a, b) => a + b, 0);
}

const tripsLogged = () =>
  gateway.lines().filter((line) => line.msg === "Rate limit reached: proxy quarantined").length;

describe("a rate-limit trip with two isolates", () => {
  it("excludes the proxy in every isolate of the process at once", async () => {
    expect((await gateway.line("Worker isolates bound")).isolates).toBe(2);
    // Requests one at a time, each on a connection of its own (either isolate may take it), each
    // counted and any trip logged (after it was handed to the other isolate) before the next.
    let served = 0;
    for (let i = 0; i < 20 && await quarantinedCount() < 2; i++) {
      if ((await getVia(proxyPort, `${origin.url}/ip`, "iso:iso-pass")).status === 200) served++;
      await waitUntil(
        async () =>
          (await requestsCounted()) === served && tripsLogged() === await quarantinedCount(),
        { timeoutMs: 5_000, message: `request ${i + 1} counted in Redis` },
      );
    }
    expect(await quarantinedCount()).toBe(2);
    // Each proxy served exactly its window: no isolate sent it another request once it tripped.
    expect(proxies.map((proxy) => proxy.requests.length)).toEqual([3, 3]);
    expect(tripsLogged()).toBe(2);

    // /metrics adds up every isolate's rate limiter (the trips may have come from either).
    expect(await gateway.metric("octoprox_gateway_rate_limit_trips_total")).toBe(2);
    expect(
      await gateway.metric('octoprox_gateway_rate_limit_requests_total{result="counted"}'),
    ).toBe(served);
    expect(await gateway.metric("octoprox_gateway_local_quarantines")).toBe(2);

    // No feed carries the quarantines here: only the isolates' own copies keep them out.
    expect(new Set(await statuses(12))).toEqual(new Set([429]));
    expect(new Set(await statuses(12))).toEqual(new Set([429]));
  });
});
