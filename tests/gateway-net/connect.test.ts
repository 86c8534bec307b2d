/**
 * CONNECT tunnels through the gateway's socket layer (a real Deno process, the fixture
 * router): every upstream scheme, half-close, retries before the tunnel is up, and a stop that
 * cancels tunnels in flight. Bytes both ways and their counts, credentials, a refusing upstream
 * and a malformed CONNECT are the suite every listener passes (listeners.test.ts).
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { curl } from "../../testkit/clients/curl.ts";
import {
  metricValue,
  startGateway,
  type TestGateway,
} from "../../testkit/gateway/fixture-gateway.ts";
import { openConnect, proxyStatusError } from "../../testkit/clients/raw-http.ts";
import { startTlsFront, type TlsFront } from "../../testkit/upstreams/tls-front.ts";

let tlsOrigin: Origin;
let tinyproxy: Tinyproxy;
let fault: FaultProxy;
let tlsFront: TlsFront;
let refusing: FaultProxy;
let echo: net.Server;
let echoPort: number;
let gateway: TestGateway;
let caDir: string;

interface HalfOpenProxy {
  port: number;
  lastReceived: string;
  lastEnded: boolean;
  close(): Promise<void>;
}

/**
 * A CONNECT endpoint that is its own target and keeps tunnels half open: at the client's end
 * of stream it answers `bye:<bytes read>` and closes; on `end-now` it sends `ending` and ends
 * its side while still reading.
 */
