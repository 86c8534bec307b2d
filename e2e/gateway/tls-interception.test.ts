/**
 * TLS interception through a real system (one cluster for the file: a control process, a gateway
 * with its own CA, two tinyproxy exits, HTTPS origins the gateway trusts through
 * OCTOPROX_UPSTREAM_CA_FILE), driven by real clients trusting the install's CA:
 *
 * - curl through HTTP CONNECT and SOCKS5, Python requests with `verify=`, Node's fetch (undici)
 *   and Chromium with the SPKI flag loading a page whose parts come from two hosts;
 * - each request inside a tunnel is a request: its own status in the Inspector and in usage, a
 *   rotating project's successive requests on one client connection leave by different exits,
 *   a sticky session's by one, header options read and stripped inside the tunnel;
 * - what stays raw: a host on the bypass list and a client's `-mitm-off` reach the origin's own
 *   certificate; bytes that are not TLS are relayed raw to a port that is not a TLS one, closed
 *   and counted on 443;
 * - failures: a client that does not trust the CA is counted by its alert, and a target whose
 *   certificate fails verification answers 502 naming why (10,000 distinct host names against
 *   the certificate cache's bound: e2e/load/tls-host-flood.test.ts, `npm run test:load`);
 * - the browser-grade modes: an HTTP/2 origin that fingerprints each ClientHello it gets sees
 *   Firefox's under `override_ua` firefox (and Firefox's User-Agent), the client's own browser's
 *   under `match_ua`, Chrome's for a client that is no browser; bodies stream both ways.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import http2 from "node:http2";
import https from "node:https";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { chromium } from "playwright-core";
import { fetch as undiciFetch, ProxyAgent } from "undici";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { scanClientHello } from "../../gateway/net/tls/client-hello.ts";
import { fingerprints } from "../../gateway/net/tls/fingerprints.ts";
import { createCa, loadCa } from "../../shared/tls/ca.ts";
import { testCertificate } from "../../testkit/certs.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { curl } from "../../testkit/clients/curl.ts";
import { createRoutedProject, type RoutedProject } from "../../testkit/routing.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";

const run = promisify(execFile);
const EXITS = ["127.0.0.2", "127.0.0.3"];
const CACHE_SIZE = 64;

let dir: string;
let caCert: string;
let originCa: string;
let cluster: Cluster;
let gateway: Gateway;
let exits: Tinyproxy[];
let origin: Origin;
let plainOrigin: Origin;
/** A page at https://localhost whose script and image come from https://127.0.0.1. */
let pageServer: https.Server;
let pagePort: number;
const pageRequests: string[] = [];
/** An HTTPS origin whose certificate no CA the gateway trusts signed. */
let untrusted: https.Server;
let untrustedPort: number;
let rotating: RoutedProject;
let bypassing: RoutedProject;
let sticky: RoutedProject;
let limited: RoutedProject;
let firefox: RoutedProject;
let matching: RoutedProject;
/** An HTTP/2 origin (HTTP/1.1 too) that records each ClientHello's JA4 and ALPN, in order. */
let h2Origin: net.Server;
let h2: http2.Http2SecureServer;
let h2Port: number;
const h2Hellos: { ja4: string; alpn: readonly string[] }[] = [];

/** The gateway's SOCKS5 port, as its log says it bound it. */
function socksPort(): number {
  return gateway.logs().find((line) => line.msg === "SOCKS5 listener bound")!.port as number;
}

function proxyUrl(project: RoutedProject, suffix = ""): string {
  return gateway.proxyUrl(`${project.credentials.username}${suffix}`, project.credentials.password);
}

