/**
 * Request metering through a real gateway (gateway/main.ts under Deno) in front of a real
 * control plane (role all), two tinyproxy exits (127.0.0.2 in DE, 127.0.0.3 in FR, each the one
 * proxy of its own connector) and a PRIVATE Redis server this file starts with persistence (an
 * append-only file), so a stopped server comes back with its data.
 *
 * What the windows count (gateway/metering, docs/metering.md): `bytes_sent` is every byte the
 * gateway relayed from the client to the upstream, `bytes_received` every byte it relayed from
 * the upstream to the client.
 * - A forwarded HTTP exchange: the request as the gateway wrote it upstream (its head as
 *   rewritten: the client's request line and fields minus the hop-by-hop ones, here the
 *   client's `Proxy-Authorization`, plus `Connection: keep-alive`, since the gateway keeps its
 *   connections to HTTP upstreams for the next request; then the body byte for byte), and the
 *   answer as the gateway wrote it to the client (head and body): exactly what the client
 *   read on its socket.
 * - A CONNECT tunnel: the bytes relayed each way once the tunnel is up; the client's CONNECT
 *   head and the gateway's `200 Connection established` are the gateway's own, not relayed.
 * - The gateway's own answers (a refusal) are no transfer: counted as rejections and demand,
 *   and under the project's failure key for the refusal's kind. A failed attempt through a proxy
 *   would count as a request and a failure of that proxy and under its failure key: none fails
 *   here, so the failure windows hold the refusals alone.
 *
 * The expected totals come from the client sockets (`bytesWritten`, `bytesRead`), not from body
 * sizes: a test's clients write raw requests and read the answers whole.
 *
 * - known requests (GETs of fixed sizes up to 3 MB, POSTs with known bodies, a chunked answer,
 *   tunnels with known bytes both ways, one refusal) give per-proxy, per-connector, per-project
 *   and per-host windows, demand and rejections equal to the clients' counts, exactly: through a
 *   gateway of one isolate, of two, and of one on the HTTP Redis transport (the Upstash REST
 *   stand-in, testkit/upstreams/upstash-rest.ts, in front of the same Redis);
 * - the same under steady traffic through a 20 s Redis outage (the server stopped and started
 *   again on its port): nothing lost, nothing counted twice;
 * - the same when Redis stops answering (frozen with SIGSTOP) past the gateway's send timeout
 *   and then applies every send it had queued, the timed-out ones included: a batch whose reply
 *   came too late, sent again, is counted once.
 *
 * The control plane's metrics_flush job has no handler yet, so nothing takes the windows out
 * of Redis meanwhile; the tests check that no flush staged any.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  ConnectorWindows,
  type EntityWindows,
  FailureWindows,
  HostWindows,
  ProjectWindows,
  ProxyWindows,
  readCounts,
  TRANSFER_FIELDS,
  windowIndexKey,
  windowKey,
} from "../../shared/metric-windows.ts";
import { LocalRedis } from "../../scripts/local-stores.ts";
import { freePort } from "../../testkit/ports.ts";
import { openConnect, RawConnection } from "../../testkit/clients/raw-http.ts";
import { TEST_REDIS_URL } from "../../testkit/stores.ts";
import { JobKind, WORKER_JOB_KINDS } from "../../shared/roles.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { basicAuth, type Credentials } from "../../testkit/clients/proxy-client.ts";
import { type Sink, startSink } from "../../testkit/upstreams/sink.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { waitForStatuses } from "../../testkit/routing.ts";
import { startUpstashRest, type UpstashRest } from "../../testkit/upstreams/upstash-rest.ts";

const EXITS = ["127.0.0.2", "127.0.0.3"];
const COUNTRIES = ["DE", "FR"];
const DE = 0;
const FR = 1;
/** What the gateway adds to every request head it sends an HTTP upstream. */
const UPSTREAM_CONNECTION_FIELD = "Connection: keep-alive\r\n";

