/**
 * The suite every client listener must pass, run once per listener the way Hono runs one suite
 * over all its routers: HTTP forward (absolute-form requests), CONNECT (on the same port) and
 * SOCKS5 (a port of its own). Each has a driver that speaks its protocol with a raw client and
 * reads the listener's answer into one shape; the assertions are the same for all: a proxied
 * request reaches the origin through the upstream, bad credentials are refused, an upstream
 * that refuses yields the listener's "upstream failed" answer, a malformed request gets its
 * error answer and a clean close, and the bytes relayed are counted.
 *
 * What is particular to one listener stays beside it: forward.test.ts (keep-alive, framing,
 * retries), connect.test.ts (half-close, upstream schemes, SIGTERM), socks5.test.ts (the real
 * gateway on a feed: options, literals, the guard, commands) and bounds.test.ts (every
 * malformed head, 431, the connection bound).
 */
import { createHash, randomBytes } from "node:crypto";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { waitUntil } from "../../testkit/wait.ts";
import {
  CREDENTIALS,
  metricValue,
  startGateway,
  type TestGateway,
} from "../../testkit/gateway/fixture-gateway.ts";
import {
  basicAuth,
  openConnect,
  proxyStatusError,
  RawConnection,
} from "../../testkit/clients/raw-http.ts";
import { ipv4Bytes, SocksAtyp, socksOpen, socksRequest } from "../../testkit/clients/socks.ts";

/** What a listener answered, in one shape for every protocol. */
type Outcome =
  | { kind: "relayed"; body: Buffer }
  /** Refused before any upstream: bad credentials (`code`: 407, or the RFC 1929 status). */
  | { kind: "auth_refused"; code: number }
  /** The upstream could not be used (`code`: 502, or the SOCKS5 reply; `error`: Proxy-Status). */
  | { kind: "upstream_failed"; code: number; error?: string }
  /** The request itself was malformed (`code`: 400, or the SOCKS5 reply). */
  | { kind: "bad_request"; code: number; closed: boolean };

interface Login {
  username: string;
  password: string;
}

interface ListenerDriver {
  name: string;
  /** The listener's port on `gateway`. */
  port(gateway: TestGateway): Promise<number>;
  /** GET `/ip`-like `path` of the origin at 127.0.0.1:`originPort` through the listener. */
  get(port: number, originPort: number, path: string, login: Login): Promise<Outcome>;
  /** Sends a request the protocol does not allow; answers what came back. */
  malformed(port: number): Promise<Outcome>;
  /**
   * Sends each payload through to an echo and reads it back, in turn: on one tunnel, or (HTTP
   * forward) as one request each. Answers what came back.
   */
  roundTrip(port: number, echoPort: number, payloads: readonly Buffer[]): Promise<Buffer[]>;
  /**
   * What each listener answers for bad credentials, a refusing upstream (any of
   * `upstreamFailed`: the fault proxy resets right after accept, which Deno reports as refused
   * or as terminated depending on when it sees it) and a malformed request.
   */
  expected: { authRefused: number; upstreamFailed: readonly number[]; badRequest: number };
}

/** The HTTP head of `connection`'s answer, the connection destroyed after. */
async function readAndClose(connection: RawConnection, method?: string) {
  try {
    return await connection.readResponse({ method });
  } finally {
    connection.destroy();
  }
}

function httpOutcome(status: number, body: Buffer, error: string | undefined): Outcome {
  if (status === 200) return { kind: "relayed", body };
  if (status === 407) return { kind: "auth_refused", code: status };
  if (status === 400) return { kind: "bad_request", code: status, closed: true };
  return { kind: "upstream_failed", code: status, error };
}

