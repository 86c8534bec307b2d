/**
 * The gateway on the HTTP Redis transport (gateway/redis/http.ts): a real gateway under Deno whose
 * OCTOPROX_REDIS_URL is the Upstash REST stand-in (testkit/upstreams/upstash-rest.ts) in front of
 * the test bed's Redis, beside a gateway on TCP, both before one control plane (role all) and two
 * tinyproxy exits (127.0.0.2 in DE, .3 in FR). Metering's exact counts over HTTP are checked by
 * the same test as over TCP (e2e/gateway/metering.test.ts).
 *
 * - the HTTP gateway routes HTTP, CONNECT and SOCKS5, and holds no TCP connection to Redis;
 * - a sticky session steered on one gateway is served from its Redis binding on the other, both
 *   ways;
 * - a connector's rate limit and a project's request rate count the requests of both gateways
 *   together (Lua scripts over both transports);
 * - a feed edit reaches the HTTP gateway within its stated bound (the poll interval and one read);
 * - requests never fail while the REST server restarts, and what the gateway writes reaches
 *   Redis again after;
 * - with its REST server gone, or hanging, a gateway stops within its bound.
 */
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { curl } from "../../testkit/clients/curl.ts";
import {
  type Credentials,
  exitOf,
  getThroughTunnel,
  viaProxy,
} from "../../testkit/clients/proxy-client.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import {
  createRoutedProject,
  loggedPort,
  SteadyLoad,
  untilAnswer,
  untilEachPlaceServed,
  waitForStatuses,
  withOptions,
} from "../../testkit/routing.ts";
import { TEST_REDIS_URL } from "../../testkit/stores.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { startUpstashRest, type UpstashRest } from "../../testkit/upstreams/upstash-rest.ts";

const EXITS = ["127.0.0.2", "127.0.0.3"];
const COUNTRIES = ["DE", "FR"];
const TOKEN = `rest-${randomBytes(12).toString("hex")}`;
/** The HTTP gateway's poll of the feed head (OCTOPROX_FEED_POLL_INTERVAL). */
const POLL_MS = 1_000;
/** docs/gateway.md: a feed edit reaches an HTTP gateway within the poll interval and one read
 * (the request deadline, 2 s). */
const EDIT_BOUND_MS = POLL_MS + 2_000;
/** docs/operations.md: 5 s for connections, twice the request deadline (2 s), 1 s of room. */
const STOP_BOUND_MS = 10_000;
const MAX_REQUESTS = 3;
const COUNTED = 'octoprox_gateway_rate_limit_requests_total{result="counted"}';
const TRIPS = "octoprox_gateway_rate_limit_trips_total";

let cluster: Cluster;
let rest: UpstashRest;
let origin: Origin;
let tinyproxies: Tinyproxy[];
let tcp: Gateway;
let http: Gateway;
let stickyProject: { id: string; proxyIds: string[]; password: string };

function httpEnv(server: UpstashRest): Record<string, string> {
  return {
    OCTOPROX_REDIS_URL: server.url,
    OCTOPROX_REDIS_TOKEN: server.token,
    OCTOPROX_FEED_POLL_INTERVAL: String(POLL_MS / 1000),
  };
}

beforeAll(async () => {
  [origin, tinyproxies, rest] = await Promise.all([
    startOrigin(),
    Promise.all(EXITS.map((bindAddress) => startTinyproxy({ bindAddress }))),
    startUpstashRest({ redisUrl: TEST_REDIS_URL, token: TOKEN }),
  ]);
  cluster = await Cluster.create();
  await cluster.start("all");
  [tcp, http] = await Promise.all([
    cluster.startGateway(),
    cluster.startGateway({ env: httpEnv(rest) }),
  ]);

  // Strategy sticky, a proxy a country: `-cc-` steers a session off its hash's proxy.
  const password = `pw-${randomBytes(8).toString("hex")}`;
  const project = await cluster.request("POST", "/api/v1/projects", {
    name: "sticky over two transports",
    username: "user",
    password,
    strategy: "sticky",
  });
  expect(project.status).toBe(201);
  const connector = await cluster.request(
    "POST",
    `/api/v1/projects/${project.body.id}/connectors`,
    { name: "static", kind: "static" },
  );
  expect(connector.status).toBe(201);
  const proxyIds: string[] = [];
  for (const [index, tinyproxy] of tinyproxies.entries()) {
    const proxy = await cluster.request("POST", `/api/v1/projects/${project.body.id}/proxies`, {
      connector_id: connector.body.id,
      url: tinyproxy.url,
      country: COUNTRIES[index],
    });
    expect(proxy.status).toBe(201);
    proxyIds.push(proxy.body.id);
  }
  stickyProject = { id: project.body.id, proxyIds, password };
  await waitForStatuses(cluster, proxyIds, "healthy");
  await untilEachPlaceServed(
    cluster,
    [tcp, http],
    ipUrl(),
    COUNTRIES.map((country, index) => ({
      name: country,
      credentials: as({ country }),
      exit: EXITS[index],
    })),
  );
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([origin, rest, ...(tinyproxies ?? [])].map((server) => server?.close()));
});