let folder: string;
let redis: LocalRedis;
let cluster: Cluster;
let gateway: Gateway;
/** The same gateway serving from two isolates, each with its own batch writer. */
let gatewayTwoIsolates: Gateway;
/** A gateway on the HTTP Redis transport, through `rest`. */
let gatewayHttp: Gateway;
let rest: UpstashRest;
let origin: Origin;
let sink: Sink;
let tinyproxies: Tinyproxy[];
/** The Redis server's pid while a test holds it stopped with SIGSTOP. */
let frozen: number | undefined;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-gw-metering-"));
  redis = new LocalRedis({
    dir: join(folder, "redis"),
    port: await freePort(),
    persist: true,
  });
  [origin, sink, tinyproxies] = await Promise.all([
    startOrigin(),
    startSink(),
    Promise.all(EXITS.map((bindAddress) => startTinyproxy({ bindAddress }))),
    redis.start(),
  ]);
  rest = await startUpstashRest({
    redisUrl: redis.url,
    token: `rest-${randomBytes(12).toString("hex")}`,
  });
  // The windows are read where the gateways write them: no worker flushes them into Postgres.
  cluster = await Cluster.create({
    redisUrl: redis.url,
    env: {
      OCTOPROX_WORKER_JOBS: WORKER_JOB_KINDS.filter((kind) => kind !== JobKind.metricsFlush).join(
        ",",
      ),
    },
  });
  await cluster.start("all");
  [gateway, gatewayTwoIsolates, gatewayHttp] = await Promise.all([
    cluster.startGateway(),
    cluster.startGateway({ env: { OCTOPROX_GATEWAY_ISOLATES: "2" } }),
    cluster.startGateway({
      env: { OCTOPROX_REDIS_URL: rest.url, OCTOPROX_REDIS_TOKEN: rest.token },
    }),
  ]);
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  // A test that failed mid-outage may have left the server frozen or stopped: the cluster's
  // cleanup of its keys needs it.
  if (frozen !== undefined) process.kill(frozen, "SIGCONT");
  await redis?.start().catch(() => {});
  await cluster?.close();
  await Promise.all([origin, sink, rest, ...(tinyproxies ?? [])].map((server) => server?.close()));
  await redis?.stop();
  if (folder) await rm(folder, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// What the clients sent and received, per proxy (an index of EXITS).

interface Flow {
  requests: number;
  sent: number;
  received: number;
}

class Tally {
  readonly proxies: Flow[] = EXITS.map(() => ({ requests: 0, sent: 0, received: 0 }));
  /** The gateway's own answers to this project's clients (each a rejection and demand). */
  refusals = 0;

  add(proxy: number, sent: number, received: number): void {
    const flow = this.proxies[proxy];
    flow.requests++;
    flow.sent += sent;
    flow.received += received;
  }

  get total(): Flow {
    return this.proxies.reduce((sum, flow) => ({
      requests: sum.requests + flow.requests,
      sent: sum.sent + flow.sent,
      received: sum.received + flow.received,
    }), { requests: 0, sent: 0, received: 0 });
  }
}

interface MeteredProject {
  projectId: string;
  /** Per proxy index: its connector (one proxy each). */
  connectorIds: string[];
  proxyIds: string[];
  password: string;
}

function as(project: MeteredProject, proxy: number, username: string): Credentials {
  return {
    username: `${username}-cc-${COUNTRIES[proxy].toLowerCase()}`,
    password: project.password,
  };
}

/**
 * One forwarded request on a keep-alive raw connection, written byte by byte as given and its
 * answer read whole. Answers the status, the exchange's bytes as metering must count them
 * (derived from the socket's counts), and the body.
 */
async function forward(
  connection: RawConnection,
  credentials: Credentials,
  method: string,
  path: string,
  bodyBytes?: number,
): Promise<{ status: number; sent: number; received: number; body: Buffer }> {
  const authority = `127.0.0.1:${origin.port}`;
  const authorization = `Proxy-Authorization: ${basicAuth(credentials)}\r\n`;
  const head = `${method} http://${authority}${path} HTTP/1.1\r\n` +
    `Host: ${authority}\r\n${authorization}X-Meter: ${randomBytes(4).toString("hex")}\r\n` +
    (bodyBytes === undefined ? "" : `Content-Length: ${bodyBytes}\r\n`) + "\r\n";
  const socket = connection.socket;
  const before = { written: socket.bytesWritten, read: socket.bytesRead };
  connection.write(head);
  if (bodyBytes) connection.write(Buffer.alloc(bodyBytes, 0x62));
  const response = await connection.readResponse({ method, timeoutMs: 20_000 });
  const wrote = socket.bytesWritten - before.written;
  const read = socket.bytesRead - before.read;
  // The socket wrote what was given, and read the one answer and nothing more.
  expect(wrote).toBe(Buffer.byteLength(head) + (bodyBytes ?? 0));
  expect(connection.buffered.length).toBe(0);
  return {
    status: response.status,
    sent: wrote - Buffer.byteLength(authorization) + Buffer.byteLength(UPSTREAM_CONNECTION_FIELD),
    received: read,
    body: response.body,
  };
}

/** A forwarded request counted into `tally` when relayed (200), as a refusal otherwise. */
async function counted(
  tally: Tally,
  proxy: number,
  connection: RawConnection,
  credentials: Credentials,
  method: string,
  path: string,
  bodyBytes?: number,
): Promise<Buffer> {
  const exchange = await forward(connection, credentials, method, path, bodyBytes);
  if (exchange.status !== 200) {
    throw new Error(`${method} ${path}: ${exchange.status} ${exchange.body.toString()}`);
  }
  tally.add(proxy, exchange.sent, exchange.received);
  return exchange.body;
}

/**
 * A CONNECT tunnel to the sink through `proxy`'s country: writes each chunk in turn and reads
 * its two-for-one answer, then ends its side and waits for the tunnel's end. Counts the bytes
 * relayed each way from the socket's counts, past the gateway's `200 Connection established`.
 */
async function tunnel(
  tally: Tally,
  proxy: number,
  credentials: Credentials,
  chunks: readonly number[],
  via: Gateway = gateway,
): Promise<void> {
  const { connection, response } = await openConnect(
    via.proxyPort,
    `127.0.0.1:${sink.port}`,
    basicAuth(credentials),
  );
  try {
    if (response.status !== 200) throw new Error(`CONNECT: ${response.status} ${response.head}`);
    const socket = connection.socket;
    // Only the gateway's own answer was read so far.
    expect(socket.bytesRead).toBe(Buffer.byteLength(response.head, "latin1") + 4);
    const before = { written: socket.bytesWritten, read: socket.bytesRead };
    let payload = 0;
    for (const size of chunks) {
      connection.write(Buffer.alloc(size, 0x61));
      payload += size;
      await connection.take(2 * size, 20_000);
    }
    connection.end();
    await connection.waitUntil(() => connection.ended, 20_000);
    const sent = socket.bytesWritten - before.written;
    const received = socket.bytesRead - before.read;
    expect(sent).toBe(payload);
    expect(received).toBe(2 * payload);
    tally.add(proxy, sent, received);
  } finally {
    connection.destroy();
  }
}

/**
 * A project with two connectors, one proxy each (DE, FR), made through the API; waits until the
 * gateway (`via`) routes each country through its exit. Those waits are requests too: counted.
 */
async function createMeteredProject(tally: Tally, via = gateway): Promise<MeteredProject> {
  const username = `m${randomBytes(4).toString("hex")}`;
  const password = `pw-${randomBytes(8).toString("hex")}`;
  const created = await cluster.request("POST", "/api/v1/projects", {
    name: username,
    username,
    password,
    strategy: "random",
  });
  expect(created.status).toBe(201);
  const project: MeteredProject = {
    projectId: created.body.id,
    connectorIds: [],
    proxyIds: [],
    password,
  };
  for (const [index, tinyproxy] of tinyproxies.entries()) {
    const connector = await cluster.request(
      "POST",
      `/api/v1/projects/${project.projectId}/connectors`,
      { name: `static-${COUNTRIES[index].toLowerCase()}`, kind: "static" },
    );
    expect(connector.status).toBe(201);
    project.connectorIds.push(connector.body.id);
    const proxy = await cluster.request("POST", `/api/v1/projects/${project.projectId}/proxies`, {
      connector_id: connector.body.id,
      url: tinyproxy.url,
      country: COUNTRIES[index],
    });
    expect(proxy.status).toBe(201);
    project.proxyIds.push(proxy.body.id);
  }
  await waitForStatuses(cluster, project.proxyIds, "healthy");
  for (const proxy of [DE, FR]) {
    const exchange = await cluster.until(async () => {
      const connection = await RawConnection.open(via.proxyPort);
      try {
        const answer = await forward(connection, as(project, proxy, username), "GET", "/ip");
        // 407: the project is not in this gateway's feed yet (no project to count it under).
        if (answer.status === 407) return undefined;
        if (answer.status !== 200) {
          tally.refusals++; // the project is known, its proxy not routed yet
          return undefined;
        }
        return answer;
      } finally {
        connection.destroy();
      }
    }, { timeoutMs: 20_000, message: `the gateway to route ${COUNTRIES[proxy]}` });
    tally.add(proxy, exchange.sent, exchange.received);
    expect(JSON.parse(exchange.body.toString()).ip).toBe(EXITS[proxy]);
  }
  usernames.set(project.projectId, username);
  return project;
}

const usernames = new Map<string, string>();
const user = (project: MeteredProject, proxy: number) =>
  as(project, proxy, usernames.get(project.projectId)!);

// ---------------------------------------------------------------------------------------------
// The gateway's metering and the windows in Redis.

const METERING = "octoprox_gateway_metering";

/** Nothing owed, pending or running in the gateway's metering: every count is in Redis. */
async function meteringSettled(via: Gateway = gateway): Promise<boolean> {
  const [owed, pending, open] = await Promise.all([
    via.metric(`${METERING}_owed_parts`),
    via.metric(`${METERING}_pending_rows`),
    via.metric(`${METERING}_meters_open`),
  ]);
  return owed === 0 && pending === 0 && open === 0;
}

async function transferWindow(kind: EntityWindows<string>, id: string) {
  const key = windowKey(cluster.keys, kind, id);
  expect(await cluster.redis.sismember(windowIndexKey(cluster.keys, kind), key)).toBe(1);
  return readCounts(TRANSFER_FIELDS, await cluster.redis.hgetall(key));
}

function expectFlow(
  counts: Awaited<ReturnType<typeof transferWindow>>,
  flow: Flow,
  what: string,
): void {
  const { latency_sum_ms: latency, ...exact } = counts;
  expect(exact, what).toEqual({
    requests: flow.requests,
    successes: flow.requests,
    failures: 0,
    bytes_sent: flow.sent,
    bytes_received: flow.received,
  });
  expect(latency, what).toBeGreaterThan(0);
}

/**
 * Waits until nothing is in flight in the gateway's metering and the project's window holds at
 * least every request of `tally` (more is a count applied twice: expectWindows shows it).
 */
async function untilPublished(
  project: MeteredProject,
  tally: Tally,
  via: Gateway = gateway,
): Promise<void> {
  const key = windowKey(cluster.keys, ProjectWindows, project.projectId);
  const expected = tally.total.requests;
  let seen = 0;
  try {
    await cluster.until(async () => {
      if (!(await meteringSettled(via))) return false;
      seen = Number(await cluster.redis.hget(key, "requests") ?? 0);
      return seen >= expected;
    }, {
      // One publish every 5 s; two cycles and some.
      timeoutMs: 20_000,
      intervalMs: 200,
      message: `metering to publish ${expected} requests`,
    });
  } catch (error) {
    throw new Error(`The project's window holds ${seen} of ${expected} requests`, {
      cause: error,
    });
  }
}

/** Waits until some of the project's traffic is in its window in Redis. */
async function untilFirstPublish(project: MeteredProject): Promise<void> {
  const key = windowKey(cluster.keys, ProjectWindows, project.projectId);
  await cluster.until(async () => Number(await cluster.redis.hget(key, "requests")) > 0, {
    timeoutMs: 20_000,
    intervalMs: 200,
    message: "a first publish of the traffic",
  });
}

/** Every window of the project against the clients' counts. */
async function expectWindows(project: MeteredProject, tally: Tally): Promise<void> {
  for (const proxy of [DE, FR]) {
    const flow = tally.proxies[proxy];
    expect(flow.requests).toBeGreaterThan(0);
    expectFlow(await transferWindow(ProxyWindows, project.proxyIds[proxy]), flow, "proxy");
    expectFlow(
      await transferWindow(ConnectorWindows, project.connectorIds[proxy]),
      flow,
      "connector",
    );
    // Every target was 127.0.0.1 (the origin, the sink).
    const host = windowKey(cluster.keys, HostWindows, {
      projectId: project.projectId,
      connectorId: project.connectorIds[proxy],
      host: "127.0.0.1",
    });
    expect(await cluster.redis.sismember(windowIndexKey(cluster.keys, HostWindows), host)).toBe(1);
    expectFlow(readCounts(TRANSFER_FIELDS, await cluster.redis.hgetall(host)), flow, "host");
  }
  expectFlow(await transferWindow(ProjectWindows, project.projectId), tally.total, "project");

  // Demand: every transfer begun and every refusal, over the minutes the test spanned.
  const demand = { requests: 0, rejections: 0 };
  for (const key of await cluster.redis.keys(`${cluster.prefix}demand:${project.projectId}:*`)) {
    const hash = await cluster.redis.hgetall(key);
    demand.requests += Number(hash.requests ?? 0);
    demand.rejections += Number(hash.rejections ?? 0);
  }
  expect(demand).toEqual({ requests: tally.total.requests, rejections: tally.refusals });

  // The failure windows hold the refusals and nothing else: every transfer went through, and
  // no attempt failed (one would count under its connector).
  const failures = { count: 0, underConnectors: 0 };
  const windowPrefix = cluster.keys.metricWindow(FailureWindows.name, "");
  for (const key of await cluster.redis.smembers(windowIndexKey(cluster.keys, FailureWindows))) {
    const parsed = FailureWindows.parseKey(key.slice(windowPrefix.length));
    if (parsed?.projectId !== project.projectId) continue;
    failures.count += Number(await cluster.redis.hget(key, "count"));
    if (parsed.connectorId !== null) failures.underConnectors++;
  }
  expect(failures).toEqual({ count: tally.refusals, underConnectors: 0 });

  // Nothing took windows out of Redis meanwhile (the metrics flush stages what it takes).
  expect(await cluster.redis.keys(`${cluster.prefix}metrics:taken:*`)).toEqual([]);
}

// ---------------------------------------------------------------------------------------------

describe("metering counts in Redis", () => {
  it.each([
    ["one isolate", () => gateway],
    ["two isolates", () => gatewayTwoIsolates],
    ["Redis over HTTP", () => gatewayHttp],
  ])("match what the clients sent and received, exactly (%s)", async (_, pick) => {
    const via = pick();
    const isolates = via === gatewayTwoIsolates ? 2 : 1;
    expect(cluster.redisUrl).not.toBe(TEST_REDIS_URL);
    const tally = new Tally();
    const project = await createMeteredProject(tally, via);

    const http = async (proxy: number, requests: [string, string, number?][]) => {
      const connection = await RawConnection.open(via.proxyPort);
      try {
        for (const [method, path, body] of requests) {
          await counted(tally, proxy, connection, user(project, proxy), method, path, body);
        }
        // One keep-alive connection carried them all.
        expect(connection.closed).toBe(false);
      } finally {
        connection.destroy();
      }
    };
    await Promise.all([
      http(DE, [
        ["GET", "/bytes/0"],
        ["GET", "/bytes/1"],
        ["GET", "/bytes/1000"],
        // Past the 1 MiB a meter reports at, each way.
        ["GET", "/bytes/3000000"],
        ["POST", "/bytes/10", 2_000_000],
        ["POST", "/bytes/100", 5],
        ["GET", "/chunked"],
      ]),
      http(FR, [
        ["GET", "/bytes/65536"],
        ["POST", "/bytes/0", 12_345],
        ["GET", "/bytes/7"],
        ["GET", "/chunked"],
      ]),
      tunnel(tally, DE, user(project, DE), [100, 5_000], via),
      tunnel(tally, FR, user(project, FR), [1_500_000], via),
      tunnel(tally, FR, user(project, FR), [1], via),
    ]);

    // A refusal of the gateway's own: no transfer, one rejection.
    const refused = await RawConnection.open(via.proxyPort);
    try {
      const answer = await forward(refused, user(project, DE), "GET", "/ip");
      expect(answer.status).toBe(200);
      tally.add(DE, answer.sent, answer.received);
      refused.write(
        `GET http://10.0.0.1/ HTTP/1.1\r\nHost: 10.0.0.1\r\n` +
          `Proxy-Authorization: ${basicAuth(user(project, DE))}\r\n\r\n`,
      );
      expect((await refused.readResponse()).status).toBe(403);
      tally.refusals++;
    } finally {
      refused.destroy();
    }

    if (isolates > 1) {
      // Requests on new connections, so the kernel hands some to each isolate (each of which
      // meters with a batch writer of its own): 12 all to one isolate is a 1-in-2,048 chance.
      for (let i = 0; i < 12; i++) {
        const connection = await RawConnection.open(via.proxyPort);
        try {
          await counted(tally, i % 2, connection, user(project, i % 2), "GET", "/bytes/10");
        } finally {
          connection.destroy();
        }
      }
    }
    await untilPublished(project, tally, via);
    await expectWindows(project, tally);
    // Every isolate's writer had its batches applied.
    const writers = await cluster.redis.keys(`${cluster.prefix}applied:${via.instance}:*`);
    expect(writers).toHaveLength(isolates);
    const rejection = windowKey(cluster.keys, FailureWindows, {
      projectId: project.projectId,
      connectorId: null,
      kind: "destination_prohibited",
      vendorStatus: null,
    });
    expect(await cluster.redis.hget(rejection, "count")).toBe("1");
    console.info(`metered exactly: ${JSON.stringify(tally.total)}`);
  });
});

/**
 * Steady traffic of every kind through the gateway until stopped: forwarded GETs and POSTs on a
 * keep-alive connection per country, short tunnels in turn through each, and one long tunnel
 * open throughout, writing every 100 ms. Every exchange is counted into the tally when it is
 * complete; every failure is kept.
 */
class Traffic {
  readonly failures: string[] = [];
  done = 0;
  #stopped = false;
  readonly #loops: Promise<void>[];
  readonly tally: Tally;
  readonly project: MeteredProject;

  constructor(tally: Tally, project: MeteredProject) {
    this.tally = tally;
    this.project = project;
    this.#loops = [
      this.#http(DE),
      this.#http(FR),
      this.#tunnels(),
      this.#longTunnel(FR),
    ];
  }

  async #guard(what: string, work: () => Promise<void>): Promise<void> {
    try {
      await work();
      this.done++;
    } catch (error) {
      this.failures.push(`${what}: ${(error as Error).message}`);
    }
    // A steady trickle, not a flood: pacing the load, not waiting for anything.
    await new Promise((resolve) => setTimeout(resolve, 10));
  }

  async #http(proxy: number): Promise<void> {
    const sizes = [0, 1, 777, 4_096, 70_000];
    const bodies = [3, 2_048, 150_000];
    let connection = await RawConnection.open(gateway.proxyPort);
    try {
      for (let i = 0; !this.#stopped; i++) {
        if (connection.ended) {
          this.failures.push(`${COUNTRIES[proxy]}: the gateway closed a keep-alive connection`);
          connection.destroy();
          connection = await RawConnection.open(gateway.proxyPort);
        }
        const size = sizes[i % sizes.length];
        await this.#guard(`${COUNTRIES[proxy]} #${i}`, async () => {
          if (i % 3 === 2) {
            const body = bodies[i % bodies.length];
            await counted(
              this.tally,
              proxy,
              connection,
              user(this.project, proxy),
              "POST",
              `/bytes/${size}`,
              body,
            );
          } else {
            await counted(
              this.tally,
              proxy,
              connection,
              user(this.project, proxy),
              "GET",
              `/bytes/${size}`,
            );
          }
        });
      }
    } finally {
      connection.destroy();
    }
  }

  async #tunnels(): Promise<void> {
    const shapes = [[10], [1_000, 20_000], [300_000]];
    for (let i = 0; !this.#stopped; i++) {
      const proxy = i % 2 === 0 ? DE : FR;
      await this.#guard(
        `tunnel #${i}`,
        () => tunnel(this.tally, proxy, user(this.project, proxy), shapes[i % shapes.length]),
      );
    }
  }

  /** One tunnel for the whole run: its meter reports at every publish, finishes at the end. */
  async #longTunnel(proxy: number): Promise<void> {
    await this.#guard("long tunnel", async () => {
      const { connection, response } = await openConnect(
        gateway.proxyPort,
        `127.0.0.1:${sink.port}`,
        basicAuth(user(this.project, proxy)),
      );
      try {
        expect(response.status).toBe(200);
        const socket = connection.socket;
        const before = { written: socket.bytesWritten, read: socket.bytesRead };
        let payload = 0;
        while (!this.#stopped) {
          connection.write(Buffer.alloc(16_384, 0x61));
          payload += 16_384;
          await connection.take(2 * 16_384, 20_000);
          // A long tunnel that carries a little now and then: the pace is the behaviour.
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        connection.end();
        await connection.waitUntil(() => connection.ended, 20_000);
        expect(socket.bytesWritten - before.written).toBe(payload);
        expect(socket.bytesRead - before.read).toBe(2 * payload);
        this.tally.add(proxy, payload, 2 * payload);
      } finally {
        connection.destroy();
      }
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#loops);
  }
}