const forward: ListenerDriver = {
  name: "HTTP forward",
  port: (gateway) => Promise.resolve(gateway.proxyPort),
  async get(port, originPort, path, login) {
    const connection = await RawConnection.open(port);
    connection.write(
      `GET http://127.0.0.1:${originPort}${path} HTTP/1.1\r\nHost: 127.0.0.1:${originPort}\r\n` +
        `Proxy-Authorization: ${basicAuth(`${login.username}:${login.password}`)}\r\n` +
        "Connection: close\r\n\r\n",
    );
    const response = await readAndClose(connection);
    return httpOutcome(response.status, response.body, proxyStatusError(response));
  },
  async malformed(port) {
    const connection = await RawConnection.open(port);
    try {
      connection.write("GARBAGE\r\n\r\n");
      const response = await connection.readResponse();
      await connection.waitUntil(() => connection.ended, 5_000).catch(() => {});
      return { kind: "bad_request", code: response.status, closed: connection.ended };
    } finally {
      connection.destroy();
    }
  },
  async roundTrip(port, echoPort, payloads) {
    const back: Buffer[] = [];
    for (const payload of payloads) {
      const connection = await RawConnection.open(port);
      connection.write(
        `POST http://127.0.0.1:${echoPort}/ HTTP/1.1\r\nHost: 127.0.0.1:${echoPort}\r\n` +
          `Proxy-Authorization: ${
            basicAuth(`${CREDENTIALS.username}:${CREDENTIALS.password}`)
          }\r\n` +
          `Content-Length: ${payload.length}\r\nConnection: close\r\n\r\n`,
      );
      connection.write(payload);
      const response = await readAndClose(connection);
      expect(response.status).toBe(200);
      back.push(response.body);
    }
    return back;
  },
  expected: { authRefused: 407, upstreamFailed: [502], badRequest: 400 },
};

const connect: ListenerDriver = {
  name: "CONNECT",
  port: (gateway) => Promise.resolve(gateway.proxyPort),
  async get(port, originPort, path, login) {
    const auth = basicAuth(`${login.username}:${login.password}`);
    const { connection, response } = await openConnect(port, `127.0.0.1:${originPort}`, auth);
    if (response.status !== 200) {
      connection.destroy();
      return httpOutcome(response.status, response.body, proxyStatusError(response));
    }
    connection.write(`GET ${path} HTTP/1.1\r\nHost: origin\r\nConnection: close\r\n\r\n`);
    const answer = await readAndClose(connection);
    return { kind: "relayed", body: answer.body };
  },
  async malformed(port) {
    const connection = await RawConnection.open(port);
    try {
      connection.write("CONNECT /path HTTP/1.1\r\n\r\n");
      const response = await connection.readResponse();
      await connection.waitUntil(() => connection.ended, 5_000).catch(() => {});
      return { kind: "bad_request", code: response.status, closed: connection.ended };
    } finally {
      connection.destroy();
    }
  },
  async roundTrip(port, echoPort, payloads) {
    const { connection, response } = await openConnect(port, `127.0.0.1:${echoPort}`);
    try {
      expect(response.status).toBe(200);
      const back: Buffer[] = [];
      for (const payload of payloads) {
        connection.write(payload);
        back.push(await connection.take(payload.length));
      }
      return back;
    } finally {
      connection.destroy();
    }
  },
  expected: { authRefused: 407, upstreamFailed: [502], badRequest: 400 },
};

const CONNECT_COMMAND = 1;