async function startHalfOpenProxy(): Promise<HalfOpenProxy> {
  const state = { lastReceived: "", lastEnded: false };
  const sockets = new Set<net.Socket>();
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    let head = "";
    let tunnel = false;
    let received = "";
    state.lastEnded = false;
    socket.on("data", (chunk: Buffer) => {
      if (!tunnel) {
        head += chunk.toString("latin1");
        const end = head.indexOf("\r\n\r\n");
        if (end < 0) return;
        tunnel = true;
        socket.write("HTTP/1.1 200 Connection established\r\n\r\n");
        received = head.slice(end + 4);
      } else {
        received += chunk.toString("latin1");
      }
      state.lastReceived = received;
      if (received === "end-now") socket.end("ending");
      if (received === "reset-now") socket.resetAndDestroy();
    });
    socket.on("end", () => {
      state.lastEnded = true;
      if (!socket.writableEnded) socket.end(`bye:${received.length}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    get lastReceived() {
      return state.lastReceived;
    },
    get lastEnded() {
      return state.lastEnded;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * A TCP target that echoes what it reads and, at the client's end of stream, answers
 * `bye:<bytes it read>` and closes: it only answers if the half-close came through.
 */
function startEcho(): Promise<net.Server> {
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    let received = 0;
    socket.on("error", () => socket.destroy());
    socket.on("data", (chunk: Buffer) => {
      received += chunk.length;
      socket.write(chunk);
    });
    socket.on("end", () => socket.end(`bye:${received}`));
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

beforeAll(async () => {
  [tlsOrigin, tinyproxy, fault, refusing, echo] = await Promise.all([
    startOrigin({ tls: true }),
    startTinyproxy({ bindAddress: "127.0.0.5" }),
    startFaultProxy({ bindAddress: "127.0.0.6" }),
    startFaultProxy({ mode: FaultMode.refuse }),
    startEcho(),
  ]);
  echoPort = (echo.address() as net.AddressInfo).port;
  // An https proxy: TLS in front of the fault proxy.
  tlsFront = await startTlsFront(fault.port);
  caDir = await mkdtemp(join(tmpdir(), "ox-gw-ca-"));
  await writeFile(join(caDir, "ca.pem"), tlsFront.caPem);
  gateway = await startGateway({
    upstreams: [
      { id: "tiny", scheme: "http", host: tinyproxy.host, port: tinyproxy.port },
    ],
  });
});

afterAll(async () => {
  // Nothing left open once the tests' connections are gone.
  if (gateway) {
    await waitUntil(
      async () =>
        (await metricValue(gateway.statusPort, "octoprox_gateway_connections_open")) === 0 &&
        (await metricValue(gateway.statusPort, "octoprox_gateway_tunnels_open")) === 0,
      { message: "every connection and tunnel closed" },
    );
  }
  const code = await gateway?.stop();
  await Promise.all([tlsOrigin, tinyproxy, fault, tlsFront, refusing].map((s) => s?.close()));
  await new Promise((resolve) => echo?.close(resolve));
  await rm(caDir, { recursive: true, force: true });
  expect(code).toBe(0);
});

describe("CONNECT", () => {
  it("tunnels curl's HTTPS to the origin through tinyproxy", async () => {
    const caFile = join(caDir, "origin.pem");
    await writeFile(caFile, tlsOrigin.ca!);
    const result = await curl(["--cacert", caFile, "-x", gateway.proxyUrl, `${tlsOrigin.url}/ip`]);
    expect(result.stderr).toBe("");
    expect(JSON.parse(result.stdout)).toEqual({ ip: "127.0.0.5" });
  });

  it("passes a half-close on, both ways", async () => {
    // Neither tinyproxy nor the fault proxy keeps a tunnel half open, so the upstream here is
    // a CONNECT endpoint of the test's own that does.
    const halfOpen = await startHalfOpenProxy();
    const viaHalfOpen = await startGateway({
      upstreams: [{ id: "half", scheme: "http", host: "127.0.0.1", port: halfOpen.port }],
    });
    try {
      // The client's end of stream reaches the upstream, whose answer still comes back.
      let { connection, response } = await openConnect(viaHalfOpen.proxyPort, "target:1");
      expect(response.status).toBe(200);
      connection.write("hello");
      connection.end();
      expect((await connection.readToEnd()).toString()).toBe("bye:5");

      // The upstream's end of stream reaches the client, whose bytes still go up.
      ({ connection, response } = await openConnect(viaHalfOpen.proxyPort, "target:1"));
      connection.write("end-now");
      expect((await connection.readToEnd()).toString()).toBe("ending");
      connection.write("still here");
      connection.end();
      await waitUntil(() => halfOpen.lastReceived.endsWith("still here") && halfOpen.lastEnded, {
        message: "the client's bytes after the upstream's half-close",
      });

      // A leg that fails (a reset) ends the relay: the client's side closes too, and the
      // allocation is released as an upstream failure.
      ({ connection, response } = await openConnect(viaHalfOpen.proxyPort, "target:1"));
      connection.write("reset-now");
      await connection.waitUntil(() => connection.ended);
      const failed = await viaHalfOpen.waitForLine((line) =>
        line.msg === "fixture release" && line.ok === false
      );
      expect(failed).toMatchObject({ phase: "idle", committed: 1, released: 1 });
    } finally {
      expect(await viaHalfOpen.stop()).toBe(0);
      await halfOpen.close();
    }
  });

  it("tunnels through SOCKS5, SOCKS4 and an https proxy", async () => {
    const viaSchemes = await startGateway({
      upstreams: [
        { id: "socks5", scheme: "socks5", host: fault.host, port: fault.port },
        { id: "socks4", scheme: "socks4", host: fault.host, port: fault.port },
        { id: "https", scheme: "https", host: "localhost", port: tlsFront.port },
      ],
      env: { DENO_CERT: join(caDir, "ca.pem") },
    });
    try {
      for (let round = 0; round < 3; round++) {
        const { connection, response } = await openConnect(
          viaSchemes.proxyPort,
          `localhost:${echoPort}`,
        );
        expect(response.status, response.body.toString()).toBe(200);
        connection.write("ping");
        expect((await connection.take(4)).toString()).toBe("ping");
        connection.destroy();
      }
      const commits = () => viaSchemes.lines().filter((l) => l.msg === "fixture commit");
      await waitUntil(() => commits().length === 3, { message: "three commits" });
      expect(commits().map((l) => String(l.proxyId)).sort()).toEqual(["https", "socks4", "socks5"]);
      // The target's name went to the upstream unresolved.
      expect(fault.requests.slice(-3).map((r) => r.host)).toEqual([
        "localhost",
        "localhost",
        "localhost",
      ]);
    } finally {
      expect(await viaSchemes.stop()).toBe(0);
    }
  });

  it("tries another proxy while the tunnel is not up, and answers 502 when none is left", async () => {
    const retrying = await startGateway({
      upstreams: [
        { id: "refusing", scheme: "http", host: refusing.host, port: refusing.port },
        { id: "tiny", scheme: "http", host: tinyproxy.host, port: tinyproxy.port },
      ],
      env: { FIXTURE_ORDER: "list" },
    });
    const alone = await startGateway({
      upstreams: [{ id: "refusing", scheme: "http", host: refusing.host, port: refusing.port }],
    });
    try {
      const { connection, response } = await openConnect(
        retrying.proxyPort,
        `127.0.0.1:${echoPort}`,
      );
      expect(response.status).toBe(200);
      connection.destroy();
      await retrying.waitForLine((l) => l.msg === "fixture release" && l.proxyId === "tiny");
      const releases = retrying.lines().filter((l) => l.msg === "fixture release");
      expect(releases.map((l) => [l.proxyId, l.ok, l.released])).toEqual([
        ["refusing", false, 1],
        ["tiny", true, 1],
      ]);

      const failed = await openConnect(alone.proxyPort, `127.0.0.1:${echoPort}`);
      failed.connection.destroy();
      expect(failed.response.status).toBe(502);
      expect(failed.response.body.toString()).toBe("Upstream proxy refused connection\n");
      // A reset right after accept: refused or terminated, depending on when Deno sees it.
      expect(proxyStatusError(failed.response)).toMatch(/^connection_(refused|terminated)$/);
    } finally {
      expect(await retrying.stop()).toBe(0);
      expect(await alone.stop()).toBe(0);
    }
  });

  it("stops on SIGTERM with a tunnel open: cancels it, releases it, exits 0", async () => {
    const stopping = await startGateway({
      upstreams: [{ id: "tiny", scheme: "http", host: tinyproxy.host, port: tinyproxy.port }],
    });
    const { connection, response } = await openConnect(stopping.proxyPort, `127.0.0.1:${echoPort}`);
    expect(response.status).toBe(200);
    connection.write("x");
    await connection.take(1);
    const started = Date.now();
    expect(await stopping.stop()).toBe(0);
    expect(Date.now() - started).toBeLessThan(5_000);
    await connection.waitUntil(() => connection.ended);
    const release = stopping.lines().find((l) => l.msg === "fixture release");
    expect(release).toMatchObject({ proxyId: "tiny", released: 1, committed: 1 });
  });
});
