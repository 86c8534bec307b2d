/**
 * A project's connection_timeout_seconds, as the real gateway reads it from the feed: its
 * attempts wait the shorter of it and OCTOPROX_CONNECT_TIMEOUT, for forwarded requests and
 * tunnels alike.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";
import {
  type FeedGateway,
  publishFeed,
  startFeedGateway,
} from "../../testkit/gateway/feed-gateway.ts";
import { proxyStatusError, RawConnection } from "../../testkit/clients/raw-http.ts";

const GATEWAY_TIMEOUT_S = 3;

let bed: FeedBed;
let hanging: FaultProxy;
let gateway: FeedGateway;
let proxyPort: number;

beforeAll(async () => {
  [bed, hanging] = await Promise.all([feedBed(), startFaultProxy({ mode: FaultMode.hang })]);
  await bed.lead();
  gateway = await startFeedGateway(bed, {
    OCTOPROX_CONNECT_TIMEOUT: String(GATEWAY_TIMEOUT_S),
    OCTOPROX_DESTINATION_ALLOW_CIDRS: "127.0.0.0/8",
  });
  const proxies = (prefix: string) => [
    { id: `${prefix}-x`, scheme: "http" as const, host: hanging.host, port: hanging.port },
  ];
  await publishFeed(bed, {
    projects: [
      { id: "quick", username: "quick", password: "quick-pass", connectionTimeoutSeconds: 1 },
      { id: "patient", username: "patient", password: "patient-pass" },
    ],
    connectors: [
      { id: "c-quick", projectId: "quick", proxies: proxies("quick") },
      { id: "c-patient", projectId: "patient", proxies: proxies("patient") },
    ],
  });
  proxyPort = await gateway.proxyPort();
});

afterAll(async () => {
  expect(await gateway?.stop()).toBe(0);
  await hanging?.close();
  await bed?.close();
});

/** Sends one request through the gateway; the status and how long the answer took. */
async function timed(login: string, head: (auth: string) => string) {
  const auth = `Basic ${Buffer.from(login).toString("base64")}`;
  const connection = await RawConnection.open(proxyPort);
  const started = Date.now();
  try {
    connection.write(head(auth));
    const response = await connection.readResponse({ timeoutMs: 20_000 });
    return { response, elapsedMs: Date.now() - started };
  } finally {
    connection.destroy();
  }
}

const forward = (auth: string) =>
  `GET http://127.0.0.1:9/ HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${auth}\r\n\r\n`;
const tunnel = (auth: string) =>
  `CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nProxy-Authorization: ${auth}\r\n\r\n`;

describe("a project's connection timeout", () => {
  it("is used when shorter than the gateway's, for a forwarded request and a tunnel", async () => {
    for (const head of [forward, tunnel]) {
      const { response, elapsedMs } = await timed("quick:quick-pass", head);
      expect(response.status).toBe(504);
      expect(proxyStatusError(response)).toBe("connection_timeout");
      expect(elapsedMs).toBeGreaterThanOrEqual(950);
      expect(elapsedMs).toBeLessThan(GATEWAY_TIMEOUT_S * 1000 - 500);
    }
  });

  it("never lengthens the gateway's own", async () => {
    const { response, elapsedMs } = await timed("patient:patient-pass", forward);
    expect(response.status).toBe(504);
    expect(elapsedMs).toBeGreaterThanOrEqual(GATEWAY_TIMEOUT_S * 1000 - 50);
    expect(elapsedMs).toBeLessThan(30_000);
  });
});
