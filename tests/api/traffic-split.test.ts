/**
 * The traffic split's expected shares over real stores, against the routing preview: both are
 * the gateway's routing code over the controller's compile of one project, with the quarantines,
 * traffic blocks and provider-API pools in Redis. A connector the router would not route a plain
 * request to (no place, no destination) takes no share and says why in the router's words; the
 * others share the requests by weight, as every strategy picks among them.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { poolStoreOf } from "../../control/provider-api/pool/store.ts";
import { markDepleted } from "../../control/services/sequences.ts";
import { connectorSubject } from "../../shared/traffic-subjects.ts";
import { type Answer, type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;

interface SplitItem {
  connector_id: string;
  name: string;
  weight: number;
  expected_share: number;
  excluded_reason: string | null;
}

interface PreviewConnector {
  id: string;
  name: string;
  weight: number;
  eligible: boolean;
  code: string | null;
  reason: string | null;
  healthy: number;
  quarantined: number;
}

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.close();
});

let serial = 0;
/** Every proxy gets an address of its own. */
let port = 3000;

async function createProject(strategy = "round_robin"): Promise<{ id: string; user: string }> {
  serial++;
  const user = `split${serial}`;
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: `Split ${serial}`, username: user, strategy },
  });
  expect(project.status, project.text).toBe(201);
  return { id: project.body.id, user };
}

/** A static connector with `healthy` healthy proxies (and `unhealthy` unhealthy ones). */
async function staticConnector(
  projectId: string,
  name: string,
  fields: Record<string, unknown>,
  proxies: { healthy: number; unhealthy?: number },
): Promise<{ id: string; proxyIds: string[] }> {
  const made = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    token: h.tokens.editor,
    body: { name, kind: "static", ...fields },
  });
  expect(made.status, made.text).toBe(201);
  const proxyIds: string[] = [];
  const total = proxies.healthy + (proxies.unhealthy ?? 0);
  for (let i = 0; i < total; i++) {
    const added = await h.request("POST", `/api/v1/projects/${projectId}/proxies`, {
      token: h.tokens.editor,
      body: { connector_id: made.body.id, url: `http://198.51.100.7:${port++}` },
    });
    expect(added.status, added.text).toBe(201);
    proxyIds.push(added.body.id);
  }
  // The health checks would move these; here the rows are set as a check would leave them.
  const healthy = proxyIds.slice(0, proxies.healthy);
  await h.deps.database
    .sql`update proxies set status = 'healthy' where id = any(${healthy}::uuid[])`;
  await h.deps.database.sql`update proxies set status = 'unhealthy'
    where id = any(${proxyIds.slice(proxies.healthy)}::uuid[])`;
  return { id: made.body.id, proxyIds };
}

async function split(projectId: string): Promise<Answer> {
  const answer = await h.request("GET", `/api/v1/projects/${projectId}/metrics/connectors`, {
    token: h.tokens.viewer,
  });
  expect(answer.status, answer.text).toBe(200);
  return answer;
}

/** The preview of a request naming no place and no destination: the split's request. */
async function preview(projectId: string, user: string): Promise<Answer> {
  const answer = await h.request("POST", `/api/v1/projects/${projectId}/routing-preview`, {
    token: h.tokens.viewer,
    body: { username: user },
  });
  expect(answer.status, answer.text).toBe(200);
  return answer;
}

/** Each connector's share and reason, by name, as the split answers them. */
function shares(answer: Answer): Record<string, [number, string | null]> {
  return Object.fromEntries(
    (answer.body.items as SplitItem[]).map((i) => [i.name, [i.expected_share, i.excluded_reason]]),
  );
}

/**
 * The split the preview's verdicts give: its code (a disabled connector keeps the split's
 * `disabled`), an eligible connector whose healthy proxies all rest takes none (the router
 * passes over it), and the rest share by weight.
 */
function splitOfPreview(answer: Answer): Record<string, [number, string | null]> {
  const connectors = answer.body.connectors as PreviewConnector[];
  const reasonOf = (c: PreviewConnector) => {
    if (c.code === "not_taking_requests" && c.reason === "The connector is disabled") {
      return "disabled";
    }
    if (c.code !== null) return c.code;
    return c.quarantined === c.healthy ? "all_proxies_quarantined" : null;
  };
  const serving = connectors.filter((c) => reasonOf(c) === null);
  const total = serving.reduce((sum, c) => sum + c.weight, 0);
  return Object.fromEntries(connectors.map((c) => {
    const reason = reasonOf(c);
    return [c.name, [reason === null ? Math.round((c.weight / total) * 1e4) / 1e4 : 0, reason]];
  }));
}

