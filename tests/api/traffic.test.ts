/**
 * Traffic limits in the api: a connector's `traffic_usage` (bytes of the window, history then
 * live, percent, status, cost, the stored block, pending), a limit edit and a reset asking for
 * a decision with a pending mark (an edit of the price alone asking none), and the decision
 * landing: the block, then its lift.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { MetricsFlushJob } from "../../control/jobs/metrics-flush.ts";
import { TrafficJob } from "../../control/jobs/traffic.ts";
import { RequestMetering } from "../../gateway/metering/metering.ts";
import { JobKind } from "../../shared/roles.ts";
import { loadMeteringScriptNode } from "../../testkit/metering.ts";
import { meter, type Transfer } from "../../testkit/metrics-bed.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
let projectId: string;
let connectorId: string;
let proxyId: string;

beforeAll(async () => {
  h = await startHarness();
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Traffic", username: "traffic" },
  });
  projectId = project.body.id;
  const connector = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    token: h.tokens.editor,
    body: {
      name: "metered",
      kind: "static",
      traffic_config: { limit_bytes: 10_000, period: "day", action: "block", price_per_gb: 2 },
    },
  });
  connectorId = connector.body.id;
  const proxy = await h.request("POST", `/api/v1/projects/${projectId}/proxies`, {
    token: h.tokens.editor,
    body: { connector_id: connectorId, url: "http://10.2.0.1:3128" },
  });
  proxyId = proxy.body.id;
});

afterAll(async () => {
  await h?.close();
});

const path = () => `/api/v1/projects/${projectId}/connectors/${connectorId}`;
const usage = async () =>
  (await h.request("GET", path(), { token: h.tokens.viewer })).body.traffic_usage;

async function metered(bytes: number): Promise<void> {
  const metering = new RequestMetering({
    redis: h.deps.redis,
    keys: h.deps.keys,
    script: await loadMeteringScriptNode(),
    instance: "gw-traffic-api",
    intervalMs: 3_600_000,
  });
  const transfer: Transfer = {
    projectId,
    connectorId,
    proxyId,
    host: "example.com",
    sent: bytes / 2,
    received: bytes / 2,
    latencyMs: 3,
    ok: true,
  };
  meter(metering, [transfer]);
  expect(await metering.publishNow()).toBe(true);
  await metering.close();
}

/** Runs the traffic job over what the stream asks, as a worker would. */
async function decide(): Promise<void> {
  const stream = h.deps.keys.jobStream(JobKind.traffic);
  const entries = await h.deps.redis.xrange(stream, "-", "+");
  await h.deps.redis.del(stream);
  const keys = [...new Set(entries.map(([, fields]) => fields[1]))];
  await new TrafficJob({
    database: h.deps.database,
    redis: h.deps.redis,
    keys: h.deps.keys,
    logger: h.deps.logger,
  }).decide(keys);
}

describe("traffic usage in the api", () => {
  test("a connector shows its window's bytes, history and live, against its limit", async () => {
    const fresh = await usage();
    expect(fresh).toMatchObject({
      period: "day",
      bytes: 0,
      limit_bytes: 10_000,
      percent: 0,
      status: "ok",
      cost: 0,
      currency: "USD",
      blocked: false,
      blocked_until: null,
      pending: false,
      runtime_included: true,
    });
    await metered(4_000);
    await new MetricsFlushJob({
      database: h.deps.database,
      redis: h.deps.redis,
      keys: h.deps.keys,
      logger: h.deps.logger,
    }).flush(`${Date.now()}-0`);
    await metered(4_500);
    expect(await usage()).toMatchObject({ bytes: 8_500, percent: 85, status: "warning" });
    await metered(2_000);
    // Past the limit, but no decision yet: usage moves at once, the block waits for a decision.
    expect(await usage()).toMatchObject({
      bytes: 10_500,
      percent: 105,
      status: "limit",
      blocked: false,
      cost: 0,
    });
    // The list answers the same.
    const list = await h.request("GET", `/api/v1/projects/${projectId}/connectors`, {
      token: h.tokens.viewer,
    });
    expect(list.body[0].traffic_usage.bytes).toBe(10_500);
  });

  test("an edit of the limit asks for a decision: pending until it lands, then blocked", async () => {
    const edited = await h.request("PATCH", path(), {
      token: h.tokens.editor,
      body: { traffic_config: { limit_bytes: 9_000, period: "day", action: "block" } },
    });
    expect(edited.status).toBe(200);
    expect(edited.body.traffic_usage).toMatchObject({ pending: true, blocked: false });
    await decide();
    const after = await usage();
    expect(after).toMatchObject({ pending: false, blocked: true, status: "limit" });
    expect(Date.parse(after.blocked_until)).toBe(Date.parse(after.period_end));
    expect(await h.deps.redis.hget(h.deps.keys.trafficBlocked, connectorId)).not.toBeNull();
  });

  test("an edit of the price, the currency or the warning line asks for no decision", async () => {
    const stream = h.deps.keys.jobStream(JobKind.traffic);
    const asked = await h.deps.redis.xlen(stream);
    const edited = await h.request("PATCH", path(), {
      token: h.tokens.editor,
      body: {
        traffic_config: {
          limit_bytes: 9_000,
          period: "day",
          action: "block",
          price_per_gb: 5,
          currency: "EUR",
          warn_percent: 50,
        },
      },
    });
    expect(edited.status, edited.text).toBe(200);
    expect(edited.body.traffic_config).toMatchObject({ price_per_gb: 5, currency: "EUR" });
    expect(edited.body.traffic_usage).toMatchObject({ pending: false, blocked: true });
    expect(await h.deps.redis.xlen(stream)).toBe(asked);
    expect(await h.deps.redis.hget(h.deps.keys.trafficPending, connectorId)).toBeNull();
  });

  test("a reset counts usage from now and lifts the block through its decision", async () => {
    // The live window holds bytes metered before the reset: flush them first, as a minute does.
    await new MetricsFlushJob({
      database: h.deps.database,
      redis: h.deps.redis,
      keys: h.deps.keys,
      logger: h.deps.logger,
    }).flush(`${Date.now()}-1`);
    expect((await h.request("POST", `${path()}/traffic/reset`, { token: h.tokens.viewer })).status)
      .toBe(403);
    const reset = await h.request("POST", `${path()}/traffic/reset`, { token: h.tokens.editor });
    expect(reset.status).toBe(200);
    expect(reset.body.traffic_usage).toMatchObject({ bytes: 0, pending: true, blocked: true });
    expect(Date.now() - Date.parse(reset.body.traffic_usage.counting_since)).toBeLessThan(10_000);
    await decide();
    expect(await usage()).toMatchObject({ bytes: 0, pending: false, blocked: false });
    const elsewhere = await h.request(
      "POST",
      `/api/v1/projects/00000000-0000-4000-8000-000000000000/connectors/${connectorId}/traffic/reset`,
      { token: h.tokens.editor },
    );
    expect(elsewhere.status).toBe(404);
  });

  test("a connector without a traffic config shows no usage", async () => {
    const plain = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
      token: h.tokens.editor,
      body: { name: "plain", kind: "static" },
    });
    expect(plain.body.traffic_usage).toBeNull();
  });
});