const ipUrl = () => `${origin.url}/ip`;

/** `user[-cc-<country>][-sessid-<session>]` of the sticky project. */
function as(options: { session?: string; country?: string } = {}): Credentials {
  let username = "user";
  if (options.country) username += `-cc-${options.country.toLowerCase()}`;
  if (options.session !== undefined) username += `-sessid-${options.session}`;
  return { username, password: stickyProject.password };
}

async function exitVia(gateway: Gateway, credentials: Credentials): Promise<string> {
  const answer = await viaProxy(gateway.proxyPort, credentials, ipUrl(), { timeoutMs: 5_000 });
  expect(answer.status, answer.body).toBe(200);
  return exitOf(answer);
}

/** Redis's clients whose name is the gateway's (`octoprox-gateway:<instance>…`). */
async function tcpClientsOf(gateway: Gateway): Promise<number> {
  const list = await cluster.redis.client("LIST") as string;
  return list.split("\n").filter((line) =>
    line.includes(`name=octoprox-gateway:${gateway.instance}`)
  )
    .length;
}

describe("a gateway on the HTTP transport", () => {
  it("routes HTTP, CONNECT and SOCKS5, with no TCP connection to Redis", async () => {
    const requestsBefore = rest.total;
    const { username, password } = as({ country: "FR" });
    expect(await exitVia(http, as({ country: "DE" }))).toBe(EXITS[0]);
    const tunnelled = await getThroughTunnel(http.proxyPort, as({ country: "FR" }), ipUrl());
    expect(exitOf(tunnelled)).toBe(EXITS[1]);
    const socksPort = loggedPort(http, "SOCKS5 listener bound");
    const socks = await curl(
      ["-s", "-x", `socks5h://${username}:${password}@127.0.0.1:${socksPort}`, ipUrl()],
      10_000,
    );
    expect(socks.code).toBe(0);
    expect(JSON.parse(socks.stdout).ip).toBe(EXITS[1]);

    // Its Redis traffic is the REST server's: requests there, none on a TCP client of its own.
    expect(await tcpClientsOf(http)).toBe(0);
    expect(await tcpClientsOf(tcp)).toBeGreaterThan(0);
    await cluster.until(() => rest.total > requestsBefore, {
      message: "requests to the REST server",
    });
    expect(await http.metric('octoprox_gateway_redis_http_requests_total{result="answered"}'))
      .toBeGreaterThan(0);
    expect(await http.metric('octoprox_gateway_redis_http_bytes_total{direction="received"}'))
      .toBeGreaterThan(0);
    expect(await tcp.metric('octoprox_gateway_redis_http_requests_total{result="answered"}'))
      .toBe(0);
  });
});

describe("sticky sessions across the two transports", () => {
  /** The session's binding in Redis: the proxy id it names, or null. */
  const binding = (session: string) =>
    cluster.redis.get(cluster.keys.sticky(stickyProject.id, session));

  it.each(
    [
      ["TCP", "HTTP", () => [tcp, http]],
      ["HTTP", "TCP", () => [http, tcp]],
    ] as const,
  )("a session steered on the %s gateway leaves through that exit on the %s one", async (
    _from,
    _to,
    pick,
  ) => {
    const [steering, following] = pick();
    const session = `s${randomBytes(4).toString("hex")}`;
    // Placed by the hash first, then moved to the other country's proxy: no hash gives that.
    const hashed = EXITS.indexOf(await exitVia(steering, as({ session })));
    expect(hashed).toBeGreaterThanOrEqual(0);
    const other = 1 - hashed;
    expect(await exitVia(steering, as({ session, country: COUNTRIES[other] }))).toBe(EXITS[other]);
    await cluster.until(async () => (await binding(session)) === stickyProject.proxyIds[other], {
      timeoutMs: 5_000,
      message: "the steered binding in Redis",
    });
    for (let i = 0; i < 5; i++) {
      expect(await exitVia(following, as({ session }))).toBe(EXITS[other]);
    }
  });
});