const sumOf = (answer: Answer) =>
  (answer.body.items as SplitItem[]).reduce((sum, i) => sum + i.expected_share, 0);

describe("the expected split is the router's", () => {
  let project: { id: string; user: string };
  const ids: Record<string, string> = {};
  const proxies: Record<string, string[]> = {};

  beforeAll(async () => {
    project = await createProject();
    const made: [string, Record<string, unknown>, { healthy: number; unhealthy?: number }][] = [
      ["a", { weight: 3 }, { healthy: 2 }],
      ["b", { weight: 1 }, { healthy: 1, unhealthy: 1 }],
      [
        "limited",
        { weight: 2, traffic_config: { limit_bytes: 1_000_000, period: "day" } },
        { healthy: 1 },
      ],
      ["resting", { weight: 4 }, { healthy: 2 }],
      ["off", { weight: 5, enabled: false }, { healthy: 1 }],
      ["leaving", { weight: 5 }, { healthy: 1 }],
      ["sick", { weight: 2 }, { healthy: 0, unhealthy: 2 }],
      ["empty", { weight: 2 }, { healthy: 0 }],
    ];
    for (const [name, fields, counts] of made) {
      const connector = await staticConnector(project.id, name, fields, counts);
      ids[name] = connector.id;
      proxies[name] = connector.proxyIds;
    }
    // A deletion marks the connector first and removes it in a job; here it stays marked.
    await h.deps.database.sql`update connectors set pending_deletion = true
      where id = ${ids.leaving}`;
    // The traffic job's block and a rate limiter's quarantines, as they stand in Redis.
    const { redis, keys } = h.deps;
    const untilMs = Date.now() + 600_000;
    await redis.hset(
      keys.trafficBlocked,
      connectorSubject(ids.limited),
      JSON.stringify({ until_ms: untilMs }),
    );
    await redis.zadd(
      keys.proxyQuarantined,
      untilMs,
      proxies.resting[0],
      untilMs,
      proxies.resting[1],
    );
  });

  test("blocked, resting, disabled, being deleted and proxy-less connectors take no share; the rest share by weight", async () => {
    const answer = await split(project.id);
    expect(answer.body.runtime_included).toBe(true);
    expect(shares(answer)).toEqual({
      a: [0.75, null],
      b: [0.25, null],
      limited: [0, "traffic_blocked"],
      resting: [0, "all_proxies_quarantined"],
      off: [0, "disabled"],
      leaving: [0, "not_taking_requests"],
      sick: [0, "no_healthy_proxy"],
      empty: [0, "place_not_served"],
    });
    expect(sumOf(answer)).toBeCloseTo(1, 10);
    // The counts beside the share are the stored rows, whatever routing makes of them.
    const b = (answer.body.items as SplitItem[]).find((i) => i.name === "b");
    expect(b).toMatchObject({ weight: 1, proxies: 2, healthy: 1, enabled: true });
  });

  test("the split equals the routing preview's verdicts, and its pick is a serving connector's", async () => {
    const [answer, previewed] = [await split(project.id), await preview(project.id, project.user)];
    expect(shares(answer)).toEqual(splitOfPreview(previewed));
    const byName = Object.fromEntries(
      (previewed.body.connectors as PreviewConnector[]).map((c) => [c.name, c]),
    );
    expect(byName.resting).toMatchObject({ eligible: true, healthy: 2, quarantined: 2 });
    expect(byName.limited).toMatchObject({ eligible: false, code: "traffic_blocked" });
    expect(byName.leaving).toMatchObject({
      code: "not_taking_requests",
      reason: "The connector is being deleted",
    });
    expect([ids.a, ids.b]).toContain(previewed.body.chosen.connector_id);
  });

  test("a block and quarantines that end give those connectors their share back", async () => {
    const { redis, keys } = h.deps;
    await redis.hdel(keys.trafficBlocked, connectorSubject(ids.limited));
    await redis.zrem(keys.proxyQuarantined, ...proxies.resting);
    const answer = await split(project.id);
    expect(shares(answer)).toMatchObject({
      a: [0.3, null],
      b: [0.1, null],
      limited: [0.2, null],
      resting: [0.4, null],
      off: [0, "disabled"],
    });
    expect(sumOf(answer)).toBeCloseTo(1, 10);
    expect(shares(answer)).toEqual(splitOfPreview(await preview(project.id, project.user)));
  });
});

