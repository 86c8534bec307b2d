/**
 * Projects, credentials, connectors and proxies end to end; each write appends exactly one
 * change entry after its commit, and a write that changes nothing appends none. Also the app's
 * frame: request ids, the access log, unknown routes, the echo, the home page, the OpenAPI doc.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type ApiHarness, listen, startHarness } from "../../testkit/api-harness.ts";
import { HttpServer } from "../../control/core/http-server.ts";
import { echoFastGets } from "../../control/api/routes/public.ts";

let h: ApiHarness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.close();
});

/** Runs a write and answers the change entries it appended. */
async function entriesOf<T>(
  write: () => Promise<T>,
): Promise<{ result: T; entries: { kind: string; ref: string }[] }> {
  const before = (await h.changes()).length;
  const result = await write();
  const entries = (await h.changes()).slice(before);
  return { result, entries };
}

describe("projects", () => {
  test("create with defaults, read, list in order, edit, delete; one entry per write", async () => {
    const { result: created, entries: createEntries } = await entriesOf(() =>
      h.request("POST", "/api/v1/projects", {
        token: h.tokens.editor,
        body: { name: " Shop ", username: "shop.eu_1" },
      })
    );
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      name: "Shop",
      username: "shop.eu_1",
      description: "",
      strategy: "round_robin",
      location_policy: "off",
      location_preflight: "off",
      location_sources: null,
      location_conflict_rule: null,
      session_ttl_seconds: 300,
      sticky_quarantine: false,
      metrics_retention_days: 90,
      connection_timeout_seconds: 30,
      max_retries: 1,
    });
    // A generated password fits the rules clients rely on.
    expect(created.body.password).toMatch(/^[A-Za-z0-9_-]{24}$/);
    const id = created.body.id;
    expect(createEntries).toEqual([{ kind: "project", ref: id }]);

    const second = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name: "Second", username: "second", strategy: "sticky", password: "p4ss!word" },
    });
    const list = await h.request("GET", "/api/v1/projects", { token: h.tokens.viewer });
    const ids = list.body.map((p: { id: string }) => p.id);
    expect(ids.indexOf(id)).toBeLessThan(ids.indexOf(second.body.id));

    const { result: edited, entries: editEntries } = await entriesOf(() =>
      h.request("PATCH", `/api/v1/projects/${id}`, {
        token: h.tokens.editor,
        body: { strategy: "least_used", description: "EU shop", max_retries: 0 },
      })
    );
    expect(edited.status).toBe(200);
    expect(edited.body).toMatchObject({
      strategy: "least_used",
      description: "EU shop",
      max_retries: 0,
    });
    expect(editEntries).toEqual([{ kind: "project", ref: id }]);

    const { result: same, entries: sameEntries } = await entriesOf(() =>
      h.request("PATCH", `/api/v1/projects/${id}`, {
        token: h.tokens.editor,
        body: { strategy: "least_used" },
      })
    );
    expect(same.status).toBe(200);
    expect(same.body.updated_at).toBe(edited.body.updated_at);
    expect(sameEntries).toEqual([]);

    const { result: removed, entries: deleteEntries } = await entriesOf(() =>
      h.request("DELETE", `/api/v1/projects/${id}`, { token: h.tokens.editor })
    );
    expect(removed.status).toBe(204);
    expect(deleteEntries).toEqual([{ kind: "project", ref: id }]);
    expect((await h.request("GET", `/api/v1/projects/${id}`, { token: h.tokens.viewer })).status)
      .toBe(404);
  });

  test("a project delete takes its connectors and proxies with it", async () => {
    const project = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name: "Cascade", username: "cascade" },
    });
    const connector = await h.request("POST", `/api/v1/projects/${project.body.id}/connectors`, {
      token: h.tokens.editor,
      body: { name: "c", kind: "static" },
    });
    await h.request(
      "POST",
      `/api/v1/projects/${project.body.id}/proxies/upload?connector_id=${connector.body.id}`,
      {
        token: h.tokens.editor,
        text: "http://a.example:1\nhttp://b.example:2\n",
      },
    );
    await h.request("DELETE", `/api/v1/projects/${project.body.id}`, { token: h.tokens.editor });
    const [{ n }] = await h.deps.database.sql`
      select count(*)::int as n from proxies where project_id = ${project.body.id}`;
    expect(n).toBe(0);
  });
});

