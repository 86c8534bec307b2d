/**
 * A project's limits as each listener answers them, through the real gateway (gateway/main.ts
 * under Deno) on a hand-made feed and a real tinyproxy upstream:
 *
 * - a project blocked by its traffic quota: 509 `bandwidth_limit_exceeded` on HTTP, and on
 *   SOCKS5 the login succeeds and the request gets `0x02` (not allowed);
 * - a project at its connection cap: 429 `connection_limit_reached` for CONNECT while a tunnel is
 *   open, SOCKS5 logged in and answered `0x01` (try again), and a slot again once it closes;
 * - a project over its request rate: 429 with the rate's reason, SOCKS5 `0x01`;
 * - each counted under its own failure kind.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";
import { type FeedGateway, startLoopbackGateway } from "../../testkit/gateway/feed-gateway.ts";
import { ipv4Bytes, SocksAtyp, socksOpen, socksRequest } from "../../testkit/clients/socks.ts";
import {
  basicAuth,
  openConnect,
  RawConnection,
  type RawResponse,
} from "../../testkit/clients/raw-http.ts";

let bed: FeedBed;
let origin: Origin;
let tinyproxy: Tinyproxy;
let gateway: FeedGateway;
let proxyPort: number;
let socksPort: number;

const login = (id: string) => ({ username: id, password: `${id}-pass` });

beforeAll(async () => {
  [bed, origin, tinyproxy] = await Promise.all([feedBed(), startOrigin(), startTinyproxy()]);
  const ids = ["quota", "capped", "rated"];
  ({ gateway, proxyPort } = await startLoopbackGateway(bed, {
    projects: [
      { id: "quota", ...login("quota"), trafficQuota: { action: "block", limit_status: 509 } },
      { id: "capped", ...login("capped"), maxConnections: 1 },
      { id: "rated", ...login("rated"), rateLimit: { requests_per_second: 1, burst: 1 } },
    ],
    connectors: ids.map((id) => ({
      id: `c-${id}`,
      projectId: id,
      proxies: [{
        id: `${id}-x`,
        scheme: "http" as const,
        host: tinyproxy.host,
        port: tinyproxy.port,
      }],
    })),
    projectBlocks: [{ project_id: "quota", until_ms: Date.now() + 3_600_000 }],
  }));
  socksPort = await gateway.socksPort();
});

afterAll(async () => {
  expect(await gateway?.stop()).toBe(0);
  await Promise.all([origin?.close(), tinyproxy?.close()]);
  await bed?.close();
});

async function get(id: string): Promise<RawResponse> {
  const connection = await RawConnection.open(proxyPort);
  try {
    const { username, password } = login(id);
    connection.write(
      `GET ${origin.url}/ip HTTP/1.1\r\nHost: ${origin.host}:${origin.port}\r\n` +
        `Proxy-Authorization: ${basicAuth(`${username}:${password}`)}\r\nConnection: close\r\n\r\n`,
    );
    return await connection.readResponse();
  } finally {
    connection.destroy();
  }
}

/** A SOCKS5 CONNECT to the origin as project `id`: the login's status and the reply code. */
async function socks(id: string): Promise<{ authStatus?: number; reply?: number }> {
  const open = await socksOpen(
    socksPort,
    login(id),
    socksRequest(1, SocksAtyp.ipv4, ipv4Bytes("127.0.0.1"), origin.port),
  );
  open.connection.destroy();
  return { authStatus: open.authStatus, reply: open.reply };
}

const authority = () => `127.0.0.1:${origin.port}`;
const failures = (kind: string) =>
  gateway.metric(`octoprox_gateway_failures_total{kind="${kind}"}`);

describe("a project's limits on each listener", () => {
  it("refuses a project blocked by its quota with 509, and SOCKS5 after its login with 0x02", async () => {
    const answer = await get("quota");
    expect(answer.status).toBe(509);
    expect(answer.headers.get("proxy-status")?.[0]).toContain("bandwidth_limit_exceeded");
    expect(answer.body.toString()).toMatch(/quota/i);
    expect(await socks("quota")).toEqual({ authStatus: 0, reply: 2 });
    expect(await failures("quota_exceeded")).toBe(2);
  });

  it("holds a project to its connection cap, on CONNECT and SOCKS5, until the tunnel closes", async () => {
    const { username, password } = login("capped");
    const auth = basicAuth(`${username}:${password}`);
    const held = await openConnect(proxyPort, authority(), auth);
    expect(held.response.status).toBe(200);
    try {
      const refused = await openConnect(proxyPort, authority(), auth);
      refused.connection.destroy();
      expect(refused.response.status).toBe(429);
      expect(refused.response.headers.get("proxy-status")?.[0]).toContain(
        "connection_limit_reached",
      );
      expect(await socks("capped")).toEqual({ authStatus: 0, reply: 1 });
      expect(await failures("connection_limit")).toBe(2);
    } finally {
      held.connection.destroy();
    }
    // The tunnel closed: its slot is free again.
    await waitUntil(async () => (await get("capped")).status === 200, {
      message: "the capped project served again",
    });
  });

  it("refuses a project over its request rate with 429, and SOCKS5 after its login with 0x01", async () => {
    // A burst of 1: the first request goes, the next within the second does not.
    const answers = [await get("rated"), await get("rated")];
    expect(answers.map((answer) => answer.status)).toEqual([200, 429]);
    expect(answers[1].headers.get("proxy-status")?.[0]).toContain("connection_limit_reached");
    expect(answers[1].body.toString()).toMatch(/rate limit/i);
    expect(await socks("rated")).toEqual({ authStatus: 0, reply: 1 });
    expect(await failures("rate_limited")).toBeGreaterThanOrEqual(2);
  });
});
