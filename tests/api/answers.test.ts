/**
 * Every answer a route declares (control/api/answers/, by `answer(...)` in its route's
 * `responses`) against what the route really answers: the routes are driven over real Postgres
 * and Redis, and each success answer is parsed with the schema its route declares for that
 * status. The schemas are strict, so a field the server adds, drops or changes the type of
 * without its declaration fails here; and every declared answer must have been checked.
 */
import * as v from "valibot";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { apiRoutes } from "../../control/api/app.ts";
import type { Route } from "../../control/api/registry.ts";
import {
  type Answer,
  type ApiHarness,
  type RequestOptions,
  startHarness,
} from "../../testkit/api-harness.ts";
import { ingestObservations } from "../../control/geo/observation-ingest.ts";
import type { Observation } from "../../shared/geo/observation-wire.ts";
import { sampleCapture, writeCaptures } from "../../testkit/mitm-captures.ts";
import { AlertDeliverer } from "../../control/alerts/deliverer.ts";
import { AlertEvaluator } from "../../control/alerts/evaluator.ts";
import { JobKind } from "../../shared/roles.ts";
import { startTestClouds, type TestClouds } from "../../testkit/clouds.ts";
import { ScaleRun } from "../../control/jobs/scale-run.ts";

let h: ApiHarness;
let routes: Route[];
/** `METHOD /path` of each route whose declared answer was parsed. */
const checked = new Set<string>();

/** Declared answers these tests do not reach, and why. */
const NOT_DRIVEN: Readonly<Record<string, string>> = {
  "POST /api/v1/projects/:id/proxies/:pid/unquarantine":
    "answers 200 only for a proxy a gateway's rate limit put in quarantine",
  "POST /api/v1/geo/databases/from-url":
    "downloads from an HTTPS publisher: tests/geo/update.test.ts parses its answer",
  "POST /api/v1/geo/databases/:id/refresh":
    "downloads from an HTTPS publisher: tests/geo/update.test.ts parses its answer",
};

const key = (route: Route) => `${route.method.toUpperCase()} ${route.path}`;