async function listen(server: net.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as net.AddressInfo).port;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "ox-tls-intercept-"));
  const pem = await createCa();
  caCert = join(dir, "mitm-ca.pem");
  const caKey = join(dir, "mitm-ca-key.pem");
  await writeFile(caCert, pem.certPem);
  await writeFile(caKey, pem.keyPem, { mode: 0o600 });
  const certificate = await testCertificate();
  originCa = join(dir, "origin-ca.pem");
  await writeFile(originCa, certificate.ca);

  pageServer = https.createServer({ cert: certificate.cert, key: certificate.key }, (req, res) => {
    pageRequests.push(`${req.headers.host} ${req.url}`);
    if (req.url === "/page") {
      res.setHeader("content-type", "text/html");
      res.end(
        `<html><head><title>waiting</title><script src="https://127.0.0.1:${pagePort}/part.js">` +
          `</script></head><body><img id="pic" src="https://127.0.0.1:${pagePort}/pic.svg"></body></html>`,
      );
    } else if (req.url === "/part.js") {
      res.setHeader("content-type", "application/javascript");
      res.end(`window.addEventListener("load", () => {
        document.title = document.getElementById("pic").naturalWidth > 0 ? "loaded" : "no picture";
      });`);
    } else {
      res.setHeader("content-type", "image/svg+xml");
      res.end(`<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"></svg>`);
    }
  });
  pagePort = await listen(pageServer);
  // A CA of its own, unknown to the gateway, signs this origin's certificate.
  const stranger = await loadCa(await createCa());
  const leaf = await stranger.mint("127.0.0.1");
  untrusted = https.createServer({ cert: leaf.chainPem, key: leaf.keyPem }, (_req, res) => {
    res.end("should not be reached");
  });
  untrustedPort = await listen(untrusted);
  h2 = http2.createSecureServer(
    { cert: certificate.cert, key: certificate.key, allowHTTP1: true },
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        const seen = {
          version: req.httpVersion,
          ua: req.headers["user-agent"] ?? null,
          received: Buffer.concat(chunks).toString("latin1"),
          probe: req.headers["x-probe"] ?? null,
        };
        res.setHeader("content-type", "application/json");
        res.setHeader("set-cookie", ["a=1", "b=2"]);
        res.end(JSON.stringify(seen));
      });
    },
  );
  const h2Backend = await listen(h2);
  // In front of it, a relay reads each connection's first bytes, its ClientHello: fingerprinted,
  // then passed on with the rest.
  h2Origin = net.createServer((socket) => {
    const backend = net.connect(h2Backend, "127.0.0.1");
    socket.once("data", (first: Buffer) => {
      const scan = scanClientHello(new Uint8Array(first));
      if (scan.kind === "hello") {
        h2Hellos.push({ ja4: fingerprints(scan.hello).ja4, alpn: scan.hello.alpn });
      }
      backend.write(first);
      socket.pipe(backend).pipe(socket);
    });
    const end = () => {
      socket.destroy();
      backend.destroy();
    };
    socket.once("error", end).once("close", end);
    backend.once("error", end).once("close", end);
  });
  h2Port = await listen(h2Origin);

  [origin, plainOrigin, ...exits] = await Promise.all([
    startOrigin({ tls: true }),
    startOrigin(),
    ...EXITS.map((bindAddress) => startTinyproxy({ bindAddress })),
  ]);
  cluster = await Cluster.create({ env: { OCTOPROX_TLS_MITM_CA_CERT_PATH: caCert } });
  await cluster.start("all");
  gateway = await cluster.startGateway({
    env: {
      OCTOPROX_TLS_MITM_CA_CERT_PATH: caCert,
      OCTOPROX_TLS_MITM_CA_KEY_PATH: caKey,
      OCTOPROX_UPSTREAM_CA_FILE: originCa,
      OCTOPROX_TLS_MITM_CERT_CACHE_SIZE: String(CACHE_SIZE),
    },
  });
  const urls = exits.map((exit) => exit.url);
  [rotating, bypassing, sticky, limited, firefox, matching] = await Promise.all([
    createRoutedProject(cluster, urls, { project: { tls_mitm_mode: "plain" } }),
    createRoutedProject(cluster, urls, {
      project: { tls_mitm_mode: "plain", tls_mitm_bypass: ["localhost"] },
    }),
    createRoutedProject(cluster, urls, { project: { tls_mitm_mode: "plain", strategy: "sticky" } }),
    createRoutedProject(cluster, urls, {
      project: { tls_mitm_mode: "plain", rate_limit: { requests_per_second: 1, burst: 3 } },
    }),
    createRoutedProject(cluster, urls, {
      project: { tls_mitm_mode: "override_ua", tls_mitm_browser: "firefox" },
    }),
    createRoutedProject(cluster, urls, { project: { tls_mitm_mode: "match_ua" } }),
  ]);
  await cluster.until(async () => {
    const result = await curl(["--cacert", caCert, "-x", proxyUrl(rotating), `${origin.url}/ip`]);
    return result.code === 0 && result.stdout.includes('"ip"');
  }, { timeoutMs: 30_000, message: "an intercepted request through the gateway" });
}, 180_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([origin, plainOrigin, ...(exits ?? [])].map((server) => server?.close()));
  pageServer?.close();
  untrusted?.close();
  h2Origin?.close();
  h2?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

