/**
 * Every core: gateway/main.ts serving from two isolates (OCTOPROX_GATEWAY_ISOLATES=2) keeps its
 * dispatch counts exact for the process. Two proxies each take one transfer at a time
 * (max_concurrency 1 in the feed); SO_REUSEPORT hands new connections to either isolate, yet a
 * third tunnel is refused while two are open, whichever isolate took it, and a closed tunnel's
 * proxy is free again for the next, on any isolate.
 */
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";
import {
  type FeedGateway,
  publishFeed,
  startFeedGateway,
} from "../../testkit/gateway/feed-gateway.ts";
import { openConnect, proxyStatusError, RawConnection } from "../../testkit/clients/raw-http.ts";
import { PROXY_AUTH } from "../../testkit/gateway/fixture-gateway.ts";
import { parseSamples, samplesOf } from "../../testkit/promtool.ts";

let bed: FeedBed;
let tinyproxies: Tinyproxy[];
let greeter: net.Server;
let greeterPort: number;
let gateway: FeedGateway;
let proxyPort: number;

/** A TCP target that first says which address the connection came from, then echoes. */
function startGreeter(): Promise<net.Server> {
  const server = net.createServer((socket) => {
    socket.on("error", () => socket.destroy());
    socket.write(`${socket.remoteAddress}\n`);
    socket.on("data", (chunk: Buffer) => socket.write(chunk));
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** Opens a tunnel to the greeter; answers the connection and the exit it came from. */
async function tunnel(): Promise<{ connection: RawConnection; exit: string }> {
  const { connection, response } = await openConnect(proxyPort, `127.0.0.1:${greeterPort}`);
  expect(response.status, response.body.toString()).toBe(200);
  await connection.waitUntil(() => connection.buffered.includes("\n"));
  const line = connection.buffered.toString("latin1");
  return { connection, exit: line.slice(0, line.indexOf("\n")) };
}

async function openPerIsolate(): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${gateway.statusPort}/metrics`)).text();
  const open = new Map<string, number>();
  for (const sample of samplesOf(parseSamples(text), "octoprox_gateway_isolate_connections_open")) {
    open.set(sample.labels.isolate, sample.value);
  }
  return open;
}

beforeAll(async () => {
  [bed, greeter, ...tinyproxies] = await Promise.all([
    feedBed(),
    startGreeter(),
    startTinyproxy({ bindAddress: "127.0.0.51" }),
    startTinyproxy({ bindAddress: "127.0.0.52" }),
  ]);
  greeterPort = (greeter.address() as net.AddressInfo).port;
  await bed.lead();
  gateway = await startFeedGateway(bed, {
    OCTOPROX_GATEWAY_ISOLATES: "2",
    OCTOPROX_DESTINATION_ALLOW_CIDRS: "127.0.0.0/8",
  });
  await publishFeed(bed, {
    projects: [{ id: "p1", username: "alice", password: "s3cret-pass", strategy: "least_used" }],
    connectors: [{
      id: "c1",
      projectId: "p1",
      proxies: tinyproxies.map((tinyproxy, index) => ({
        id: `limited-${index}`,
        scheme: "http" as const,
        host: tinyproxy.host,
        port: tinyproxy.port,
        maxConcurrency: 1,
      })),
    }],
  });
  proxyPort = await gateway.proxyPort();
  expect((await gateway.line("Worker isolates bound")).isolates).toBe(2);
});

afterAll(async () => {
  const code = await gateway?.stop();
  await Promise.all((tinyproxies ?? []).map((tinyproxy) => tinyproxy.close()));
  await new Promise((resolve) => greeter?.close(resolve));
  await bed?.close();
  expect(code).toBe(0);
  expect(gateway.output()).not.toMatch(/"level":"(error|fatal)"/);
});

describe("two isolates", () => {
  it("spread new connections over both isolates", async () => {
    const idle = await Promise.all(
      Array.from({ length: 24 }, () => RawConnection.open(proxyPort)),
    );
    try {
      await waitUntil(async () => {
        const open = await openPerIsolate();
        return [...open.values()].reduce((a, b) => a + b, 0) === 24 ? open : undefined;
      }, { message: "24 connections open" });
      const open = await openPerIsolate();
      expect([...open.keys()].sort()).toEqual(["0", "1"]);
      // 24 connections hashed over two listeners: both get some (all on one: 2 in 16 million).
      expect(open.get("0")).toBeGreaterThan(0);
      expect(open.get("1")).toBeGreaterThan(0);
    } finally {
      for (const connection of idle) connection.destroy();
    }
  });

  it("keep each proxy's concurrency limit exact for the process", async () => {
    const first = await tunnel();
    const second = await tunnel();
    // Two proxies of one transfer each: the second tunnel went to the other one.
    expect(new Set([first.exit, second.exit])).toEqual(new Set(["127.0.0.51", "127.0.0.52"]));

    // Every further tunnel, on whichever isolate accepts it, finds both proxies at their limit.
    for (let attempt = 0; attempt < 12; attempt++) {
      const refused = await openConnect(proxyPort, `127.0.0.1:${greeterPort}`, PROXY_AUTH);
      expect(refused.response.status).toBe(503);
      expect(proxyStatusError(refused.response)).toBe("connection_limit_reached");
      refused.connection.destroy();
    }

    // A closed tunnel releases its proxy for the next, whichever isolate takes it.
    first.connection.destroy();
    await waitUntil(
      async () => (await gateway.metric("octoprox_gateway_tunnels_open")) === 1,
      { message: "the first tunnel closed" },
    );
    for (let round = 0; round < 6; round++) {
      const again = await tunnel();
      expect(again.exit).toBe(first.exit);
      again.connection.destroy();
      await waitUntil(
        async () => (await gateway.metric("octoprox_gateway_tunnels_open")) === 1,
        { message: "the tunnel closed" },
      );
    }
    second.connection.destroy();
    await waitUntil(
      async () => (await gateway.metric("octoprox_gateway_tunnels_open")) === 0,
      { message: "every tunnel closed" },
    );
  });
});
