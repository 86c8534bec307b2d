/**
 * Interception over every kind of upstream (the fixture gateway with FIXTURE_MITM=plain, real
 * upstreams): the gateway's own TLS to an HTTPS origin runs through an HTTP proxy's CONNECT
 * (tinyproxy), a SOCKS5 proxy (Dante) and an https proxy (TLS inside TLS, through a TLS front
 * before tinyproxy); keep-alive on both sides (the origin sees one connection per exit for
 * successive requests); a pooled TLS connection the origin closed meanwhile is replaced for a GET
 * rather than failing it; every allocation is released once.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import https from "node:https";
import type net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCa, loadCa } from "../../shared/tls/ca.ts";
import { testCertificate } from "../../testkit/certs.ts";
import { curl } from "../../testkit/clients/curl.ts";
import { startGateway, type TestGateway } from "../../testkit/gateway/fixture-gateway.ts";
import { testMitmCa } from "../../testkit/mitm-ca.ts";
import { startDante } from "../../testkit/upstreams/dante.ts";
import type { Service } from "../../testkit/upstreams/daemon.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { startTlsFront, type TlsFront } from "../../testkit/upstreams/tls-front.ts";
import { waitUntil } from "../../testkit/wait.ts";

let dir: string;
let tinyproxy: Tinyproxy;
let dante: Service;
let front: TlsFront;
let origin: https.Server;
let originPort: number;
/** Each request's connection, by the client port the origin saw. */
const connections: number[] = [];
const gateways: TestGateway[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "ox-intercept-"));
  const certificate = await testCertificate();
  await writeFile(join(dir, "ca.pem"), certificate.ca);
  origin = https.createServer(
    { cert: certificate.cert, key: certificate.key, keepAliveTimeout: 30_000 },
    (req, res) => {
      connections.push(req.socket.remotePort!);
      if (req.url === "/close") res.setHeader("connection", "close");
      res.end(`${req.method} ${req.url}`);
    },
  );
  await new Promise<void>((resolve) => origin.listen(0, "127.0.0.1", resolve));
  originPort = (origin.address() as net.AddressInfo).port;
  [tinyproxy, dante] = await Promise.all([startTinyproxy(), startDante()]);
  front = await startTlsFront(tinyproxy.port);
}, 60_000);

afterAll(async () => {
  for (const gateway of gateways) await gateway.stop();
  await Promise.all([tinyproxy, front].map((server) => server?.close()));
  await dante?.stop();
  origin?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function interceptingGateway(
  upstream: { scheme: "http" | "https" | "socks5"; host: string; port: number },
): Promise<TestGateway> {
  const gateway = await startGateway({
    upstreams: [{ id: upstream.scheme, ...upstream }],
    env: {
      FIXTURE_MITM: "plain",
      OCTOPROX_UPSTREAM_CA_FILE: join(dir, "ca.pem"),
      // The https proxy's certificate: Deno's own roots do not know the test CA.
      DENO_CERT: join(dir, "ca.pem"),
    },
  });
  gateways.push(gateway);
  return gateway;
}

describe("interception through each kind of upstream", () => {
  for (
    const [scheme, upstream] of [
      ["http", () => ({ scheme: "http" as const, host: "127.0.0.1", port: tinyproxy.port })],
      ["socks5", () => ({ scheme: "socks5" as const, host: "127.0.0.1", port: dante.port })],
      ["https", () => ({ scheme: "https" as const, host: "localhost", port: front.port })],
    ] as const
  ) {
    it(`${scheme}: requests on one client connection share one TLS connection to the origin`, async () => {
      const gateway = await interceptingGateway(upstream());
      connections.length = 0;
      const result = await curl([
        "--cacert",
        testMitmCa().certPath,
        "-x",
        gateway.proxyUrl,
        `https://127.0.0.1:${originPort}/a`,
        `https://127.0.0.1:${originPort}/b`,
        `https://127.0.0.1:${originPort}/c`,
      ]);
      expect(result.code, result.stderr).toBe(0);
      expect(
        result.stdout,
        JSON.stringify(gateway.lines().filter((line) => line.level === "error")),
      ).toBe("GET /aGET /bGET /c");
      // The gateway kept its TLS connection to the origin between requests.
      expect(connections).toHaveLength(3);
      expect(new Set(connections).size).toBe(1);
      // One allocation per request, each committed and released once.
      const releases = () => gateway.lines().filter((line) => line.msg === "fixture release");
      await waitUntil(() => releases().length >= 3, { timeoutMs: 5_000, message: "3 releases" });
      const released = releases();
      expect(released.map((line) => [line.committed, line.released, line.ok])).toEqual([
        [1, 1, true],
        [1, 1, true],
        [1, 1, true],
      ]);
    });
  }

  for (const scheme of ["http", "https"] as const) {
    it(`${scheme}: a target whose certificate no trusted CA signed is answered 502`, async () => {
      const stranger = await loadCa(await createCa());
      const leaf = await stranger.mint("127.0.0.1");
      const untrusted = https.createServer({ cert: leaf.chainPem, key: leaf.keyPem }, (_, res) => {
        res.end("must not be reached");
      });
      await new Promise<void>((resolve) => untrusted.listen(0, "127.0.0.1", resolve));
      try {
        const gateway = await interceptingGateway(
          scheme === "http"
            ? { scheme, host: "127.0.0.1", port: tinyproxy.port }
            : { scheme, host: "localhost", port: front.port },
        );
        const port = (untrusted.address() as net.AddressInfo).port;
        const result = await curl([
          "--cacert",
          testMitmCa().certPath,
          "-x",
          gateway.proxyUrl,
          "-w",
          "\n%{http_code}",
          `https://127.0.0.1:${port}/`,
        ]);
        expect(result.stdout).toMatch(/^The target.s certificate was rejected: \S[^\n]*\n+502$/);
        expect(result.stdout).not.toContain("must not be reached");
      } finally {
        untrusted.close();
      }
    });
  }

  it("a pooled connection the origin closed is replaced for the next GET", async () => {
    const gateway = await interceptingGateway({
      scheme: "http",
      host: "127.0.0.1",
      port: tinyproxy.port,
    });
    connections.length = 0;
    const result = await curl([
      "--cacert",
      testMitmCa().certPath,
      "-x",
      gateway.proxyUrl,
      `https://127.0.0.1:${originPort}/close`,
      `https://127.0.0.1:${originPort}/after`,
    ]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe("GET /closeGET /after");
    expect(new Set(connections).size).toBe(2);
  });
});