describe("credentials", () => {
  test("secrets are masked, a mask sent back keeps them, null removes a field", async () => {
    const project = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name: "Creds", username: "creds" },
    });
    const base = `/api/v1/projects/${project.body.id}/credentials`;
    const { result: created, entries } = await entriesOf(() =>
      h.request("POST", base, {
        token: h.tokens.editor,
        body: {
          name: "Default login",
          provider: "STATIC",
          config: { username: "u", password: "hunter22" },
        },
      })
    );
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      provider: "static",
      config: { username: "u", password: "********" },
      has_password: true,
    });
    expect(created.text).not.toContain("hunter22");
    expect(entries).toEqual([{ kind: "credential", ref: created.body.id }]);

    const item = `${base}/${created.body.id}`;
    const { entries: maskEntries } = await entriesOf(() =>
      h.request("PATCH", item, {
        token: h.tokens.editor,
        body: { config: { username: "u", password: "********" } },
      })
    );
    expect(maskEntries).toEqual([]);
    const [stored] = await h.deps.database
      .sql`select config from credentials where id = ${created.body.id}`;
    expect(stored.config).toEqual({ username: "u", password: "hunter22" });

    const cleared = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { config: { password: null }, name: "Renamed" },
    });
    expect(cleared.body).toMatchObject({
      name: "Renamed",
      config: { username: "u" },
      has_password: false,
    });

    const listed = await h.request("GET", base, { token: h.tokens.viewer });
    expect(listed.body).toHaveLength(1);

    // A credential in use cannot go; once free it can.
    const connector = await h.request("POST", `/api/v1/projects/${project.body.id}/connectors`, {
      token: h.tokens.editor,
      body: { name: "uses", kind: "static", credential_id: created.body.id },
    });
    expect(connector.body.credential_id).toBe(created.body.id);
    const refused = await h.request("DELETE", item, { token: h.tokens.editor });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatch(/uses this credential/);
    await h.request(
      "PATCH",
      `/api/v1/projects/${project.body.id}/connectors/${connector.body.id}`,
      {
        token: h.tokens.editor,
        body: { credential_id: null },
      },
    );
    const { result: removed, entries: deleteEntries } = await entriesOf(() =>
      h.request("DELETE", item, { token: h.tokens.editor })
    );
    expect(removed.status).toBe(204);
    expect(deleteEntries).toEqual([{ kind: "credential", ref: created.body.id }]);
  });
});