describe("a connector sequence", () => {
  test("only its current connector takes a share, whatever the weights", async () => {
    const project = await createProject();
    const first = await staticConnector(project.id, "first", { weight: 1 }, { healthy: 1 });
    const second = await staticConnector(project.id, "second", { weight: 5 }, { healthy: 1 });
    const loose = await staticConnector(project.id, "loose", { weight: 2 }, { healthy: 1 });
    const set = await h.request("PUT", `/api/v1/projects/${project.id}/sequence`, {
      token: h.tokens.editor,
      body: { connector_ids: [first.id, second.id] },
    });
    expect(set.status, set.text).toBe(200);

    const before = await split(project.id);
    expect(shares(before)).toEqual({
      first: [1, null],
      second: [0, "out_of_sequence"],
      loose: [0, "out_of_sequence"],
    });
    expect(shares(before)).toEqual(splitOfPreview(await preview(project.id, project.user)));

    await markDepleted(h.deps, first.id);
    const after = await split(project.id);
    expect(shares(after)).toEqual({
      first: [0, "out_of_sequence"],
      second: [1, null],
      loose: [0, "out_of_sequence"],
    });
    const previewed = await preview(project.id, project.user);
    expect(shares(after)).toEqual(splitOfPreview(previewed));
    expect(previewed.body.chosen.connector_id).toBe(second.id);
    expect(loose.id).not.toBe(previewed.body.chosen.connector_id);
  });
});

describe("a provider-API connector", () => {
  test("serves from its pool's routed entries in Redis, not from Postgres", async () => {
    const project = await createProject("random");
    const credential = await h.request("POST", `/api/v1/projects/${project.id}/credentials`, {
      token: h.tokens.editor,
      body: { name: "Keys", provider: "provider_api", config: { api_key: "k-1" } },
    });
    expect(credential.status, credential.text).toBe(201);
    const pool = await h.request("POST", `/api/v1/projects/${project.id}/connectors`, {
      token: h.tokens.editor,
      body: {
        name: "pool",
        kind: "provider_api",
        weight: 3,
        credential_id: credential.body.id,
        config: {
          fetch: { url: "https://provider.example/v1/proxies" },
          parser: { format: "json", items: "data", fields: { host: "ip", port: "port" } },
        },
      },
    });
    expect(pool.status, pool.text).toBe(201);
    await staticConnector(project.id, "list", { weight: 1 }, { healthy: 1 });

    const empty = await split(project.id);
    expect(shares(empty)).toEqual({ pool: [0, "place_not_served"], list: [1, null] });

    // One fetched entry that passed its check: routed, as the pool job leaves it.
    const store = poolStoreOf(h.deps);
    const nowMs = Date.now();
    const added = await store.add({ id: pool.body.id, projectId: project.id }, [{
      key: "http|203.0.113.77|8080|u",
      scheme: "http",
      host: "203.0.113.77",
      port: 8080,
      username: "u",
      password: "p",
      country: null,
      expiresAtMs: nowMs + 600_000,
      usableUntilMs: nowMs + 590_000,
    }], { nowMs, maxSize: 10 });
    await store.markChecked({ id: pool.body.id, projectId: project.id }, [
      { id: added.ids[0], passed: true },
    ], { nowMs, reserve: null });

    const filled = await split(project.id);
    expect(shares(filled)).toEqual({ pool: [0.75, null], list: [0.25, null] });
    const item = (filled.body.items as SplitItem[]).find((i) => i.name === "pool");
    // Its proxies live in Redis: the stored rows' counts stay at none.
    expect(item).toMatchObject({ proxies: 0, healthy: 0 });
    expect(shares(filled)).toEqual(splitOfPreview(await preview(project.id, project.user)));
  });
});