interface Capture {
  id: string;
  method: string;
  host: string;
  path: string;
  status: number;
  proxy_status: string;
  proxy_id: string | null;
  ja3: string;
  ja4: string;
  sni: string;
  request_headers: [string, string][];
  sent_headers: [string, string][];
  bytes_down: number;
  mode: string;
  http2: string;
}

/** The project's captures, newest first, once at least `atLeast` match `match`. */
async function captures(
  project: RoutedProject,
  match: (capture: Capture) => boolean,
  atLeast: number,
): Promise<Capture[]> {
  let found: Capture[] = [];
  await cluster.until(async () => {
    const answer = await cluster.request(
      "GET",
      `/api/v1/projects/${project.projectId}/mitm/requests?count=1000`,
    );
    found = (answer.body.items as Capture[]).filter(match);
    return found.length >= atLeast;
  }, { timeoutMs: 15_000, message: `${atLeast} captures` });
  return found;
}

/** `-w` of curl: a line of its own per URL, `@@status connects`. */
const WRITE_OUT = "\\n@@%{http_code} %{num_connects}\\n";

describe("real clients trusting the install's CA", () => {
  it("curl through CONNECT: one client connection, each request its own exit and status", async () => {
    const tag = `curl-${Date.now()}`;
    const result = await curl([
      "--cacert",
      caCert,
      "-x",
      proxyUrl(rotating),
      "-w",
      WRITE_OUT,
      `${origin.url}/ip?${tag}=1`,
      `${origin.url}/ip?${tag}=2`,
      `${origin.url}/status/404?${tag}=3`,
    ]);
    expect(result.code).toBe(0);
    // The answers' bodies, then their write-outs, in order: the two /ip bodies name two exits.
    const ips = [...result.stdout.matchAll(/"ip":\s*"([^"]+)"/g)].map((match) => match[1]);
    expect(new Set(ips)).toEqual(new Set(EXITS));
    const lines = result.stdout.match(/^@@\d{3} \d+$/gm)!.map((line) => line.slice(2));
    // One connection to the gateway: the later requests reuse it.
    expect(lines).toEqual(["200 1", "200 0", "404 0"]);
    const seen = await captures(rotating, (capture) =>
      capture.path.startsWith("/ip?") ||
      capture.path.startsWith("/status/404?"), 3);
    const ours = seen.slice(0, 3).reverse();
    expect(ours.map((capture) => capture.status)).toEqual([200, 200, 404]);
    // The query never reaches the Inspector.
    expect(ours.every((capture) => capture.path.endsWith("?…"))).toBe(true);
    expect(new Set(ours.slice(0, 2).map((capture) => capture.proxy_id)).size).toBe(2);
    for (const capture of ours) {
      expect(capture.host).toBe(`127.0.0.1:${origin.port}`);
      expect(capture.ja4).toMatch(/^t1[23]i\d{4}/);
      expect(capture.ja3).toMatch(/^[0-9a-f]{32}$/);
    }
  });

  it("curl through SOCKS5, with a sticky session holding one exit", async () => {
    const result = await curl([
      "--cacert",
      caCert,
      "-x",
      proxyUrl(sticky, "-sessid-tls1").replace("http://", "socks5h://").replace(
        `:${gateway.proxyPort}`,
        `:${socksPort()}`,
      ),
      `${origin.url}/ip`,
      `${origin.url}/ip`,
      `${origin.url}/ip`,
    ]);
    expect(result.code, result.stderr).toBe(0);
    const ips = [...result.stdout.matchAll(/"ip":\s*"([^"]+)"/g)].map((match) => match[1]);
    expect(ips).toHaveLength(3);
    expect(new Set(ips).size).toBe(1);
  });

  it("Python requests with verify= the CA", async () => {
    const script = [
      "import requests, sys",
      "proxy = sys.argv[1]",
      "s = requests.Session()",
      "r = [s.get(sys.argv[2], proxies={'https': proxy}, verify=sys.argv[3]) for _ in range(2)]",
      "print(' '.join(str(x.status_code) for x in r), r[0].json()['ip'])",
    ].join("\n");
    const { stdout } = await run("python3", [
      "-c",
      script,
      proxyUrl(rotating),
      `${origin.url}/ip`,
      caCert,
    ]);
    const [first, second, ip] = stdout.trim().split(" ");
    expect([first, second]).toEqual(["200", "200"]);
    expect(EXITS).toContain(ip);
  });

  it("Node's fetch (undici) through a ProxyAgent trusting the CA", async () => {
    const agent = new ProxyAgent({
      uri: `http://127.0.0.1:${gateway.proxyPort}`,
      token: `Basic ${
        Buffer.from(`${rotating.credentials.username}:${rotating.credentials.password}`)
          .toString("base64")
      }`,
      requestTls: { ca: await readFile(caCert, "utf8") },
    });
    try {
      const answer = await undiciFetch(`${origin.url}/headers`, {
        dispatcher: agent,
        headers: { "X-Octoprox-Session": "node-fetch", "X-Test": "kept" },
      });
      expect(answer.status).toBe(200);
      const { headers } = await answer.json() as { headers: Record<string, string> };
      // Header options are read inside the tunnel and never reach the target.
      expect(headers["x-test"]).toBe("kept");
      expect(Object.keys(headers).filter((name) => name.startsWith("x-octoprox"))).toEqual([]);
    } finally {
      await agent.close();
    }
    const [capture] = await captures(rotating, (capture) => capture.path === "/headers", 1);
    expect(capture.request_headers.map(([name]) => name.toLowerCase())).toContain(
      "x-octoprox-session",
    );
    expect(capture.sent_headers.map(([name]) => name.toLowerCase())).not.toContain(
      "x-octoprox-session",
    );
  });

  it("Chromium with the SPKI flag loads a page whose parts come from two hosts", async () => {
    // The SPKI hash as the api answers it (the header is on every form).
    const spki = await cluster.request("GET", "/api/v1/projects/ca-certificate?format=spki");
    const hash = String(spki.body).trim();
    expect(hash).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    const browser = await chromium.launch({
      executablePath: process.env.OCTOPROX_TEST_CHROMIUM ?? "/usr/bin/chromium",
      // As root (CI), chromium's sandbox cannot start.
      args: ["--no-sandbox", `--ignore-certificate-errors-spki-list=${hash}`],
      proxy: {
        server: `http://127.0.0.1:${gateway.proxyPort}`,
        username: rotating.credentials.username,
        password: rotating.credentials.password,
      },
    });
    try {
      const page = await browser.newPage();
      pageRequests.length = 0;
      await page.goto(`https://localhost:${pagePort}/page`);
      await page.waitForFunction(() => document.title !== "waiting", undefined, {
        timeout: 15_000,
      });
      expect(await page.title()).toBe("loaded");
    } finally {
      await browser.close();
    }
    expect(pageRequests).toEqual(expect.arrayContaining([
      `localhost:${pagePort} /page`,
      `127.0.0.1:${pagePort} /part.js`,
      `127.0.0.1:${pagePort} /pic.svg`,
    ]));
    const seen = await captures(rotating, (capture) => capture.host.endsWith(`:${pagePort}`), 3);
    expect(new Set(seen.map((capture) => capture.host))).toEqual(
      new Set([`localhost:${pagePort}`, `127.0.0.1:${pagePort}`]),
    );
    expect(seen.find((capture) => capture.host.startsWith("localhost"))!.sni).toBe("localhost");
  });

  it("counts each request inside a tunnel in the project's usage", async () => {
    const usage = async () =>
      Number(
        (await cluster.request("GET", `/api/v1/projects/${rotating.projectId}/metrics`)).body
          .usage.requests,
      );
    await cluster.untilMetered([gateway]);
    const before = await usage();
    const urls = Array.from({ length: 5 }, (_, i) => `${origin.url}/bytes/${100 + i}`);
    const result = await curl(["--cacert", caCert, "-x", proxyUrl(rotating), ...urls]);
    expect(result.code).toBe(0);
    await cluster.until(async () => (await usage()) >= before + 5, {
      timeoutMs: 20_000,
      message: "five requests metered",
    });
    expect(await usage()).toBe(before + 5);
  });
});

