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
 * Requests start on either exit (round robin over two): each check sends until the case it
 * asserts happened, at most twice, since the second request starts on the other exit.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
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

const EXIT_A = "127.0.0.2";
const EXIT_B = "127.0.0.3";
/** Each site is an address of its own on loopback (a site is its address then). */
const SHOP = "127.0.0.1";
const NEWS = "127.0.0.5";
const FORM = "127.0.0.6";
const WALL = "127.0.0.7";

const CAPTCHA = "<html><head><title>Verify you are human</title></head>" +
  '<body><div class="g-recaptcha" data-sitekey="x"></div></body></html>';

/** Which exits each site bans. */
const BANS: Record<string, readonly string[]> = {
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
  const split = result.stdout.indexOf("\r\n\r\n");
  const head = result.stdout.slice(0, split).split("\r\n");
  const headers = new Map<string, string>();
  for (const line of head.slice(1)) {
    const colon = line.indexOf(":");
    headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return {
    status: Number(head[0].split(" ")[1]),
    headers,
    body: result.stdout.slice(split + 4),
  };
}

const JUDGE = "judge:judge-pass";
const POSTING = "posting:posting-pass";

beforeAll(async () => {
  [bed, exitA, exitB] = await Promise.all([
    feedBed(),
    startFaultProxy({ mode: FaultMode.pass, bindAddress: EXIT_A }),
    startFaultProxy({ mode: FaultMode.pass, bindAddress: EXIT_B }),
  ]);
  await Promise.all(Object.keys(BANS).map(serve));
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
    ],
    connectors: [
      { id: "c-judge", projectId: "judge", proxies: exits("judge") },
      { id: "c-posting", projectId: "posting", proxies: exits("posting") },
    ],
  }));
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