describe("rate limits across the two transports", () => {
  it("a connector's rate limit counts both gateways' requests, then both refuse with 429", async () => {
    // One proxy: its window in Redis is the only count there is.
    const project = await createRoutedProject(cluster, [tinyproxies[0].url], {
      connector: {
        rate_limit_config: {
          max_requests: MAX_REQUESTS,
          window_seconds: 300,
          quarantine_seconds_min: 600,
        },
      },
    });
    const counted = () =>
      Promise.all([tcp, http].map((gateway) => gateway.metric(COUNTED))).then(([a, b]) => a + b);
    const countedBefore = await counted();
    for (const gateway of [tcp, http]) {
      await untilAnswer(cluster, gateway, project.credentials, ipUrl(), (a) => a.status === 200, {
        message: `${gateway.instance} to route the limited project`,
      });
    }
    // The two probes served are counted (their writes land after the answers): then the window
    // starts over.
    await cluster.until(async () => (await counted()) === countedBefore + 2, {
      timeoutMs: 5_000,
      message: "the probes' window writes",
    });
    await cluster.redis.del(cluster.keys.proxyRequests(project.proxyIds[0]));
    // Two through TCP, then the last one the limit allows through HTTP: that one trips the
    // proxy only if Redis counted the other gateway's two.
    for (const [index, gateway] of [tcp, tcp, http].entries()) {
      const before = await counted();
      const answer = await viaProxy(gateway.proxyPort, project.credentials, ipUrl());
      expect(answer.status, answer.body).toBe(200);
      await cluster.until(async () => (await counted()) > before, {
        timeoutMs: 5_000,
        message: `request ${index + 1}'s window write`,
      });
    }
    expect(await http.metric(TRIPS)).toBe(1);
    expect(await tcp.metric(TRIPS)).toBe(0);
    for (const gateway of [http, tcp]) {
      await untilAnswer(cluster, gateway, project.credentials, ipUrl(), (a) => a.status === 429, {
        timeoutMs: 10_000,
        message: `${gateway.instance} to refuse with the proxy resting`,
      });
    }
  });

  it("a project's request rate holds across both gateways", async () => {
    const rate = { requests_per_second: 10, burst: 10 };
    const project = await createRoutedProject(cluster, [tinyproxies[0].url], {
      project: { rate_limit: rate },
    });
    for (const gateway of [tcp, http]) {
      await untilAnswer(cluster, gateway, project.credentials, ipUrl(), (a) => a.status === 200, {
        message: `${gateway.instance} to route the rate-limited project`,
      });
    }
    await cluster.until(async () => {
      const answers = await Promise.all(
        Array.from({ length: 30 }, () => viaProxy(http.proxyPort, project.credentials, ipUrl())),
      );
      return answers.some((answer) => answer.status === 429);
    }, { message: "the rate limit in force on the HTTP gateway" });

    // 10 s offered at 80 a second, half through each gateway.
    const seconds = 10;
    const admitted = [0, 0];
    /** Answers neither admitted nor refused for the rate: what they were. */
    const others: string[] = [];
    const endAt = Date.now() + seconds * 1000;
    await Promise.all([tcp, http, tcp, http].map(async (gateway, index) => {
      let next = Date.now();
      while (Date.now() < endAt) {
        const answer = await viaProxy(gateway.proxyPort, project.credentials, ipUrl(), {
          timeoutMs: 10_000,
        }).catch((error: Error) => error);
        if (answer instanceof Error) others.push(`${gateway.instance}: ${answer.message}`);
        else if (answer.status === 200) admitted[index % 2]++;
        else if (answer.status !== 429) {
          others.push(`${gateway.instance}: ${answer.status} ${answer.body.trim()}`);
        }
        next += 50;
        const waitMs = next - Date.now();
        if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
      }
    }));
    const total = admitted[0] + admitted[1];
    // The bucket's rate over the time plus its burst, and a chunk (100 ms of the rate) each
    // gateway may hold leased: one bucket for both, where two would admit twice as many.
    const chunk = Math.ceil(rate.requests_per_second / 10);
    const most = rate.requests_per_second * seconds + rate.burst + 2 * chunk;
    console.info(`request rate over TCP + HTTP: admitted ${admitted.join(" + ")} of ${most}`);
    // What failed for a reason other than the rate (an upstream's hiccup on a loaded machine) is
    // neither admitted nor refused by the limit: shown, and a rare one at most.
    if (others.length > 0) console.warn(`answers other than 200 or 429:\n${others.join("\n")}`);
    expect(others.length).toBeLessThanOrEqual(Math.ceil(0.01 * (total + others.length)));
    expect(total).toBeLessThanOrEqual(most);
    expect(total).toBeGreaterThanOrEqual(0.8 * rate.requests_per_second * seconds);
    for (const count of admitted) expect(count).toBeGreaterThan(0.2 * total);
  });
});

