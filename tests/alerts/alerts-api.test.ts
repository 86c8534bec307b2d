/**
 * Alerting through the api, in process: what a rule and a channel accept and refuse (each
 * refusal a 422 naming its field), that only admins reach it, the quiet period, the conditions
 * this release evaluates (healthy share, job backlog, the CA's end), test deliveries signed in
 * both formats, retried after a failure, and claimed once by two delivery loops at a time.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { AlertDeliverer } from "../../control/alerts/deliverer.ts";
import { AlertEvaluator } from "../../control/alerts/evaluator.ts";
import { signBody } from "../../control/alerts/signature.ts";
import { JobKind } from "../../shared/roles.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";
import { testMitmCa } from "../../testkit/mitm-ca.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../../testkit/webhook-receiver.ts";

let h: ApiHarness;
let receiver: WebhookReceiver;
let projectId: string;
let connectorId: string;

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  h = await startHarness({
    env: {
      OCTOPROX_ALERT_RETRY_BASE_DELAY: "0.05",
      OCTOPROX_TLS_MITM_CA_CERT_PATH: testMitmCa().certPath,
    },
  });
  const project = await admin("POST", "/api/v1/projects", { name: "Watched", username: "watched" });
  projectId = project.body.id;
  const connector = await admin("POST", `/api/v1/projects/${projectId}/connectors`, {
    name: "static",
    kind: "static",
  });
  connectorId = connector.body.id;
});

afterAll(async () => {
  await h?.close();
  await receiver?.close();
});

function admin(method: string, path: string, body?: unknown) {
  return h.request(method, path, { token: h.tokens.admin, body });
}

const fields = (answer: { body: { detail?: { field: string }[] } }) =>
  (answer.body.detail ?? []).map((issue) => issue.field);

function evaluator() {
  return new AlertEvaluator({ deps: h.deps, intervalMs: 60_000 });
}

function deliverer() {
  return new AlertDeliverer({
    database: h.deps.database,
    settings: h.deps.settings,
    logger: h.deps.logger,
    pollMs: 50,
  });
}

let channelCount = 0;
async function channel(extra: Record<string, unknown> = {}) {
  const made = await admin("POST", "/api/v1/alerts/channels", {
    name: `receiver ${++channelCount}`,
    url: receiver.url,
    allow_private_address: true,
    ...extra,
  });
  expect(made.status, made.text).toBe(201);
  return made.body as { id: string; secret: string };
}

describe("rules", () => {
  test("a kind, threshold, scope or channel at fault is a 422 naming its field", async () => {
    const post = (body: Record<string, unknown>) =>
      admin("POST", "/api/v1/alerts/rules", { name: "r", ...body });
    const unknown = await post({ kind: "weather" });
    expect(unknown.status).toBe(422);
    expect(fields(unknown)).toEqual(["body.kind"]);
    for (const threshold of [-1, 101, null]) {
      const answer = await post({ kind: "healthy_share", threshold });
      expect(answer.status, String(threshold)).toBe(422);
      expect(fields(answer)).toEqual(["body.threshold"]);
    }
    const needless = await post({ kind: "traffic_limit", threshold: 5 });
    expect(fields(needless)).toEqual(["body.threshold"]);
    const scoped = await post({ kind: "job_backlog", threshold: 10, project_id: projectId });
    expect(fields(scoped)).toEqual(["body.project_id"]);
    const missing = await post({ kind: "traffic_limit", project_id: crypto.randomUUID() });
    expect(fields(missing)).toEqual(["body.project_id"]);
    const noChannel = await post({ kind: "traffic_limit", channel_ids: [crypto.randomUUID()] });
    expect(fields(noChannel)).toEqual(["body.channel_ids.0"]);
    const severity = await post({ kind: "traffic_limit", severity: "dire" });
    expect(fields(severity)).toEqual(["body.severity"]);
    expect((await admin("GET", "/api/v1/alerts/rules")).body).toEqual([]);
  });

  test("a rule is created, read, edited and deleted; its name is unique", async () => {
    const made = await admin("POST", "/api/v1/alerts/rules", {
      name: "Healthy",
      kind: "healthy_share",
      threshold: 50,
      connector_id: connectorId,
    });
    expect(made.status, made.text).toBe(201);
    expect(made.body).toMatchObject({ severity: "warning", quiet_period_seconds: 3600 });
    const again = await admin("POST", "/api/v1/alerts/rules", {
      name: "healthy",
      kind: "traffic_limit",
    });
    expect(again.status).toBe(400);
    expect(fields(again)).toEqual(["body.name"]);
    const edited = await admin("PATCH", `/api/v1/alerts/rules/${made.body.id}`, {
      threshold: 75,
      severity: "critical",
    });
    expect(edited.body).toMatchObject({ threshold: 75, severity: "critical" });
    const past = await admin("PATCH", `/api/v1/alerts/rules/${made.body.id}`, { threshold: 500 });
    expect(fields(past)).toEqual(["body.threshold"]);
    expect((await admin("DELETE", `/api/v1/alerts/rules/${made.body.id}`)).status).toBe(204);
    expect((await admin("GET", `/api/v1/alerts/rules/${made.body.id}`)).status).toBe(404);
  });

  test("only admins reach alerting", async () => {
    for (const role of ["editor", "viewer"] as const) {
      const answer = await h.request("GET", "/api/v1/alerts/rules", { token: h.tokens[role] });
      expect(answer.status).toBe(403);
    }
  });
});

describe("channels", () => {
  test("a private, loopback or metadata URL is refused without the admin's leave", async () => {
    for (const url of ["http://127.0.0.1:9/hook", "http://10.1.2.3/hook", "http://localhost/x"]) {
      const answer = await admin("POST", "/api/v1/alerts/channels", { name: "private", url });
      expect(answer.status, url).toBe(422);
      expect(fields(answer)).toEqual(["body.url"]);
      expect(answer.text).toContain("allow_private_address");
    }
    const metadata = await admin("POST", "/api/v1/alerts/channels", {
      name: "metadata",
      url: "http://169.254.169.254/latest",
      allow_private_address: true,
    });
    expect(metadata.status).toBe(422);
    expect(fields(metadata)).toEqual(["body.url"]);
    const scheme = await admin("POST", "/api/v1/alerts/channels", {
      name: "ftp",
      url: "ftp://example.com/x",
    });
    expect(fields(scheme)).toEqual(["body.url"]);
    // No OCTOPROX_SMTP_URL here: tests/alerts/email.test.ts has one.
    const email = await admin("POST", "/api/v1/alerts/channels", {
      name: "mail",
      type: "email",
      url: "mailto:ops@example.com",
    });
    expect(email.status).toBe(422);
    expect(fields(email)).toEqual(["body.type"]);
    const allowed = await channel();
    expect(allowed.secret).toMatch(/^whsec_/);
    // The secret is stored sealed: not in clear in its row.
    const [row] = await h.deps.database.sql<{ secret_sealed: string }[]>`
      select secret_sealed from alert_channels where id = ${allowed.id}`;
    expect(row.secret_sealed).not.toContain(allowed.secret);
    expect(JSON.stringify((await admin("GET", "/api/v1/alerts/channels")).body))
      .not.toContain(allowed.secret);
    // Turning the leave off is checked again.
    const off = await admin("PATCH", `/api/v1/alerts/channels/${allowed.id}`, {
      allow_private_address: false,
    });
    expect(fields(off)).toEqual(["body.url"]);
  });

  test("a test delivery is signed, retried after a failure, and logged with each try", async () => {
    const made = await channel();
    const failing = await startWebhookReceiver([503]);
    try {
      await admin("PATCH", `/api/v1/alerts/channels/${made.id}`, { url: failing.url });
      const owed = await admin("POST", `/api/v1/alerts/channels/${made.id}/test`);
      expect(owed.status).toBe(202);
      expect(owed.body).toMatchObject({ action: "test", state: "pending", attempts: 0 });
      const loop = deliverer();
      await loop.deliverDue();
      expect(failing.received.map((r) => r.status)).toEqual([503]);
      // Due again after the base delay (50 ms here), not before.
      expect(await loop.deliverDue()).toBe(0);
      await waitFor(async () => (await loop.deliverDue()) > 0);
      const [request] = failing.received.slice(-1);
      expect(request.status).toBe(200);
      const timestamp = Number(request.headers["x-octoprox-timestamp"]);
      expect(request.headers["x-octoprox-signature"])
        .toBe(signBody(made.secret, timestamp, request.body));
      expect(request.json).toMatchObject({ type: "alert.test", severity: "info" });
      const log = await admin("GET", "/api/v1/alerts/deliveries?limit=5");
      const mine = log.body.find((d: { id: number }) => d.id === owed.body.id);
      expect(mine).toMatchObject({ state: "delivered", attempts: 2 });
      expect(mine.tries.map((t: { status_code: number | null }) => t.status_code))
        .toEqual([503, 200]);
      expect(mine.tries[0].error).toBe("answered 503");
      expect(loop.snapshot().alert_deliveries).toEqual({ delivered: 1, retried: 1, given_up: 0 });
    } finally {
      await failing.close();
    }
  });

  test("a Slack channel gets {text, blocks}; a refused address is a try's error", async () => {
    const slack = await channel({ format: "slack" });
    await admin("POST", `/api/v1/alerts/channels/${slack.id}/test`);
    await deliverer().deliverDue();
    const [request] = receiver.received.slice(-1);
    expect(request.json.text).toContain("[TEST]");
    expect(request.json.blocks[0]).toMatchObject({ type: "section" });
    // Without the leave at delivery (changed in the row behind the api's back): refused there.
    await h.deps.database.sql`
      update alert_channels set allow_private_address = false where id = ${slack.id}`;
    const owed = await admin("POST", `/api/v1/alerts/channels/${slack.id}/test`);
    await deliverer().deliverDue();
    const log = await admin("GET", "/api/v1/alerts/deliveries");
    const refused = log.body.find((d: { id: number }) => d.id === owed.body.id);
    expect(refused.tries[0]).toMatchObject({ status_code: null });
    expect(refused.tries[0].error).toContain("loopback");
    expect(refused.tries[0].error).not.toContain("/hook");
  });

  test("two delivery loops at once send each delivery once", async () => {
    const made = await channel();
    const before = receiver.received.length;
    const ids: number[] = [];
    for (let i = 0; i < 12; i++) {
      ids.push((await admin("POST", `/api/v1/alerts/channels/${made.id}/test`)).body.id);
    }
    const [a, b] = [deliverer(), deliverer()];
    await Promise.all([a.deliverDue(), b.deliverDue(), a.deliverDue(), b.deliverDue()]);
    const sent = receiver.received.slice(before).map((r) =>
      Number(r.headers["x-octoprox-delivery"])
    );
    expect(sent.sort((x, y) => x - y)).toEqual(ids);
  });
});

/** Polls `condition` (a deadline of 5 s): for a retry's due time to come. */
async function waitFor(condition: () => Promise<boolean>): Promise<void> {
  await waitUntil(condition, { timeoutMs: 5_000, message: "the retry due" });
}

