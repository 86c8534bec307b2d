/**
 * The failure log end to end: failed requests through a real gateway, whose upstream (our
 * fault proxy, holding credentials of its own) refuses a CONNECT with a 403 that echoes those
 * credentials and resets a forwarded GET whose URL carries a query; the gateway's counts taken
 * by one flush on a real worker; then the api's failure summary counts each failure once, its
 * examples describe them, and the credentials and the query are in none of: the api's answers,
 * Redis, the processes' logs. A request that went through is in none of it.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { JobKind } from "../../shared/roles.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { basicAuth, type Credentials } from "../../testkit/clients/proxy-client.ts";
import { openConnect, RawConnection } from "../../testkit/clients/raw-http.ts";

const VENDOR = { username: "vendoruser7", password: "VendorS3cretPw" };
const QUERY_SECRET = "QuerySecret123";
/** Targets the fault proxy fails on (IP literals: no name lookup on the way). */
const REFUSED_TARGET = "127.0.0.9";
const RESET_TARGET = "127.0.0.10";

let cluster: Cluster;
let gateway: Gateway;
let origin: Origin;
let upstream: FaultProxy;
let projectId: string;
let connectorId: string;
let proxyId: string;
let credentials: Credentials;

beforeAll(async () => {
  [origin, upstream] = await Promise.all([
    startOrigin(),
    startFaultProxy({
      mode: FaultMode.pass,
      auth: VENDOR,
      hostModes: { [REFUSED_TARGET]: FaultMode.echo403, [RESET_TARGET]: FaultMode.refuse },
    }),
  ]);
  cluster = await Cluster.create({ env: { OCTOPROX_METRICS_FLUSH_INTERVAL: "3600" } });
  await cluster.start("all");
  gateway = await cluster.startGateway();
  credentials = { username: "failing", password: "client-pass-1" };
  const project = await cluster.request("POST", "/api/v1/projects", {
    name: "Failing",
    ...credentials,
    strategy: "round_robin",
    // One attempt a request: each failure below is exactly one.
    max_retries: 0,
  });
  projectId = project.body.id;
  const connector = await cluster.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    name: "vendor",
    kind: "static",
  });
  connectorId = connector.body.id;
  const proxy = await cluster.request("POST", `/api/v1/projects/${projectId}/proxies`, {
    connector_id: connectorId,
    url: upstream.url("http", VENDOR),
  });
  proxyId = proxy.body.id;
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([origin?.close(), upstream?.close()]);
});

