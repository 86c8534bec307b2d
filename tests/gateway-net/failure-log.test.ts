/**
 * The failure log through the real gateway (gateway/main.ts under Deno) on a hand-made feed, with
 * real failing upstream proxies of our own (testkit/upstreams/fault-proxy.ts) and a real origin, once
 * with one isolate and once with two (OCTOPROX_GATEWAY_ISOLATES=2, each isolate a writer of its
 * own):
 *
 * - a proxy that resets every connection, beside a working one: each failed attempt is one
 *   request and one failure of that proxy and one under its failure key, and its example says the
 *   client got 200 (the retry on the other proxy went through); the successes are never logged;
 * - a proxy that refuses CONNECT with a 403 whose reason phrase echoes the credentials it was
 *   sent: counted under its status, over HTTP CONNECT and SOCKS5 alike;
 * - an answer cut off mid-body: counted as the transfer it was, plus one under its failure key;
 * - refusals of several kinds.
 *
 * Every count is exact against what the proxies themselves saw, and neither the proxies'
 * credentials nor the query of the client's URL is anywhere in Redis or in the gateway's log
 * lines (at debug level, where every failed attempt is logged). /metrics passes
 * `promtool check metrics`, with every failure kind from the first scrape.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { decodeFailureExample, type FailureExample } from "../../shared/failure-examples.ts";
import { FAILURE_KINDS } from "../../shared/failure-kinds.ts";
import {
  FailureWindows,
  ProxyWindows,
  readCounts,
  TRANSFER_FIELDS,
  windowKey,
} from "../../shared/metric-windows.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";
import { type FeedGateway, startLoopbackGateway } from "../../testkit/gateway/feed-gateway.ts";
import { ipv4Bytes, SocksAtyp, socksOpen, socksRequest } from "../../testkit/clients/socks.ts";
import { basicAuth, getVia, openConnect } from "../../testkit/clients/raw-http.ts";
import { promtoolCheck, seriesValue } from "../../testkit/promtool.ts";

/** The upstream proxies' own credentials: the gateway sends them, and must write them nowhere. */
const VENDOR = { username: "vendor-u7x", password: "Pw-S3cr3t-q9" };
/** The query of the client's URLs. */
const TOKEN = "tok-Q8secret";
const SECRETS = [
  VENDOR.username,
  VENDOR.password,
  Buffer.from(`${VENDOR.username}:${VENDOR.password}`).toString("base64"),
  TOKEN,
];

const RETRY = { id: "fl-retry", username: "fl-retry", password: "fl-retry-pass" };
const ECHO = { id: "fl-echo", username: "fl-echo", password: "fl-echo-pass" };
const DROP = { id: "fl-drop", username: "fl-drop", password: "fl-drop-pass" };
const login = (project: { username: string; password: string }, options = "") =>
  `${project.username}${options}:${project.password}`;

let origin: Origin;
let resetting: FaultProxy;
let working: FaultProxy;
let echoing: FaultProxy;
let dropping: FaultProxy;

beforeAll(async () => {
  [origin, resetting, working, echoing, dropping] = await Promise.all([
    startOrigin(),
    startFaultProxy({ mode: FaultMode.refuse, auth: VENDOR }),
    startFaultProxy({ mode: FaultMode.pass, auth: VENDOR }),
    startFaultProxy({ mode: FaultMode.echo403, auth: VENDOR }),
    startFaultProxy({ mode: FaultMode.dropMid, auth: VENDOR, dropAfterBytes: 1_000 }),
  ]);
});

afterAll(async () => {
  await Promise.all([origin, resetting, working, echoing, dropping].map((s) => s?.close()));
});

function proxy(id: string, server: FaultProxy) {
  return {
    id,
    scheme: "http" as const,
    host: server.host,
    port: server.port,
    country: "DE",
    ...VENDOR,
  };
}

async function metricsText(gateway: FeedGateway): Promise<string> {
  return await (await fetch(`http://127.0.0.1:${gateway.statusPort}/metrics`)).text();
}

