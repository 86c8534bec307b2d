/**
 * A traffic-limit alert end to end, on two api processes that both evaluate every rule: a
 * connector crossing its limit fires one event and one delivery, signed, to a receiver that
 * answers 500 twice and then 200 (the delivery log shows the three tries); the traffic reset
 * resolves it, with a resolve delivery. The bytes are metered into Redis as a gateway meters
 * them, and flushed into the history before the reset (the usage counts from the reset, and
 * live bytes would still count).
 */
import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createDatabase, type Database } from "../../db/client.ts";
import { MetricsFlushJob } from "../../control/jobs/metrics-flush.ts";
import { createLogger } from "../../control/core/logging.ts";
import { signBody } from "../../control/alerts/signature.ts";
import { RequestMetering } from "../../gateway/metering/metering.ts";
import { Cluster, type Member } from "../../testkit/cluster.ts";
import { loadMeteringScriptNode } from "../../testkit/metering.ts";
import { meter } from "../../testkit/metrics-bed.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../../testkit/webhook-receiver.ts";
import { waitUntil } from "../../testkit/wait.ts";

let cluster: Cluster;
let apis: Member[];
let receiver: WebhookReceiver;
let database: Database;

beforeAll(async () => {
  receiver = await startWebhookReceiver([500, 500]);
  cluster = await Cluster.create({
    env: { OCTOPROX_ALERT_EVALUATION_INTERVAL: "0.2", OCTOPROX_ALERT_RETRY_BASE_DELAY: "0.1" },
  });
  apis = [await cluster.start("api"), await cluster.start("api")];
  database = createDatabase(cluster.databaseUrl, { poolSize: 2 });
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await database?.close();
  await receiver?.close();
});

async function metered(projectId: string, connectorId: string, bytes: number): Promise<void> {
  const metering = new RequestMetering({
    redis: cluster.redis,
    keys: cluster.keys,
    script: await loadMeteringScriptNode(),
    instance: "gw-alerts",
    intervalMs: 3_600_000,
  });
  meter(metering, [{
    projectId,
    connectorId,
    proxyId: randomUUID(),
    host: "example.com",
    sent: bytes / 2,
    received: bytes / 2,
    latencyMs: 3,
    ok: true,
  }]);
  expect(await metering.publishNow()).toBe(true);
  await metering.close();
}

/** Each api's evaluator's runs, from its heartbeat snapshot. */
async function evaluatorRuns(): Promise<number[]> {
  return await Promise.all(apis.map(async (api) => {
    const snapshot = await cluster.snapshot(api) as
      | { loops?: { name: string; runs: number }[] }
      | undefined;
    return snapshot?.loops?.find((loop) => loop.name === "alert_evaluator")?.runs ?? 0;
  }));
}

/** Until every api judged the rules `cycles` more times than now. */
async function cyclesPass(cycles: number): Promise<void> {
  const start = await evaluatorRuns();
  await waitUntil(
    async () => (await evaluatorRuns()).every((runs, i) => runs >= start[i] + cycles),
    { message: `${cycles} more evaluations on each api`, timeoutMs: 20_000 },
  );
}

function verify(secret: string, request: WebhookReceiver["received"][number]): void {
  const timestamp = Number(request.headers["x-octoprox-timestamp"]);
  expect(Math.abs(Date.now() / 1000 - timestamp)).toBeLessThan(120);
  expect(request.headers["x-octoprox-signature"]).toBe(signBody(secret, timestamp, request.body));
  // A body changed in flight would not match.
  expect(signBody(secret, timestamp, `${request.body} `)).not.toBe(
    request.headers["x-octoprox-signature"],
  );
}