describe("a gateway of two isolates", () => {
  it("intercepts on each, one CA, the engine loaded on each, the counts summed on /metrics", async () => {
    const two = await cluster.startGateway({
      env: {
        OCTOPROX_TLS_MITM_CA_CERT_PATH: caCert,
        OCTOPROX_TLS_MITM_CA_KEY_PATH: join(dir, "mitm-ca-key.pem"),
        OCTOPROX_UPSTREAM_CA_FILE: originCa,
        OCTOPROX_GATEWAY_ISOLATES: "2",
      },
    });
    try {
      const url = two.proxyUrl(rotating.credentials.username, rotating.credentials.password);
      // Separate client connections, so SO_REUSEPORT spreads them over the isolates.
      const results = await Promise.all(
        Array.from({ length: 8 }, () => curl(["--cacert", caCert, "-x", url, `${origin.url}/ip`])),
      );
      expect(results.map((result) => result.code)).toEqual(Array(8).fill(0));
      expect(await two.metric("octoprox_gateway_mitm_requests_total")).toBe(8);
      expect(await two.metric("octoprox_gateway_mitm_tunnels_total")).toBe(8);
      // The browser-grade engine loads in worker isolates too.
      const browserUrl = two.proxyUrl(firefox.credentials.username, firefox.credentials.password);
      const browsed = await Promise.all(
        Array.from(
          { length: 6 },
          () => curl(["--cacert", caCert, "-x", browserUrl, `https://127.0.0.1:${h2Port}/two`]),
        ),
      );
      expect(browsed.map((result) => result.stdout)).toEqual(
        Array(6).fill(expect.stringContaining('"version":"2.0"')),
      );
      expect(
        await two.metric('octoprox_gateway_mitm_browser_requests_total{browser="firefox"}'),
      ).toBe(6);
    } finally {
      await two.stop();
    }
  });
});