describe("the feed over HTTP", () => {
  it("reaches the HTTP gateway within the poll interval and one read of an edit's publish", async () => {
    const project = await createRoutedProject(cluster, tinyproxies.map((t) => t.url));
    await untilAnswer(cluster, http, project.credentials, ipUrl(), (a) => a.status === 200, {
      message: "the HTTP gateway to route the new project",
    });
    const timings: number[] = [];
    // Each edit gives a proxy a country no proxy had: served through it once the feed carries it.
    for (const [index, country] of ["NL", "IT"].entries()) {
      const asCountry = withOptions(project.credentials, `-cc-${country.toLowerCase()}`);
      expect((await viaProxy(http.proxyPort, asCountry, ipUrl())).status).not.toBe(200);
      const head = await cluster.redis.get(cluster.keys.feedHead);
      const edited = await cluster.request(
        "PATCH",
        `/api/v1/projects/${project.projectId}/proxies/${project.proxyIds[index]}`,
        { country },
      );
      expect(edited.status, JSON.stringify(edited.body)).toBe(200);
      // The publish: the moment the new head lands in Redis.
      await cluster.until(async () => (await cluster.redis.get(cluster.keys.feedHead)) !== head, {
        intervalMs: 5,
        message: "the edit's publish",
      });
      const publishedAt = performance.now();
      await untilAnswer(
        cluster,
        http,
        asCountry,
        ipUrl(),
        (answer) => answer.status === 200 && exitOf(answer) === EXITS[index],
        { intervalMs: 20, message: `the HTTP gateway to serve ${country}` },
      );
      timings.push(performance.now() - publishedAt);
    }
    console.info(`edit to serve over HTTP: ${timings.map(Math.round).join(", ")} ms`);
    for (const ms of timings) expect(ms).toBeLessThan(EDIT_BOUND_MS);
  });
});

describe("the REST server going away", () => {
  it("fails no request while it restarts, and what the gateway writes reaches Redis again", async () => {
    const load = new SteadyLoad([http], as({ country: "DE" }), ipUrl());
    try {
      await cluster.until(() => load.leastOk >= 10, { message: "the steady load under way" });
      for (let round = 0; round < 3; round++) {
        const requestsBefore = rest.total;
        await rest.restart();
        await cluster.until(() => rest.total > requestsBefore, {
          message: "the gateway's requests after a restart",
        });
      }
      const servedBefore = load.leastOk;
      await cluster.until(() => load.leastOk >= servedBefore + 10, {
        message: "the load to go on after the restarts",
      });
    } finally {
      await load.stop();
    }
    expect(load.failures).toEqual([]);
    // Metering confirms batches again, and the feed is read again.
    const confirmed = 'octoprox_gateway_metering_sends_total{result="confirmed"}';
    const [sendsBefore, readsBefore] = [
      await http.metric(confirmed),
      await http.metric(
        "octoprox_gateway_feed_applies_total",
      ),
    ];
    await viaProxy(http.proxyPort, as({ country: "FR" }), ipUrl());
    await cluster.until(async () => (await http.metric(confirmed)) > sendsBefore, {
      timeoutMs: 15_000,
      message: "a metering batch confirmed after the restarts",
    });
    expect(await http.metric("octoprox_gateway_feed_applies_total")).toBeGreaterThanOrEqual(
      readsBefore,
    );
    expect(await http.metric("octoprox_gateway_feed_read_age_seconds")).toBeLessThan(
      (POLL_MS + 2_000) / 1000,
    );
  });

  it.each(
    [
      ["gone", (server: UpstashRest) => server.close()],
      ["hanging", (server: UpstashRest) => server.pause(true)],
    ] as const,
  )("a gateway whose REST server is %s stops within its bound", async (_, fail) => {
    const own = await startUpstashRest({ redisUrl: TEST_REDIS_URL, token: TOKEN });
    try {
      const gateway = await cluster.startGateway({ env: httpEnv(own) });
      await untilAnswer(cluster, gateway, as({ country: "DE" }), ipUrl(), (a) => a.status === 200);
      const failuresBefore = await gateway.metric("octoprox_gateway_feed_failures_total");
      await fail(own);
      await cluster.until(
        async () => (await gateway.metric("octoprox_gateway_feed_failures_total")) > failuresBefore,
        { timeoutMs: 15_000, message: "the feed reads to fail" },
      );
      // Still serving on its last feed: failing open.
      expect(await exitVia(gateway, as({ country: "FR" }))).toBe(EXITS[1]);
      const started = performance.now();
      const exit = await gateway.stop("SIGTERM", 60_000);
      const ms = performance.now() - started;
      console.info(`stopped with the REST server ${_} in ${Math.round(ms)} ms`);
      expect(exit.code).toBe(0);
      expect(ms).toBeLessThan(STOP_BOUND_MS);
    } finally {
      own.pause(false);
      await own.close();
    }
  });
});