describe("firing", () => {
  async function rule(body: Record<string, unknown>) {
    const made = await admin("POST", "/api/v1/alerts/rules", body);
    expect(made.status, made.text).toBe(201);
    return made.body.id as string;
  }

  async function events(ruleId: string) {
    return (await admin("GET", "/api/v1/alerts/events")).body
      .filter((event: { rule_id: string }) => event.rule_id === ruleId);
  }

  async function setStatuses(statuses: string[]) {
    await h.deps.database.sql`delete from proxies where connector_id = ${connectorId}`;
    for (const [i, status] of statuses.entries()) {
      await h.deps.database.sql`
        insert into proxies (project_id, connector_id, scheme, host, port, status)
        values (${projectId}, ${connectorId}, 'http', ${`10.9.0.${i + 1}`}, 3128, ${status})`;
    }
  }

  test("a healthy share under the threshold fires, resolves, and stays quiet in its quiet period", async () => {
    const quiet = await rule({
      name: "quiet share",
      kind: "healthy_share",
      threshold: 50,
      connector_id: connectorId,
      quiet_period_seconds: 3600,
    });
    const eager = await rule({
      name: "eager share",
      kind: "healthy_share",
      threshold: 50,
      connector_id: connectorId,
      quiet_period_seconds: 0,
    });
    const judge = evaluator();
    await setStatuses(["healthy", "unhealthy", "unhealthy"]);
    expect(await judge.evaluate()).toMatchObject({ fired: 2, resolved: 0 });
    expect(await judge.evaluate()).toMatchObject({ fired: 0, resolved: 0 });
    const [fired] = await events(quiet);
    expect(fired).toMatchObject({ subject: `connector:${connectorId}`, resolved_at: null });
    expect(fired.details).toMatchObject({ healthy: 1, total: 3, percent: 33 });
    expect(judge.snapshot().alerts_firing.warning).toBeGreaterThanOrEqual(2);

    await setStatuses(["healthy", "healthy", "unhealthy"]);
    expect(await judge.evaluate()).toMatchObject({ fired: 0, resolved: 2 });
    await setStatuses(["unhealthy", "unhealthy"]);
    // The quiet rule fired within its quiet period: no new event; the eager one fires again.
    expect(await judge.evaluate()).toMatchObject({ fired: 1 });
    expect(await events(quiet)).toHaveLength(1);
    expect(await events(eager)).toHaveLength(2);
    await h.deps.database.sql`delete from proxies where connector_id = ${connectorId}`;
    await judge.evaluate();
    for (const id of [quiet, eager]) await admin("DELETE", `/api/v1/alerts/rules/${id}`);
  });

  test("a job kind's backlog over the threshold fires, and resolves once it drains", async () => {
    const id = await rule({ name: "backlog", kind: "job_backlog", threshold: 2 });
    const stream = h.deps.keys.jobStream(JobKind.health);
    for (let i = 0; i < 3; i++) await h.deps.redis.xadd(stream, "*", "key", `k${i}`);
    const judge = evaluator();
    expect(await judge.evaluate()).toMatchObject({ fired: 1 });
    const [event] = await events(id);
    expect(event).toMatchObject({ subject: "job:health", details: { backlog: 3 } });
    await h.deps.redis.del(stream);
    expect(await judge.evaluate()).toMatchObject({ resolved: 1 });
    await admin("DELETE", `/api/v1/alerts/rules/${id}`);
  });

  test("the TLS interception CA ending within the threshold fires", async () => {
    const soon = await rule({ name: "ca soon", kind: "tls_ca_expiry", threshold: 36_500 });
    const late = await rule({ name: "ca late", kind: "tls_ca_expiry", threshold: 1 });
    await evaluator().evaluate();
    const [event] = await events(soon);
    expect(event).toMatchObject({ subject: "tls_ca" });
    expect(event.details.days_left).toBeGreaterThan(1);
    expect(await events(late)).toEqual([]);
    for (const id of [soon, late]) await admin("DELETE", `/api/v1/alerts/rules/${id}`);
  });

  test("a firing owes one delivery per channel of the rule, in its transaction", async () => {
    const made = await channel();
    const id = await rule({
      name: "owed",
      kind: "job_backlog",
      threshold: 1,
      channel_ids: [made.id],
    });
    const stream = h.deps.keys.jobStream(JobKind.sync);
    for (let i = 0; i < 2; i++) await h.deps.redis.xadd(stream, "*", "key", `k${i}`);
    // Two evaluators seeing the same condition at once: one event, one delivery.
    await Promise.all([evaluator().evaluate(), evaluator().evaluate()]);
    expect(await events(id)).toHaveLength(1);
    const [row] = await h.deps.database.sql<{ count: number }[]>`
      select count(*)::int from alert_deliveries d join alert_events e on e.id = d.event_id
      where e.rule_id = ${id}`;
    expect(row.count).toBe(1);
    await h.deps.redis.del(stream);
  });
});