describe("limits inside a tunnel", () => {
  it("the project's rate limit refuses requests inside one tunnel with 429, the connection kept", async () => {
    const urls = Array.from({ length: 8 }, (_, i) => `${origin.url}/status/200?n=${i}`);
    const result = await curl([
      "--cacert",
      caCert,
      "-x",
      proxyUrl(limited),
      "-w",
      WRITE_OUT,
      ...urls,
    ]);
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stdout.match(/^@@\d{3} \d+$/gm)!.map((line) => line.slice(2));
    const statuses = lines.map((line) => Number(line.split(" ")[0]));
    // The burst lets the tunnel and the first requests through, then the rate refuses...
    expect(statuses[0]).toBe(200);
    expect(statuses).toContain(429);
    expect(statuses.every((status) => status === 200 || status === 429)).toBe(true);
    // ...each refusal an answer inside the tunnel: one connection throughout.
    expect(lines.slice(1).every((line) => line.endsWith(" 0"))).toBe(true);
  });
});

describe("the browser-grade modes", () => {
  const FIREFOX_UA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

  /** One request through `project`; the origin's account of it and the ClientHello it got. */
  async function through(project: RoutedProject, path: string, extra: string[] = []) {
    const before = h2Hellos.length;
    const result = await curl([
      "--cacert",
      caCert,
      "-x",
      proxyUrl(project),
      "-sS",
      ...extra,
      `https://127.0.0.1:${h2Port}${path}`,
    ]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout, result.stdout).toContain("{");
    const seen = JSON.parse(result.stdout.slice(result.stdout.indexOf("{"))) as {
      version: string;
      ua: string | null;
      received: string;
      probe: string | null;
    };
    // A new connection to the origin made one ClientHello; a kept one none.
    return { seen, hello: h2Hellos.slice(before).at(-1), stdout: result.stdout };
  }

  it("override_ua firefox: Firefox's ClientHello, HTTP/2 and User-Agent towards the target", async () => {
    const plain = await through(rotating, "/plain");
    const ff = await through(firefox, "/ff", ["-H", "X-Probe: kept", "-A", "curl/8"]);
    expect(plain.seen.version).toBe("1.1");
    expect(ff.seen).toMatchObject({ version: "2.0", probe: "kept" });
    expect(ff.seen.ua).toMatch(/Firefox\/\d+/);
    expect(ff.hello!.alpn).toContain("h2");
    // TLS 1.3, an IP target (no SNI: `i`), h2 offered first.
    expect(ff.hello!.ja4).toMatch(/^t13i\d{4}h2_/);
    expect(ff.hello!.ja4).not.toBe(plain.hello!.ja4);
    const [capture] = await captures(firefox, (capture) => capture.path === "/ff", 1);
    expect(capture).toMatchObject({ status: 200, mode: "override_ua", http2: "firefox" });
    // The client's User-Agent as it sent it, and the browser's as it went.
    expect(capture.request_headers).toContainEqual(["User-Agent", "curl/8"]);
    expect(capture.sent_headers.some(([name]) => name.toLowerCase() === "user-agent")).toBe(
      false,
    );
    expect(
      await gateway.metric('octoprox_gateway_mitm_browser_requests_total{browser="firefox"}'),
    ).toBeGreaterThanOrEqual(1);
  });

  it("match_ua: the client's browser's fingerprint, and Chrome's for a client that is none", async () => {
    const ff = await through(firefox, "/ff-again");
    const asFirefox = await through(matching, "/as-firefox", ["-A", FIREFOX_UA]);
    expect(asFirefox.seen).toMatchObject({ version: "2.0", ua: FIREFOX_UA });
    const asCurl = await through(matching, "/as-curl", ["-A", "curl/8"]);
    expect(asCurl.seen.version).toBe("2.0");
    expect(asCurl.seen.ua).toMatch(/Chrome\/\d+/);
    // Each new connection to the origin is fingerprinted: Firefox's twice, then Chrome's.
    const firefoxJa4 = (ff.hello ?? asFirefox.hello)!.ja4;
    if (asFirefox.hello !== undefined) expect(asFirefox.hello.ja4).toBe(firefoxJa4);
    expect(asCurl.hello!.ja4).not.toBe(firefoxJa4);
  });

  it("streams a request body up and the answer's fields back whole", async () => {
    const body = "x".repeat(200_000);
    const dir2 = await mkdtemp(join(tmpdir(), "ox-browser-body-"));
    try {
      const file = join(dir2, "body");
      await writeFile(file, body);
      const result = await through(matching, "/upload", [
        "--data-binary",
        `@${file}`,
        "-A",
        FIREFOX_UA,
        "-i",
      ]);
      expect(result.seen.received.length).toBe(body.length);
      expect(result.stdout.match(/^set-cookie: [ab]=\d/gim)).toHaveLength(2);
    } finally {
      await rm(dir2, { recursive: true, force: true });
    }
  });

  it("a target whose certificate fails verification answers 502 naming why", async () => {
    const result = await curl([
      "--cacert",
      caCert,
      "-x",
      proxyUrl(firefox),
      "-w",
      "\n%{http_code}",
      `https://127.0.0.1:${untrustedPort}/`,
    ]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /The target's certificate was rejected: UnknownIssuer[\s\S]*\n502$/,
    );
  });
});

