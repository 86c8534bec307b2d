/**
 * A connector's traffic block through the real gateway (gateway/main.ts under Deno) on a
 * hand-made feed: with the `interrupt` action, transfers already running through it stop at
 * their next report (every 1 MiB, and every 5 s), a forwarded answer cut short and a tunnel
 * closed; with `block`, running transfers go on to their end. Either way new requests hear the
 * connector's limit status.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";
import {
  type FeedGateway,
  publishApplied,
  startLoopbackGateway,
} from "../../testkit/gateway/feed-gateway.ts";
import { basicAuth, getVia, openConnect, RawConnection } from "../../testkit/clients/raw-http.ts";

/** The gateway's metering interval: a running transfer reports at least this often. */
const REPORT_INTERVAL_MS = 5_000;

let bed: FeedBed;
let origin: Origin;
let upstream: FaultProxy;
let gateway: FeedGateway;
let proxyPort: number;

const feedSpec = (blocked: string[] = []) => ({
  projects: [
    { id: "cut", username: "cut", password: "cut-pass" },
    { id: "kept", username: "kept", password: "kept-pass" },
  ],
  connectors: [
    { id: "c-cut", action: "interrupt" },
    { id: "c-kept", action: "block" },
  ].map(({ id, action }) => ({
    id,
    projectId: id.slice(2),
    traffic: { action, limit_status: 509 },
    proxies: [{
      id: `${id}-proxy`,
      scheme: "http" as const,
      host: upstream.host,
      port: upstream.port,
    }],
  })),
  trafficBlocks: blocked.map((connector_id) => ({
    connector_id,
    until_ms: Date.now() + 3_600_000,
  })),
});

beforeAll(async () => {
  [bed, origin, upstream] = await Promise.all([
    feedBed(),
    startOrigin(),
    startFaultProxy({ mode: FaultMode.pass }),
  ]);
  ({ gateway, proxyPort } = await startLoopbackGateway(bed, feedSpec()));
});

afterAll(async () => {
  expect(await gateway?.stop()).toBe(0);
  await Promise.all([upstream?.close(), origin?.close()]);
  await bed?.close();
});

/** Publishes a feed blocking `connectors` and waits until the gateway applied it. */
const block = (connectors: string[]) => publishApplied(bed, gateway, feedSpec(connectors));

/** A forwarded GET of a slow answer (`chunks` lines, `delayMs` apart), its head read. */
async function slowDownload(login: string, chunks: number, delayMs: number) {
  const connection = await RawConnection.open(proxyPort);
  const url = `${origin.url}/slow?chunks=${chunks}&delayMs=${delayMs}`;
  connection.write(
    `GET ${url} HTTP/1.1\r\nHost: ${origin.host}:${origin.port}\r\n` +
      `Proxy-Authorization: ${basicAuth(login)}\r\nConnection: close\r\n\r\n`,
  );
  await connection.waitUntil(() => connection.buffered.includes("chunk 1\n"));
  expect(connection.buffered.toString("latin1")).toMatch(/^HTTP\/1\.1 200 /);
  return connection;
}

/** A tunnel to the origin with the same slow GET sent through it, its first line read. */
async function slowTunnel(login: string, chunks: number, delayMs: number) {
  const { connection, response } = await openConnect(
    proxyPort,
    `${origin.host}:${origin.port}`,
    basicAuth(login),
  );
  expect(response.status).toBe(200);
  const before = connection.buffered.length;
  connection.write(
    `GET /slow?chunks=${chunks}&delayMs=${delayMs} HTTP/1.1\r\n` +
      `Host: ${origin.host}:${origin.port}\r\nConnection: close\r\n\r\n`,
  );
  await connection.waitUntil(() => connection.buffered.subarray(before).includes("chunk 1\n"));
  return connection;
}

describe("a connector blocked by its traffic limit", () => {
  it("with the interrupt action, stops the transfers running through it at their next report", async () => {
    // Twenty seconds of answer each, a line every 50 ms.
    const download = await slowDownload("cut:cut-pass", 400, 50);
    const tunnel = await slowTunnel("cut:cut-pass", 400, 50);
    const interruptedBefore = await gateway.metric("octoprox_gateway_transfers_interrupted_total");

    await block(["c-cut"]);
    const blockedAtMs = Date.now();
    // Both end within one report interval of the block (plus slack), long before their answers.
    await download.waitUntil(() => download.ended || download.closed, REPORT_INTERVAL_MS + 3_000);
    await tunnel.waitUntil(() => tunnel.ended || tunnel.closed, REPORT_INTERVAL_MS + 3_000);
    expect(Date.now() - blockedAtMs).toBeLessThan(REPORT_INTERVAL_MS + 3_000);
    expect(download.buffered.toString()).not.toContain("chunk 400");
    expect(tunnel.buffered.toString()).not.toContain("chunk 400");
    download.destroy();
    tunnel.destroy();
    expect(await gateway.metric("octoprox_gateway_transfers_interrupted_total")).toBe(
      interruptedBefore + 2,
    );

    // New requests hear the connector's limit status.
    const refused = await getVia(proxyPort, `${origin.url}/ip`, "cut:cut-pass");
    expect(refused.status).toBe(509);
    expect(refused.headers.get("proxy-status")?.join()).toContain("bandwidth_limit_exceeded");
  });

  it("with the block action, lets running transfers finish and refuses new ones", async () => {
    // Seven seconds of answer: more than one report interval runs under the block.
    const download = await slowDownload("kept:kept-pass", 70, 100);
    await block(["c-cut", "c-kept"]);
    const body = await download.readToEnd(15_000);
    expect(body.toString()).toContain("chunk 70\n");
    const refused = await getVia(proxyPort, `${origin.url}/ip`, "kept:kept-pass");
    expect(refused.status).toBe(509);
  });
});