describe("a traffic-limit alert", () => {
  it("fires once across two apis, signed, retried to a 200, and resolves after the reset", async () => {
    const project = await cluster.request("POST", "/api/v1/projects", {
      name: "Alerted",
      username: "alerted",
    });
    expect(project.status).toBe(201);
    const projectId = project.body.id as string;
    const connector = await cluster.request("POST", `/api/v1/projects/${projectId}/connectors`, {
      name: "metered",
      kind: "static",
      traffic_config: { limit_bytes: 10_000, period: "day", action: "block" },
    });
    expect(connector.status).toBe(201);
    const connectorId = connector.body.id as string;

    const channel = await cluster.request("POST", "/api/v1/alerts/channels", {
      name: "receiver",
      url: receiver.url,
      allow_private_address: true,
    });
    expect(channel.status).toBe(201);
    const secret = channel.body.secret as string;
    expect(secret).toMatch(/^whsec_[0-9a-f]{64}$/);
    // Shown once: never in a read.
    const channels = await cluster.request("GET", "/api/v1/alerts/channels");
    expect(JSON.stringify(channels.body)).not.toContain(secret);
    const rule = await cluster.request("POST", "/api/v1/alerts/rules", {
      name: "metered over its limit",
      kind: "traffic_limit",
      connector_id: connectorId,
      severity: "critical",
      quiet_period_seconds: 3600,
      channel_ids: [channel.body.id],
    });
    expect(rule.status).toBe(201);

    await cyclesPass(2);
    expect(receiver.received).toEqual([]);

    await metered(projectId, connectorId, 12_000);
    await waitUntil(() => receiver.received.some((r) => r.status === 200), {
      message: "the firing delivered (after two 500s)",
      timeoutMs: 20_000,
    });
    // Both apis judge the rule several times more with the limit still crossed: nothing new.
    await cyclesPass(3);
    expect(receiver.received.map((r) => r.status)).toEqual([500, 500, 200]);
    for (const request of receiver.received) {
      verify(secret, request);
      expect(request.json).toMatchObject({
        type: "alert.fired",
        severity: "critical",
        subject: `connector:${connectorId}`,
        rule: { id: rule.body.id, kind: "traffic_limit" },
        details: { bytes: 12_000, limit_bytes: 10_000, status: "limit" },
      });
    }
    // Every try sent the same delivery.
    expect(new Set(receiver.received.map((r) => r.headers["x-octoprox-delivery"])).size).toBe(1);

    const events = await cluster.request("GET", "/api/v1/alerts/events");
    expect(events.body).toHaveLength(1);
    expect(events.body[0]).toMatchObject({ resolved_at: null, severity: "critical" });
    const log = await cluster.request("GET", "/api/v1/alerts/deliveries");
    expect(log.body).toHaveLength(1);
    expect(log.body[0]).toMatchObject({ action: "fired", state: "delivered", attempts: 3 });
    expect(log.body[0].tries.map((t: { status_code: number }) => t.status_code)).toEqual([
      500,
      500,
      200,
    ]);

    // The bytes go to the history first: live bytes would still count after the reset.
    const flush = new MetricsFlushJob({
      database,
      redis: cluster.redis,
      keys: cluster.keys,
      logger: createLogger({ level: "silent", instance: "test", role: "worker" }),
    });
    await flush.flush(`${Date.now()}-0`);
    const reset = await cluster.request(
      "POST",
      `/api/v1/projects/${projectId}/connectors/${connectorId}/traffic/reset`,
    );
    expect(reset.status).toBe(200);
    const resolved = await waitUntil(
      () => receiver.received.find((r) => r.json?.type === "alert.resolved"),
      { message: "the resolve delivery", timeoutMs: 20_000 },
    );
    verify(secret, resolved);
    expect(resolved.json).toMatchObject({ subject: `connector:${connectorId}` });
    expect(resolved.json.resolved_at).not.toBeNull();
    await cyclesPass(3);
    expect(receiver.received.filter((r) => r.json?.type === "alert.resolved")).toHaveLength(1);
    const after = await cluster.request("GET", "/api/v1/alerts/deliveries");
    expect(after.body.map((d: { action: string }) => d.action).sort()).toEqual([
      "fired",
      "resolved",
    ]);
    const closed = await cluster.request("GET", "/api/v1/alerts/events");
    expect(closed.body).toHaveLength(1);
    expect(closed.body[0].resolved_at).not.toBeNull();
    // The secret appears in no process's output, metrics or Redis (the cluster's scan at close).
    cluster.secretsScan.add("alert channel secret", secret);
  });
});