describe("connectors", () => {
  let projectId: string;
  beforeAll(async () => {
    const project = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name: "Connectors", username: "connectors" },
    });
    projectId = project.body.id;
  });

  test("fields are normalised and defaults filled; edits merge and keep the rules", async () => {
    const base = `/api/v1/projects/${projectId}/connectors`;
    const { result: created, entries } = await entriesOf(() =>
      h.request("POST", base, {
        token: h.tokens.editor,
        body: {
          name: "Datacenter",
          kind: "static",
          weight: 7,
          countries: ["us", "uk", "DE", "gb", "US"],
          domain_deny: ["Example.COM", "*.ads.example", "example.com"],
          healthcheck_url: "https://check.example/ok",
          rate_limit_config: { max_requests: 10, window_seconds: 60, quarantine_seconds_max: 120 },
          traffic_config: { limit_bytes: 1e9, period: "day", reset_day: 9, currency: "eur" },
        },
      })
    );
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      kind: "static",
      provider: "static",
      enabled: true,
      weight: 7,
      countries: ["DE", "GB", "US"],
      domain_allow: [],
      domain_deny: ["ads.example", "example.com"],
      rate_limit_config: {
        max_requests: 10,
        window_seconds: 60,
        quarantine_seconds_min: 60,
        quarantine_seconds_max: 120,
        sticky_quarantine: false,
      },
      traffic_config: {
        limit_bytes: 1e9,
        period: "day",
        reset_day: 1,
        action: "alert",
        warn_percent: 80,
        limit_status: 509,
        price_per_gb: null,
        currency: "EUR",
      },
      pending_deletion: false,
      proxy_count: 0,
    });
    expect(entries).toEqual([{ kind: "connector", ref: created.body.id }]);
    const item = `${base}/${created.body.id}`;

    // Setting the allow list while the deny list stands breaks the rule on the merged copy.
    const conflict = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { domain_allow: ["only.example"] },
    });
    expect(conflict.status).toBe(422);
    expect(conflict.body.detail[0].field).toBe("body.domain_allow");
    const swapped = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { domain_allow: ["only.example"], domain_deny: [] },
    });
    expect(swapped.status).toBe(200);
    expect(swapped.body).toMatchObject({ domain_allow: ["only.example"], domain_deny: [] });

    const { entries: noop } = await entriesOf(() =>
      h.request("PATCH", item, { token: h.tokens.editor, body: { countries: ["gb", "de", "us"] } })
    );
    expect(noop).toEqual([]);

    const cleared = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { rate_limit_config: null, enabled: false },
    });
    expect(cleared.body).toMatchObject({ rate_limit_config: null, enabled: false });

    const listed = await h.request("GET", base, { token: h.tokens.viewer });
    expect(listed.body.map((c: { id: string }) => c.id)).toContain(created.body.id);
  });

  test("deleting a static connector deletes its proxies in one transaction, one entry", async () => {
    const base = `/api/v1/projects/${projectId}/connectors`;
    const connector = await h.request("POST", base, {
      token: h.tokens.editor,
      body: { name: "Doomed", kind: "static" },
    });
    await h.request(
      "POST",
      `/api/v1/projects/${projectId}/proxies/upload?connector_id=${connector.body.id}`,
      {
        token: h.tokens.editor,
        text: "socks5://1.1.1.1:1080\nsocks5://1.1.1.2:1080\nsocks5://1.1.1.3:1080\n",
      },
    );
    const read = await h.request("GET", `${base}/${connector.body.id}`, { token: h.tokens.viewer });
    expect(read.body.proxy_count).toBe(3);
    const { result, entries } = await entriesOf(() =>
      h.request("DELETE", `${base}/${connector.body.id}`, { token: h.tokens.editor })
    );
    expect(result.status).toBe(204);
    expect(entries).toEqual([{ kind: "connector", ref: connector.body.id }]);
    const [{ n }] = await h.deps.database.sql`
      select count(*)::int as n from proxies where connector_id = ${connector.body.id}`;
    expect(n).toBe(0);
  });
});