describe("metering through a Redis outage", () => {
  it("loses nothing and counts nothing twice over a 20 s outage during traffic", {
    timeout: 150_000,
  }, async () => {
    expect(cluster.redisUrl).toBe(redis.url);
    expect(redis.persist).toBe(true);
    const tally = new Tally();
    const project = await createMeteredProject(tally);
    const failed = () => gateway.metric(`${METERING}_sends_total{result="failed"}`);
    const traffic = new Traffic(tally, project);
    let outage = { requests: 0, seconds: 0 };
    try {
      // Some of this traffic is in Redis before the outage.
      await untilFirstPublish(project);
      const failedBefore = await failed();
      await redis.stop();
      const stoppedAt = Date.now();
      const doneAtStop = traffic.done;
      // Down for 20 s while the traffic goes on, and the gateway has found its sends failing.
      await cluster.until(async () => {
        return Date.now() - stoppedAt >= 20_000 && (await failed()) > failedBefore &&
          traffic.done > doneAtStop + 50;
      }, { timeoutMs: 45_000, intervalMs: 250, message: "20 s of traffic with Redis down" });
      await redis.start();
      outage = {
        requests: traffic.done - doneAtStop,
        seconds: Math.round((Date.now() - stoppedAt) / 100) / 10,
      };
      const doneAtStart = traffic.done;
      // Sends work again (the owed batch first), and traffic goes on a while after.
      await cluster.until(async () => {
        return (await gateway.metric(`${METERING}_consecutive_failures`)) === 0 &&
          traffic.done > doneAtStart + 50;
      }, { timeoutMs: 30_000, intervalMs: 250, message: "metering to recover" });
    } finally {
      await traffic.stop();
    }
    expect(traffic.failures).toEqual([]);
    await untilPublished(project, tally);
    await expectWindows(project, tally);
    // The gateway said what happened.
    const logs = gateway.logs().map((line) => line.msg);
    expect(logs).toContain("Metering publish failed; the batch is owed");
    expect(logs).toContain("Metering publish recovered");
    console.info(
      `metered exactly through a ${outage.seconds} s outage: ${JSON.stringify(tally.total)}, ` +
        `${outage.requests} transfers while Redis was down`,
    );
  });
});

