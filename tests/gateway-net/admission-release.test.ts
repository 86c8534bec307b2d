/**
 * What an admission step holds, through the real gateway process (the fixture core adds a step
 * that holds a grant per request and consumes an `X-Fixture-Option` field): every listener runs
 * it, after the credentials and before the destination guard; each grant is released exactly
 * once, when its request ended (a forwarded answer, a refusal, a tunnel closing, a SOCKS5
 * tunnel), never earlier; and a field the step consumed never reaches the origin. Tinyproxy
 * upstream, curl and raw sockets as clients.
 */
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { ipv4Bytes, SocksAtyp, socksOpen, socksRequest } from "../../testkit/clients/socks.ts";
import {
  CREDENTIALS,
  type LogLine,
  metricValue,
  PROXY_AUTH,
  startGateway,
  type TestGateway,
} from "../../testkit/gateway/fixture-gateway.ts";
import { curl } from "../../testkit/clients/curl.ts";
import { openConnect, RawConnection } from "../../testkit/clients/raw-http.ts";

let origin: Origin;
let tinyproxy: Tinyproxy;
let echo: net.Server;
let echoPort: number;
let gateway: TestGateway;
let socksPort: number;

beforeAll(async () => {
  [origin, tinyproxy] = await Promise.all([startOrigin(), startTinyproxy()]);
  echo = net.createServer((socket) => {
    socket.on("error", () => socket.destroy());
    socket.on("data", (chunk: Buffer) => socket.write(chunk));
  });
  await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
  echoPort = (echo.address() as net.AddressInfo).port;
  gateway = await startGateway({
    upstreams: [{ id: "tiny", scheme: "http", host: tinyproxy.host, port: tinyproxy.port }],
    blocked: ["blocked.test"],
    env: { FIXTURE_ADMISSION: "hold" },
  });
  socksPort = Number((await gateway.waitForLine((l) => l.msg === "SOCKS5 listener bound")).port);
});

afterAll(async () => {
  if (gateway) {
    await waitUntil(
      async () =>
        (await metricValue(gateway.statusPort, "octoprox_gateway_connections_open")) === 0,
      { message: "every connection closed" },
    );
    // However each request ended, every hold was given back exactly once (a release's line may
    // come a moment after its connection was counted closed).
    const holds = gateway.lines().filter((l) => l.msg === "fixture admission hold");
    const released = () => gateway.lines().filter((l) => l.msg === "fixture admission release");
    await waitUntil(() => released().length >= holds.length, {
      timeoutMs: 5_000,
      message: "a release line for every hold",
    }).catch(() => {});
    const releases = released();
    expect(releases.map((l) => l.hold).sort()).toEqual(holds.map((l) => l.hold).sort());
    expect(releases.every((l) => l.released === 1)).toBe(true);
  }
  const code = await gateway?.stop();
  await new Promise<void>((resolve) => echo ? echo.close(() => resolve()) : resolve());
  await Promise.all([origin, tinyproxy].map((s) => s?.close()));
  expect(code).toBe(0);
});

/** The lines logged from index `from` on with message `msg`. */
function since(from: number, msg: string): LogLine[] {
  return gateway.lines().slice(from).filter((line) => line.msg === msg);
}

/** The status curl got for `url` through `proxyUrl`. */
async function statusVia(proxyUrl: string, url: string): Promise<string> {
  const result = await curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-x", proxyUrl, url]);
  return result.stdout;
}

/** The first hold logged from index `from` on, once it is (the log trails the answers). */
function holdSince(from: number): Promise<LogLine> {
  return gateway.waitForLine((l) =>
    l.msg === "fixture admission hold" && gateway.lines().indexOf(l) >= from
  );
}

/** Waits for the release of `hold`; answers its index in the log. */
async function released(hold: unknown): Promise<number> {
  const line = await gateway.waitForLine((l) =>
    l.msg === "fixture admission release" && l.hold === hold
  );
  return gateway.lines().indexOf(line);
}

/**
 * Makes a request on a connection of its own and answers the index of its hold in the log:
 * log lines come out in order, so whatever the gateway did before is logged before it.
 */
