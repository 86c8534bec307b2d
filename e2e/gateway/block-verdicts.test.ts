/**
 * Block verdicts as a client sees them, through the real gateway (two of them on one feed) and
 * real exits (two of our fault proxies in pass mode, each leaving from an address of its own).
 * The origin tells the exits apart by the address a request comes from, and answers exit A with
 * a captcha page (403, `g-recaptcha` in its body) on the sites A is banned from:
 *
 * - a GET blocked through A goes again through B, and the client gets B's 200 with
 *   `X-Octoprox-Attempts: 2`; A is cooled down for that site (later requests pass it over) and
 *   keeps serving another site; a second gateway learns the cool-down through Redis;
 * - a POST is not sent again unless the project retries POST, which keeps the body and sends it
 *   whole to the next exit;
 * - when every exit is blocked the retry budget ends with the last blocked answer, its verdict
 *   in `Proxy-Status` (its gzip body judged after decoding).
 *
 * - the same inside HTTPS under `plain` interception: curl, and Chromium loading a page;
 * - escalation: a site that blocks the cheap static tier (exit A) is moved to the dearer one
 *   (exit B) after two blocks, and back down after good probes once it lets A in again.
 *
 * Requests start on either exit (round robin over two): each check sends until the case it
 * asserts happened, at most twice, since the second request starts on the other exit.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { createHash, X509Certificate } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { testCertificate } from "../../testkit/certs.ts";
import { testMitmCa } from "../../testkit/mitm-ca.ts";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";
import {
  type FeedGateway,
  startFeedGateway,
  startLoopbackGateway,
} from "../../testkit/gateway/feed-gateway.ts";
import { curl } from "../../testkit/clients/curl.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { countDay } from "../../shared/redis-keys.ts";

const EXIT_A = "127.0.0.2";
const EXIT_B = "127.0.0.3";
/** Each site is an address of its own on loopback (a site is its address then). */
const SHOP = "127.0.0.1";
const NEWS = "127.0.0.5";
const FORM = "127.0.0.6";
const WALL = "127.0.0.7";
/** The site escalation moves: it bans exit A until the test lifts the ban. */
const TIERED = "127.0.0.8";

const CAPTCHA = "<html><head><title>Verify you are human</title></head>" +
  '<body><div class="g-recaptcha" data-sitekey="x"></div></body></html>';

/** Which exits each site bans. */
const BANS: Record<string, readonly string[]> = {
  [TIERED]: [EXIT_A],
  [SHOP]: [EXIT_A],
  [NEWS]: [],
  [FORM]: [EXIT_A],
  [WALL]: [EXIT_A, EXIT_B],
};

interface Seen {
  site: string;
  exit: string;
  method: string;
  body: string;
}

const RULES = [{
  name: "captcha",
  mode: "on",
  status: [403],
  body_contains: ["g-recaptcha"],
  verdict: "blocked",
  cool_down_seconds: 600,
}];

let bed: FeedBed;
let exitA: FaultProxy;
let exitB: FaultProxy;
let gateway: FeedGateway;
let second: FeedGateway | undefined;
let proxyPort: number;
const origins: Server[] = [];
const ports = new Map<string, number>();
const seen: Seen[] = [];

/** The HTTPS origin: `localhost` bans exit A, `127.0.0.1` nobody (both names are its certificate's). */
let tlsPort = 0;
const TLS_BANS: Record<string, readonly string[]> = { localhost: [EXIT_A], "127.0.0.1": [] };

async function serveTls(): Promise<void> {
  const certificate = await testCertificate();
  const server = createHttpsServer(
    { cert: certificate.cert, key: certificate.key },
    (request, response) => {
      const exit = (request.socket.remoteAddress ?? "").replace(/^::ffff:/, "");
      const host = (request.headers.host ?? "").replace(/:\d+$/, "");
      seen.push({ site: `tls:${host}`, exit, method: request.method ?? "", body: "" });
      if ((TLS_BANS[host] ?? []).includes(exit)) {
        response.writeHead(403, { "content-type": "text/html" });
        response.end(CAPTCHA);
        return;
      }
      response.writeHead(200, { "content-type": "text/html" });
      response.end(`<html><head><title>loaded</title></head><body>via ${exit}</body></html>`);
    },
  );
  origins.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  tlsPort = (server.address() as { port: number }).port;
}