const socks5: ListenerDriver = {
  name: "SOCKS5",
  async port(gateway) {
    return Number((await gateway.waitForLine((l) => l.msg === "SOCKS5 listener bound")).port);
  },
  async get(port, originPort, path, login) {
    const opened = await socksOpen(
      port,
      login,
      socksRequest(CONNECT_COMMAND, SocksAtyp.ipv4, ipv4Bytes("127.0.0.1"), originPort),
    );
    if (opened.authStatus !== 0) {
      opened.connection.destroy();
      return { kind: "auth_refused", code: opened.authStatus ?? opened.method };
    }
    if (opened.reply !== 0) {
      opened.connection.destroy();
      return { kind: "upstream_failed", code: opened.reply ?? -1 };
    }
    opened.connection.write(`GET ${path} HTTP/1.1\r\nHost: origin\r\nConnection: close\r\n\r\n`);
    const answer = await readAndClose(opened.connection);
    return { kind: "relayed", body: answer.body };
  },
  async malformed(port) {
    // An address type SOCKS5 does not define.
    const opened = await socksOpen(
      port,
      CREDENTIALS,
      Buffer.from([5, CONNECT_COMMAND, 0, 9, 1, 2, 3, 4, 0, 80]),
    );
    try {
      await opened.connection.waitUntil(() => opened.connection.ended, 5_000).catch(() => {});
      return { kind: "bad_request", code: opened.reply ?? -1, closed: opened.connection.ended };
    } finally {
      opened.connection.destroy();
    }
  },
  async roundTrip(port, echoPort, payloads) {
    const opened = await socksOpen(
      port,
      CREDENTIALS,
      socksRequest(CONNECT_COMMAND, SocksAtyp.ipv4, ipv4Bytes("127.0.0.1"), echoPort),
    );
    try {
      expect(opened.reply).toBe(0);
      const back: Buffer[] = [];
      for (const payload of payloads) {
        opened.connection.write(payload);
        back.push(await opened.connection.take(payload.length));
      }
      return back;
    } finally {
      opened.connection.destroy();
    }
  },
  // RFC 1929's failure status; reply 5 (connection refused), or 1 (general failure) for a
  // connection the upstream ended; reply 8 (address type).
  expected: { authRefused: 1, upstreamFailed: [5, 1], badRequest: 8 },
};

const DRIVERS: readonly ListenerDriver[] = [forward, connect, socks5];

let origin: Origin;
let tinyproxy: Tinyproxy;
let refusing: FaultProxy;
let echo: net.Server;
let echoPort: number;
let gateway: TestGateway;
let refusingGateway: TestGateway;

/**
 * A TCP echo for tunnels, that answers an HTTP request with its body (Content-Length), so a
 * forwarded POST comes back as it went.
 */