/** The route a request reaches: the first of the mount order whose method and path match. */
function routeOf(method: string, url: string): Route {
  const path = url.split("?")[0];
  const route = routes.find((candidate) => {
    if (candidate.method !== method.toLowerCase()) return false;
    const pattern = candidate.path.split("/")
      .map((part) => part.startsWith(":") ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
      .join("/");
    return new RegExp(`^${pattern}$`).test(path);
  });
  if (!route) throw new Error(`No route answers ${method} ${path}`);
  return route;
}

/** Sends a request (admin's token unless told) and parses its answer with its declaration. */
async function call(method: string, url: string, options: RequestOptions = {}): Promise<Answer> {
  const answer = await h.request(method, url, { token: h.tokens.admin, ...options });
  const route = routeOf(method, url);
  const declared = route.responses[answer.status];
  expect(
    typeof declared,
    `${key(route)} answered ${answer.status} with no declared schema: ${answer.text}`,
  ).toBe("object");
  if (typeof declared !== "object") return answer;
  const result = v.safeParse(declared.schema, answer.body);
  const issues = (result.issues ?? []).map((issue) =>
    `${
      (issue.path ?? []).map((item) => String(item.key)).join(".") || "(answer)"
    }: ${issue.message}`
  );
  expect(issues, `${key(route)} ${answer.status} against its declaration`).toEqual([]);
  checked.add(key(route));
  return answer;
}

let clouds: TestClouds;

beforeAll(async () => {
  clouds = await startTestClouds();
  h = await startHarness({ env: clouds.env });
  routes = apiRoutes(h.deps);
});

afterAll(async () => {
  await h?.close();
  await clouds?.close();
});

describe("each declared answer is what the route answers", () => {
  let projectId = "";
  let connectorA = "";
  let connectorB = "";

  test("public, auth, tokens and users", async () => {
    await call("GET", "/echo", { token: undefined });
    const login = await call("POST", "/api/v1/auth/login", {
      token: undefined,
      body: { username: "admin", password: "password-admin" },
    });
    await call("GET", "/api/v1/auth/me", { token: login.body.access_token });
    const token = await call("POST", "/api/v1/tokens", { body: { name: "answers" } });
    await call("GET", "/api/v1/auth/me", { token: token.body.token });
    await call("GET", "/api/v1/tokens");
    await call("GET", "/api/v1/users/me");
    await call("PATCH", "/api/v1/users/me", { body: { email: "admin@answers.example" } });
    await call("GET", "/api/v1/users");
    const user = await call("POST", "/api/v1/users", {
      body: { username: "answers-viewer", password: "password-answers", role: "viewer" },
    });
    await call("GET", `/api/v1/users/${user.body.id}`);
    await call("PATCH", `/api/v1/users/${user.body.id}`, { body: { email: null } });
    const invited = await call("POST", "/api/v1/users/invite", {
      body: { username: "answers-invitee", role: "viewer" },
    });
    await call("POST", `/api/v1/users/${invited.body.user.id}/reinvite`);
  });

  test("projects, keys, credentials, connectors, proxies and the sequence", async () => {
    const project = await call("POST", "/api/v1/projects", {
      body: {
        name: "Answers",
        username: "answers",
        traffic_quota: { limit_bytes: 1_000_000_000, period: "month" },
        rate_limit: { requests_per_second: 10 },
        allowed_cidrs: ["203.0.113.0/24"],
      },
    });
    projectId = project.body.id;
    const base = `/api/v1/projects/${projectId}`;
    await call("GET", "/api/v1/projects");
    await call("GET", base);
    // A viewer's answer has no password: still the declared answer.
    await call("GET", base, { token: h.tokens.viewer });
    await call("PATCH", base, { body: { description: "Declared answers" } });
    await call("POST", `${base}/traffic/reset`);

    await call("POST", `${base}/distribution-keys`, { body: { name: "answers" } });
    await call("GET", `${base}/distribution-keys`);

    const credential = await call("POST", `${base}/credentials`, {
      body: { name: "Static", provider: "static", config: { username: "u", password: "p" } },
    });
    await call("POST", `${base}/credentials`, {
      body: { name: "API", provider: "provider_api", config: { token: "t-1" } },
    });
    await call("GET", `${base}/credentials`);
    await call("GET", `${base}/credentials/${credential.body.id}`);
    await call("PATCH", `${base}/credentials/${credential.body.id}`, {
      body: { name: "Static 2" },
    });

    const a = await call("POST", `${base}/connectors`, {
      body: {
        name: "A",
        kind: "static",
        credential_id: credential.body.id,
        countries: ["de"],
        traffic_config: { limit_bytes: 1_000_000, period: "day", price_per_gb: 2 },
        rate_limit_config: { max_requests: 10, window_seconds: 60 },
      },
    });
    connectorA = a.body.id;
    const b = await call("POST", `${base}/connectors`, { body: { name: "B", kind: "static" } });
    connectorB = b.body.id;
    const pool = await call("POST", `${base}/connectors`, {
      body: {
        name: "Pool",
        kind: "provider_api",
        config: {
          fetch: { url: "https://open.example/list?n={count}" },
          parser: { format: "text", ttl_seconds: 60 },
        },
      },
    });
    await call("GET", `${base}/connectors`);
    await call("GET", `${base}/connectors/${connectorA}`);
    await call("PATCH", `${base}/connectors/${connectorA}`, { body: { weight: 5 } });
    await call("POST", `${base}/connectors/${connectorA}/traffic/reset`);
    await call("GET", `${base}/connectors/${pool.body.id}/pool`);
    await call("POST", `${base}/connectors/${pool.body.id}/pool/run`);

    const proxy = await call("POST", `${base}/proxies`, {
      body: { connector_id: connectorA, url: "http://user:secret@203.0.113.5:8080" },
    });
    await call("POST", `${base}/proxies/upload?connector_id=${connectorA}`, {
      text: "203.0.113.6:8080\n203.0.113.5:8080\nnot a proxy\n",
    });
    await call("GET", `${base}/proxies`);
    await call("GET", `${base}/proxies/${proxy.body.id}`);
    await call("PATCH", `${base}/proxies/${proxy.body.id}`, {
      body: { metadata: { rack: 1 } },
    });

    await call("PUT", `${base}/sequence`, { body: { connector_ids: [connectorA, connectorB] } });
    await call("GET", `${base}/sequence`);
  });

  test("IP databases and the attribution settings", async () => {
    const feed = "127.0.0.0/24,DE,DE-BE,Berlin,\n";
    await call("GET", "/api/v1/geo/settings");
    await call("PUT", "/api/v1/geo/settings", { body: { location_conflict_rule: "first" } });
    const database = await call("POST", "/api/v1/geo/databases?name=answers&format=geofeed", {
      text: feed,
    });
    const path = `/api/v1/geo/databases/${database.body.id}`;
    await call("POST", "/api/v1/geo/databases/inspect?format=geofeed", { text: feed });
    await call("GET", "/api/v1/geo/databases");
    await call("GET", path);
    await call("PATCH", path, { body: { position: 2 } });
    await call("PUT", `${path}/file`, { text: "127.0.1.0/24,FR,,,\n" });
    await call("POST", "/api/v1/geo/lookup", { body: { ip: "127.0.1.1" } });
    await call("POST", "/api/v1/geo/reattribute", { body: { project_id: projectId } });
    await call("GET", "/api/v1/geo/status");
  });

  test("metrics, failures and the system", async () => {
    const base = `/api/v1/projects/${projectId}`;
    const proxies = await call("GET", `${base}/proxies`);
    const proxyId = proxies.body.items[0].id;
    await call("GET", `${base}/metrics`);
    await call("GET", `${base}/metrics/history`);
    await call("GET", `${base}/metrics/connectors`);
    await call("GET", `${base}/metrics/proxies`);
    await call("GET", `${base}/metrics/hosts`);
    await call("GET", `${base}/metrics/hosts/history?hosts=example.com`);
    await call("GET", `${base}/connectors/${connectorB}/metrics`);
    await call("GET", `${base}/connectors/${connectorB}/metrics/history`);
    await call("GET", `${base}/proxies/${proxyId}/metrics`);
    await call("GET", `${base}/proxies/${proxyId}/metrics/history`);
    await call("GET", `${base}/failures`);
    await call("GET", `${base}/failures/examples`);
    await writeCaptures(h.deps.redis, h.deps.keys, projectId, [
      sampleCapture({ connectorId: connectorB, proxyId }),
      sampleCapture({ status: 502, proxyStatus: "destination_unavailable", firstByteMs: null }),
    ]);
    await call("GET", `${base}/mitm/requests?count=1`);
    await call("GET", `${base}/domains?days=7`);
    await call("GET", "/api/v1/system/stats");
    await call("GET", "/api/v1/system/stats/history");
    // The harness has no CA: the answer says so, still the declared answer.
    await call("GET", "/api/v1/system/tls-ca");
    await call("GET", "/api/v1/block-rules/presets");
  });

  test("the provider catalogue and a custom descriptor's life", async () => {
    const list = await call("GET", "/api/v1/providers");
    await call("GET", `/api/v1/providers/${list.body[0].id}`);
    const descriptor = (name: string) => ({
      id: "answers",
      name,
      credential_fields: [
        { key: "api_key", label: "API key", type: "password", secret: true, required: true },
      ],
      proxy_types: [{
        id: "proxy_list",
        name: "Proxy list",
        mode: "list",
        call: {
          url: "https://api.answers.example/v1/proxies",
          headers: { Authorization: "Token {credential.api_key}" },
          items: "results",
        },
        item: { host: "{item.host}", port: "{item.port}" },
      }],
    });
    const confirm_hosts = ["api.answers.example"];
    await call("POST", "/api/v1/providers", {
      body: { descriptor: descriptor("Answers"), confirm_hosts },
    });
    await call("GET", "/api/v1/providers/answers");
    await call("PUT", "/api/v1/providers/answers", {
      body: { descriptor: descriptor("Answers 2"), confirm_hosts },
    });
    await call("DELETE", "/api/v1/providers/answers");
    await call("GET", "/api/v1/providers/answers/history");
  });

  test("where exits were seen: the observation log, the exits, accuracy", async () => {
    const observed = (ip: string, atMs: number): Observation => ({
      observedAt: atMs,
      ip,
      projectId,
      connectorId: connectorA,
      proxyId: null,
      source: "health",
      sessionId: "s-1",
      country: "DE",
      region: "DE-BE",
      city: "Berlin",
      asn: 64_500,
      claimedCountry: "DE",
      sources: ["database"],
    });
    await ingestObservations(h.deps, [observed("203.0.113.90", 1_000), observed("::1", 2_000)]);
    const log = await call("GET", "/api/v1/geo/observations?limit=1");
    await call("GET", `/api/v1/geo/observations?cursor=${log.body.next_cursor}`);
    await call("GET", `/api/v1/geo/exits?project_id=${projectId}`);
    await call("GET", "/api/v1/geo/exits/ips");
    await call("GET", "/api/v1/geo/accuracy");
  });

  test("the audit log", async () => {
    const page = await call("GET", "/api/v1/audit?limit=1");
    expect(page.body.items).toHaveLength(1);
    await call("GET", `/api/v1/audit?cursor=${page.body.next_cursor}&entity=project`);
  });

  test("alerting: rules, channels, a test delivery, events and the delivery log", async () => {
    const channel = await call("POST", "/api/v1/alerts/channels", {
      body: { name: "answers", url: "http://127.0.0.1:9/hook", allow_private_address: true },
    });
    await call("PATCH", `/api/v1/alerts/channels/${channel.body.id}`, {
      body: { format: "slack" },
    });
    await call("GET", "/api/v1/alerts/channels");
    const rule = await call("POST", "/api/v1/alerts/rules", {
      body: { name: "answers", kind: "job_backlog", threshold: 1, channel_ids: [channel.body.id] },
    });
    await call("PATCH", `/api/v1/alerts/rules/${rule.body.id}`, { body: { severity: "info" } });
    await call("GET", `/api/v1/alerts/rules/${rule.body.id}`);
    await call("GET", "/api/v1/alerts/rules");
    await call("POST", `/api/v1/alerts/channels/${channel.body.id}/test`);
    const stream = h.deps.keys.jobStream(JobKind.health);
    for (let i = 0; i < 2; i++) await h.deps.redis.xadd(stream, "*", "key", `k${i}`);
    await new AlertEvaluator({ deps: h.deps, intervalMs: 60_000 }).evaluate();
    await h.deps.redis.del(stream);
    // Tried once (nothing listens on port 9): each delivery has a try with its error.
    await new AlertDeliverer({
      database: h.deps.database,
      settings: h.deps.settings,
      logger: h.deps.logger,
      pollMs: 50,
    }).deliverDue();
    const events = await call("GET", "/api/v1/alerts/events");
    expect(events.body.some((e: { subject: string }) => e.subject === "job:health")).toBe(true);
    const log = await call("GET", "/api/v1/alerts/deliveries");
    expect(log.body.length).toBeGreaterThan(1);
    for (const delivery of log.body) expect(delivery.tries).toHaveLength(1);
  });

  test("cloud connectors: the form's options and a connector's instances", async () => {
    await call("GET", "/api/v1/connector-options");
    const project = await call("POST", "/api/v1/projects", {
      body: { name: "answers-cloud", username: "answerscloud" },
    });
    const aws = clouds.clouds.aws;
    const credential = await call("POST", `/api/v1/projects/${project.body.id}/credentials`, {
      body: { name: "aws", provider: "aws", config: aws.credential },
    });
    const connector = await call("POST", `/api/v1/projects/${project.body.id}/connectors`, {
      body: {
        name: "fleet",
        kind: "cloud",
        provider: "aws",
        credential_id: credential.body.id,
        config: aws.connectorConfig({ min_proxies: 1, max_proxies: 2 }),
      },
    });
    await new ScaleRun({
      deps: h.deps,
      redis: h.deps.redis,
      keys: h.deps.keys,
      logger: h.deps.logger,
    }).run(connector.body.id, AbortSignal.timeout(30_000));
    const view = await call(
      "GET",
      `/api/v1/projects/${project.body.id}/connectors/${connector.body.id}/instances`,
    );
    expect(view.body.instances).toHaveLength(1);
    const deleted = await h.request(
      "DELETE",
      `/api/v1/projects/${project.body.id}/connectors/${connector.body.id}`,
      { token: h.tokens.admin },
    );
    expect(deleted.status).toBe(202);
  });

  test("WireGuard: the settings and a project's devices", async () => {
    await call("GET", "/api/v1/wireguard/settings", { token: h.tokens.viewer });
    await call("PUT", "/api/v1/wireguard/settings", { body: { endpoint_host: "vpn.example" } });
    await call("POST", "/api/v1/wireguard/settings/rotate-key");
    const base = `/api/v1/projects/${projectId}/wireguard/peers`;
    const device = await call("POST", base, { body: { name: "phone", country: "de" } });
    await call("GET", base, { token: h.tokens.viewer });
    await call("GET", `${base}/${device.body.id}`, { token: h.tokens.viewer });
    await call("GET", `${base}/${device.body.id}/metrics/history`, { token: h.tokens.viewer });
    await call("PATCH", `${base}/${device.body.id}`, { body: { enabled: false } });
    await call("POST", `${base}/${device.body.id}/rotate-keys`);
  });

  test("OpenVPN: the settings and a project's devices", async () => {
    await call("GET", "/api/v1/openvpn/settings", { token: h.tokens.viewer });
    await call("PUT", "/api/v1/openvpn/settings", { body: { endpoint_host: "vpn.example" } });
    await call("POST", "/api/v1/openvpn/settings/rotate-identity");
    const base = `/api/v1/projects/${projectId}/openvpn/peers`;
    const device = await call("POST", base, { body: { name: "tablet", country: "de" } });
    await call("GET", base, { token: h.tokens.viewer });
    await call("GET", `${base}/${device.body.id}`, { token: h.tokens.viewer });
    await call("GET", `${base}/${device.body.id}/metrics/history`, { token: h.tokens.viewer });
    await call("PATCH", `${base}/${device.body.id}`, { body: { enabled: false } });
    await call("POST", `${base}/${device.body.id}/rotate-certificate`);
  });

  test("every declared answer was checked", () => {
    const declared = routes.filter((route) =>
      Object.entries(route.responses).some(([status, answer]) =>
        status.startsWith("2") && typeof answer === "object"
      )
    ).map(key);
    const unchecked = declared.filter((name) => !checked.has(name) && !(name in NOT_DRIVEN));
    expect(unchecked).toEqual([]);
    expect(declared.length).toBeGreaterThan(50);
  });
});