function serve(site: string): Promise<void> {
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const exit = (request.socket.remoteAddress ?? "").replace(/^::ffff:/, "");
      seen.push({
        site,
        exit,
        method: request.method ?? "",
        body: Buffer.concat(chunks).toString(),
      });
      if (BANS[site].includes(exit)) {
        // The wall's page is gzip-coded: the rule reads it decoded.
        const gzip = site === WALL;
        const body = gzip ? gzipSync(CAPTCHA) : Buffer.from(CAPTCHA);
        response.writeHead(403, {
          "content-type": "text/html",
          ...(gzip ? { "content-encoding": "gzip" } : {}),
          "content-length": String(body.length),
        });
        response.end(body);
        return;
      }
      response.writeHead(200, { "content-type": "text/plain" });
      response.end(`hello from ${site} via ${exit}\n`);
    });
  });
  origins.push(server);
  return new Promise((resolve) =>
    server.listen(0, site, () => {
      ports.set(site, (server.address() as { port: number }).port);
      resolve();
    })
  );
}

const url = (site: string) => `http://${site}:${ports.get(site)}/page`;
const seenAt = (site: string, exit?: string, method?: string) =>
  seen.filter((s) =>
    s.site === site && (exit === undefined || s.exit === exit) &&
    (method === undefined || s.method === method)
  );

interface Answer {
  status: number;
  headers: Map<string, string>;
  body: string;
}