describe("proxies", () => {
  let projectId: string;
  let connectorA: string;
  let connectorB: string;
  beforeAll(async () => {
    const project = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name: "Proxies", username: "proxies" },
    });
    projectId = project.body.id;
    const make = async (name: string) =>
      (await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
        token: h.tokens.editor,
        body: { name, kind: "static" },
      })).body.id as string;
    connectorA = await make("A");
    connectorB = await make("B");
  });

  test("add, read, edit and delete; passwords never answered; one entry per write", async () => {
    const base = `/api/v1/projects/${projectId}/proxies`;
    const { result: created, entries } = await entriesOf(() =>
      h.request("POST", base, {
        token: h.tokens.editor,
        body: {
          connector_id: connectorA,
          url: "SOCKS5://us%3Aer:p%40ss:word@[2001:DB8::1]:1080",
          country: "uk",
          metadata: { rack: 7 },
        },
      })
    );
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({
      scheme: "socks5",
      host: "2001:db8::1",
      port: 1080,
      username: "us:er",
      has_password: true,
      url: "socks5://us%3Aer@[2001:db8::1]:1080",
      country: "GB",
      country_source: "manual",
      metadata: { rack: 7 },
      status: "initializing",
    });
    expect(created.text).not.toContain("p@ss");
    expect(created.body.password).toBeUndefined();
    expect(entries).toEqual([{ kind: "proxy", ref: connectorA }]);
    const [stored] = await h.deps.database
      .sql`select password from proxies where id = ${created.body.id}`;
    expect(stored.password).toBe("p@ss:word");

    const item = `${base}/${created.body.id}`;
    const read = await h.request("GET", item, { token: h.tokens.viewer });
    expect(read.body.id).toBe(created.body.id);

    const { result: edited, entries: editEntries } = await entriesOf(() =>
      h.request("PATCH", item, {
        token: h.tokens.editor,
        body: { url: "http://proxy.example:3128", country: "" },
      })
    );
    expect(edited.body).toMatchObject({
      scheme: "http",
      host: "proxy.example",
      port: 3128,
      username: null,
      has_password: false,
      country: null,
      country_source: null,
    });
    expect(editEntries).toEqual([{ kind: "proxy", ref: connectorA }]);

    const status = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { status: "healthy" },
    });
    expect(status.status).toBe(422);

    const { entries: noop } = await entriesOf(() =>
      h.request("PATCH", item, {
        token: h.tokens.editor,
        body: { url: "http://proxy.example:3128" },
      })
    );
    expect(noop).toEqual([]);

    const { result: removed, entries: deleteEntries } = await entriesOf(() =>
      h.request("DELETE", item, { token: h.tokens.editor })
    );
    expect(removed.status).toBe(204);
    expect(deleteEntries).toEqual([{ kind: "proxy", ref: connectorA }]);
  });

  test("a rate-limit quarantine shows on the proxy with its time left; an editor lifts it", async () => {
    const base = `/api/v1/projects/${projectId}/proxies`;
    const made = await h.request("POST", base, {
      token: h.tokens.editor,
      body: { connector_id: connectorA, url: "http://resting.example:3128" },
    });
    expect(made.status, made.text).toBe(201);
    expect(made.body).toMatchObject({ quarantined: false, quarantine_remaining_seconds: 0 });
    const id: string = made.body.id;
    const item = `${base}/${id}`;
    const { redis, keys } = h.deps;

    // A gateway's rate limiter tripped it for 90 s.
    await redis.zadd(keys.proxyQuarantined, Date.now() + 90_000, id);
    const read = await h.request("GET", item, { token: h.tokens.viewer });
    expect(read.body.quarantined).toBe(true);
    expect(read.body.quarantine_remaining_seconds).toBeGreaterThan(85);
    expect(read.body.quarantine_remaining_seconds).toBeLessThanOrEqual(90);
    const listed = await h.request("GET", `${base}?connector_id=${connectorA}`, {
      token: h.tokens.viewer,
    });
    const shown = listed.body.items.find((row: { id: string }) => row.id === id);
    expect(shown).toMatchObject({ quarantined: true });
    expect(
      listed.body.items.filter((row: { quarantined: boolean }) => row.quarantined),
    ).toHaveLength(1);

    // A viewer may not lift it; an editor may, once, announced on the runtime stream.
    const lift = (token: string) => h.request("POST", `${item}/unquarantine`, { token });
    expect((await lift(h.tokens.viewer)).status).toBe(403);
    const streamBefore = await redis.xlen(keys.runtimeStream);
    const lifted = await lift(h.tokens.editor);
    expect(lifted.status, lifted.text).toBe(200);
    expect(lifted.body).toEqual({ status: "ok" });
    expect(await redis.zscore(keys.proxyQuarantined, id)).toBeNull();
    const entries = await redis.xrange(keys.runtimeStream, "-", "+");
    expect(entries).toHaveLength(streamBefore + 1);
    expect(entries.at(-1)?.[1]).toEqual(["kind", "quarantine_lifted", "ref", id]);
    expect((await h.request("GET", item, { token: h.tokens.viewer })).body).toMatchObject({
      quarantined: false,
      quarantine_remaining_seconds: 0,
    });

    const again = await lift(h.tokens.editor);
    expect(again.status).toBe(400);
    expect(again.body.error).toBe("The proxy is not quarantined");
    // One that ended by itself, not trimmed yet, is not quarantined either.
    await redis.zadd(keys.proxyQuarantined, Date.now() - 1_000, id);
    expect((await lift(h.tokens.editor)).status).toBe(400);
    expect((await h.request("GET", item, { token: h.tokens.viewer })).body.quarantined).toBe(false);
    expect(await redis.xlen(keys.runtimeStream)).toBe(streamBefore + 1);

    // Another project's proxy, or none at all: 404.
    const missing = await h.request(
      "POST",
      `${base}/00000000-0000-4000-8000-000000000000/unquarantine`,
      { token: h.tokens.editor },
    );
    expect(missing.status).toBe(404);
    expect((await h.request("DELETE", item, { token: h.tokens.editor })).status).toBe(204);
  });

  test("an edit of a connector's rate limits lifts the quarantines they tripped; another edit none", async () => {
    const limited = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
      token: h.tokens.editor,
      body: {
        name: "limited",
        kind: "static",
        rate_limit_config: { max_requests: 10, window_seconds: 60 },
      },
    });
    expect(limited.status, limited.text).toBe(201);
    const connector = `/api/v1/projects/${projectId}/connectors/${limited.body.id}`;
    const ids: string[] = [];
    for (const host of ["rest-1.example", "rest-2.example"]) {
      const made = await h.request("POST", `/api/v1/projects/${projectId}/proxies`, {
        token: h.tokens.editor,
        body: { connector_id: limited.body.id, url: `http://${host}:3128` },
      });
      ids.push(made.body.id);
    }
    const { redis, keys } = h.deps;
    // Both tripped by the limiter; a proxy of another connector too.
    const other = await h.request("POST", `/api/v1/projects/${projectId}/proxies`, {
      token: h.tokens.editor,
      body: { connector_id: connectorA, url: "http://rest-other.example:3128" },
    });
    for (const id of [...ids, other.body.id]) {
      await redis.zadd(keys.proxyQuarantined, Date.now() + 90_000, id);
    }

    // Renaming it lifts nothing.
    const renamed = await h.request("PATCH", connector, {
      token: h.tokens.editor,
      body: { name: "limited-renamed" },
    });
    expect(renamed.status, renamed.text).toBe(200);
    for (const id of ids) expect(await redis.zscore(keys.proxyQuarantined, id)).not.toBeNull();

    // Raising its limit lifts its proxies' quarantines, each announced; not the other's.
    const streamBefore = await redis.xlen(keys.runtimeStream);
    const raised = await h.request("PATCH", connector, {
      token: h.tokens.editor,
      body: { rate_limit_config: { max_requests: 100, window_seconds: 60 } },
    });
    expect(raised.status, raised.text).toBe(200);
    for (const id of ids) expect(await redis.zscore(keys.proxyQuarantined, id)).toBeNull();
    expect(await redis.zscore(keys.proxyQuarantined, other.body.id)).not.toBeNull();
    const entries = (await redis.xrange(keys.runtimeStream, "-", "+")).slice(streamBefore);
    expect(entries.map(([, fields]) => fields).sort()).toEqual(
      ids.map((id) => ["kind", "quarantine_lifted", "ref", id]).sort(),
    );
    // What the next tests count is as it was.
    await redis.zrem(keys.proxyQuarantined, other.body.id);
    for (const id of [...ids, other.body.id]) {
      const gone = await h.request("DELETE", `/api/v1/projects/${projectId}/proxies/${id}`, {
        token: h.tokens.editor,
      });
      expect(gone.status).toBe(204);
    }
    expect((await h.request("DELETE", connector, { token: h.tokens.editor })).status).toBe(204);
  });

  test("listing is paged, ordered, and filtered by connector, status and country", async () => {
    const lines = (prefix: string, count: number, country: string) =>
      Array.from({ length: count }, (_, i) => `http://u:p@${prefix}${i}.example:8080 ${country}`)
        .join("\n");
    await h.request(
      "POST",
      `/api/v1/projects/${projectId}/proxies/upload?connector_id=${connectorA}`,
      {
        token: h.tokens.editor,
        text: lines("a", 25, "us"),
      },
    );
    await h.request(
      "POST",
      `/api/v1/projects/${projectId}/proxies/upload?connector_id=${connectorB}`,
      {
        token: h.tokens.editor,
        text: lines("b", 5, "de"),
      },
    );
    const base = `/api/v1/projects/${projectId}/proxies`;
    const first = await h.request("GET", `${base}?page_size=10`, { token: h.tokens.viewer });
    expect(first.body).toMatchObject({ total: 30, page: 1, page_size: 10 });
    expect(first.body.items).toHaveLength(10);
    expect(first.text).not.toContain('"password"');
    const pages = [first.body.items];
    for (const page of [2, 3]) {
      pages.push(
        (await h.request("GET", `${base}?page_size=10&page=${page}`, { token: h.tokens.viewer }))
          .body.items,
      );
    }
    const all = pages.flat().map((p: { id: string }) => p.id);
    expect(new Set(all).size).toBe(30);
    const beyond = await h.request("GET", `${base}?page_size=10&page=4`, {
      token: h.tokens.viewer,
    });
    expect(beyond.body).toMatchObject({ items: [], total: 30 });

    const byConnector = await h.request("GET", `${base}?connector_id=${connectorB}`, {
      token: h.tokens.viewer,
    });
    expect(byConnector.body.total).toBe(5);
    const byCountry = await h.request("GET", `${base}?country=us`, { token: h.tokens.viewer });
    expect(byCountry.body.total).toBe(25);
    await h.deps.database.sql`
      update proxies set status = 'healthy' where connector_id = ${connectorB} and host = 'b0.example'`;
    const byStatus = await h.request("GET", `${base}?status=healthy`, { token: h.tokens.viewer });
    expect(byStatus.body.total).toBe(1);
    const combined = await h.request(
      "GET",
      `${base}?status=initializing&connector_id=${connectorB}&country=DE`,
      {
        token: h.tokens.viewer,
      },
    );
    expect(combined.body.total).toBe(4);
  });
});

