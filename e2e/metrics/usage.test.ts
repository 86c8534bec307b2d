/**
 * Counts that last, end to end: N tunnels carrying known bytes through a real gateway and two
 * real tinyproxies, metered by the gateway into Redis, taken by one metrics flush that a run-now
 * asks a real worker for (role all), and read back through the api: the totals of the project,
 * its connector, each proxy and the destination host equal exactly what the clients sent and
 * received, and a second flush adds nothing.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ProxyWindows, windowKey } from "../../shared/metric-windows.ts";
import { JobKind } from "../../shared/roles.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { basicAuth } from "../../testkit/clients/proxy-client.ts";
import { type Sink, startSink } from "../../testkit/upstreams/sink.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { createRoutedProject, type RoutedProject } from "../../testkit/routing.ts";
import { openConnect } from "../../testkit/clients/raw-http.ts";

const EXITS = ["127.0.0.2", "127.0.0.3"];
/** The sink's greeting: the address the tunnel reached it from, padded to a fixed size. */
const GREETING_BYTES = 16;
const TUNNELS = 24;

let cluster: Cluster;
let gateway: Gateway;
let tinyproxies: Tinyproxy[];
let sink: Sink;
let project: RoutedProject;

beforeAll(async () => {
  [tinyproxies, sink] = await Promise.all([
    Promise.all(EXITS.map((bindAddress) => startTinyproxy({ bindAddress }))),
    startSink({ greetingBytes: GREETING_BYTES }),
  ]);
  // Flushes only when the test asks: the periodic one an hour apart.
  cluster = await Cluster.create({ env: { OCTOPROX_METRICS_FLUSH_INTERVAL: "3600" } });
  await cluster.start("all");
  gateway = await cluster.startGateway();
  project = await createRoutedProject(cluster, tinyproxies.map((t) => t.url));
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([sink, ...(tinyproxies ?? [])].map((server) => server?.close()));
});

interface Flow {
  requests: number;
  sent: number;
  received: number;
}

/**
 * One tunnel: `payload` bytes up, the greeting and twice the payload down. Until the gateway
 * routes the project (its feed may lag the proxies' first checks), it is refused: a refusal is
 * no transfer, so it counts in no usage, and the tunnel is asked again.
 */
async function tunnel(payload: number): Promise<{ exit: string; sent: number; received: number }> {
  const { connection } = await cluster.until(async () => {
    const opened = await openConnect(
      gateway.proxyPort,
      `127.0.0.1:${sink.port}`,
      basicAuth(project.credentials),
    );
    if (opened.response.status === 200) return opened;
    opened.connection.destroy();
    return undefined;
  }, { message: "the gateway to route the project" });
  try {
    const greeting = await connection.take(GREETING_BYTES);
    connection.write(Buffer.alloc(payload, 0x61));
    await connection.take(payload * 2);
    connection.end();
    await connection.waitUntil(() => connection.ended);
    return {
      exit: greeting.toString("latin1").trim(),
      sent: payload,
      received: GREETING_BYTES + payload * 2,
    };
  } finally {
    connection.destroy();
  }
}

async function committedFlushes(): Promise<number> {
  const rows = await cluster.sql`select count(*)::int as n from metric_flushes`;
  return rows[0].n;
}

describe("usage end to end", () => {
  it("counts exactly what clients sent and received, once, after one flush", async () => {
    const byExit = new Map<string, Flow>(
      EXITS.map((exit) => [exit, { requests: 0, sent: 0, received: 0 }]),
    );
    const total: Flow = { requests: 0, sent: 0, received: 0 };
    for (let i = 0; i < TUNNELS; i++) {
      const flow = await tunnel(1_000 + 37 * i);
      const own = byExit.get(flow.exit);
      expect(own, `exit ${flow.exit}`).toBeDefined();
      for (const f of [own!, total]) {
        f.requests += 1;
        f.sent += flow.sent;
        f.received += flow.received;
      }
    }
    // Every tunnel's meter reached Redis (the gateway publishes every 5 s).
    await cluster.until(async () => {
      let requests = 0;
      for (const id of project.proxyIds) {
        requests += Number(
          await cluster.redis.hget(windowKey(cluster.keys, ProxyWindows, id), "requests") ?? 0,
        );
      }
      return requests === TUNNELS;
    }, { message: "the gateway's metering to publish every tunnel", timeoutMs: 20_000 });

    await cluster.runNow(JobKind.metricsFlush);
    expect(await committedFlushes()).toBe(1);
    // The live windows were taken: what the api shows now is the flushed history alone.
    for (const id of project.proxyIds) {
      expect(await cluster.redis.exists(windowKey(cluster.keys, ProxyWindows, id))).toBe(0);
    }

    const expectTotals = async () => {
      const base = `/api/v1/projects/${project.projectId}`;
      const projectUsage = (await cluster.request("GET", `${base}/metrics`)).body.usage;
      expect(projectUsage).toMatchObject({
        requests: total.requests,
        successes: total.requests,
        failures: 0,
        bytes_sent: total.sent,
        bytes_received: total.received,
      });
      const connector = (await cluster.request(
        "GET",
        `${base}/connectors/${project.connectorId}/metrics`,
      )).body.usage;
      expect(connector).toEqual(projectUsage);
      for (const [i, proxyId] of project.proxyIds.entries()) {
        const flow = byExit.get(EXITS[i])!;
        const proxy = (await cluster.request("GET", `${base}/proxies/${proxyId}/metrics`)).body
          .usage;
        expect(proxy).toMatchObject({
          requests: flow.requests,
          bytes_sent: flow.sent,
          bytes_received: flow.received,
        });
      }
      const hosts = (await cluster.request("GET", `${base}/metrics/hosts?range=all`)).body;
      expect(hosts.items).toEqual([{ host: "127.0.0.1", ...projectUsage }]);
    };
    await expectTotals();
    // Both proxies served (round robin), so the per-proxy totals were each put to the test.
    expect([...byExit.values()].every((f) => f.requests > 0)).toBe(true);

    // A second flush: nothing new metered, nothing added, nothing recorded.
    await cluster.runNow(JobKind.metricsFlush);
    expect(await committedFlushes()).toBe(1);
    await expectTotals();
  });
});