/** Every key under the cluster's prefix with its content, as text. */
async function redisText(): Promise<string> {
  const parts: string[] = [];
  const redis = cluster.redis;
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${cluster.prefix}*`, "COUNT", 500);
    cursor = next;
    for (const key of keys) {
      const type = await redis.type(key);
      let value: unknown;
      if (type === "string") value = await redis.get(key);
      else if (type === "hash") value = await redis.hgetall(key);
      else if (type === "set") value = await redis.smembers(key);
      else if (type === "zset") value = await redis.zrange(key, "0", "-1", "WITHSCORES");
      else if (type === "list") value = await redis.lrange(key, 0, -1);
      else if (type === "stream") value = await redis.xrange(key, "-", "+");
      parts.push(key, JSON.stringify(value));
    }
  } while (cursor !== "0");
  return parts.join("\n");
}

function expectNoSecret(text: string, where: string): void {
  for (const secret of [VENDOR.username, VENDOR.password, QUERY_SECRET, "token="]) {
    expect(text.includes(secret), `${secret} in ${where}`).toBe(false);
  }
}

describe("the failure log end to end", () => {
  it("counts each failed request once, describes it scrubbed, and never a success", async () => {
    // Routed: a request that goes through (waiting out the first feed with the healthy proxy).
    await cluster.until(async () => {
      const connection = await RawConnection.open(gateway.proxyPort);
      try {
        connection.write(
          `GET ${origin.url}/ip HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
            `Proxy-Authorization: ${basicAuth(credentials)}\r\nConnection: close\r\n\r\n`,
        );
        return (await connection.readResponse()).status === 200;
      } finally {
        connection.destroy();
      }
    }, { message: "a request through the proxy" });
    const refusalsBefore = await failureCount();

    // A CONNECT the vendor refuses with a 403 echoing our credentials for it.
    const refused = await openConnect(
      gateway.proxyPort,
      `${REFUSED_TARGET}:443`,
      basicAuth(credentials),
    );
    expect(refused.response.status).toBe(502);
    refused.connection.destroy();
    // A GET whose URL carries a secret query, reset by the vendor without an answer.
    const reset = await RawConnection.open(gateway.proxyPort);
    reset.write(
      `GET http://${RESET_TARGET}/report?token=${QUERY_SECRET} HTTP/1.1\r\n` +
        `Host: ${RESET_TARGET}\r\nProxy-Authorization: ${basicAuth(credentials)}\r\n\r\n`,
    );
    expect((await reset.readResponse()).status).toBe(502);
    reset.destroy();

    // The gateway's windows and examples reach Redis within a metering interval or two.
    await cluster.until(async () => (await failureCount()) >= refusalsBefore + 2, {
      message: "the failure windows",
      timeoutMs: 20_000,
    });
    await cluster.runNow(JobKind.metricsFlush);

    const base = `/api/v1/projects/${projectId}`;
    const summary = await cluster.request("GET", `${base}/failures?range=1h`);
    expect(summary.status).toBe(200);
    const attempts = summary.body.rows.filter((row: { connector_id: string | null }) =>
      row.connector_id === connectorId
    );
    const kinds = attempts.map((row: { kind: string }) => row.kind).sort();
    expect(kinds).toHaveLength(2);
    expect(kinds).toContain("upstream_refused");
    expect(["upstream_closed", "upstream_unreachable"]).toContain(
      kinds.find((kind: string) => kind !== "upstream_refused"),
    );
    expect(attempts.find((row: { kind: string }) => row.kind === "upstream_refused")).toEqual({
      kind: "upstream_refused",
      connector_id: connectorId,
      vendor_status: 403,
      count: 1,
    });
    for (const row of attempts) expect(row.count).toBe(1);

    const examples = await cluster.until(async () => {
      const answer = await cluster.request("GET", `${base}/failures/examples`);
      const attemptExamples = answer.body.items.filter((item: { connector_id: string | null }) =>
        item.connector_id === connectorId
      );
      return attemptExamples.length >= 2 ? answer : undefined;
    }, { message: "the two failed attempts' examples" });
    const refusedExample = examples.body.items.find((item: { kind: string }) =>
      item.kind === "upstream_refused"
    );
    expect(refusedExample).toMatchObject({
      protocol: "connect",
      client_status: 502,
      vendor_status: 403,
      connector_id: connectorId,
      proxy_id: proxyId,
      target: `${REFUSED_TARGET}:443`,
    });
    const resetExample = examples.body.items.find((item: { kind: string }) =>
      item.kind === "upstream_closed" || item.kind === "upstream_unreachable"
    );
    expect(resetExample).toMatchObject({ protocol: "http", client_status: 502 });
    expect(resetExample.message).toContain(`http://${RESET_TARGET}/report`);
    // The requests that went through were described nowhere (those refused while the gateway
    // had no feed yet are refusals, without a connector).
    const throughProxy = examples.body.items.filter((item: { connector_id: string | null }) =>
      item.connector_id === connectorId
    );
    expect(throughProxy.map((item: { target: string }) => item.target).sort()).toEqual(
      [`${REFUSED_TARGET}:443`, `${RESET_TARGET}:80`].sort(),
    );

    // The proxy's usage: its failed attempts counted as requests that failed.
    const usage = (await cluster.request("GET", `${base}/proxies/${proxyId}/metrics`)).body.usage;
    expect(usage.failures).toBe(2);
    expect(usage.successes).toBeGreaterThanOrEqual(1);

    // Neither the vendor's credentials nor the client's query string anywhere.
    expectNoSecret(JSON.stringify(summary.body), "the failure summary");
    expectNoSecret(JSON.stringify(examples.body), "the failure examples");
    expectNoSecret(await redisText(), "Redis");
    for (const member of cluster.members) {
      expectNoSecret(JSON.stringify(member.logs()), `the logs of ${member.instance}`);
    }
  });
});

/** Failures counted in the project's failure windows so far (live, not flushed). */
async function failureCount(): Promise<number> {
  const index = await cluster.redis.smembers(cluster.keys.metricIndex("failure"));
  let total = 0;
  for (const key of index.filter((k) => k.includes(projectId))) {
    total += Number(await cluster.redis.hget(key, "count") ?? 0);
  }
  return total;
}
