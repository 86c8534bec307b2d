/**
 * Usage in the api: totals and series of a project, connector, proxy and host, the traffic
 * split, proxies by usage, the failure summary and examples, and the system readings, all read
 * through the real app over real stores, with windows written by the gateway's own metering and
 * taken by the real metrics flush. Totals add the live window; a bad range or bucket is a 422
 * naming the field; without Redis the totals alone and the split's shares without runtime
 * state, each logged once.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MetricsFlushJob } from "../../control/jobs/metrics-flush.ts";
import { SystemSnapshotJob } from "../../control/jobs/system-snapshot.ts";
import { RequestMetering } from "../../gateway/metering/metering.ts";
import type { LuaScript } from "../../shared/lua/loader.ts";
import { LocalRedis } from "../../scripts/local-stores.ts";
import { freePort } from "../../testkit/ports.ts";
import { encodeFailureExample, type FailureExample } from "../../shared/failure-examples.ts";
import { STREAM_CAPS } from "../../shared/redis-keys.ts";
import { loadMeteringScriptNode } from "../../testkit/metering.ts";
import {
  meter,
  sums,
  type Transfer,
  usageOfTransfers as usage,
} from "../../testkit/metrics-bed.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
let script: LuaScript;
let projectId: string;
let connectorIds: string[];
let proxyIds: string[];
const meters: RequestMetering[] = [];

beforeAll(async () => {
  h = await startHarness();
  script = await loadMeteringScriptNode();
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Usage", username: "usage" },
  });
  projectId = project.body.id;
  connectorIds = [];
  proxyIds = [];
  for (const [i, weight] of [3, 1].entries()) {
    const connector = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
      token: h.tokens.editor,
      body: {
        name: `c${i}`,
        kind: "static",
        weight,
        traffic_config: i === 0 ? { price_per_gb: 2.5 } : null,
      },
    });
    connectorIds.push(connector.body.id);
    for (let p = 0; p < 2; p++) {
      const proxy = await h.request("POST", `/api/v1/projects/${projectId}/proxies`, {
        token: h.tokens.editor,
        body: { connector_id: connector.body.id, url: `http://10.1.${i}.${p + 1}:3128` },
      });
      proxyIds.push(proxy.body.id);
    }
  }
  // The health checks would move these; here the rows are set as a check would leave them.
  await h.deps.database.sql`update proxies set status = 'healthy'
    where connector_id = ${connectorIds[0]}`;
});

afterAll(async () => {
  await Promise.all(meters.map((m) => m.close()));
  await h?.close();
});

function metering(): RequestMetering {
  const m = new RequestMetering({
    redis: h.deps.redis,
    keys: h.deps.keys,
    script,
    instance: "gw-usage-test",
    intervalMs: 3_600_000,
  });
  meters.push(m);
  return m;
}

const flusher = () =>
  new MetricsFlushJob({
    database: h.deps.database,
    redis: h.deps.redis,
    keys: h.deps.keys,
    logger: h.deps.logger,
  });

let flushes = 0;
async function flush(): Promise<void> {
  flushes += 1;
  const outcome = await flusher().flush(`${Date.now()}-${flushes}`);
  expect(["committed", "empty"]).toContain(outcome.result);
}

function transfer(i: number): Transfer {
  const proxy = i % 4;
  return {
    projectId,
    connectorId: connectorIds[proxy < 2 ? 0 : 1],
    proxyId: proxyIds[proxy],
    host: i % 2 ? "shop.example" : "api.example",
    sent: 200 + i,
    received: 5_000 + i,
    latencyMs: 20 + (i % 7),
    ok: i % 6 !== 5,
  };
}

const get = (path: string) => h.request("GET", path, { token: h.tokens.viewer });

describe("usage reads", () => {
  const flushed: Transfer[] = [];
  const pending: Transfer[] = [];

  test("totals of the project, its connectors and proxies: flushed plus live, exactly", async () => {
    for (let i = 0; i < 48; i++) flushed.push(transfer(i));
    const m = metering();
    meter(m, flushed);
    expect(await m.publishNow()).toBe(true);
    await flush();
    // Counted after the flush: still in the live windows.
    for (let i = 48; i < 60; i++) pending.push(transfer(i));
    meter(m, pending);
    expect(await m.publishNow()).toBe(true);
    const all = [...flushed, ...pending];

    const project = await get(`/api/v1/projects/${projectId}/metrics`);
    expect(project.status).toBe(200);
    expect(project.body.usage).toEqual(usage(all));
    expect(project.body.live_included).toBe(true);
    expect(project.body.pool).toMatchObject({
      total: 4,
      by_status: { healthy: 2, initializing: 2, unhealthy: 0 },
      quarantined: 0,
    });
    for (const connectorId of connectorIds) {
      const answer = await get(`/api/v1/projects/${projectId}/connectors/${connectorId}/metrics`);
      expect(answer.body.usage).toEqual(usage(all.filter((t) => t.connectorId === connectorId)));
    }
    for (const proxyId of proxyIds) {
      const answer = await get(`/api/v1/projects/${projectId}/proxies/${proxyId}/metrics`);
      expect(answer.body.usage).toEqual(usage(all.filter((t) => t.proxyId === proxyId)));
    }
  });

  test("a project's series over 1 h in minutes: the flushed minute, live counts in the last", async () => {
    const answer = await get(`/api/v1/projects/${projectId}/metrics/history?range=1h`);
    expect(answer.status).toBe(200);
    expect(answer.body.bucket_seconds).toBe(60);
    expect(answer.body.points.length).toBeGreaterThanOrEqual(60);
    expect(answer.body.points.length).toBeLessThanOrEqual(61);
    const total = answer.body.points.reduce(
      (n: number, p: { requests: number }) => n + p.requests,
      0,
    );
    expect(total).toBe(60);
    const last = answer.body.points.at(-1);
    expect(last.requests).toBeGreaterThanOrEqual(pending.length);
    // Hours over a week: the same requests in one or two buckets.
    const week = await get(`/api/v1/projects/${projectId}/metrics/history?range=7d`);
    expect(week.body.bucket_seconds).toBe(3600);
    expect(week.body.points.reduce((n: number, p: { requests: number }) => n + p.requests, 0))
      .toBe(60);
    // A proxy's and a connector's series take the same shape.
    const proxy = await get(
      `/api/v1/projects/${projectId}/proxies/${proxyIds[0]}/metrics/history?range=6h`,
    );
    expect(proxy.body.points.reduce((n: number, p: { requests: number }) => n + p.requests, 0))
      .toBe(15);
  });

  test("a bad range, bucket or end is a 422 naming the field", async () => {
    const base = `/api/v1/projects/${projectId}/metrics/history`;
    for (
      const [query, field] of [
        ["range=2h", "query.range"],
        ["bucket_seconds=30", "query.bucket_seconds"],
        ["range=7d&bucket_seconds=60", "query.bucket_seconds"],
        ["range=90d&bucket_seconds=3600", "query.bucket_seconds"],
        ["end=yesterday", "query.end"],
        ["end=2999-01-01T00:00:00Z", "query.end"],
      ]
    ) {
      const answer = await get(`${base}?${query}`);
      expect(answer.status, query).toBe(422);
      expect(answer.body.detail.map((d: { field: string }) => d.field)).toContain(field);
    }
    const hosts = await get(`/api/v1/projects/${projectId}/metrics/hosts?page_size=501`);
    expect(hosts.status).toBe(422);
    expect(hosts.body.detail[0].field).toBe("query.page_size");
    const examples = await get(`/api/v1/projects/${projectId}/failures/examples?cursor=zz`);
    expect(examples.status).toBe(422);
    expect(examples.body.detail[0].field).toBe("query.cursor");
    const unknown = await get(
      `/api/v1/projects/00000000-0000-4000-8000-000000000000/metrics/history`,
    );
    expect(unknown.status).toBe(404);
  });

  test("destination hosts: most requested first, searched, paged, and their series", async () => {
    const flushedHosts = (host: string) => flushed.filter((t) => t.host === host);
    const answer = await get(`/api/v1/projects/${projectId}/metrics/hosts?range=24h`);
    expect(answer.status).toBe(200);
    expect(answer.body.total).toBe(2);
    expect(answer.body.items).toEqual([
      { host: "api.example", ...usage(flushedHosts("api.example")) },
      { host: "shop.example", ...usage(flushedHosts("shop.example")) },
    ]);
    const searched = await get(`/api/v1/projects/${projectId}/metrics/hosts?search=SHOP&range=all`);
    expect(searched.body.items.map((i: { host: string }) => i.host)).toEqual(["shop.example"]);
    const paged = await get(`/api/v1/projects/${projectId}/metrics/hosts?page=2&page_size=1`);
    expect(paged.body).toMatchObject({ total: 2, page: 2, page_size: 1 });
    expect(paged.body.items).toHaveLength(1);
    const series = await get(
      `/api/v1/projects/${projectId}/metrics/hosts/history?hosts=shop.example,api.example`,
    );
    expect(series.status).toBe(200);
    const requestsOf = (host: string) =>
      series.body.items.find((i: { host: string }) => i.host === host).series.points.reduce(
        (n: number, p: { requests: number }) => n + p.requests,
        0,
      );
    expect(requestsOf("shop.example")).toBe(flushedHosts("shop.example").length);
    const tooMany = await get(
      `/api/v1/projects/${projectId}/metrics/hosts/history?hosts=${
        Array.from({ length: 13 }, (_, i) => `h${i}.example`).join(",")
      }`,
    );
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.detail[0].field).toBe("query.hosts");
  });

  test("the traffic split: expected by weight among connectors that can take requests, observed by counts", async () => {
    const answer = await get(`/api/v1/projects/${projectId}/metrics/connectors?range=24h`);
    expect(answer.status).toBe(200);
    expect(answer.body.runtime_included).toBe(true);
    const [first, second] = answer.body.items;
    const all = [...flushed, ...pending];
    const firstCount = all.filter((t) => t.connectorId === connectorIds[0]);
    // The second connector has no healthy proxy: excluded, its weight goes to the first (the
    // router's reasons, against the preview's: tests/api/traffic-split.test.ts).
    expect(first).toMatchObject({
      connector_id: connectorIds[0],
      weight: 3,
      expected_share: 1,
      excluded_reason: null,
      observed_share: Math.round((firstCount.length / all.length) * 1e4) / 1e4,
      usage: usage(firstCount),
      currency: "USD",
    });
    const bytes = sums(firstCount).bytes_sent + sums(firstCount).bytes_received;
    expect(first.cost).toBe(Math.round((bytes / 1e9) * 2.5 * 1e4) / 1e4);
    expect(second).toMatchObject({
      expected_share: 0,
      excluded_reason: "no_healthy_proxy",
      cost: null,
    });
  });

  test("proxies by usage, most requested first, with their live counts", async () => {
    const answer = await get(`/api/v1/projects/${projectId}/metrics/proxies?page_size=2`);
    expect(answer.status).toBe(200);
    expect(answer.body.total).toBe(4);
    expect(answer.body.items).toHaveLength(2);
    const all = [...flushed, ...pending];
    for (const row of answer.body.items) {
      expect(row.usage).toEqual(usage(all.filter((t) => t.proxyId === row.proxy_id)));
    }
    const filtered = await get(
      `/api/v1/projects/${projectId}/metrics/proxies?connector_id=${connectorIds[1]}`,
    );
    expect(filtered.body.items.map((r: { connector_id: string }) => r.connector_id)).toEqual([
      connectorIds[1],
      connectorIds[1],
    ]);
  });

  test("the failure summary from the flushed counts, and examples newest first, paged", async () => {
    const m = metering();
    for (let i = 0; i < 3; i++) {
      m.rejected(
        {
          status: 502,
          proxyStatus: "destination_unavailable",
          reason: "none",
          rejection: "no_proxy_available",
        },
        { projectId, options: { user: "usage" } },
        { host: "x.example", port: 443 },
      );
    }
    expect(await m.publishNow()).toBe(true);
    await flush();
    const summary = await get(`/api/v1/projects/${projectId}/failures?range=1h`);
    expect(summary.status).toBe(200);
    // The failed transfers of the tests above, and the three refusals.
    const broken = [...flushed, ...pending].filter((t) => !t.ok);
    expect(summary.body.total).toBe(broken.length + 3);
    expect(summary.body.by_kind).toEqual([
      { kind: "transfer_broken", count: broken.length },
      { kind: "no_proxy_available", count: 3 },
    ]);
    expect(summary.body.rows).toContainEqual(
      { kind: "no_proxy_available", connector_id: null, vendor_status: null, count: 3 },
    );
    for (const connectorId of connectorIds) {
      expect(summary.body.rows).toContainEqual({
        kind: "transfer_broken",
        connector_id: connectorId,
        vendor_status: null,
        count: broken.filter((t) => t.connectorId === connectorId).length,
      });
    }
    const one = await get(
      `/api/v1/projects/${projectId}/failures?range=1h&connector_id=${connectorIds[0]}`,
    );
    expect(one.body.total).toBe(broken.filter((t) => t.connectorId === connectorIds[0]).length);

    // Examples as the gateway's failure log writes them.
    const base: FailureExample = {
      atMs: Date.now(),
      kind: "upstream_refused",
      protocol: "connect",
      clientStatus: 502,
      proxyStatus: "connection_refused",
      vendorStatus: 403,
      connectorId: connectorIds[0],
      proxyId: proxyIds[0],
      target: "shop.example:443",
      message: "Upstream proxy refused connection (status 403)",
    };
    for (let i = 0; i < 5; i++) {
      for (const kind of ["upstream_refused", "upstream_timeout"] as const) {
        await h.deps.redis.xadd(
          h.deps.keys.failures(projectId, kind),
          "MAXLEN",
          "~",
          STREAM_CAPS.failures,
          // One id for both kinds: pages order by id, then kind.
          `${1_700_000_000_000 + i}-0`,
          ...encodeFailureExample({ ...base, kind, atMs: 1_700_000_000_000 + i }),
        );
      }
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await get(
        `/api/v1/projects/${projectId}/failures/examples?limit=3${
          cursor ? `&cursor=${cursor}` : ""
        }`,
      );
      expect(page.status).toBe(200);
      for (const item of page.body.items) seen.push(`${item.id}:${item.kind}`);
      cursor = page.body.next_cursor;
    } while (cursor);
    const expected: string[] = [];
    for (let i = 4; i >= 0; i--) {
      expected.push(`${1_700_000_000_000 + i}-0:upstream_refused`);
      expected.push(`${1_700_000_000_000 + i}-0:upstream_timeout`);
    }
    expect(seen).toEqual(expected);
    const timeouts = await get(
      `/api/v1/projects/${projectId}/failures/examples?kind=upstream_timeout&limit=1`,
    );
    expect(timeouts.body.items[0]).toMatchObject({
      kind: "upstream_timeout",
      client_status: 502,
      vendor_status: 403,
      connector_id: connectorIds[0],
      target: "shop.example:443",
    });
    const badKind = await get(`/api/v1/projects/${projectId}/failures/examples?kind=nope`);
    expect(badKind.status).toBe(422);
    expect(badKind.body.detail[0].field).toBe("query.kind");
  });

  test("the system readings' history, averaged per bucket (admin)", async () => {
    const job = new SystemSnapshotJob({
      database: h.deps.database,
      redis: h.deps.redis,
      keys: h.deps.keys,
      logger: h.deps.logger,
      intervalMs: 60_000,
      retentionDays: 90,
    });
    expect(await job.snapshot()).toBe(true);
    expect((await get("/api/v1/system/stats/history")).status).toBe(403);
    const answer = await h.request("GET", "/api/v1/system/stats/history?range=1h", {
      token: h.tokens.admin,
    });
    expect(answer.status).toBe(200);
    expect(answer.body.points).toHaveLength(1);
    expect(answer.body.points[0]).toMatchObject({
      readings: 1,
      projects: 1,
      connectors: 2,
      proxies_by_status: { healthy: 2, initializing: 2 },
    });
    expect(answer.body.points[0].database_bytes).toBeGreaterThan(0);
  });

  test("the OpenAPI document lists every usage route", async () => {
    const doc = (await get("/api/v1/openapi.json")).body;
    for (
      const path of [
        "/api/v1/projects/{id}/metrics",
        "/api/v1/projects/{id}/metrics/history",
        "/api/v1/projects/{id}/metrics/connectors",
        "/api/v1/projects/{id}/metrics/proxies",
        "/api/v1/projects/{id}/metrics/hosts",
        "/api/v1/projects/{id}/metrics/hosts/history",
        "/api/v1/projects/{id}/connectors/{cid}/metrics",
        "/api/v1/projects/{id}/connectors/{cid}/metrics/history",
        "/api/v1/projects/{id}/proxies/{pid}/metrics",
        "/api/v1/projects/{id}/proxies/{pid}/metrics/history",
        "/api/v1/projects/{id}/failures",
        "/api/v1/projects/{id}/failures/examples",
        "/api/v1/system/stats/history",
      ]
    ) {
      expect(doc.paths[path]?.get, path).toBeDefined();
    }
  });
});

describe("usage reads without Redis", () => {
  let folder: string;
  let redis: LocalRedis;
  let own: ApiHarness;

  beforeAll(async () => {
    folder = await mkdtemp(join(tmpdir(), "ox-usage-redis-"));
    await chmod(folder, 0o755);
    redis = new LocalRedis({ dir: join(folder, "redis"), port: await freePort() });
    await redis.start();
    own = await startHarness({ redisUrl: redis.url });
  });

  afterAll(async () => {
    await own?.close();
    await redis?.stop();
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  test("show the flushed totals alone, logged once; examples answer 503", async () => {
    const project = await own.request("POST", "/api/v1/projects", {
      token: own.tokens.editor,
      body: { name: "Away", username: "away" },
    });
    const id = project.body.id;
    const connector = await own.request("POST", `/api/v1/projects/${id}/connectors`, {
      token: own.tokens.editor,
      body: { name: "c", kind: "static" },
    });
    const connectorId = connector.body.id;
    await own.request("POST", `/api/v1/projects/${id}/proxies`, {
      token: own.tokens.editor,
      body: { connector_id: connectorId, url: "http://10.9.0.1:3128" },
    });
    await own.deps.database.sql`update proxies set status = 'healthy' where project_id = ${id}`;
    await own.deps.database.sql`insert into metric_totals (entity_kind, entity_id, requests,
      successes) values ('project', ${id}, 7, 7)`;
    await redis.stop();
    for (let i = 0; i < 3; i++) {
      const answer = await own.request("GET", `/api/v1/projects/${id}/metrics`, {
        token: own.tokens.viewer,
      });
      expect(answer.status).toBe(200);
      expect(answer.body.usage).toMatchObject({ requests: 7, successes: 7 });
      expect(answer.body.live_included).toBe(false);
      expect(answer.body.pool.quarantined).toBeNull();
    }
    const history = await own.request("GET", `/api/v1/projects/${id}/metrics/history`, {
      token: own.tokens.viewer,
    });
    expect(history.status).toBe(200);
    expect(history.body.live_included).toBe(false);
    const lines = own.lines.filter((l) =>
      l.msg === "Runtime state unavailable, shown without it" &&
      l.what === "live metric windows"
    );
    expect(lines).toHaveLength(1);
    // The split's shares as the routing preview answers without runtime state, logged once.
    for (let i = 0; i < 2; i++) {
      const split = await own.request("GET", `/api/v1/projects/${id}/metrics/connectors`, {
        token: own.tokens.viewer,
      });
      expect(split.status, split.text).toBe(200);
      expect(split.body.runtime_included).toBe(false);
      expect(split.body.items).toMatchObject([
        { connector_id: connectorId, expected_share: 1, excluded_reason: null },
      ]);
    }
    expect(
      own.lines.filter((l) =>
        l.msg === "Runtime state unavailable, shown without it" && l.what === "traffic split"
      ),
    ).toHaveLength(1);
    const examples = await own.request("GET", `/api/v1/projects/${id}/failures/examples`, {
      token: own.tokens.viewer,
    });
    expect(examples.status).toBe(503);
    expect(
      (await own.request("GET", `/api/v1/projects/${id}/failures`, {
        token: own.tokens.viewer,
      })).status,
    ).toBe(200);
  });
});
