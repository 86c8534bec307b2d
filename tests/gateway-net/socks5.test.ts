/**
 * The SOCKS5 listener of the real gateway (gateway/main.ts on a published feed): curl's
 * `--socks5-hostname` with the project's username and password reaches the origin through the
 * upstream the username's options choose, as HTTP does; a wrong password and a client without
 * credentials are refused; names go on unresolved, IPv4 and IPv6 literals as such; the guard,
 * a missing route and unsupported commands get their reply codes; bytes are counted both ways.
 */
import { createHash, randomBytes } from "node:crypto";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FaultProxy, startFaultProxy } from "../../testkit/upstreams/fault-proxy.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { refusingAddress } from "../../testkit/ports.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";
import {
  type FeedGateway,
  publishFeed,
  startFeedGateway,
} from "../../testkit/gateway/feed-gateway.ts";
import {
  ipv4Bytes,
  ipv6Bytes,
  SocksAtyp,
  socksOpen,
  socksRequest,
} from "../../testkit/clients/socks.ts";
import { curl } from "../../testkit/clients/curl.ts";
import { RawConnection } from "../../testkit/clients/raw-http.ts";
import { startGateway } from "../../testkit/gateway/fixture-gateway.ts";

const PASSWORD = "acme-pass";
const CONNECT = 1;
const BIND = 2;
const UDP_ASSOCIATE = 3;

let bed: FeedBed;
let origin: Origin;
let origin6: Origin;
let tinyproxy: Tinyproxy;
/** The DE connector's upstream: a SOCKS5 proxy that records the names it is asked for. */
let socksUpstream: FaultProxy;
/** The JP connector's upstream: an HTTP proxy without a fixed exit (so it reaches ::1). */
let httpUpstream: FaultProxy;
let echo: net.Server;
let echoPort: number;
let gateway: FeedGateway;
let socksPort: number;
let proxyPort: number;