describe("the app's frame", () => {
  test("X-Request-ID is accepted when sane, generated otherwise, and echoed", async () => {
    const given = await h.request("GET", "/api/v1/projects", {
      token: h.tokens.viewer,
      headers: { "x-request-id": "client-req.42_A" },
    });
    expect(given.headers.get("x-request-id")).toBe("client-req.42_A");
    const insane = await h.request("GET", "/api/v1/projects", {
      token: h.tokens.viewer,
      headers: { "x-request-id": "bad id with spaces" },
    });
    expect(insane.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const tooLong = await h.request("GET", "/live", {
      headers: { "x-request-id": "a".repeat(129) },
    });
    expect(tooLong.headers.get("x-request-id")).not.toBe("a".repeat(129));
    // Errors carry it too.
    const refused = await h.request("GET", "/api/v1/projects", {
      headers: { "x-request-id": "r-401" },
    });
    expect(refused.status).toBe(401);
    expect(refused.headers.get("x-request-id")).toBe("r-401");
  });

  test("one access log line per request, with the request id and the user", async () => {
    await h.request("GET", "/api/v1/projects", {
      token: h.tokens.viewer,
      headers: { "x-request-id": "log-line-1" },
    });
    const lines = h.lines.filter((line) => line.request_id === "log-line-1");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: "info",
      msg: "request",
      method: "GET",
      path: "/api/v1/projects",
      status: 200,
      username: "viewer",
    });
    expect(typeof lines[0].duration_ms).toBe("number");
  });

  test("the echo's access line is at debug: health checks ask it hundreds of times a second", async () => {
    const answer = await h.request("GET", "/echo", { headers: { "x-request-id": "echo-line-1" } });
    expect(answer.status).toBe(200);
    const lines = h.lines.filter((line) => line.request_id === "echo-line-1");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: "debug", msg: "request", path: "/echo", status: 200 });
  });

  test("a bug answers 500 with the request id; one error line, never the SQL", async () => {
    const database = h.deps.database as { transaction: typeof h.deps.database.transaction };
    const original = database.transaction;
    // What drizzle throws: the statement and its parameters in the wrapper, the cause inside.
    const wrapped = Object.assign(
      new Error("Failed query: insert into secret_table values ($1)\nparams: hunter2"),
      {
        query: "insert into secret_table values ($1)",
        params: ["hunter2"],
        cause: new TypeError("kaboom"),
      },
    );
    database.transaction = (() => Promise.reject(wrapped)) as typeof database.transaction;
    try {
      const answer = await h.request("POST", "/api/v1/projects", {
        token: h.tokens.editor,
        body: { name: "Bug", username: "bug" },
        headers: { "x-request-id": "bug-500" },
      });
      expect(answer.status).toBe(500);
      expect(answer.body).toEqual({ error: "Internal server error", request_id: "bug-500" });
      const errors = h.lines.filter((l) => l.request_id === "bug-500" && l.level === "error");
      expect(errors).toHaveLength(1);
      expect(errors[0].error).toMatchObject({ type: "TypeError", message: "kaboom" });
      expect(String((errors[0].error as { stack?: string }).stack)).toContain("kaboom");
      const logged = JSON.stringify(h.lines.filter((l) => l.request_id === "bug-500"));
      expect(logged).not.toMatch(/hunter2|secret_table/);
    } finally {
      database.transaction = original;
    }
  });

  test("an unknown route is a JSON 404", async () => {
    const answer = await h.request("GET", "/api/v1/nothing-here");
    expect(answer.status).toBe(404);
    expect(answer.body.error).toMatch(/No route/);
  });

  test("the probes are mounted", async () => {
    expect((await h.request("GET", "/health")).body).toMatchObject({ status: "healthy" });
    expect((await h.request("GET", "/live")).status).toBe(200);
    expect((await h.request("GET", "/ready")).status).toBe(200);
  });

  test("/echo answers the socket's address and ignores forwarding headers", async () => {
    const server = await listen(h.app);
    // As the api serves it: answered before the app, and by the app (a query string) alike.
    const fast = new HttpServer({
      app: h.app,
      host: "127.0.0.1",
      port: 0,
      fastGets: echoFastGets(),
    });
    await fast.start();
    try {
      for (
        const url of [
          `http://127.0.0.1:${server.port}/echo`,
          `http://127.0.0.1:${fast.port}/echo`,
          `http://127.0.0.1:${fast.port}/echo?through=app`,
        ]
      ) {
        const response = await fetch(url, {
          headers: { "x-forwarded-for": "203.0.113.9", "x-real-ip": "203.0.113.9" },
        });
        expect(response.status).toBe(200);
        expect(response.headers.get("content-type")).toMatch(/^application\/json/);
        expect(await response.json()).toEqual({ ip: "127.0.0.1" });
      }
    } finally {
      await server.close();
      await fast.stop();
    }
  });

  test("the OpenAPI document describes every mounted route from the same schemas", async () => {
    const answer = await h.request("GET", "/api/v1/openapi.json");
    expect(answer.status).toBe(200);
    const doc = answer.body;
    expect(doc.openapi).toBe("3.1.0");
    const operations = Object.entries(doc.paths as Record<string, Record<string, unknown>>)
      .flatMap(([path, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`));
    for (
      const expected of [
        "POST /api/v1/auth/login",
        "GET /api/v1/auth/me",
        "POST /api/v1/tokens",
        "GET /api/v1/tokens",
        "DELETE /api/v1/tokens/{id}",
        "GET /api/v1/users",
        "POST /api/v1/users",
        "GET /api/v1/users/me",
        "PATCH /api/v1/users/me",
        "GET /api/v1/users/{id}",
        "PATCH /api/v1/users/{id}",
        "DELETE /api/v1/users/{id}",
        "GET /api/v1/projects",
        "POST /api/v1/projects",
        "GET /api/v1/projects/{id}",
        "PATCH /api/v1/projects/{id}",
        "DELETE /api/v1/projects/{id}",
        "GET /api/v1/projects/{id}/credentials",
        "POST /api/v1/projects/{id}/credentials",
        "GET /api/v1/projects/{id}/credentials/{cid}",
        "PATCH /api/v1/projects/{id}/credentials/{cid}",
        "DELETE /api/v1/projects/{id}/credentials/{cid}",
        "GET /api/v1/projects/{id}/connectors",
        "POST /api/v1/projects/{id}/connectors",
        "GET /api/v1/projects/{id}/connectors/{cid}",
        "PATCH /api/v1/projects/{id}/connectors/{cid}",
        "DELETE /api/v1/projects/{id}/connectors/{cid}",
        "GET /api/v1/projects/{id}/proxies",
        "POST /api/v1/projects/{id}/proxies",
        "POST /api/v1/projects/{id}/proxies/upload",
        "GET /api/v1/projects/{id}/proxies/{pid}",
        "PATCH /api/v1/projects/{id}/proxies/{pid}",
        "DELETE /api/v1/projects/{id}/proxies/{pid}",
        "POST /api/v1/projects/{id}/proxies/{pid}/unquarantine",
        "GET /api/v1/openapi.json",
        "GET /echo",
        "GET /health",
        "GET /ready",
      ]
    ) {
      expect(operations).toContain(expected);
    }
    const createProject = doc.paths["/api/v1/projects"].post;
    const schema = createProject.requestBody.content["application/json"].schema;
    expect(schema.required.sort()).toEqual(["name", "username"]);
    expect(schema.additionalProperties).toBe(false);
    expect(schema.properties.strategy.enum).toContain("sticky");
    expect(createProject.security).toEqual([{ bearer: [] }]);
    expect(createProject.responses["422"]).toBeDefined();
    const list = doc.paths["/api/v1/projects/{id}/proxies"].get;
    const pageSize = list.parameters.find((p: { name: string }) => p.name === "page_size");
    expect(pageSize).toMatchObject({ in: "query", required: false });
    const upload = doc.paths["/api/v1/projects/{id}/proxies/upload"].post;
    expect(upload.requestBody.content["text/plain"]).toBeDefined();
    expect(doc.paths["/api/v1/auth/login"].post.security).toEqual([]);
    const metadata = doc.paths["/api/v1/projects/{id}/proxies"].post.requestBody
      .content["application/json"].schema.properties.metadata;
    expect(metadata).toEqual({ type: "object" });
  });
});