/** curl through a gateway; the last head's fields, lower-cased names. */
async function via(
  port: number,
  login: string,
  target: string,
  extra: string[] = [],
): Promise<Answer> {
  const result = await curl([
    "-x",
    `http://${login}@127.0.0.1:${port}`,
    "-D",
    "-",
    ...extra,
    target,
  ]);
  expect(result.code, result.stderr).toBe(0);
  // The last head: a CONNECT's answer (HTTPS through the proxy) comes before the target's.
  let rest = result.stdout;
  let split = rest.indexOf("\r\n\r\n");
  while (rest.slice(split + 4).startsWith("HTTP/")) {
    rest = rest.slice(split + 4);
    split = rest.indexOf("\r\n\r\n");
  }
  const head = rest.slice(0, split).split("\r\n");
  const headers = new Map<string, string>();
  for (const line of head.slice(1)) {
    const colon = line.indexOf(":");
    headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return {
    status: Number(head[0].split(" ")[1]),
    headers,
    body: rest.slice(split + 4),
  };
}

const JUDGE = "judge:judge-pass";
const JUDGE_TLS = "judgetls:judgetls-pass";
const JUDGE_BROWSER = "judgebrowser:judgebrowser-pass";
const POSTING = "posting:posting-pass";

beforeAll(async () => {
  [bed, exitA, exitB] = await Promise.all([
    feedBed(),
    startFaultProxy({ mode: FaultMode.pass, bindAddress: EXIT_A }),
    startFaultProxy({ mode: FaultMode.pass, bindAddress: EXIT_B }),
  ]);
  await Promise.all([...Object.keys(BANS).map(serve), serveTls()]);
  // The gateway trusts the origin's CA for its own TLS towards it.
  const originCa = join(testMitmCa().dir, "origin-ca.pem");
  await writeFile(originCa, (await testCertificate()).ca);
  const exits = (prefix: string) => [
    { id: `${prefix}-a`, scheme: "http" as const, host: exitA.host, port: exitA.port },
    { id: `${prefix}-b`, scheme: "http" as const, host: exitB.host, port: exitB.port },
  ];
  ({ gateway, proxyPort } = await startLoopbackGateway(bed, {
    projects: [
      {
        id: "judge",
        username: "judge",
        password: "judge-pass",
        blocking: { rules: RULES, retry: null, body_bytes: null },
      },
      {
        id: "posting",
        username: "posting",
        password: "posting-pass",
        blocking: {
          rules: RULES,
          retry: {
            attempts: 3,
            methods: ["GET", "POST"],
            max_total_seconds: 30,
            rebind_sticky: false,
          },
          body_bytes: null,
        },
      },
      {
        id: "judgetls",
        username: "judgetls",
        password: "judgetls-pass",
        blocking: { rules: RULES, retry: null, body_bytes: null },
        tlsMitm: { mode: "plain", browser: null, bypass: [] },
      },
      {
        id: "ruled",
        username: "ruled",
        password: "ruled-pass",
        domainRules: [
          { domains: [WALL], action: "refuse", reason: "This project does not scrape the wall" },
          { domains: [SHOP], action: "connectors", connectors: ["c-ruled-b"] },
          { domains: [NEWS], action: "direct" },
        ],
      },
      {
        id: "shadowing",
        username: "shadowing",
        password: "shadowing-pass",
        blocking: { rules: [{ ...RULES[0], mode: "shadow" }], retry: null, body_bytes: null },
      },
      {
        id: "judgebrowser",
        username: "judgebrowser",
        password: "judgebrowser-pass",
        blocking: { rules: RULES, retry: null, body_bytes: null },
        tlsMitm: { mode: "override_ua", browser: "chrome", bypass: [] },
      },
      {
        id: "judgechromium",
        username: "judgechromium",
        password: "judgechromium-pass",
        blocking: { rules: RULES, retry: null, body_bytes: null },
        tlsMitm: { mode: "plain", browser: null, bypass: [] },
      },
      {
        id: "escalate",
        username: "escalate",
        password: "escalate-pass",
        blocking: {
          // No cool-down: a probe of the cheap tier may go through the exit it blocked.
          rules: [{ ...RULES[0], cool_down_seconds: 0 }],
          retry: null,
          body_bytes: null,
          escalation: { up_after_blocks: 2, probe_after_seconds: 1, down_after_probes: 2 },
        },
      },
    ],
    connectors: [
      // The cheap static tier leaves from A, the dear one (priced per GB) from B.
      { id: "c-esc-static", projectId: "escalate", proxies: [exits("esc")[0]] },
      { id: "c-esc-resi", projectId: "escalate", pricePerGb: 8, proxies: [exits("esc")[1]] },
      { id: "c-judge", projectId: "judge", proxies: exits("judge") },
      { id: "c-posting", projectId: "posting", proxies: exits("posting") },
      { id: "c-judgetls", projectId: "judgetls", proxies: exits("judgetls") },
      { id: "c-judgechromium", projectId: "judgechromium", proxies: exits("judgechromium") },
      { id: "c-judgebrowser", projectId: "judgebrowser", proxies: exits("judgebrowser") },
      { id: "c-shadowing", projectId: "shadowing", proxies: exits("shadowing") },
      { id: "c-ruled-a", projectId: "ruled", proxies: [exits("ruled")[0]] },
      { id: "c-ruled-b", projectId: "ruled", proxies: [exits("ruled")[1]] },
    ],
  }, { OCTOPROX_UPSTREAM_CA_FILE: originCa, OCTOPROX_METRICS_TOP_SITES: "3" }));
}, 60_000);

afterAll(async () => {
  await Promise.all([gateway?.stop(), second?.stop()]);
  await Promise.all([exitA?.close(), exitB?.close(), bed?.close()]);
  await Promise.all(origins.map((server) => new Promise((resolve) => server.close(resolve))));
});

describe("a blocked answer", () => {
  it("goes again through another exit: the client gets the good one, with the attempts made", async () => {
    const answers: Answer[] = [];
    // The first request through A (the first or the second) is blocked and sent on to B.
    while (answers.length < 2 && seenAt(SHOP, EXIT_A).length === 0) {
      answers.push(await via(proxyPort, JUDGE, url(SHOP)));
    }
    expect(seenAt(SHOP, EXIT_A)).toHaveLength(1);
    const retried = answers[answers.length - 1];
    expect(retried.status).toBe(200);
    expect(retried.body).toBe(`hello from ${SHOP} via ${EXIT_B}\n`);
    expect(retried.headers.get("x-octoprox-attempts")).toBe("2");
    // Served at once by B before it, if it was the second.
    for (const answer of answers.slice(0, -1)) {
      expect(answer.status).toBe(200);
      expect(answer.headers.has("x-octoprox-attempts")).toBe(false);
    }
    expect(
      await gateway.metric('octoprox_gateway_block_verdicts_total{verdict="blocked",mode="on"}'),
    )
      .toBe(1);
    expect(await gateway.metric("octoprox_gateway_block_retries_total")).toBe(1);
    // The site by name, among the gateway's three most judged (OCTOPROX_METRICS_TOP_SITES).
    expect(
      await gateway.metric(
        `octoprox_gateway_site_verdicts_total{project="judge",site="${SHOP}",verdict="blocked"}`,
      ),
    ).toBe(1);
  });

  it("is counted for its site: blocked, sent again, the bytes its attempt and the good ones carried", async () => {
    const key = bed.keys.domainCounts("judge", countDay(Date.now()));
    const field = (count: string) => `${SHOP}\tc-judge\t${count}`;
    await waitUntil(async () => Number(await bed.redis.hget(key, field("retries"))) === 1, {
      timeoutMs: 10_000,
      message: "the gateway to write the site's counts",
    });
    const counts = await bed.redis.hgetall(key);
    expect(Number(counts[field("blocked")])).toBe(1);
    expect(Number(counts[field("ok")])).toBeGreaterThanOrEqual(1);
    // The request sent, and the captcha page's head and body read before it was dropped.
    expect(Number(counts[field("blocked_bytes")])).toBeGreaterThan(CAPTCHA.length);
    // The good answers' bytes both ways (written once each answer ended): at least each body.
    const good = `hello from ${SHOP} via ${EXIT_B}\n`.length;
    await waitUntil(async () => {
      const now = await bed.redis.hgetall(key);
      return Number(now[field("ok_bytes")]) >= Number(now[field("ok")]) * good;
    }, { message: "the good answers' bytes to be counted" });
  });

  it("cools that exit down for that site only: it is passed over there and serves others", async () => {
    for (let i = 0; i < 4; i++) {
      const answer = await via(proxyPort, JUDGE, url(SHOP));
      expect(answer.status).toBe(200);
      expect(answer.headers.has("x-octoprox-attempts")).toBe(false);
    }
    expect(seenAt(SHOP, EXIT_A)).toHaveLength(1);
    for (let i = 0; i < 4; i++) expect((await via(proxyPort, JUDGE, url(NEWS))).status).toBe(200);
    expect(seenAt(NEWS, EXIT_A).length).toBeGreaterThan(0);
    expect(seenAt(NEWS, EXIT_B).length).toBeGreaterThan(0);
  });

  it("is cooled down on a second gateway too, through Redis", async () => {
    second = await startFeedGateway(bed, { OCTOPROX_DESTINATION_ALLOW_CIDRS: "127.0.0.0/8" });
    const port = await second.proxyPort();
    await waitUntil(
      async () =>
        (await second!.metric('octoprox_gateway_cooldowns_total{source="other_gateways"}')) >= 1,
      { timeoutMs: 10_000, message: "the second gateway to learn the cool-down" },
    );
    for (let i = 0; i < 4; i++) {
      const answer = await via(port, JUDGE, url(SHOP));
      expect(answer.status).toBe(200);
      expect(answer.headers.has("x-octoprox-attempts")).toBe(false);
    }
    expect(seenAt(SHOP, EXIT_A)).toHaveLength(1);
  });
});

describe("a request with a body", () => {
  it("is not sent again unless the project retries its method", async () => {
    const answers: Answer[] = [];
    while (answers.length < 2 && seenAt(FORM, EXIT_A, "POST").length === 0) {
      answers.push(await via(proxyPort, JUDGE, url(FORM), ["--data", "a=1"]));
    }
    const blocked = answers[answers.length - 1];
    expect(blocked.status).toBe(403);
    expect(blocked.body).toContain("g-recaptcha");
    expect(blocked.headers.get("x-octoprox-attempts")).toBe("1");
    expect(blocked.headers.get("proxy-status")).toBe(
      'octoprox; received-status=403; details="blocked by rule captcha"',
    );
    // Each POST reached the origin once: none went again.
    expect(seenAt(FORM, undefined, "POST")).toHaveLength(answers.length);
  });

  it("goes again whole when the project retries it", async () => {
    const before = seenAt(FORM, undefined, "POST").length;
    const answers: Answer[] = [];
    while (answers.length < 2 && !answers.some((a) => a.headers.has("x-octoprox-attempts"))) {
      answers.push(await via(proxyPort, POSTING, url(FORM), ["--data", "order=42&qty=3"]));
    }
    const retried = answers[answers.length - 1];
    expect(retried.status).toBe(200);
    expect(retried.headers.get("x-octoprox-attempts")).toBe("2");
    const sent = seenAt(FORM, undefined, "POST").slice(before);
    expect(sent.map((s) => s.body)).toEqual(sent.map(() => "order=42&qty=3"));
    expect(sent.filter((s) => s.exit === EXIT_A)).toHaveLength(1);
  });
});

describe("per-domain routing rules", () => {
  it("refuse one site, send one direct, another through the connectors named, leave the rest", async () => {
    const wallBefore = seenAt(WALL).length;
    const refused = await via(proxyPort, "ruled:ruled-pass", url(WALL));
    expect(refused.status).toBe(403);
    expect(refused.body).toContain("This project does not scrape the wall");
    expect(refused.headers.get("proxy-status")).toContain("error=http_request_denied");
    expect(seenAt(WALL)).toHaveLength(wallBefore);

    const shopBefore = seenAt(SHOP).length;
    for (let i = 0; i < 4; i++) {
      expect((await via(proxyPort, "ruled:ruled-pass", url(SHOP))).status).toBe(200);
    }
    expect(seenAt(SHOP).slice(shopBefore).map((s) => s.exit)).toEqual([
      EXIT_B,
      EXIT_B,
      EXIT_B,
      EXIT_B,
    ]);

    // Direct: the gateway's own connection, through neither exit.
    const newsBefore = seenAt(NEWS).length;
    for (let i = 0; i < 2; i++) {
      const direct = await via(proxyPort, "ruled:ruled-pass", url(NEWS));
      expect(direct.status).toBe(200);
      expect(direct.body).not.toContain(EXIT_A);
      expect(direct.body).not.toContain(EXIT_B);
    }
    const directExits = seenAt(NEWS).slice(newsBefore).map((s) => s.exit);
    expect(directExits).toHaveLength(2);
    for (const exit of directExits) expect([EXIT_A, EXIT_B]).not.toContain(exit);

    // No rule for the form: both exits serve it (A's answers are its ban, not judged here).
    const formBefore = seenAt(FORM).length;
    for (let i = 0; i < 4; i++) await via(proxyPort, "ruled:ruled-pass", url(FORM));
    expect(new Set(seenAt(FORM).slice(formBefore).map((s) => s.exit))).toEqual(
      new Set([EXIT_A, EXIT_B]),
    );
    expect(
      await gateway.metric(
        'octoprox_gateway_requests_total{kind="http",outcome="refused",status="403"}',
      ),
    ).toBeGreaterThanOrEqual(1);
  });
});

describe("a rule in shadow mode", () => {
  it("records what it would have done, and lets the answer go as it came", async () => {
    const shadowed = 'octoprox_gateway_block_verdicts_total{verdict="blocked",mode="shadow"}';
    const before = await gateway.metric(shadowed);
    const answer = await via(proxyPort, "shadowing:shadowing-pass", url(FORM));
    // Whichever exit it took: FORM bans A only, so a 403 came through A and a 200 through B.
    if (answer.status === 403) {
      expect(answer.body).toContain("g-recaptcha");
      expect(await gateway.metric(shadowed)).toBe(before + 1);
    } else {
      expect(answer.status).toBe(200);
    }
    expect(answer.headers.has("x-octoprox-attempts")).toBe(false);
    expect(answer.headers.has("proxy-status")).toBe(false);
    // A second request takes the other exit: one of the two met the ban, and nothing retried it.
    const second = await via(proxyPort, "shadowing:shadowing-pass", url(FORM));
    expect([answer.status, second.status].sort()).toEqual([200, 403]);
    expect(await gateway.metric(shadowed)).toBe(before + 1);
    const key = bed.keys.domainCounts("shadowing", countDay(Date.now()));
    await waitUntil(
      async () => Number(await bed.redis.hget(key, `${FORM}\t\tshadow:captcha:blocked`)) === 1,
      { timeoutMs: 10_000, message: "the shadow finding counted for the site" },
    );
  });
});

describe("the retry budget", () => {
  it("ends with the last blocked answer and its verdict when every exit is blocked", async () => {
    const answer = await via(proxyPort, JUDGE, url(WALL), ["--compressed"]);
    expect(answer.status).toBe(403);
    expect(answer.body).toContain("g-recaptcha");
    expect(answer.headers.get("content-encoding")).toBe("gzip");
    // Two exits: both tried, then none is left.
    expect(answer.headers.get("x-octoprox-attempts")).toBe("2");
    expect(answer.headers.get("proxy-status")).toBe(
      'octoprox; received-status=403; details="blocked by rule captcha"',
    );
    expect(seenAt(WALL).map((s) => s.exit).sort()).toEqual([EXIT_A, EXIT_B]);
  });
});

describe("inside HTTPS, under plain interception", () => {
  const tlsUrl = (host: string) => `https://${host}:${tlsPort}/page`;

  it("a blocked answer goes again through another exit (curl)", async () => {
    const answers: Answer[] = [];
    while (answers.length < 2 && seenAt("tls:localhost", EXIT_A).length === 0) {
      answers.push(
        await via(proxyPort, JUDGE_TLS, tlsUrl("localhost"), ["--cacert", testMitmCa().certPath]),
      );
    }
    expect(seenAt("tls:localhost", EXIT_A)).toHaveLength(1);
    const retried = answers[answers.length - 1];
    expect(retried.status).toBe(200);
    expect(retried.body).toContain(`via ${EXIT_B}`);
    expect(retried.headers.get("x-octoprox-attempts")).toBe("2");
    // Cooled down for localhost only: 127.0.0.1 is another site, and both exits serve it.
    for (let i = 0; i < 4; i++) {
      const answer = await via(proxyPort, JUDGE_TLS, tlsUrl("localhost"), [
        "--cacert",
        testMitmCa().certPath,
      ]);
      expect(answer.headers.has("x-octoprox-attempts")).toBe(false);
      await via(proxyPort, JUDGE_TLS, tlsUrl("127.0.0.1"), ["--cacert", testMitmCa().certPath]);
    }
    expect(seenAt("tls:localhost", EXIT_A)).toHaveLength(1);
    expect(seenAt("tls:127.0.0.1", EXIT_A).length).toBeGreaterThan(0);
  });

  it("a blocked answer of the browser-grade engine goes again through another exit", async () => {
    const before = seen.length;
    const answers: Answer[] = [];
    const throughA = () =>
      seen.slice(before).filter((s) => s.site === "tls:localhost" && s.exit === EXIT_A);
    while (answers.length < 2 && throughA().length === 0) {
      answers.push(
        await via(proxyPort, JUDGE_BROWSER, tlsUrl("localhost"), [
          "--cacert",
          testMitmCa().certPath,
        ]),
      );
    }
    expect(throughA()).toHaveLength(1);
    const retried = answers[answers.length - 1];
    expect(retried.status).toBe(200);
    expect(retried.body).toContain(`via ${EXIT_B}`);
    expect(retried.headers.get("x-octoprox-attempts")).toBe("2");
  });

  it("Chromium loads the page though one exit is blocked", async () => {
    const spki = createHash("sha256")
      .update(
        new X509Certificate(testMitmCa().certPem).publicKey.export({ type: "spki", format: "der" }),
      )
      .digest("base64");
    const browser = await chromium.launch({
      executablePath: process.env.OCTOPROX_TEST_CHROMIUM ?? "/usr/bin/chromium",
      // As root (CI), chromium's sandbox cannot start.
      args: ["--no-sandbox", `--ignore-certificate-errors-spki-list=${spki}`],
      proxy: {
        server: `http://127.0.0.1:${proxyPort}`,
        username: "judgechromium",
        password: "judgechromium-pass",
      },
    });
    const before = seen.length;
    try {
      // Two loads, each in a context of its own: one of the requests starts on exit A.
      for (let load = 0; load < 2; load++) {
        const context = await browser.newContext();
        const page = await context.newPage();
        const response = await page.goto(tlsUrl("localhost"));
        expect(response?.status()).toBe(200);
        expect(await page.title()).toBe("loaded");
        await context.close();
      }
    } finally {
      await browser.close();
    }
    const mine = seen.slice(before).filter((s) => s.site === "tls:localhost");
    expect(mine.filter((s) => s.exit === EXIT_A)).toHaveLength(1);
  });
});

describe("escalation between connector tiers", () => {
  const ESCALATE = "escalate:escalate-pass";
  const state = async () => {
    const text = await bed.redis.hget(bed.keys.escalation("escalate"), TIERED);
    return text === null ? undefined : JSON.parse(text) as { t: number; w?: string };
  };

  it("moves a site from the cheap static tier to the dearer one after blocks, and back down after good probes", async () => {
    // Each request starts on the cheap tier, is blocked through A and served by B's tier.
    for (let sent = 1; sent <= 2; sent++) {
      const answer = await via(proxyPort, ESCALATE, url(TIERED));
      expect(answer.status).toBe(200);
      expect(answer.body).toBe(`hello from ${TIERED} via ${EXIT_B}\n`);
      expect(answer.headers.get("x-octoprox-attempts")).toBe("2");
      expect(seenAt(TIERED, EXIT_A)).toHaveLength(sent);
    }
    await waitUntil(async () => (await state())?.t === 1, {
      message: "two blocks in a row to move the site up a tier",
    });
    expect(await state()).toMatchObject({ t: 1, w: "up" });
    // Served by the dear tier at once now: A is not asked again, and no retry is needed.
    await waitUntil(async () => {
      const answer = await via(proxyPort, ESCALATE, url(TIERED));
      return answer.status === 200 && !answer.headers.has("x-octoprox-attempts");
    }, { message: "the gateway to read the site's new tier" });
    expect(seenAt(TIERED, EXIT_A)).toHaveLength(2);
    // Another site of the project stays on the cheap tier meanwhile.
    expect((await via(proxyPort, ESCALATE, url(NEWS))).body).toBe(
      `hello from ${NEWS} via ${EXIT_A}\n`,
    );
    expect(await gateway.metric('octoprox_gateway_escalations_total{direction="up"}')).toBe(1);

    // The site lets A in again: after probe_after_seconds requests probe the cheap tier, and
    // two good probes bring the site back down.
    BANS[TIERED] = [];
    await waitUntil(async () => {
      const answer = await via(proxyPort, ESCALATE, url(TIERED));
      expect(answer.status).toBe(200);
      return (await state())?.t === 0;
    }, { timeoutMs: 20_000, intervalMs: 200, message: "good probes to move the site back down" });
    expect(await state()).toMatchObject({ t: 0, w: "down" });
    expect(seenAt(TIERED, EXIT_A).length).toBeGreaterThanOrEqual(4);
    expect(await gateway.metric('octoprox_gateway_escalations_total{direction="down"}')).toBe(1);
  });
});