function startEcho(): Promise<net.Server> {
  const server = net.createServer((socket) => {
    socket.on("error", () => socket.destroy());
    socket.on("data", (chunk: Buffer) => socket.write(chunk));
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** curl through the SOCKS5 listener: `[exit code, body, stderr]`. */
async function viaSocks(username: string, url: string, password = PASSWORD) {
  const result = await curl([
    "--socks5-hostname",
    `127.0.0.1:${socksPort}`,
    "--proxy-user",
    `${username}:${password}`,
    url,
  ]);
  return result;
}

/** The status the HTTP listener answers for the same username and URL. */
async function httpStatus(username: string, url: string): Promise<string> {
  const result = await curl([
    "-x",
    `http://${username}:${PASSWORD}@127.0.0.1:${proxyPort}`,
    "-o",
    "/dev/null",
    "-w",
    "%{http_code}",
    url,
  ]);
  return result.stdout;
}

const credentials = (username: string) => ({ username, password: PASSWORD });

beforeAll(async () => {
  [bed, origin, origin6, tinyproxy, socksUpstream, httpUpstream, echo] = await Promise.all([
    feedBed(),
    startOrigin(),
    startOrigin({ host: "::1" }),
    startTinyproxy({ bindAddress: "127.0.0.41" }),
    startFaultProxy({ bindAddress: "127.0.0.42" }),
    startFaultProxy(),
    startEcho(),
  ]);
  echoPort = (echo.address() as net.AddressInfo).port;
  await bed.lead();
  gateway = await startFeedGateway(bed, {
    OCTOPROX_DESTINATION_ALLOW_CIDRS: "127.0.0.0/8,::1/128",
  });
  await publishFeed(bed, {
    projects: [{ id: "p1", username: "acme", password: PASSWORD }],
    connectors: [
      {
        id: "c-us",
        projectId: "p1",
        countries: ["US"],
        proxies: [{ id: "us1", scheme: "http", ...hostPort(tinyproxy), country: "US" }],
      },
      {
        id: "c-de",
        projectId: "p1",
        countries: ["DE"],
        proxies: [{ id: "de1", scheme: "socks5", ...hostPort(socksUpstream), country: "DE" }],
      },
      {
        // Nothing listens at one proxy: a tunnel is tried on the other before it is up.
        id: "c-gb",
        projectId: "p1",
        countries: ["GB"],
        proxies: [
          { id: "gb-refusing", scheme: "http", ...refusingAddress(echoPort), country: "GB" },
          { id: "gb-tiny", scheme: "http", ...hostPort(tinyproxy), country: "GB" },
        ],
      },
      {
        // Only a proxy nothing listens at.
        id: "c-it",
        projectId: "p1",
        countries: ["IT"],
        proxies: [{ id: "it1", scheme: "http", ...refusingAddress(echoPort), country: "IT" }],
      },
      {
        id: "c-jp",
        projectId: "p1",
        countries: ["JP"],
        proxies: [{ id: "jp1", scheme: "http", ...hostPort(httpUpstream), country: "JP" }],
      },
    ],
  });
  [proxyPort, socksPort] = [await gateway.proxyPort(), await gateway.socksPort()];
});

function hostPort(server: { host: string; port: number }) {
  return { host: server.host, port: server.port };
}

afterAll(async () => {
  const code = await gateway?.stop();
  await Promise.all(
    [origin, origin6, tinyproxy, socksUpstream, httpUpstream].map((server) => server?.close()),
  );
  await new Promise((resolve) => echo?.close(resolve));
  await bed?.close();
  expect(code).toBe(0);
  expect(gateway.output()).not.toMatch(/acme-pass|"level":"(error|fatal)"/);
});

describe("SOCKS5 listener", () => {
  it("reaches the origin through the upstream the username chooses, as HTTP does", async () => {
    const us = await viaSocks("acme-cc-us", `${origin.url}/ip`);
    expect(us.stderr).toBe("");
    expect(JSON.parse(us.stdout)).toEqual({ ip: "127.0.0.41" });

    // Through a SOCKS5 upstream, with a name the upstream is asked for as it came.
    const de = await viaSocks("acme-cc-de", `http://localhost:${origin.port}/ip`);
    expect(de.stderr).toBe("");
    expect(JSON.parse(de.stdout)).toEqual({ ip: "127.0.0.42" });
    expect(socksUpstream.requests.at(-1)).toMatchObject({
      protocol: "socks5",
      host: "localhost",
      port: origin.port,
    });

    // A place nothing serves, and an option written wrong: refused, as HTTP refuses them.
    const fr = await viaSocks("acme-cc-fr", `${origin.url}/ip`);
    expect(fr.code).toBe(97);
    expect(fr.stderr).toMatch(/\(3\)/); // network unreachable
    expect(await httpStatus("acme-cc-fr", `${origin.url}/ip`)).toBe("502");
    const bad = await viaSocks("acme-cc-zz", `${origin.url}/ip`);
    expect(bad.code).toBe(97);
    expect(bad.stderr).toMatch(/\(2\)/); // not allowed by ruleset
    expect(await httpStatus("acme-cc-zz", `${origin.url}/ip`)).toBe("400");
  });

  it("tries another proxy while the tunnel is not up; answers a refusal when none is left", async () => {
    const failures = 'octoprox_gateway_upstream_failures_total{phase="refused"}';
    const before = await gateway.metric(failures);
    // Round robin: at least one of two requests starts on the proxy that refuses.
    for (let round = 0; round < 2; round++) {
      const result = await viaSocks("acme-cc-gb", `${origin.url}/ip`);
      expect(result.stderr).toBe("");
      expect(JSON.parse(result.stdout)).toEqual({ ip: "127.0.0.41" });
    }
    expect(await gateway.metric(failures) - before).toBeGreaterThanOrEqual(1);

    const refused = await viaSocks("acme-cc-it", `${origin.url}/ip`);
    expect(refused.code).toBe(97);
    expect(refused.stderr).toMatch(/\(5\)/); // connection refused
  });

  it("refuses a wrong password, and a client that offers no username/password", async () => {
    const wrong = await viaSocks("acme-cc-us", `${origin.url}/ip`, "nope");
    expect(wrong.code).toBe(97);
    expect(wrong.stderr).toMatch(/rejected/i);
    const unknown = await viaSocks("nobody", `${origin.url}/ip`);
    expect(unknown.code).toBe(97);

    const anonymous = await socksOpen(
      socksPort,
      credentials("acme"),
      Buffer.alloc(0),
      [0],
    );
    expect(anonymous.method).toBe(0xff);
    await anonymous.connection.waitUntil(() => anonymous.connection.ended);
  });

  it("passes IPv4 and IPv6 literals on as literals", async () => {
    const get = "GET /ip HTTP/1.1\r\nHost: origin\r\nConnection: close\r\n\r\n";
    const v4 = await socksOpen(
      socksPort,
      credentials("acme-cc-jp"),
      socksRequest(CONNECT, SocksAtyp.ipv4, ipv4Bytes("127.0.0.1"), origin.port),
    );
    expect(v4.reply).toBe(0);
    v4.connection.write(get);
    expect((await v4.connection.readToEnd()).toString()).toMatch(/\{"ip":"127\.0\.0\.1"\}$/);
    // The origin's end of stream came through as a half-close: ours ends the tunnel.
    v4.connection.destroy();
    expect(httpUpstream.requests.at(-1)).toMatchObject({
      protocol: "connect",
      host: "127.0.0.1",
      port: origin.port,
    });

    const v6 = await socksOpen(
      socksPort,
      credentials("acme-cc-jp"),
      socksRequest(CONNECT, SocksAtyp.ipv6, ipv6Bytes("::1"), origin6.port),
    );
    expect(v6.reply).toBe(0);
    v6.connection.write(get);
    expect((await v6.connection.readToEnd()).toString()).toMatch(/\{"ip":"::1"\}$/);
    v6.connection.destroy();
    expect(httpUpstream.requests.at(-1)).toMatchObject({
      protocol: "connect",
      host: "::1",
      port: origin6.port,
    });
  });

  it("refuses a private destination the allow list does not cover", async () => {
    for (const address of ["10.1.2.3", "169.254.169.254"]) {
      const refused = await socksOpen(
        socksPort,
        credentials("acme-cc-us"),
        socksRequest(CONNECT, SocksAtyp.ipv4, ipv4Bytes(address), 80),
      );
      expect(refused.reply).toBe(2); // connection not allowed by ruleset
      await refused.connection.waitUntil(() => refused.connection.ended);
    }
    const curlRefused = await viaSocks("acme-cc-us", "http://10.9.8.7/");
    expect(curlRefused.code).toBe(97);
    expect(curlRefused.stderr).toMatch(/\(2\)/);
  });

  it("answers BIND, UDP ASSOCIATE and an unknown address type as unsupported", async () => {
    for (const command of [BIND, UDP_ASSOCIATE]) {
      const opened = await socksOpen(
        socksPort,
        credentials("acme-cc-us"),
        socksRequest(command, SocksAtyp.ipv4, ipv4Bytes("127.0.0.1"), echoPort),
      );
      expect(opened.reply).toBe(7); // command not supported
      await opened.connection.waitUntil(() => opened.connection.ended);
    }
    const atyp = await socksOpen(
      socksPort,
      credentials("acme-cc-us"),
      Buffer.from([5, CONNECT, 0, 9, 1, 2, 3, 4, 0, 80]),
    );
    expect(atyp.reply).toBe(8); // address type not supported
  });

  it("relays bytes both ways and counts them exactly", async () => {
    const series = (direction: string) =>
      gateway.metric(`octoprox_gateway_relay_bytes_total{direction="${direction}"}`);
    const relayed = 'octoprox_gateway_requests_total{kind="socks5",outcome="relayed",status="200"}';
    const [upBefore, downBefore, relayedBefore] = [
      await series("to_upstream"),
      await series("to_client"),
      await gateway.metric(relayed),
    ];
    const opened = await socksOpen(
      socksPort,
      credentials("acme-cc-us"),
      socksRequest(CONNECT, SocksAtyp.ipv4, ipv4Bytes("127.0.0.1"), echoPort),
    );
    expect(opened.reply).toBe(0);
    const payload = randomBytes(1024 * 1024);
    opened.connection.write(payload);
    const echoed = await opened.connection.take(payload.length);
    expect(createHash("sha256").update(echoed).digest("hex")).toBe(
      createHash("sha256").update(payload).digest("hex"),
    );
    opened.connection.destroy();
    await waitUntil(
      async () => (await gateway.metric("octoprox_gateway_tunnels_open")) === 0,
      { message: "the tunnel closed" },
    );
    expect(await series("to_upstream") - upBefore).toBe(payload.length);
    expect(await series("to_client") - downBefore).toBe(payload.length);
    expect(await gateway.metric(relayed) - relayedBefore).toBe(1);
  });
});

describe("SOCKS5 bounds", () => {
  it("closes a silent handshake at its deadline; shares the connection limit with HTTP", async () => {
    const bounded = await startGateway({
      upstreams: [{ id: "tiny", scheme: "http", host: tinyproxy.host, port: tinyproxy.port }],
      env: { OCTOPROX_CLIENT_IDLE_TIMEOUT: "1", OCTOPROX_MAX_CLIENT_CONNECTIONS: "2" },
    });
    try {
      const port = Number(
        (await bounded.waitForLine((l) => l.msg === "SOCKS5 listener bound")).port,
      );
      const started = Date.now();
      const silent = await RawConnection.open(port);
      const http = await RawConnection.open(bounded.proxyPort);
      // Both connections are taken: a third, on either listener, is closed at once.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const third = await RawConnection.open(port);
      await third.waitUntil(() => third.ended, 2_000);
      expect(Date.now() - started).toBeLessThan(1_000);
      // The silent one is closed by its handshake deadline (the idle timeout here, 1 s).
      await silent.waitUntil(() => silent.ended, 5_000);
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
      http.destroy();
    } finally {
      expect(await bounded.stop()).toBe(0);
    }
  });
});