function startEcho(): Promise<net.Server> {
  const server = net.createServer((socket) => {
    socket.on("error", () => socket.destroy());
    let buffer = Buffer.alloc(0);
    let http: boolean | undefined;
    socket.on("data", (chunk: Buffer) => {
      http ??= chunk.subarray(0, 5).toString("latin1") === "POST ";
      if (!http) {
        socket.write(chunk);
        return;
      }
      buffer = Buffer.concat([buffer, chunk]);
      const end = buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = Number(
        /content-length:\s*(\d+)/i.exec(buffer.subarray(0, end).toString())?.[1],
      );
      const body = buffer.subarray(end + 4);
      if (body.length < length) return;
      socket.end(
        Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${length}\r\n\r\n`), body]),
      );
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

beforeAll(async () => {
  [origin, tinyproxy, refusing, echo] = await Promise.all([
    startOrigin(),
    startTinyproxy({ bindAddress: "127.0.0.11" }),
    startFaultProxy({ mode: FaultMode.refuse }),
    startEcho(),
  ]);
  echoPort = (echo.address() as net.AddressInfo).port;
  [gateway, refusingGateway] = await Promise.all([
    startGateway({
      upstreams: [{ id: "tiny", scheme: "http", host: tinyproxy.host, port: tinyproxy.port }],
    }),
    startGateway({
      upstreams: [{ id: "refusing", scheme: "http", host: refusing.host, port: refusing.port }],
    }),
  ]);
});

afterAll(async () => {
  // Nothing left open once the suite's connections are gone.
  if (gateway) {
    await waitUntil(
      async () =>
        (await metricValue(gateway.statusPort, "octoprox_gateway_connections_open")) === 0 &&
        (await metricValue(gateway.statusPort, "octoprox_gateway_tunnels_open")) === 0,
      { message: "every connection and tunnel closed" },
    );
  }
  const codes = await Promise.all([gateway?.stop(), refusingGateway?.stop()]);
  await Promise.all([origin, tinyproxy, refusing].map((server) => server?.close()));
  await new Promise((resolve) => echo?.close(resolve));
  expect(codes).toEqual([0, 0]);
  expect(gateway.lines().filter((line) => line.level === "error" || line.level === "fatal"))
    .toEqual([]);
});

const relayedBytes = (direction: string) =>
  metricValue(gateway.statusPort, `octoprox_gateway_relay_bytes_total{direction="${direction}"}`);

describe.each(DRIVERS)("the $name listener", (driver) => {
  it("takes a request through the upstream to the origin", async () => {
    const outcome = await driver.get(await driver.port(gateway), origin.port, "/ip", CREDENTIALS);
    expect(outcome.kind).toBe("relayed");
    if (outcome.kind !== "relayed") return;
    expect(JSON.parse(outcome.body.toString())).toEqual({ ip: "127.0.0.11" });
  });

  it("refuses a wrong password and an unknown user before any upstream", async () => {
    const port = await driver.port(gateway);
    const acquiresBefore = gateway.lines().filter((l) => l.msg === "fixture acquire").length;
    for (
      const login of [{ ...CREDENTIALS, password: "wrong" }, { username: "nobody", password: "x" }]
    ) {
      expect(await driver.get(port, origin.port, "/ip", login)).toEqual({
        kind: "auth_refused",
        code: driver.expected.authRefused,
      });
    }
    expect(gateway.lines().filter((l) => l.msg === "fixture acquire").length).toBe(acquiresBefore);
  });

  it("answers an upstream that refuses with the listener's upstream failure", async () => {
    const outcome = await driver.get(
      await driver.port(refusingGateway),
      origin.port,
      "/ip",
      CREDENTIALS,
    );
    expect(outcome.kind).toBe("upstream_failed");
    if (outcome.kind === "upstream_failed") {
      expect(driver.expected.upstreamFailed).toContain(outcome.code);
    }
    // HTTP answers say why in Proxy-Status. A reset right after accept: refused or terminated,
    // depending on when Deno sees it.
    if (outcome.kind === "upstream_failed" && outcome.error !== undefined) {
      expect(outcome.error).toMatch(/^connection_(refused|terminated)$/);
    }
    await refusingGateway.waitForLine((l) => l.msg === "fixture release" && l.ok === false);
  });

  it("answers a malformed request with its error and closes the connection", async () => {
    expect(await driver.malformed(await driver.port(gateway))).toEqual({
      kind: "bad_request",
      code: driver.expected.badRequest,
      closed: true,
    });
    // And keeps serving.
    const after = await driver.get(await driver.port(gateway), origin.port, "/ip", CREDENTIALS);
    expect(after.kind).toBe("relayed");
  });

  it("relays bytes both ways unchanged and counts them", async () => {
    const port = await driver.port(gateway);
    const [upBefore, downBefore] = [
      await relayedBytes("to_upstream"),
      await relayedBytes("to_client"),
    ];
    // Bulk; then quiet (each direction back on a small buffer), a small buffer filled, and bulk
    // again: on one tunnel, one request each for HTTP forward.
    const payloads = [1024 * 1024, 10, 3000, 200, 1024 * 1024].map((size) => randomBytes(size));
    const back = await driver.roundTrip(port, echoPort, payloads);
    expect(createHash("sha256").update(back[0]).digest("hex")).toBe(
      createHash("sha256").update(payloads[0]).digest("hex"),
    );
    for (const [index, payload] of payloads.entries()) {
      expect(Buffer.compare(back[index], payload), `payload ${index}`).toBe(0);
    }
    await waitUntil(
      async () =>
        (await relayedBytes("to_upstream")) - upBefore >= payloads[0].length &&
        (await relayedBytes("to_client")) - downBefore >= payloads[0].length,
      { message: `${driver.name}'s bytes counted both ways` },
    );
  });
});
