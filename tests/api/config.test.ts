/**
 * Configuration as code through the API: an apply writes a whole document in one transaction
 * with one change entry, a second apply of it changes nothing, export then apply is a no-op, a
 * document with errors lists each and changes nothing, and an apply from a stale base is refused.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.close();
});

const document = () => ({
  version: 1,
  projects: [{
    name: "Shop",
    username: "shop",
    password: "shop-secret-1",
    strategy: "random",
    rate_limit: { requests_per_second: 50 },
    credentials: [{
      name: "login",
      provider: "static",
      config: { username: "bob", password: "pw-1" },
    }],
    connectors: [{
      name: "main",
      credential: "login",
      weight: 3,
      countries: ["de"],
      traffic_config: { limit_bytes: 1_000_000, period: "day" },
      proxies: [
        "http://203.0.113.7:3128",
        { url: "socks5://u:p%40ss@203.0.113.8:1080", country: "fr" },
      ],
    }],
  }],
});

async function counts() {
  const [row] = await h.deps.database.sql`
    select (select count(*)::int from projects) as projects,
      (select count(*)::int from credentials) as credentials,
      (select count(*)::int from connectors) as connectors,
      (select count(*)::int from proxies) as proxies`;
  return row;
}

const post = (path: string, body: unknown, token = h.tokens.editor) =>
  h.request("POST", `/api/v1/config/${path}`, { token, body });

test("an apply creates the whole document in one change entry; again, it changes nothing", async () => {
  const before = (await h.changes()).length;
  const diff = await post("diff", { config: document() });
  expect(diff.status).toBe(200);
  expect(diff.body.changes.map((c: { action: string; path: string }) => `${c.action} ${c.path}`))
    .toEqual([
      "create Shop",
      "create Shop/credentials/login",
      "create Shop/connectors/main",
      "create Shop/connectors/main/proxies/http://203.0.113.7:3128",
      "create Shop/connectors/main/proxies/socks5://u@203.0.113.8:1080",
    ]);
  const applied = await post("apply", {
    config: document(),
    base_fingerprint: diff.body.fingerprint,
  });
  expect(applied.status).toBe(200);
  expect(applied.body.fingerprint).not.toBe(diff.body.fingerprint);
  expect(await counts()).toEqual({ projects: 1, credentials: 1, connectors: 1, proxies: 2 });
  const entries = (await h.changes()).slice(before);
  expect(entries).toEqual([expect.objectContaining({ kind: "all", ref: "*" })]);

  const [project] = (await h.request("GET", "/api/v1/projects", { token: h.tokens.editor })).body;
  expect(project).toMatchObject({
    username: "shop",
    password: "shop-secret-1",
    strategy: "random",
  });
  const [connector] = (await h.request("GET", `/api/v1/projects/${project.id}/connectors`, {
    token: h.tokens.editor,
  })).body;
  expect(connector).toMatchObject({ weight: 3, countries: ["DE"] });
  const [proxy] = await h.deps.database
    .sql`select password, country from proxies where port = 1080`;
  expect(proxy).toEqual({ password: "p@ss", country: "FR" });

  const again = await post("apply", { config: document() });
  expect(again.body).toMatchObject({ changes: [], fingerprint: applied.body.fingerprint });
  expect((await h.changes()).length).toBe(before + 1);
  expect((await post("diff", { config: document() })).body.changes).toEqual([]);
});

test("export then apply is a no-op, and leaves the secrets the export left out", async () => {
  const exported = await h.request("GET", "/api/v1/config", { token: h.tokens.viewer });
  expect(exported.status).toBe(200);
  const text = JSON.stringify(exported.body.config);
  for (const secret of ["shop-secret-1", "pw-1", "p@ss", "p%40ss"]) {
    expect(text).not.toContain(secret);
  }
  const applied = await post("apply", {
    config: exported.body.config,
    base_fingerprint: exported.body.fingerprint,
  });
  expect(applied.body).toMatchObject({ changes: [], fingerprint: exported.body.fingerprint });
  const [project] = await h.deps.database.sql`select password from projects`;
  expect(project.password).toBe("shop-secret-1");
});

test("a document with three errors lists all three with their paths and changes nothing", async () => {
  const before = await counts();
  const bad = document();
  bad.projects[0].connectors[0].weight = 0;
  bad.projects[0].connectors[0].credential = "nobody";
  (bad.projects[0].connectors[0].proxies as unknown[]).push("http://203.0.113.9");
  const answer = await post("apply", { config: bad });
  expect(answer.status).toBe(422);
  expect(answer.body.detail.map((issue: { field: string }) => issue.field).sort()).toEqual([
    "config.projects.0.connectors.0.credential",
    "config.projects.0.connectors.0.proxies.2",
    "config.projects.0.connectors.0.weight",
  ]);
  expect(await counts()).toEqual(before);
});

test("an apply from a base that moved is refused with the fresh diff", async () => {
  const next = document();
  next.projects[0].connectors[0].weight = 5;
  const diff = await post("diff", { config: next });
  const other = document();
  other.projects[0].strategy = "least_used";
  expect((await post("apply", { config: other, base_fingerprint: diff.body.fingerprint })).status)
    .toBe(200);
  const stale = await post("apply", { config: next, base_fingerprint: diff.body.fingerprint });
  expect(stale.status).toBe(409);
  expect(
    stale.body.detail.changes.map((c: { path: string; fields?: string[] }) => [c.path, c.fields]),
  )
    .toEqual([["Shop", ["strategy"]], ["Shop/connectors/main", ["weight"]]]);
  const [connector] = await h.deps.database.sql`select weight from connectors`;
  expect(connector.weight).toBe(3);
});

test("without prune what the document leaves out stays; with prune it goes", async () => {
  const extra = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Extra", username: "extra" },
  });
  expect(extra.status).toBe(201);
  const slim = document();
  slim.projects[0].strategy = "least_used";
  slim.projects[0].connectors[0].proxies = ["http://203.0.113.7:3128"];
  const kept = await post("diff", { config: slim });
  expect(kept.body.changes).toEqual([]);
  const pruned = await post("apply", { config: slim, prune: true });
  expect(pruned.body.changes.map((c: { action: string; path: string }) => `${c.action} ${c.path}`))
    .toEqual([
      "delete Shop/connectors/main/proxies/socks5://u@203.0.113.8:1080",
      "delete Extra",
    ]);
  expect(await counts()).toEqual({ projects: 1, credentials: 1, connectors: 1, proxies: 1 });
});

test("vendor credentials and connectors are the api's: a file never exports, compares or prunes them", async () => {
  const [shop] = await h.deps.database.sql`select id from projects where name = 'Shop'`;
  const base = `/api/v1/projects/${shop.id}`;
  const credential = await h.request("POST", `${base}/credentials`, {
    token: h.tokens.editor,
    body: { name: "oxy", provider: "oxylabs", config: { username: "acme", password: "pw" } },
  });
  expect(credential.status, credential.text).toBe(201);
  const connector = await h.request("POST", `${base}/connectors`, {
    token: h.tokens.editor,
    body: {
      name: "residential",
      kind: "vendor",
      provider: "oxylabs",
      credential_id: credential.body.id,
    },
  });
  expect(connector.status, connector.text).toBe(201);
  const exported = await h.request("GET", "/api/v1/config", { token: h.tokens.viewer });
  expect(JSON.stringify(exported.body)).not.toContain("oxylabs");
  const pruned = await post("apply", { config: exported.body.config, prune: true });
  expect(pruned.status, pruned.text).toBe(200);
  expect(pruned.body.changes).toEqual([]);
  const [left] = await h.deps.database
    .sql`select count(*)::int as n from connectors where kind = 'vendor'`;
  expect(left.n).toBe(1);
  // A file naming a vendor connector is refused, naming the field.
  const vendorFile = document();
  (vendorFile.projects[0].connectors[0] as Record<string, unknown>).kind = "vendor";
  const refused = await post("diff", { config: vendorFile });
  expect(refused.status).toBe(422);
  expect(refused.text).toContain("static connectors only");
});

test("a username another project holds is named; a viewer may not apply", async () => {
  const other = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Other", username: "other-user" },
  });
  expect(other.status).toBe(201);
  const clash = document();
  clash.projects[0].username = "other-user";
  const answer = await post("diff", { config: clash });
  expect(answer.status).toBe(422);
  expect(answer.body.detail).toEqual([{
    field: "config.projects.0.username",
    message: "is the proxy username of project Other, which this file does not name",
  }]);
  expect((await post("apply", { config: document() }, h.tokens.viewer)).status).toBe(403);
  expect((await h.request("POST", "/api/v1/config/reload", { token: h.tokens.admin })).status)
    .toBe(409);
});

test("a revision older than the last applied is refused, so a stale file cannot undo a newer one", async () => {
  const newer = { ...document(), revision: 7 };
  newer.projects[0].strategy = "least_used";
  expect((await post("apply", { config: newer })).status).toBe(200);
  expect((await h.request("GET", "/api/v1/config", { token: h.tokens.viewer })).body.revision)
    .toBe(7);
  const older = { ...document(), revision: 6 };
  older.projects[0].strategy = "round_robin";
  for (const path of ["diff", "apply"]) {
    const refused = await post(path, { config: older });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatch(/revision 6, older than revision 7/);
  }
  const [project] = await h.deps.database.sql`select strategy from projects where name = 'Shop'`;
  expect(project.strategy).toBe("least_used");
  // The same revision again, or a document without one, is applied.
  expect((await post("apply", { config: { ...newer } })).status).toBe(200);
  expect((await post("apply", { config: document() })).status).toBe(200);
});

test("an apply that edits a connector's rate limits lifts its proxies' quarantines; a price edit asks no decision", async () => {
  const doc = (maxRequests: number, pricePerGb: number) => ({
    version: 1,
    projects: [{
      name: "Limits",
      username: "limits",
      password: "limits-secret-1",
      connectors: [{
        name: "edge",
        rate_limit_config: { max_requests: maxRequests, window_seconds: 60 },
        traffic_config: { limit_bytes: 1_000, period: "day", price_per_gb: pricePerGb },
        proxies: ["http://203.0.113.20:3128"],
      }],
    }],
  });
  const created = await post("apply", { config: doc(10, 1) });
  expect(created.status, created.text).toBe(200);
  const [proxy] = await h.deps.database
    .sql`select id, connector_id from proxies where host = '203.0.113.20'`;
  const { redis, keys } = h.deps;
  // A new limit asked for a decision; a worker would have taken it.
  expect(await redis.hget(keys.trafficPending, proxy.connector_id)).not.toBeNull();
  await redis.hdel(keys.trafficPending, proxy.connector_id);
  await redis.zadd(keys.proxyQuarantined, Date.now() + 90_000, proxy.id);

  const priced = await post("apply", { config: doc(10, 2) });
  expect(priced.status, priced.text).toBe(200);
  expect(priced.body.changes).toHaveLength(1);
  expect(await redis.hget(keys.trafficPending, proxy.connector_id)).toBeNull();
  expect(await redis.zscore(keys.proxyQuarantined, proxy.id)).not.toBeNull();

  const raised = await post("apply", { config: doc(100, 2) });
  expect(raised.status, raised.text).toBe(200);
  expect(await redis.zscore(keys.proxyQuarantined, proxy.id)).toBeNull();
  expect(await redis.hget(keys.trafficPending, proxy.connector_id)).toBeNull();
});