describe("what stays raw", () => {
  it("a host on the bypass list reaches the client with the origin's own certificate", async () => {
    // localhost is bypassed: only the origin's CA verifies it.
    const bypassed = await curl([
      "--cacert",
      originCa,
      "-x",
      proxyUrl(bypassing),
      `https://localhost:${origin.port}/ip`,
    ]);
    expect(bypassed.code, bypassed.stderr).toBe(0);
    // 127.0.0.1 is not: the origin's CA alone does not verify the gateway's certificate.
    const intercepted = await curl([
      "--cacert",
      originCa,
      "-x",
      proxyUrl(bypassing),
      `${origin.url}/ip`,
    ]);
    expect(intercepted.code).toBe(60);
  });

  it("a client's -mitm-off keeps its tunnel raw", async () => {
    const result = await curl([
      "--cacert",
      originCa,
      "-x",
      proxyUrl(rotating, "-mitm-off"),
      `${origin.url}/ip`,
    ]);
    expect(result.code, result.stderr).toBe(0);
    expect(await gateway.metric('octoprox_gateway_mitm_tunnel_ends_total{end="opted_out"}'))
      .toBeGreaterThanOrEqual(1);
  });

  it("bytes that are not TLS: relayed raw to another port, closed on 443", async () => {
    const relayed = await rawTunnel(
      `127.0.0.1:${plainOrigin.port}`,
      "GET /ip HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    expect(relayed).toMatch(/^HTTP\/1\.1 200 Connection established\r\n\r\nHTTP\/1\.1 200/);
    const before = await gateway.metric('octoprox_gateway_mitm_tunnel_ends_total{end="not_tls"}');
    const closed = await rawTunnel("127.0.0.1:443", "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    expect(closed).toBe("HTTP/1.1 200 Connection established\r\n\r\n");
    expect(await gateway.metric('octoprox_gateway_mitm_tunnel_ends_total{end="not_tls"}'))
      .toBe(before + 1);
  });
});

/** A CONNECT to `authority` through the rotating project, `send` after it: all it got back. */
function rawTunnel(authority: string, send: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(gateway.proxyPort, "127.0.0.1");
    const auth = Buffer.from(
      `${rotating.credentials.username}:${rotating.credentials.password}`,
    ).toString("base64");
    let received = "";
    let sent = false;
    socket.setTimeout(10_000, () => socket.destroy(new Error("no end")));
    socket.on("connect", () => {
      socket.write(
        `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`,
      );
    });
    socket.on("data", (chunk) => {
      received += chunk.toString("latin1");
      if (!sent && received.includes("\r\n\r\n")) {
        sent = true;
        socket.write(send);
      }
    });
    socket.on("close", () => resolve(received));
    socket.on("error", reject);
  });
}

describe("failures", () => {
  it("a client that does not trust the CA is counted by its alert", async () => {
    const series = 'octoprox_gateway_mitm_client_alerts_total{alert="unknown_ca"}';
    const before = await gateway.metric(series);
    const result = await curl(["-x", proxyUrl(rotating), `${origin.url}/ip`]);
    expect(result.code).toBe(60);
    await cluster.until(async () => (await gateway.metric(series)) === before + 1, {
      timeoutMs: 5_000,
      message: "the alert counted",
    });
  });

  it("a target whose certificate fails verification answers 502 naming why", async () => {
    const result = await curl([
      "--cacert",
      caCert,
      "-x",
      proxyUrl(rotating),
      "-w",
      "\\n%{http_code}",
      `https://127.0.0.1:${untrustedPort}/`,
    ]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /The target's certificate was rejected: .*UnknownIssuer[\s\S]*\n502$/,
    );
    const [capture] = await captures(
      rotating,
      (capture) => capture.host === `127.0.0.1:${untrustedPort}`,
      1,
    );
    expect(capture).toMatchObject({ status: 502, proxy_status: "tls_certificate_error" });
  });
});