describe("metering when Redis answers too late", () => {
  it("counts a batch once when Redis applied it after the gateway gave up on the reply", {
    timeout: 120_000,
  }, async () => {
    expect(cluster.redisUrl).toBe(redis.url);
    const tally = new Tally();
    const project = await createMeteredProject(tally);
    const logLines = () =>
      gateway.logs().filter((line) =>
        line.msg === "Metering publish failed; the batch is owed" &&
        String(line.error).startsWith("No reply within")
      ).length;
    const traffic = new Traffic(tally, project);
    let unanswered = 0;
    try {
      await untilFirstPublish(project);
      const timeoutsBefore = logLines();
      const consecutive = () => gateway.metric(`${METERING}_consecutive_failures`);
      // Frozen: connections stay open and commands queue unanswered in its socket buffers.
      frozen = redis.pid!;
      process.kill(frozen, "SIGSTOP");
      // Until a send went unanswered past the send timeout (5 s): it waits in Redis's queue,
      // and its batch is owed.
      await cluster.until(async () => logLines() > timeoutsBefore && (await consecutive()) >= 1, {
        timeoutMs: 30_000,
        intervalMs: 250,
        message: "sends unanswered while Redis is frozen",
      });
      unanswered = await consecutive();
      process.kill(frozen, "SIGCONT");
      frozen = undefined;
      // Redis runs the queued send now: it applies the batch, and its reply is dropped (the
      // gateway gave up on it). The next cycle sends the owed batch again, which Redis finds
      // applied before. Then traffic goes on a while.
      const doneAtThaw = traffic.done;
      await cluster.until(async () => {
        return (await consecutive()) === 0 && traffic.done > doneAtThaw + 50;
      }, { timeoutMs: 30_000, intervalMs: 250, message: "metering to recover" });
    } finally {
      await traffic.stop();
    }
    expect(traffic.failures).toEqual([]);
    await untilPublished(project, tally);
    await expectWindows(project, tally);
    console.info(
      `metered exactly after ${unanswered} unanswered send(s) of one batch: ` +
        JSON.stringify(tally.total),
    );
  });
});
