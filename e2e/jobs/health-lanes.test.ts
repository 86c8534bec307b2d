/**
 * New proxies are not held behind periodic re-checks, nor a batch's live verdicts behind its
 * hanging checks. An api and a worker with four probe slots (one kept for first-lane checks), no
 * controller (the test appends the periodic work itself), real upstream processes: a tinyproxy
 * that answers and a fault proxy that accepts and never answers.
 *
 * - a batch of five working proxies and one hanging: the five turn healthy within a verdict group
 *   or two, long before the hanging one's check times out;
 * - a backlog of periodic re-checks of hanging proxies on the regular stream fills every probe
 *   slot they may take; a proxy added then (its check on the first lane) is healthy within 5 s.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { JobKind } from "../../shared/roles.ts";
import { Cluster } from "../../testkit/cluster.ts";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";

const CHECK_TIMEOUT_S = 8;
const PROBES = 4;

let cluster: Cluster;
let tinyproxy: Tinyproxy;
let hang: FaultProxy;

beforeAll(async () => {
  cluster = await Cluster.create();
  const api = await cluster.start("api");
  [, tinyproxy, hang] = await Promise.all([
    cluster.start("worker", {
      env: {
        OCTOPROX_ECHO_URL: `${api.url}/echo`,
        OCTOPROX_HEALTH_CHECK_TIMEOUT: String(CHECK_TIMEOUT_S),
        OCTOPROX_HEALTH_CHECK_CONCURRENCY: String(PROBES),
      },
    }),
    startTinyproxy({ bindAddress: "127.0.0.2" }),
    startFaultProxy({ mode: FaultMode.hang }),
  ]);
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await tinyproxy?.close();
  await hang?.close();
});

/** `proxy`'s URL with a login of its own, so each line is a proxy of its own. */
const withLogin = (url: string, username: string) => {
  const parsed = new URL(url);
  parsed.username = username;
  parsed.password = "p";
  return parsed.href;
};

/** Uploads `lines` to the connector in one request (one batch of first-lane checks). */
async function upload(
  connector: { projectId: string; connectorId: string },
  lines: string[],
): Promise<void> {
  const response = await fetch(
    `${cluster.apiUrl}/api/v1/projects/${connector.projectId}/proxies/upload?connector_id=${connector.connectorId}`,
    {
      method: "POST",
      headers: { authorization: `Bearer ${await cluster.token()}`, "content-type": "text/plain" },
      body: lines.join("\n"),
    },
  );
  expect(response.status).toBe(200);
  expect(await response.json()).toMatchObject({ added: lines.length });
}

async function idsOf(connectorId: string, host: string): Promise<Map<string, string>> {
  const rows = await cluster.sql<{ id: string; username: string }[]>`
    select id, username from proxies where connector_id = ${connectorId} and port = ${
    Number(new URL(host).port)
  }`;
  return new Map(rows.map((row) => [row.username, row.id]));
}

describe("health checks that go first", () => {
  it("turns a batch's working proxies healthy while its hanging one is still being checked", async () => {
    const connector = await cluster.createConnector();
    const started = Date.now();
    await upload(connector, [
      ...[1, 2, 3, 4, 5].map((n) => withLogin(tinyproxy.url, `live${n}`)),
      withLogin(hang.url(), "hanging"),
    ]);
    const live = [...(await idsOf(connector.connectorId, tinyproxy.url)).values()];
    const [hanging] = [...(await idsOf(connector.connectorId, hang.url())).values()];
    expect(live).toHaveLength(5);
    await cluster.until(
      async () => {
        const statuses = await Promise.all(live.map((id) => cluster.status(id)));
        return statuses.every((s) => s === "healthy") ? true : undefined;
      },
      { message: "the working proxies to turn healthy", timeoutMs: 30_000 },
    );
    // Their verdicts did not wait for the hanging check, which is still running.
    expect(Date.now() - started).toBeLessThan(CHECK_TIMEOUT_S * 1000);
    expect(await cluster.status(hanging)).toBe("initializing");
    // Its own verdict comes at its timeout.
    await cluster.until(
      async () => (await cluster.status(hanging)) === "degraded" ? true : undefined,
      { message: "the hanging proxy's check to time out", timeoutMs: 30_000 },
    );
  });

  it("checks a proxy added behind a backlog of periodic re-checks within 5 s", async () => {
    const connector = await cluster.createConnector();
    await upload(connector, [1, 2, 3, 4, 5, 6].map((n) => withLogin(hang.url(), `backlog${n}`)));
    const hanging = [...(await idsOf(connector.connectorId, hang.url())).values()];
    // Their first checks (first lane) run out first, so what follows is the backlog alone.
    await cluster.until(
      async () => {
        const statuses = await Promise.all(hanging.map((id) => cluster.status(id)));
        return statuses.every((s) => s === "degraded") ? true : undefined;
      },
      { message: "the hanging proxies' first checks to end", timeoutMs: 60_000 },
    );
    // The periodic re-checks a controller would publish: 1,200 of them, every one hanging.
    const stream = cluster.keys.jobStream(JobKind.health);
    const pipeline = cluster.redis.pipeline();
    for (let i = 0; i < 200; i++) {
      for (const id of hanging) pipeline.xadd(stream, "*", "key", id);
    }
    await pipeline.exec();
    // The worker holds as many of them as its probes allow the regular stream.
    await cluster.until(
      async () => (await cluster.pending(stream)).length >= PROBES - 1 ? true : undefined,
      { message: "the backlog to hold the worker's probes" },
    );
    expect(await cluster.redis.xlen(stream)).toBeGreaterThan(1000);

    const addedAt = Date.now();
    const id = await cluster.addProxy(connector, withLogin(tinyproxy.url, "newcomer"));
    await cluster.until(async () => (await cluster.status(id)) === "healthy" ? true : undefined, {
      message: "the new proxy to be checked ahead of the backlog",
      timeoutMs: 5_000,
    });
    expect(Date.now() - addedAt).toBeLessThan(5_000);
    // The backlog is still there: the new proxy went ahead of it, not after it.
    expect(await cluster.redis.xlen(stream)).toBeGreaterThan(1000);
    await cluster.redis.del(stream);
  });
});