/** Every key under the bed's prefix with its content, as text. */
async function redisText(bed: FeedBed): Promise<string> {
  const parts: string[] = [];
  for (const key of await bed.redis.keys(`${bed.prefix}*`)) {
    const type = await bed.redis.type(key);
    let content: unknown;
    if (type === "string") content = (await bed.redis.getBuffer(key))?.toString("latin1");
    else if (type === "hash") {
      content = Object.entries(await bed.redis.hgetallBuffer(key))
        .map(([field, value]) => `${field}=${value.toString("latin1")}`);
    } else if (type === "stream") content = await bed.redis.xrange(key, "-", "+");
    else if (type === "set") content = await bed.redis.smembers(key);
    else if (type === "zset") content = await bed.redis.zrange(key, "0", "-1");
    parts.push(`${key} ${JSON.stringify(content)}`);
  }
  return parts.join("\n");
}

describe.each([1, 2])("the failure log with %i isolate(s)", (isolates) => {
  let bed: FeedBed;
  let gateway: FeedGateway;
  let proxyPort: number;
  let socksPort: number;
  let firstScrape: string;
  const seen = { resetting: 0, working: 0, echoing: 0, dropping: 0 };

  beforeAll(async () => {
    seen.resetting = resetting.connectionsSeen;
    seen.working = working.requests.length;
    seen.echoing = echoing.connectionsSeen;
    seen.dropping = dropping.connectionsSeen;
    bed = await feedBed();
    ({ gateway, proxyPort } = await startLoopbackGateway(bed, {
      projects: [RETRY, ECHO, DROP],
      connectors: [
        {
          id: "c-retry",
          projectId: RETRY.id,
          countries: ["DE"],
          proxies: [proxy("px-reset", resetting), proxy("px-good", working)],
        },
        { id: "c-echo", projectId: ECHO.id, proxies: [proxy("px-echo", echoing)] },
        { id: "c-drop", projectId: DROP.id, proxies: [proxy("px-drop", dropping)] },
      ],
    }, {
      OCTOPROX_GATEWAY_ISOLATES: String(isolates),
      OCTOPROX_LOG_LEVEL: "debug",
    }));
    socksPort = await gateway.socksPort();
    firstScrape = await metricsText(gateway);
    if (isolates > 1) expect((await gateway.line("Worker isolates bound")).isolates).toBe(2);
  });

  afterAll(async () => {
    expect(await gateway?.stop()).toBe(0);
    await bed?.close();
  });

  it("counts every failure once, exactly, keeps scrubbed examples, and logs no secret", {
    timeout: 90_000,
  }, async () => {
    // Each request on a connection of its own, so the kernel spreads them over the isolates.
    const retried = await Promise.all(
      Array.from(
        { length: 8 },
        () => getVia(proxyPort, `${origin.url}/ip?token=${TOKEN}`, login(RETRY)),
      ),
    );
    expect(retried.map((answer) => answer.status)).toEqual(Array(8).fill(200));
    const tunnels = await Promise.all([0, 1].map(async () => {
      const { connection, response } = await openConnect(
        proxyPort,
        `127.0.0.1:${origin.port}`,
        basicAuth(login(ECHO)),
      );
      connection.destroy();
      return response.status;
    }));
    expect(tunnels).toEqual([502, 502]);
    const socks = await socksOpen(
      socksPort,
      { username: ECHO.username, password: ECHO.password },
      socksRequest(1, SocksAtyp.ipv4, ipv4Bytes("127.0.0.1"), origin.port),
    );
    socks.connection.destroy();
    expect(socks.reply).toBeDefined();
    expect(socks.reply).not.toBe(0);
    // An answer cut off mid-body: the client had its 200 head, then the connection closed.
    const cut = await getVia(proxyPort, `${origin.url}/bytes/5000?token=${TOKEN}`, login(DROP))
      .then((answer) => answer.status, () => "cut");
    expect([200, "cut"]).toContain(cut);
    // Refusals: a place nothing serves, a private destination (HTTP and SOCKS5), a bad password.
    for (let i = 0; i < 2; i++) {
      expect(
        (await getVia(proxyPort, `${origin.url}/ip?token=${TOKEN}`, login(RETRY, "-cc-fr")))
          .status,
      ).toBe(502);
    }
    expect((await getVia(proxyPort, `http://10.0.0.1/?token=${TOKEN}`, login(RETRY))).status)
      .toBe(403);
    const prohibited = await socksOpen(
      socksPort,
      { username: RETRY.username, password: RETRY.password },
      socksRequest(1, SocksAtyp.ipv4, ipv4Bytes("10.0.0.1"), 80),
    );
    prohibited.connection.destroy();
    expect(prohibited.reply).toBe(2);
    expect((await getVia(proxyPort, `${origin.url}/ip`, `${RETRY.username}:wrong`)).status)
      .toBe(407);

    // What the proxies saw: every attempt through them.
    const resets = resetting.connectionsSeen - seen.resetting;
    const refusedByEcho = echoing.connectionsSeen - seen.echoing;
    expect(resets).toBeGreaterThan(0);
    expect(working.requests.length - seen.working).toBe(8);
    expect(refusedByEcho).toBe(3);
    expect(dropping.connectionsSeen - seen.dropping).toBe(1);

    const failureKey = (
      projectId: string,
      connectorId: string | null,
      kind: string,
      status: number | null,
    ) =>
      windowKey(bed.keys, FailureWindows, { projectId, connectorId, kind, vendorStatus: status });
    const expected = new Map<string, number>([
      [failureKey(ECHO.id, "c-echo", "upstream_refused", 403), 3],
      [failureKey(DROP.id, "c-drop", "transfer_broken", null), 1],
      [failureKey(RETRY.id, null, "no_proxy_available", null), 2],
      [failureKey(RETRY.id, null, "destination_prohibited", null), 2],
    ]);
    // A reset at once reads as the proxy unreachable (the connect failed) or as closing before
    // it answered (the connect went through first): either way one failure per reset.
    const resetKinds = ["upstream_unreachable", "upstream_closed"];
    const resetKeys = resetKinds.map((kind) => failureKey(RETRY.id, "c-retry", kind, null));
    const failureWindows = async () => {
      const listed = await bed.redis.smembers(bed.keys.metricIndex(FailureWindows.name));
      const counts = new Map<string, number>();
      for (const key of listed) counts.set(key, Number(await bed.redis.hget(key, "count")));
      return counts;
    };
    const resetCount = (counts: Map<string, number>) =>
      resetKeys.reduce((sum, key) => sum + (counts.get(key) ?? 0), 0);
    // Metering publishes every 5 s: wait for the counts to arrive, then hold them exactly.
    await waitUntil(async () => {
      const counts = await failureWindows();
      return resetCount(counts) >= resets &&
        [...expected].every(([key, count]) => (counts.get(key) ?? 0) >= count);
    }, { timeoutMs: 20_000, message: "every failure counted" });
    const counts = await failureWindows();
    expect(resetCount(counts)).toBe(resets);
    for (const key of resetKeys) counts.delete(key);
    expect(Object.fromEntries(counts)).toEqual(Object.fromEntries(expected));

    // The failed attempts are requests and failures of their proxy; the retries' successes of
    // the other; the cut transfer one request that failed.
    const proxyCounts = async (id: string) =>
      readCounts(TRANSFER_FIELDS, await bed.redis.hgetall(windowKey(bed.keys, ProxyWindows, id)));
    expect(await proxyCounts("px-reset")).toMatchObject({
      requests: resets,
      successes: 0,
      failures: resets,
    });
    expect(await proxyCounts("px-good")).toMatchObject({ requests: 8, successes: 8, failures: 0 });
    expect(await proxyCounts("px-echo")).toMatchObject({ requests: 3, failures: 3 });
    expect(await proxyCounts("px-drop")).toMatchObject({ requests: 1, failures: 1 });

    // Examples: a few per project and kind, each saying what the client was answered.
    const examples = async (projectId: string, kind: string): Promise<FailureExample[]> =>
      (await bed.redis.xrange(bed.keys.failures(projectId, kind), "-", "+"))
        .map(([, fields]) => decodeFailureExample(fields)!);
    const resetExamples = async () => [
      ...await examples(RETRY.id, "upstream_unreachable"),
      ...await examples(RETRY.id, "upstream_closed"),
    ];
    await waitUntil(async () => {
      if ((await resetExamples()).length === 0) return false;
      for (
        const [projectId, kind] of [
          [ECHO.id, "upstream_refused"],
          [DROP.id, "transfer_broken"],
          [RETRY.id, "no_proxy_available"],
          [RETRY.id, "destination_prohibited"],
        ]
      ) if ((await examples(projectId, kind)).length === 0) return false;
      return true;
    }, { timeoutMs: 20_000, message: "the failure examples in Redis" });
    const closed = await resetExamples();
    expect(closed.length).toBeLessThanOrEqual(resets);
    for (const entry of closed) {
      expect(resetKinds).toContain(entry.kind);
      expect(entry).toMatchObject({
        protocol: "http",
        clientStatus: 200,
        proxyStatus: "",
        connectorId: "c-retry",
        proxyId: "px-reset",
        target: `127.0.0.1:${origin.port}`,
      });
      expect(entry.message).toContain(`GET ${origin.url}/ip: `);
    }
    const echoed = await examples(ECHO.id, "upstream_refused");
    for (const entry of echoed) {
      expect(entry).toMatchObject({ clientStatus: 502, vendorStatus: 403, proxyId: "px-echo" });
      // The vendor's answer is kept, its echo of the credentials is not.
      expect(entry.message).toContain("Proxy answered CONNECT with 403 Refused CONNECT");
      expect(entry.message).toContain("for ***:***");
    }
    const [broken] = await examples(DROP.id, "transfer_broken");
    expect(broken).toMatchObject({ protocol: "http", clientStatus: 200, proxyId: "px-drop" });
    expect(broken.message).toContain(`GET ${origin.url}/bytes/5000: `);
    const prohibitedExamples = await examples(RETRY.id, "destination_prohibited");
    // Examples are distinct by message: the SOCKS5 refusal reads as the HTTP one did (two
    // isolates keep one each, if each took one).
    expect(["http", "socks5"]).toContain(prohibitedExamples[0].protocol);
    expect(prohibitedExamples[0]).toMatchObject({
      clientStatus: 403,
      proxyStatus: "destination_ip_prohibited",
      connectorId: null,
      proxyId: null,
      target: "10.0.0.1:80",
    });
    // No success is logged: the working proxy appears in no example.
    const streams = await bed.redis.keys(`${bed.prefix}failures:*`);
    expect(streams.length).toBeGreaterThanOrEqual(5);
    expect(streams.length).toBeLessThanOrEqual(6);
    const allExamples = JSON.stringify(
      await Promise.all(
        (await bed.redis.keys(`${bed.prefix}failures:*`)).map((key) =>
          bed.redis.xrange(key, "-", "+")
        ),
      ),
    );
    expect(allExamples).not.toContain("px-good");

    // /metrics: every process's count, whichever isolate served the request.
    const text = await metricsText(gateway);
    const metric = (series: string) => seriesValue(text, series);
    expect(
      metric('octoprox_gateway_failures_total{kind="upstream_closed"}')! +
        metric('octoprox_gateway_failures_total{kind="upstream_unreachable"}')!,
    ).toBe(resets);
    expect(metric('octoprox_gateway_failures_total{kind="upstream_refused"}')).toBe(3);
    expect(metric('octoprox_gateway_failures_total{kind="transfer_broken"}')).toBe(1);
    expect(metric('octoprox_gateway_failures_total{kind="no_proxy_available"}')).toBe(2);
    expect(metric('octoprox_gateway_failures_total{kind="destination_prohibited"}')).toBe(2);
    expect(metric('octoprox_gateway_failures_total{kind="unauthenticated"}')).toBe(1);
    expect(metric('octoprox_gateway_failures_total{kind="gateway_error"}')).toBe(0);

    // Not a trace of the secrets in Redis (windows, streams, the heartbeat, everything) or in
    // any line the gateway wrote; the log does say what failed, scrubbed.
    const stored = await redisText(bed);
    const output = gateway.output();
    for (const secret of SECRETS) {
      expect(stored, "Redis").not.toContain(secret);
      expect(output, "the gateway's log").not.toContain(secret);
    }
    const attemptLines = gateway.lines().filter((line) =>
      line.msg === "CONNECT attempt failed" || line.msg === "Forward attempt failed"
    );
    expect(attemptLines.some((line) => String(line.failure).includes("for ***:***"))).toBe(true);
    expect(attemptLines.some((line) => String(line.failure).includes(`${origin.url}/ip: `)))
      .toBe(true);
  });

  it("writes its instance snapshot with every isolate, the feed it applied and its failure logs", async () => {
    const snapshot = await waitUntil(async () => {
      const [instance] = await bed.redis.smembers(bed.keys.instanceIndex);
      if (instance === undefined) return undefined;
      const text = await bed.redis.get(bed.keys.instanceSnapshot(instance));
      const parsed = text === null ? undefined : JSON.parse(text);
      // A beat from after the traffic above (every 5 s): the failure logs have written.
      return parsed?.isolates?.length === isolates &&
          parsed.isolates.every((entry: { failure_log: { pending_examples: number } }) =>
            entry.failure_log.pending_examples === 0
          ) &&
          parsed.isolates.reduce(
              (sum: number, entry: { failure_log: { recorded: number } }) =>
                sum + entry.failure_log.recorded,
              0,
            ) > 0
        ? parsed
        : undefined;
    }, { timeoutMs: 20_000, message: "a heartbeat snapshot after the traffic" });
    const head = JSON.parse((await bed.redis.get(bed.keys.feedHead))!);
    expect(snapshot).toMatchObject({
      role: "gateway",
      ready: true,
      isolates_configured: isolates,
      feed: { applied_digest: head.digest, consecutive_failures: 0 },
    });
    expect(snapshot.isolates.map((entry: { isolate: number }) => entry.isolate)).toEqual(
      Array.from({ length: isolates }, (_, index) => index),
    );
    const registry = JSON.parse((await bed.redis.get(bed.keys.instance(snapshot.instance)))!);
    expect(registry).toMatchObject({ role: "gateway", ttl_ms: 15_000 });
  });

  it("answers /metrics that promtool passes, every failure kind from the first scrape", async () => {
    for (const kind of FAILURE_KINDS) {
      expect(seriesValue(firstScrape, `octoprox_gateway_failures_total{kind="${kind}"}`)).toBe(0);
    }
    for (const text of [firstScrape, await metricsText(gateway)]) {
      const checked = await promtoolCheck(text);
      expect(checked.output).toBe("");
      expect(checked.code).toBe(0);
    }
    const text = await metricsText(gateway);
    for (
      const family of [
        "octoprox_gateway_request_duration_seconds",
        "octoprox_gateway_upstream_connect_seconds",
        "octoprox_gateway_feed_applied_age_seconds",
        "octoprox_gateway_feed_compiled_timestamp_seconds",
        "octoprox_gateway_loop_lag_worst_seconds",
        "octoprox_gateway_failure_examples_total",
      ]
    ) {
      expect(text).toContain(`# TYPE ${family} `);
      expect(text).toContain(`# HELP ${family} `);
    }
    // Every request above took its time: the forwarded ones are in the histogram.
    expect(seriesValue(text, 'octoprox_gateway_request_duration_seconds_count{kind="http"}'))
      .toBeGreaterThan(0);
    expect(seriesValue(text, "octoprox_gateway_upstream_connect_seconds_count"))
      .toBeGreaterThan(0);
    for (let isolate = 0; isolate < isolates; isolate++) {
      expect(
        seriesValue(text, `octoprox_gateway_loop_lag_worst_seconds{isolate="${isolate}"}`),
      ).toBeGreaterThanOrEqual(0);
    }
  });
});