describe("a project's limits in the api", () => {
  test("are validated field by field, and a bad edit changes nothing", async () => {
    const bad = async (body: Record<string, unknown>, field: string) => {
      const answer = await h.request("PATCH", `/api/v1/projects/${projectId}`, {
        token: h.tokens.editor,
        body,
      });
      expect(answer.status, JSON.stringify(body)).toBe(422);
      expect(answer.body.detail.map((d: { field: string }) => d.field)).toContain(field);
    };
    await bad({ traffic_quota: { limit_bytes: 1_000 } }, "body.traffic_quota.period");
    await bad({ traffic_quota: { period: "day" } }, "body.traffic_quota.limit_bytes");
    await bad(
      { traffic_quota: { limit_bytes: 1_000, period: "year" } },
      "body.traffic_quota.period",
    );
    await bad({ rate_limit: { requests_per_second: 0 } }, "body.rate_limit.requests_per_second");
    await bad({ rate_limit: { requests_per_second: 5, burst: 0 } }, "body.rate_limit.burst");
    await bad({ max_connections: 0 }, "body.max_connections");
    await bad({ allowed_cidrs: ["10.0.0.0/33"] }, "body.allowed_cidrs.0");
    await bad({ allowed_cidrs: ["10.0.0.0/8", "not an address"] }, "body.allowed_cidrs.1");
    await bad({ passwordless_cidrs: "10.0.0.0/8" }, "body.passwordless_cidrs");
    // One good field beside a bad one: nothing is applied.
    await bad({ max_connections: 5, allowed_cidrs: ["nope"] }, "body.allowed_cidrs.0");
    const project = await h.request("GET", `/api/v1/projects/${projectId}`, {
      token: h.tokens.viewer,
    });
    expect(project.body).toMatchObject({
      traffic_quota: null,
      traffic_usage: null,
      rate_limit: null,
      max_connections: null,
      allowed_cidrs: [],
      passwordless_cidrs: [],
    });
  });

  test("a quota shows its usage over every connector and is decided like a connector's limit", async () => {
    const edited = await h.request("PATCH", `/api/v1/projects/${projectId}`, {
      token: h.tokens.editor,
      body: {
        traffic_quota: { limit_bytes: 5_000, period: "day", action: "block" },
        rate_limit: { requests_per_second: 50 },
        max_connections: 10,
        allowed_cidrs: [" 203.0.113.0/24 ", "2001:db8::/32"],
      },
    });
    expect(edited.status).toBe(200);
    expect(edited.body).toMatchObject({
      traffic_quota: { limit_bytes: 5_000, period: "day", action: "block", limit_status: 509 },
      rate_limit: { requests_per_second: 50, burst: 50 },
      max_connections: 10,
      allowed_cidrs: ["203.0.113.0/24", "2001:db8::/32"],
    });
    expect(edited.body.traffic_usage).toMatchObject({ pending: true, limit_bytes: 5_000 });
    await metered(6_000);
    await decide();
    const project = await h.request("GET", `/api/v1/projects/${projectId}`, {
      token: h.tokens.viewer,
    });
    expect(project.body.traffic_usage).toMatchObject({
      status: "limit",
      blocked: true,
      pending: false,
    });
    // A reset counts from now (with the live bytes flushed before it) and lifts the block.
    await new MetricsFlushJob({
      database: h.deps.database,
      redis: h.deps.redis,
      keys: h.deps.keys,
      logger: h.deps.logger,
    }).flush(`${Date.now()}-5`);
    const reset = await h.request("POST", `/api/v1/projects/${projectId}/traffic/reset`, {
      token: h.tokens.editor,
    });
    expect(reset.status).toBe(200);
    expect(reset.body.traffic_usage).toMatchObject({ pending: true, bytes: 0 });
    await decide();
    const after = await h.request("GET", `/api/v1/projects/${projectId}`, {
      token: h.tokens.viewer,
    });
    expect(after.body.traffic_usage).toMatchObject({ blocked: false, pending: false });
  });
});
