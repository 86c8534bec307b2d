/** openTunnel: a connected socket through each kind of proxy. */
import { execFile } from "node:child_process";
import net from "node:net";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openTunnel } from "../../control/upstream/index.ts";
import {
  HandshakeFailure,
  UpstreamConnectError,
  UpstreamHandshakeError,
  UpstreamRefusedError,
} from "../../shared/proxy-protocol/errors.ts";
import type { UpstreamProxy } from "../../shared/proxy-protocol/types.ts";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { refusingAddress } from "../../testkit/ports.ts";
import { waitUntil } from "../../testkit/wait.ts";

let origin: Origin;
let tinyproxy: Tinyproxy;
let fault: FaultProxy;
let faultTls: FaultProxy;
let hanging: FaultProxy;

beforeAll(async () => {
  [origin, tinyproxy, fault, faultTls, hanging] = await Promise.all([
    startOrigin(),
    startTinyproxy({ bindAddress: "127.0.0.6" }),
    startFaultProxy({ bindAddress: "127.0.0.7" }),
    startFaultProxy({ bindAddress: "127.0.0.7", tls: true }),
    startFaultProxy({ mode: FaultMode.hang }),
  ]);
});

afterAll(async () => {
  await Promise.all([origin, tinyproxy, fault, faultTls, hanging].map((server) => server?.close()));
});

/** Sends a raw GET over the tunnel and reads the whole answer (the origin closes it). */
function get(socket: net.Socket, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.once("error", reject);
    socket.once("close", () => resolve(Buffer.concat(chunks).toString()));
    socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
    socket.resume();
  });
}

describe("openTunnel", () => {
  it("tunnels through tinyproxy (CONNECT) and every scheme of the fault proxy", async () => {
    const target = { host: "localhost", port: origin.port };
    const routes: Array<[UpstreamProxy, string, string | undefined]> = [
      [tinyproxy.proxy, "127.0.0.6", undefined],
      [fault.proxy("http"), "127.0.0.7", undefined],
      [fault.proxy("socks4"), "127.0.0.7", undefined],
      [fault.proxy("socks5"), "127.0.0.7", undefined],
      [faultTls.proxy("https"), "127.0.0.7", faultTls.ca],
    ];
    for (const [proxy, exit, ca] of routes) {
      const socket = await openTunnel({ proxy, target, timeoutMs: 5_000, tls: { ca } });
      expect(await get(socket, "/ip"), proxy.scheme).toContain(`{"ip":"${exit}"}`);
    }
  });

  it("turns keepalive on (60 s idle)", async () => {
    const socket = await openTunnel({
      proxy: fault.proxy("socks5"),
      target: { host: "127.0.0.1", port: origin.port },
      timeoutMs: 5_000,
    });
    try {
      const { stdout } = await promisify(execFile)("ss", [
        "-tnoH",
        "state",
        "established",
        `sport = :${socket.localPort}`,
      ]);
      expect(stdout).toMatch(/timer:\(keepalive,/);
    } finally {
      socket.destroy();
    }
  });

  it("hands back bytes that came with the proxy's reply", async () => {
    const scripted = net.createServer((client) => {
      client.once("data", () => {
        client.write("HTTP/1.1 200 Connection established\r\n\r\nHELLO ");
        client.once("data", () => client.end("WORLD"));
      });
    });
    await new Promise<void>((resolve) => scripted.listen(0, "127.0.0.1", resolve));
    try {
      const port = (scripted.address() as net.AddressInfo).port;
      const socket = await openTunnel({
        proxy: { scheme: "http", host: "127.0.0.1", port },
        target: { host: "example.test", port: 80 },
        timeoutMs: 5_000,
      });
      const received = await new Promise<string>((resolve, reject) => {
        let text = "";
        socket.on("data", (chunk: Buffer) => {
          if (text === "") socket.write("ping");
          text += chunk.toString();
        });
        socket.once("error", reject);
        socket.once("end", () => resolve(text));
        socket.resume();
      });
      expect(received).toBe("HELLO WORLD");
      socket.destroy();
    } finally {
      scripted.close();
    }
  });

  it("fails a hung handshake at the deadline and leaves nothing open", async () => {
    const started = performance.now();
    const error = await openTunnel({
      proxy: hanging.proxy("socks5"),
      target: { host: "localhost", port: origin.port },
      timeoutMs: 200,
    }).catch((caught: unknown) => caught);
    expect(performance.now() - started).toBeGreaterThanOrEqual(195);
    expect(error).toBeInstanceOf(UpstreamHandshakeError);
    expect((error as UpstreamHandshakeError).reason).toBe(HandshakeFailure.timeout);
    await waitUntil(() => hanging.connectionsOpen === 0, {
      message: "the hung connection to close",
    });
  });

  it("refuses a target the scheme cannot carry before connecting", async () => {
    const before = fault.connectionsSeen;
    const error = await openTunnel({
      proxy: fault.proxy("socks4"),
      target: { host: "::1", port: origin.port },
      timeoutMs: 1_000,
    }).catch((caught: unknown) => caught);
    expect(error).toMatchObject({ reason: HandshakeFailure.invalidRequest });
    expect(fault.connectionsSeen).toBe(before);
  });

  it("refused, untrusted, aborted", async () => {
    const refused = refusingAddress(origin.port);
    await expect(
      openTunnel({
        proxy: { scheme: "http", ...refused },
        target: { host: "localhost", port: 80 },
        timeoutMs: 1_000,
      }),
    ).rejects.toBeInstanceOf(UpstreamRefusedError);
    // An https proxy whose certificate we do not trust fails to connect.
    await expect(
      openTunnel({
        proxy: faultTls.proxy("https"),
        target: { host: "localhost", port: origin.port },
        timeoutMs: 5_000,
      }),
    ).rejects.toBeInstanceOf(UpstreamConnectError);
    const controller = new AbortController();
    const pending = openTunnel({
      proxy: hanging.proxy("http"),
      target: { host: "localhost", port: 80 },
      timeoutMs: 10_000,
      signal: controller.signal,
    });
    controller.abort(new Error("stop"));
    await expect(pending).rejects.toThrow("stop");
    await waitUntil(() => hanging.connectionsOpen === 0, {
      message: "the aborted connection to close",
    });
  });
});
