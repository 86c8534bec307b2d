/**
 * A project's max_retries, as the real gateway reads it from the feed: a request that may be
 * retried (a GET without a body, a tunnel not up yet) goes on to that many other proxies after a
 * failed attempt, each one not tried yet; 0 gives every request one attempt.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";
import { type FeedGateway, startLoopbackGateway } from "../../testkit/gateway/feed-gateway.ts";
import { basicAuth, getVia, openConnect } from "../../testkit/clients/raw-http.ts";

let bed: FeedBed;
let origin: Origin;
let refusingA: FaultProxy;
let refusingB: FaultProxy;
let working: FaultProxy;
let gateway: FeedGateway;
let proxyPort: number;

beforeAll(async () => {
  [bed, origin, refusingA, refusingB, working] = await Promise.all([
    feedBed(),
    startOrigin(),
    startFaultProxy({ mode: FaultMode.refuse }),
    startFaultProxy({ mode: FaultMode.refuse }),
    startFaultProxy({ mode: FaultMode.pass }),
  ]);
  // Each project's own proxies (a proxy row belongs to one connector): the working one last.
  const proxies = (prefix: string, refusing: FaultProxy[]) => [
    ...refusing.map((proxy, i) => ({
      id: `${prefix}-refusing-${i}`,
      scheme: "http" as const,
      host: proxy.host,
      port: proxy.port,
    })),
    { id: `${prefix}-working`, scheme: "http" as const, host: working.host, port: working.port },
  ];
  ({ gateway, proxyPort } = await startLoopbackGateway(bed, {
    projects: [
      { id: "once", username: "once", password: "once-pass", maxRetries: 0 },
      { id: "usual", username: "usual", password: "usual-pass" },
      { id: "stubborn", username: "stubborn", password: "stubborn-pass", maxRetries: 2 },
    ],
    connectors: [
      { id: "c-once", projectId: "once", proxies: proxies("once", [refusingA]) },
      { id: "c-usual", projectId: "usual", proxies: proxies("usual", [refusingA, refusingB]) },
      {
        id: "c-stubborn",
        projectId: "stubborn",
        proxies: proxies("stubborn", [refusingA, refusingB]),
      },
    ],
  }));
});

afterAll(async () => {
  expect(await gateway?.stop()).toBe(0);
  await Promise.all([refusingA?.close(), refusingB?.close(), working?.close(), origin?.close()]);
  await bed?.close();
});

/** The statuses of `count` GETs through the gateway, one after another. */
async function gets(login: string, count: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) {
    statuses.push((await getVia(proxyPort, `${origin.url}/ip`, login)).status);
  }
  return statuses;
}

/** The statuses of `count` CONNECTs to the origin through the gateway, one after another. */
async function tunnels(login: string, count: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) {
    const { connection, response } = await openConnect(
      proxyPort,
      `${origin.host}:${origin.port}`,
      basicAuth(login),
    );
    connection.destroy();
    statuses.push(response.status);
  }
  return statuses;
}

const count = (statuses: number[], status: number) => statuses.filter((s) => s === status).length;

describe("a project's max_retries", () => {
  it("0 gives each request one proxy: the refusing one's requests fail", async () => {
    // Round robin over two proxies: every other request lands on the refusing one.
    const forwarded = await gets("once:once-pass", 4);
    expect(count(forwarded, 200)).toBe(2);
    expect(count(forwarded, 502)).toBe(2);
    const tunnelled = await tunnels("once:once-pass", 4);
    expect(count(tunnelled, 200)).toBe(2);
    expect(count(tunnelled, 502)).toBe(2);
  });

  it("the default (1) tries two distinct proxies: not enough past two refusing ones", async () => {
    const statuses = [
      ...await gets("usual:usual-pass", 6),
      ...await tunnels("usual:usual-pass", 6),
    ];
    expect(count(statuses, 502)).toBeGreaterThan(0);
    expect(count(statuses, 200)).toBeGreaterThan(0);
    expect(count(statuses, 200) + count(statuses, 502)).toBe(statuses.length);
  });

  it("2 goes on to a third proxy: every request reaches the working one", async () => {
    const forwarded = await gets("stubborn:stubborn-pass", 6);
    expect(forwarded).toEqual([200, 200, 200, 200, 200, 200]);
    const tunnelled = await tunnels("stubborn:stubborn-pass", 6);
    expect(tunnelled).toEqual([200, 200, 200, 200, 200, 200]);
  });
});
