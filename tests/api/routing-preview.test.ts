/**
 * The routing preview over real stores: the gateway's routing code over the controller's compile
 * of one project. Which connectors serve a place and why the others do not, the gateway's own
 * sentence for a bad option, quarantines, traffic blocks and sticky bindings read from Redis and
 * never written, and no login or password in the answer.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { connectorSubject } from "../../shared/traffic-subjects.ts";
import { UsernameMessage } from "../../shared/username.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
let projectId: string;
const connector: Record<string, string> = {};
const proxy: Record<string, string> = {};

const SECRETS = ["s3cret-de", "s3cret-us", "s3cret-off", "alice", "bob", "carol"];

beforeAll(async () => {
  h = await startHarness();
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Preview", username: "preview", strategy: "round_robin" },
  });
  projectId = project.body.id;
  const connectors: [string, Record<string, unknown>][] = [
    ["germany", { countries: ["de"] }],
    ["usa", { countries: ["us"], domain_deny: ["blocked.example"] }],
    ["off", { countries: ["de"], enabled: false }],
  ];
  for (const [name, fields] of connectors) {
    const created = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
      token: h.tokens.editor,
      body: { name, kind: "static", ...fields },
    });
    expect(created.status).toBe(201);
    connector[name] = created.body.id;
  }
  const proxies: [string, string, string, string][] = [
    ["de1", "germany", "http://alice:s3cret-de@203.0.113.10:3128", "de"],
    ["de2", "germany", "http://203.0.113.11:3128", "de"],
    ["us1", "usa", "socks5://bob:s3cret-us@[2001:db8::5]:1080", "us"],
    ["off1", "off", "http://carol:s3cret-off@203.0.113.20:3128", "de"],
  ];
  for (const [key, owner, url, country] of proxies) {
    const created = await h.request("POST", `/api/v1/projects/${projectId}/proxies`, {
      token: h.tokens.editor,
      body: { connector_id: connector[owner], url, country },
    });
    expect(created.status).toBe(201);
    proxy[key] = created.body.id;
  }
  // The health checks would move these; here the rows are set as a check would leave them.
  await h.deps.database.sql`update proxies set status = 'healthy' where project_id = ${projectId}`;
});

afterAll(async () => {
  await h?.close();
});

function preview(body: unknown, token = h.tokens.viewer, id = projectId) {
  return h.request("POST", `/api/v1/projects/${id}/routing-preview`, { token, body });
}

// deno-lint-ignore no-explicit-any -- answer rows, read by the assertions.
const byName = (answer: any, name: string) =>
  // deno-lint-ignore no-explicit-any -- as above.
  answer.body.connectors.find((c: any) => c.name === name);

function expectNoSecrets(text: string) {
  for (const secret of SECRETS) expect(text).not.toContain(secret);
}

describe("routing preview", () => {
  test("-cc-de: the de connector serves, the us one and the disabled one say why", async () => {
    const answer = await preview({ username: "preview-cc-de", target: "example.com:443" });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({
      project_id: projectId,
      strategy: "round_robin",
      username: {
        user: "preview",
        country: "DE",
        state: null,
        city: null,
        session_id: null,
        session_minutes: null,
      },
      target: { host: "example.com", port: 443 },
      refusal: null,
      runtime_included: true,
    });
    expect(byName(answer, "germany")).toMatchObject({
      id: connector.germany,
      eligible: true,
      code: null,
      reason: null,
      proxies_for_place: 2,
      healthy: 2,
      quarantined: 0,
    });
    expect(byName(answer, "usa")).toMatchObject({
      eligible: false,
      code: "place_not_served",
      reason: "The connector serves only US, not DE",
      proxies_for_place: 0,
    });
    expect(byName(answer, "off")).toMatchObject({
      eligible: false,
      code: "not_taking_requests",
      reason: "The connector is disabled",
    });
    expect(answer.body.proxies.total).toBe(2);
    expect(answer.body.proxies.items.map((p: { id: string }) => p.id).sort())
      .toEqual([proxy.de1, proxy.de2].sort());
    expect(answer.body.proxies.items.find((p: { id: string }) => p.id === proxy.de1)).toEqual({
      id: proxy.de1,
      connector_id: connector.germany,
      scheme: "http",
      address: "203.0.113.10:3128",
      country: "DE",
      region: null,
      city: null,
      location_conflict: false,
      status: "healthy",
      quarantined: false,
      quarantined_until: null,
    });
    expect(answer.body.chosen.connector_id).toBe(connector.germany);
    expect([proxy.de1, proxy.de2]).toContain(answer.body.chosen.id);
    expectNoSecrets(answer.text);
  });

  test("a per-domain rule: the connectors it names, or its refusal with its reason", async () => {
    const edited = await h.request("PATCH", `/api/v1/projects/${projectId}`, {
      token: h.tokens.admin,
      body: {
        domain_rules: [
          { domains: ["*.shop.*"], action: "connectors", connectors: [connector.usa] },
          { domains: [".wall.example"], action: "refuse", reason: "Not through this project" },
          { domains: ["direct.example"], action: "direct" },
        ],
      },
    });
    expect(edited.status).toBe(200);
    try {
      const shop = await preview({ username: "preview-cc-de", target: "www.shop.example:443" });
      expect(byName(shop, "germany")).toMatchObject({
        eligible: false,
        code: "not_in_domain_rule",
        reason: "The project's domain rule for www.shop.example (*.shop.*) names other connectors",
      });
      // The usa connector, the one named, serves no DE: nothing is left for the request.
      expect(byName(shop, "usa")).toMatchObject({ eligible: false, code: "place_not_served" });
      expect(shop.body.refusal).toMatchObject({ status: 502 });
      const wall = await preview({ username: "preview-cc-de", target: "a.wall.example:443" });
      expect(wall.body.refusal).toMatchObject({
        status: 403,
        reason: "Not through this project",
      });
      const direct = await preview({ username: "preview-cc-de", target: "direct.example:443" });
      expect(direct.body.refusal).toBeNull();
      expect(byName(direct, "germany")).toMatchObject({
        eligible: false,
        code: "not_in_domain_rule",
        reason: "The project's domain rule for direct.example (direct.example) sends it direct, " +
          "through no upstream",
      });
      const other = await preview({ username: "preview-cc-de", target: "example.com:443" });
      expect(other.body.refusal).toBeNull();
      expect(byName(other, "germany").eligible).toBe(true);
    } finally {
      await h.request("PATCH", `/api/v1/projects/${projectId}`, {
        token: h.tokens.admin,
        body: { domain_rules: [] },
      });
    }
  });

  test("a deny list and a place nothing serves answer the gateway's refusal", async () => {
    const denied = await preview({ username: "preview-cc-us", target: "www.Blocked.example:80" });
    expect(denied.status).toBe(200);
    expect(byName(denied, "usa")).toMatchObject({
      eligible: false,
      code: "domain_filtered",
      reason: "The connector's domain deny list holds www.blocked.example",
    });
    expect(denied.body.chosen).toBeNull();
    expect(denied.body.refusal).toEqual({
      status: 502,
      proxy_status: "destination_unavailable",
      reason: "No upstream proxy available for US and this domain",
      rejection: "no_proxy_available",
    });
    expect(denied.body.proxies).toEqual({ items: [], total: 0 });

    const us = await preview({ username: "preview-cc-us" });
    expect(us.body.target).toBeNull();
    expect(us.body.chosen).toMatchObject({
      id: proxy.us1,
      scheme: "socks5",
      address: "[2001:db8::5]:1080",
      country: "US",
    });
    expectNoSecrets(us.text);

    const nowhere = await preview({ username: "preview-cc-fr" });
    expect(nowhere.body.refusal).toMatchObject({
      status: 502,
      reason: "No upstream proxy available for FR",
    });
    const state = await preview({ username: "preview-cc-us-st-ny" });
    expect(byName(state, "usa")).toMatchObject({
      code: "place_not_served",
      reason: "No proxy of the connector was seen in US, state NY (0 of its 1 in US have a " +
        "known state or city): a request is never widened to its country",
    });
    expect(state.body.refusal).toMatchObject({ status: 502 });
  });

  test("no place: every enabled connector with a healthy proxy is eligible", async () => {
    const answer = await preview({ username: "preview-sessid-42-sesstime-30" });
    expect(answer.status).toBe(200);
    expect(answer.body.username).toMatchObject({ session_id: "42", session_minutes: 30 });
    expect(byName(answer, "germany").eligible).toBe(true);
    expect(byName(answer, "usa").eligible).toBe(true);
    expect(byName(answer, "off").eligible).toBe(false);
    expect(answer.body.proxies.total).toBe(3);
  });

  test("a bad option is a 422 naming body.username with the gateway's sentence", async () => {
    const country = await preview({ username: "preview-cc-xx" });
    expect(country.status).toBe(422);
    expect(country.body.detail).toEqual([
      { field: "body.username", message: UsernameMessage.country },
    ]);
    const state = await preview({ username: "preview-st-ny" });
    expect(state.status).toBe(422);
    expect(state.body.detail).toEqual([
      { field: "body.username", message: UsernameMessage.needsCountry },
    ]);
    const other = await preview({ username: "shop-cc-de" });
    expect(other.status).toBe(422);
    expect(other.body.detail[0].field).toBe("body.username");
    expect(other.body.detail[0].message).toContain("this project's username, preview");

    const target = await preview({ username: "preview", target: "example.com" });
    expect(target.status).toBe(422);
    expect(target.body.detail[0].field).toBe("body.target");
    const unknown = await preview({ username: "preview", proxy: "x" });
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail).toEqual([{ field: "body.proxy", message: "is not a known field" }]);
    const missing = await preview({});
    expect(missing.body.detail).toEqual([{ field: "body.username", message: "is required" }]);
  });

  test("a missing project is 404; a viewer may call it, nobody unauthenticated", async () => {
    expect((await preview({ username: "preview" }, h.tokens.viewer, randomUUID())).status)
      .toBe(404);
    expect((await preview({ username: "preview" }, h.tokens.viewer, "not-an-id")).status)
      .toBe(404);
    expect((await preview({ username: "preview" }, h.tokens.editor)).status).toBe(200);
    const anonymous = await h.request("POST", `/api/v1/projects/${projectId}/routing-preview`, {
      body: { username: "preview" },
    });
    expect(anonymous.status).toBe(401);
  });

  test("quarantines and traffic blocks come from Redis, as the feed carries them", async () => {
    const { redis, keys } = h.deps;
    const untilMs = Date.now() + 60_000;
    await redis.zadd(keys.proxyQuarantined, untilMs, proxy.de1, untilMs, proxy.de2);
    try {
      const resting = await preview({ username: "preview-cc-de" });
      expect(byName(resting, "germany")).toMatchObject({ eligible: true, quarantined: 2 });
      expect(resting.body.proxies.items[0]).toMatchObject({
        quarantined: true,
        quarantined_until: new Date(untilMs).toISOString(),
      });
      expect(resting.body.chosen).toBeNull();
      expect(resting.body.refusal).toMatchObject({
        status: 429,
        reason: "All proxies are temporarily rate-limited. Retry later.",
      });
    } finally {
      await redis.zrem(keys.proxyQuarantined, proxy.de1, proxy.de2);
    }

    const field = connectorSubject(connector.germany);
    await redis.hset(keys.trafficBlocked, field, JSON.stringify({ until_ms: untilMs }));
    try {
      const blocked = await preview({ username: "preview-cc-de" });
      expect(byName(blocked, "germany")).toMatchObject({
        eligible: false,
        code: "traffic_blocked",
        blocked_until: new Date(untilMs).toISOString(),
      });
      expect(blocked.body.refusal).toMatchObject({
        status: 509,
        proxy_status: "bandwidth_limit_exceeded",
      });
    } finally {
      await redis.hdel(keys.trafficBlocked, field);
    }
  });

  test("sticky reads a session's binding from Redis and writes nothing", async () => {
    const patched = await h.request("PATCH", `/api/v1/projects/${projectId}`, {
      token: h.tokens.editor,
      body: { strategy: "sticky" },
    });
    expect(patched.status).toBe(200);
    const { redis, keys } = h.deps;
    const prefixKeys = async () => (await redis.keys(`${keys.prefix}*`)).sort();
    const before = await prefixKeys();
    const fresh = await preview({ username: "preview-cc-de-sessid-7" });
    expect(fresh.body.strategy).toBe("sticky");
    expect(fresh.body.chosen.connector_id).toBe(connector.germany);
    expect(await prefixKeys()).toEqual(before);

    // A binding another gateway wrote is the one a gateway would follow.
    const bound = fresh.body.chosen.id === proxy.de1 ? proxy.de2 : proxy.de1;
    await redis.set(keys.sticky(projectId, "7"), bound, "PX", 60_000);
    const held = await preview({ username: "preview-cc-de-sessid-7" });
    expect(held.body.chosen.id).toBe(bound);
    expect(Number(await redis.pttl(keys.sticky(projectId, "7")))).toBeLessThanOrEqual(60_000);
    expect(await redis.get(keys.sticky(projectId, "7"))).toBe(bound);
  });
});