async function marker(): Promise<number> {
  const from = gateway.lines().length;
  const result = await curl(["-s", "-o", "/dev/null", "-x", gateway.proxyUrl, `${origin.url}/ip`]);
  expect(result.code).toBe(0);
  const line = await gateway.waitForLine((l) =>
    l.msg === "fixture admission hold" && gateway.lines().indexOf(l) >= from
  );
  return gateway.lines().indexOf(line);
}

/** Whether `hold` was released by the time a request made now was admitted. */
async function releasedYet(hold: unknown): Promise<boolean> {
  const markerAt = await marker();
  return gateway.lines().slice(0, markerAt).some((l) =>
    l.msg === "fixture admission release" && l.hold === hold
  );
}

describe("an admission step's grant", () => {
  it("is held by each forwarded request on a keep-alive connection, and given back as each ends", async () => {
    const connection = await RawConnection.open(gateway.proxyPort);
    try {
      for (let round = 0; round < 2; round++) {
        const from = gateway.lines().length;
        connection.write(
          `GET ${origin.url}/ip HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${PROXY_AUTH}\r\n\r\n`,
        );
        expect((await connection.readResponse()).status).toBe(200);
        const hold = await holdSince(from);
        expect([hold.protocol, hold.client, hold.address]).toEqual([
          "http",
          CREDENTIALS.username,
          "127.0.0.1",
        ]);
        // Given back as the answer ended, while the connection waits for its next request.
        expect(await releasedYet(hold.hold)).toBe(true);
      }
      expect(connection.ended).toBe(false);
    } finally {
      connection.destroy();
    }
  });

  it("runs after the credentials: a request without them holds nothing", async () => {
    const from = gateway.lines().length;
    expect(await statusVia(`http://127.0.0.1:${gateway.proxyPort}`, `${origin.url}/ip`))
      .toBe("407");
    // The next hold is the marker request's: the refused one held nothing.
    const markerAt = await marker();
    const holds = since(from, "fixture admission hold");
    expect(holds.map((l) => gateway.lines().indexOf(l))).toEqual([markerAt]);
  });

  it("is given back once when the destination guard after it refuses", async () => {
    const from = gateway.lines().length;
    expect(await statusVia(gateway.proxyUrl, "http://blocked.test/")).toBe("403");
    const hold = await holdSince(from);
    expect(hold.target).toBe("blocked.test");
    await released(hold.hold);
    // No upstream was asked for it.
    expect(since(from, "fixture acquire")).toHaveLength(0);
  });

  it("is held by a CONNECT tunnel until the tunnel closes", async () => {
    const from = gateway.lines().length;
    const { connection, response } = await openConnect(gateway.proxyPort, `127.0.0.1:${echoPort}`);
    try {
      expect(response.status).toBe(200);
      connection.write("ping");
      await connection.waitUntil(() => connection.buffered.toString() === "ping");
      const hold = await holdSince(from);
      expect(hold.protocol).toBe("connect");
      expect(await releasedYet(hold.hold)).toBe(false);
      connection.end();
      await released(hold.hold);
    } finally {
      connection.destroy();
    }
  });

  it("is held by a SOCKS5 tunnel until it closes", async () => {
    const from = gateway.lines().length;
    const opened = await socksOpen(
      socksPort,
      CREDENTIALS,
      socksRequest(1, SocksAtyp.ipv4, ipv4Bytes("127.0.0.1"), echoPort),
    );
    const { connection } = opened;
    try {
      expect(opened.reply).toBe(0);
      connection.write("ping");
      await connection.waitUntil(() => connection.buffered.toString() === "ping");
      const hold = await holdSince(from);
      expect([hold.protocol, hold.target, hold.client]).toEqual([
        "socks5",
        "127.0.0.1",
        CREDENTIALS.username,
      ]);
      expect(await releasedYet(hold.hold)).toBe(false);
      connection.end();
      await released(hold.hold);
    } finally {
      connection.destroy();
    }
  });

  it("keeps a field the step consumed from the origin", async () => {
    const result = await curl([
      "-s",
      "-x",
      gateway.proxyUrl,
      "-H",
      "X-Fixture-Option: country-de",
      "-H",
      "X-Kept: yes",
      `${origin.url}/headers`,
    ]);
    const { headers } = JSON.parse(result.stdout) as { headers: Record<string, string> };
    expect(headers["x-kept"]).toBe("yes");
    expect(headers["x-fixture-option"]).toBeUndefined();
  });
});
