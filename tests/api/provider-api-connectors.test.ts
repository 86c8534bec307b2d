/**
 * provider_api connectors through the api: a config checked by its schema (422 naming
 * `body.config.<path>`) and stored with its defaults; templates that read only the connector's
 * credential keys and `{count}`, with the URL's host written out and visibly internal hosts
 * refused; the `provider_api` credential it needs (a flat object of secrets, masked in every
 * answer, a mask sent back keeping the secret, its read keys kept); and the pool run a created
 * or edited connector asks for.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { JobKind } from "../../shared/roles.ts";
import { poolStoreOf } from "../../control/provider-api/pool/store.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
let projectId: string;
let connectors: string;
let credentials: string;
/** A provider_api credential with `api_key` and `account`. */
let apiCredential: string;
let staticCredential: string;

const API_KEY = "pk-live-7f3a9c";
const ACCOUNT = "acct-42";

beforeAll(async () => {
  h = await startHarness();
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Short-lived", username: "short-lived" },
  });
  projectId = project.body.id;
  connectors = `/api/v1/projects/${projectId}/connectors`;
  credentials = `/api/v1/projects/${projectId}/credentials`;
  const made = await h.request("POST", credentials, {
    token: h.tokens.editor,
    body: {
      name: "Provider keys",
      provider: "provider_api",
      config: { api_key: API_KEY, account: ACCOUNT },
    },
  });
  if (made.status !== 201) throw new Error(made.text);
  apiCredential = made.body.id;
  const login = await h.request("POST", credentials, {
    token: h.tokens.editor,
    body: { name: "Default login", provider: "static", config: { username: "u" } },
  });
  staticCredential = login.body.id;
});

afterAll(async () => {
  await h?.close();
});

/** A config that reads both keys of the credential, in a header and in auth. */
function config(
  overrides: {
    fetch?: Record<string, unknown>;
    parser?: Record<string, unknown>;
    pool?: Record<string, unknown>;
  } = {},
) {
  return {
    fetch: {
      url: "https://provider.example/v1/proxies",
      params: { count: "{count}", format: "json" },
      headers: { "X-Account": "{credential.account}" },
      auth: { type: "bearer", token: "{credential.api_key}" },
      ...overrides.fetch,
    },
    parser: {
      format: "json",
      items: "data.proxies",
      fields: { host: "ip", port: "port", ttl_seconds: "ttl" },
      ...overrides.parser,
    },
    ...(overrides.pool === undefined ? {} : { pool: overrides.pool }),
  };
}

const body = (name: string, settings: unknown, extra: Record<string, unknown> = {}) => ({
  name,
  kind: "provider_api",
  credential_id: apiCredential,
  config: settings,
  ...extra,
});

async function storedConnectors(): Promise<{ name: string; provider: string; config: unknown }[]> {
  return await h.deps.database.sql<{ name: string; provider: string; config: unknown }[]>`
    select name, provider, config from connectors where project_id = ${projectId}
    order by created_at`;
}

async function poolRequests(): Promise<string[]> {
  const entries = await h.deps.redis.xrange(h.deps.keys.jobStream(JobKind.pool), "-", "+");
  return entries.map(([, fields]) => fields[fields.indexOf("key") + 1]);
}

/** Posts a connector that must be refused, and answers its issues. */
async function refused(settings: unknown, extra: Record<string, unknown> = {}) {
  const answer = await h.request("POST", connectors, {
    token: h.tokens.editor,
    body: body("Refused", settings, extra),
  });
  expect(answer.status, answer.text).toBe(422);
  return answer.body.detail as { field: string; message: string }[];
}

describe("a provider_api credential", () => {
  test("is a flat object of text values, every one masked in answers", async () => {
    const read = await h.request("GET", `${credentials}/${apiCredential}`, {
      token: h.tokens.viewer,
    });
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({
      provider: "provider_api",
      config: { api_key: "********", account: "********" },
      has_api_key: true,
      has_account: true,
    });
    expect(read.text).not.toContain(API_KEY);
    expect(read.text).not.toContain(ACCOUNT);
    const list = await h.request("GET", credentials, { token: h.tokens.viewer });
    expect(list.text).not.toContain(API_KEY);

    const cases: [Record<string, unknown>, string, string][] = [
      [{ nested: { key: "v" } }, "body.config.nested", "must be text (a secret)"],
      [{ port: 8080 }, "body.config.port", "must be text (a secret)"],
      [
        { "bad.key": "v" },
        "body.config.bad.key",
        "must be a key of letters, digits, _ and -, from a letter or _",
      ],
      [{ long: "x".repeat(4097) }, "body.config.long", "must be at most 4096 characters"],
      [
        Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, "v"])),
        "body.config",
        "must hold at most 32 keys",
      ],
    ];
    for (const [settings, field, message] of cases) {
      const answer = await h.request("POST", credentials, {
        token: h.tokens.editor,
        body: { name: "Refused", provider: "provider_api", config: settings },
      });
      expect(answer.status, field).toBe(422);
      expect(answer.body.detail, field).toEqual([{ field, message }]);
    }
    const names = await h.deps.database.sql<{ name: string }[]>`
      select name from credentials where project_id = ${projectId}`;
    expect(names.map((row) => row.name)).not.toContain("Refused");
  });

  test("an edit merges key by key: the mask keeps a secret, null removes a key", async () => {
    const made = await h.request("POST", credentials, {
      token: h.tokens.editor,
      body: { name: "Editable", provider: "provider_api", config: { token: "t-1", user: "me" } },
    });
    expect(made.status).toBe(201);
    const item = `${credentials}/${made.body.id}`;
    const edited = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { config: { token: "********", user: null, region: "eu" } },
    });
    expect(edited.status, edited.text).toBe(200);
    expect(edited.body.config).toEqual({ token: "********", region: "********" });
    const [row] = await h.deps.database.sql<{ config: Record<string, string> }[]>`
      select config from credentials where id = ${made.body.id}`;
    expect(row.config).toEqual({ token: "t-1", region: "eu" });
  });
});

describe("creating a provider_api connector", () => {
  test("is stored with its config's defaults, answered as is, and asks for a pool run", async () => {
    const before = await poolRequests();
    const created = await h.request("POST", connectors, {
      token: h.tokens.editor,
      body: body("Provider pool", config()),
    });
    expect(created.status, created.text).toBe(201);
    const expected = {
      fetch: {
        url: "https://provider.example/v1/proxies",
        method: "GET",
        params: { count: "{count}", format: "json" },
        headers: { "X-Account": "{credential.account}" },
        auth: { type: "bearer", token: "{credential.api_key}" },
        timeout_ms: 10_000,
        estimated_ips_per_call: 10,
        request_interval_ms: 1000,
        max_in_flight: 1,
        max_total: null,
      },
      parser: {
        format: "json",
        items: "data.proxies",
        fields: { host: "ip", port: "port", ttl_seconds: "ttl" },
        default_scheme: "http",
        safety_margin_seconds: 5,
      },
      pool: {
        min_size: 10,
        target_size: 10,
        max_size: 100,
        reserve_for_gateway: null,
        depleted_after_empty: 3,
        reuse_after_release_seconds: null,
        remove_after_failures: 2,
        max_concurrency: null,
      },
    };
    expect(created.body).toMatchObject({
      kind: "provider_api",
      provider: "provider_api",
      credential_id: apiCredential,
      config: expected,
    });
    const [stored] = (await storedConnectors()).filter((c) => c.name === "Provider pool");
    expect(stored).toEqual({ name: "Provider pool", provider: "provider_api", config: expected });
    // The connector's config holds no secret: answers show it whole, templates and all.
    const read = await h.request("GET", `${connectors}/${created.body.id}`, {
      token: h.tokens.viewer,
    });
    expect(read.body.config).toEqual(expected);
    expect(read.text).not.toContain(API_KEY);
    expect((await poolRequests()).slice(before.length)).toEqual([created.body.id]);

    // provider_api may be named; min_size defaults to the target; a POST body is a template.
    const named = await h.request("POST", connectors, {
      token: h.tokens.editor,
      body: body(
        "Named provider",
        config({
          fetch: { method: "POST", body: { want: "{count}", filters: [{ country: "DE" }] } },
          pool: { target_size: 40, max_size: 60, min_size: 20, reserve_for_gateway: 5 },
        }),
        { provider: "provider_api" },
      ),
    });
    expect(named.status, named.text).toBe(201);
    expect(named.body.config.pool).toEqual({
      min_size: 20,
      target_size: 40,
      max_size: 60,
      reserve_for_gateway: 5,
      depleted_after_empty: 3,
      reuse_after_release_seconds: null,
      remove_after_failures: 2,
      max_concurrency: null,
    });
    expect(named.body.config.fetch.body).toEqual({ want: "{count}", filters: [{ country: "DE" }] });
  });

  test("templates that read no credential need none", async () => {
    const created = await h.request("POST", connectors, {
      token: h.tokens.editor,
      body: {
        name: "Open provider",
        kind: "provider_api",
        config: {
          fetch: { url: "https://open.example/list?n={count}" },
          parser: { format: "text", ttl_seconds: 60 },
        },
      },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({ credential_id: null, provider: "provider_api" });
    expect(created.body.config.fetch.auth).toEqual({ type: "none" });
  });

  test("a config its schema refuses is a 422 at body.config.<path>; nothing is stored", async () => {
    const cases: [unknown, string, string][] = [
      [{ parser: { format: "json" } }, "body.config.fetch", "is required"],
      [{ fetch: { url: "https://p.example/x" } }, "body.config.parser", "is required"],
      ["fetch=1", "body.config", "must be an object of config fields"],
      [
        config({ fetch: { url: "http://provider.example/x" } }),
        "body.config.fetch.url",
        "must be an https:// URL",
      ],
      [
        config({ fetch: { url: "https://user:pw@provider.example/x" } }),
        "body.config.fetch.url",
        "may not carry credentials; use auth, headers or params",
      ],
      [config({ fetch: { verb: "GET" } }), "body.config.fetch.verb", "is not a known field"],
      [config({ fetch: { method: "PUT" } }), "body.config.fetch.method", "must be GET or POST"],
      [
        config({ fetch: { body: { a: 1 } } }),
        "body.config.fetch.body",
        "a GET call takes no body; use POST",
      ],
      [
        config({ fetch: { timeout_ms: 50 } }),
        "body.config.fetch.timeout_ms",
        "must be a whole number from 100 to 120000",
      ],
      [
        config({ fetch: { max_in_flight: 0 } }),
        "body.config.fetch.max_in_flight",
        "must be a whole number from 1 to 64",
      ],
      [
        config({ fetch: { max_total: 0 } }),
        "body.config.fetch.max_total",
        `must be a whole number from 1 to ${Number.MAX_SAFE_INTEGER}`,
      ],
      [
        config({ fetch: { headers: { Host: "evil.example" } } }),
        "body.config.fetch.headers.Host",
        "is a header the call writes itself",
      ],
      [
        config({
          fetch: {
            auth: { type: "api_key", value: "{credential.api_key}", header: "X-Key", query: "key" },
          },
        }),
        "body.config.fetch.auth.query",
        "the key goes in a header or in the query, not both",
      ],
      [
        config({ fetch: { auth: { type: "digest" } } }),
        "body.config.fetch.auth.type",
        "must be an object whose type is none, bearer, basic or api_key",
      ],
      [
        config({ parser: { format: "xml" } }),
        "body.config.parser.format",
        "must be one of text, json, csv",
      ],
      [
        config({ parser: { format: "text", items: undefined, fields: undefined } }),
        "body.config.parser.ttl_seconds",
        "is required for a text answer, whose lines give no expiry",
      ],
      [
        config({ parser: { format: "csv", items: "data", fields: undefined } }),
        "body.config.parser.items",
        "is read on JSON answers only",
      ],
      [
        config({ pool: { min_size: 20, target_size: 10 } }),
        "body.config.pool.min_size",
        "must not be above target_size",
      ],
      [
        config({ pool: { target_size: 200, max_size: 100 } }),
        "body.config.pool.target_size",
        "must not be above max_size",
      ],
      [
        config({ pool: { depleted_after_empty: 0 } }),
        "body.config.pool.depleted_after_empty",
        "must be a whole number from 1 to 1000",
      ],
      [
        config({ pool: { reuse_after_release_seconds: -1 } }),
        "body.config.pool.reuse_after_release_seconds",
        "must be a whole number from 0 to 86400",
      ],
      [
        config({ pool: { remove_after_failures: 0 } }),
        "body.config.pool.remove_after_failures",
        "must be a whole number from 1 to 10",
      ],
    ];
    for (const [settings, field, message] of cases) {
      const detail = await refused(settings);
      expect(detail, JSON.stringify(settings)).toContainEqual({ field, message });
    }
    const badPath = await refused(config({ parser: { items: "data.[" } }));
    expect(badPath).toHaveLength(1);
    expect(badPath[0].field).toBe("body.config.parser.items");
    expect(badPath[0].message).toMatch(/^not a JMESPath expression/);
    expect((await storedConnectors()).map((c) => c.name)).not.toContain("Refused");
  });

  test("templates read only {credential.<key>} and {count}, never the host", async () => {
    const cases: [Record<string, unknown>, string, string][] = [
      [
        { url: "https://{credential.account}.provider.example/x" },
        "body.config.fetch.url",
        "must write its host out: a template may not make the host",
      ],
      [
        { url: "https://provider.example/{credential.api_key}/proxies" },
        "body.config.fetch.url",
        "may not read the credential (the URL's path shows in errors and logs); put secrets in " +
        "params, headers, the body or auth",
      ],
      [
        { headers: { "X-Thing": "{connector.zone}" } },
        "body.config.fetch.headers.X-Thing",
        "{connector.zone} names no connector field",
      ],
      [
        { params: { home: "{env.HOME}" } },
        "body.config.fetch.params.home",
        "{env.HOME} is not a name a template can read here",
      ],
      [
        { params: { file: "{file}" } },
        "body.config.fetch.params.file",
        "{file} is not a name a template can read here",
      ],
      [
        { params: { session: "{session_id}" } },
        "body.config.fetch.params.session",
        "{session_id} is not a name a template can read here",
      ],
      [
        { params: { n: "{count|shout}" } },
        "body.config.fetch.params.n",
        "filter shout is not one of lower, upper, urlencode, or, compact, plus, us_state, " +
        "us_state_code, gb_as_uk, then",
      ],
      [
        { auth: { type: "bearer", token: "{auth.token}" } },
        "body.config.fetch.auth.token",
        "{auth.token} needs an auth token flow",
      ],
      [
        { method: "POST", body: { deep: { inside: ["ok", "{item.ip}"] } } },
        "body.config.fetch.body.deep.inside.1",
        "{item.ip} is not readable here",
      ],
    ];
    for (const [fetch, field, message] of cases) {
      const detail = await refused(config({ fetch }));
      expect(detail, JSON.stringify(fetch)).toEqual([{ field, message }]);
    }
  });

  test("a URL whose host is visibly internal is refused", async () => {
    for (
      const host of [
        "127.0.0.1",
        "10.1.2.3",
        "169.254.169.254",
        "localhost",
        "metadata.google.internal",
      ]
    ) {
      const detail = await refused(config({ fetch: { url: `https://${host}/proxies` } }));
      expect(detail, host).toHaveLength(1);
      expect(detail[0].field, host).toBe("body.config.fetch.url");
      expect(detail[0].message, host).toMatch(/^is refused: /);
    }
  });

  test("it needs a provider_api credential of the project holding every key it reads", async () => {
    expect(await refused(config(), { credential_id: null })).toEqual([{
      field: "body.credential_id",
      message: "the templates read {credential.account}, {credential.api_key}: name a " +
        "provider_api credential of this project",
    }]);
    expect(await refused(config(), { credential_id: staticCredential })).toEqual([{
      field: "body.credential_id",
      message: "the credential is for static, not provider_api",
    }]);
    expect(
      await refused(config({ fetch: { params: { secret: "{credential.password}" } } })),
    ).toEqual([{
      field: "body.config.fetch.params.secret",
      message: "{credential.password} names no key of the connector's credential",
    }]);
    expect(await refused(config(), { provider: "oxylabs" })).toEqual([{
      field: "body.provider",
      message: "a provider_api connector's provider is provider_api; leave it out",
    }]);

    const other = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name: "Other", username: "other-project" },
    });
    const foreign = await h.request("POST", `/api/v1/projects/${other.body.id}/credentials`, {
      token: h.tokens.editor,
      body: { name: "Theirs", provider: "provider_api", config: { api_key: "x", account: "y" } },
    });
    const answer = await h.request("POST", connectors, {
      token: h.tokens.editor,
      body: body("Foreign", config(), { credential_id: foreign.body.id }),
    });
    expect(answer.status).toBe(400);
    expect(answer.text).toContain("no credential with this id in this project");
    expect((await storedConnectors()).map((c) => c.name)).not.toContain("Foreign");
  });

  test("a provider_api credential is no static connector's login", async () => {
    const answer = await h.request("POST", connectors, {
      token: h.tokens.editor,
      body: { name: "Static", kind: "static", credential_id: apiCredential },
    });
    expect(answer.status).toBe(422);
    expect(answer.body.detail).toEqual([{
      field: "body.credential_id",
      message: "a provider_api credential serves provider_api connectors only",
    }]);
  });

  test("a cloud connector without a cloud provider is refused at its provider", async () => {
    const answer = await h.request("POST", connectors, {
      token: h.tokens.editor,
      body: { name: "Cloud", kind: "cloud" },
    });
    expect(answer.status).toBe(422);
    expect(answer.body.detail[0].field).toBe("body.provider");
  });
});

describe("editing a provider_api connector", () => {
  test("a config is replaced whole and checked again; its credential keeps the keys it reads", async () => {
    const created = await h.request("POST", connectors, {
      token: h.tokens.editor,
      body: body("Editable pool", config()),
    });
    expect(created.status, created.text).toBe(201);
    const item = `${connectors}/${created.body.id}`;
    const before = await poolRequests();

    const edited = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { config: config({ fetch: { max_in_flight: 4, max_total: 500 } }) },
    });
    expect(edited.status, edited.text).toBe(200);
    expect(edited.body.config.fetch).toMatchObject({ max_in_flight: 4, max_total: 500 });
    expect((await poolRequests()).slice(before.length)).toEqual([created.body.id]);

    const bad = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { config: config({ fetch: { headers: { "X-Home": "{env.HOME}" } } }) },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].field).toBe("body.config.fetch.headers.X-Home");

    const cleared = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { credential_id: null },
    });
    expect(cleared.status).toBe(422);
    expect(cleared.body.detail[0].field).toBe("body.credential_id");

    // The credential cannot drop a key the connector reads, and the refusal names it.
    const dropped = await h.request("PATCH", `${credentials}/${apiCredential}`, {
      token: h.tokens.editor,
      body: { config: { account: null } },
    });
    expect(dropped.status).toBe(422);
    expect(dropped.body.detail).toEqual([{
      field: "body.config.account",
      message: 'connector "Provider pool" reads it ({credential.account}); keep it',
    }]);
    // A new key, and the others sent back masked, keep what the connectors read.
    const added = await h.request("PATCH", `${credentials}/${apiCredential}`, {
      token: h.tokens.editor,
      body: { config: { api_key: "********", account: "********", region: "eu" } },
    });
    expect(added.status, added.text).toBe(200);
    const [row] = await h.deps.database.sql<{ config: Record<string, string> }[]>`
      select config from credentials where id = ${apiCredential}`;
    expect(row.config).toEqual({ api_key: API_KEY, account: ACCOUNT, region: "eu" });

    const read = await h.request("GET", item, { token: h.tokens.viewer });
    expect(read.body.config.fetch).toMatchObject({ max_in_flight: 4, max_total: 500 });
  });
});

describe("a connector's pool", () => {
  test("answers its counts by state, sizes and fetch bookkeeping; asks a run; 404 for other kinds", async () => {
    const made = await h.request("POST", connectors, {
      token: h.tokens.editor,
      body: body("Pool view", config({ pool: { min_size: 2, target_size: 4, max_size: 6 } }), {
        credential_id: apiCredential,
      }),
    });
    expect(made.status, made.text).toBe(201);
    const id = made.body.id as string;
    const path = `${connectors}/${id}/pool`;
    const empty = await h.request("GET", path, { token: h.tokens.viewer });
    expect(empty.status, empty.text).toBe(200);
    expect(empty.body).toMatchObject({
      connector_id: id,
      counts: { checking: 0, routed: 0, stock: 0, draining: 0, extracted: 0 },
      live: 0,
      pool: { min_size: 2, target_size: 4, max_size: 6, reserve_for_gateway: null },
      fetch: { success: 0, empty: 0, error: 0, in_flight: 0, ledger_used: 0, max_total: null },
      depleted_at: null,
    });

    // Two fetched proxies, one of them checked: the answer counts them, and names neither.
    const store = poolStoreOf(h.deps);
    const nowMs = Date.now();
    const proxy = (n: number) => ({
      key: `http|203.0.113.${n}|8080|u${n}`,
      scheme: "http",
      host: `203.0.113.${n}`,
      port: 8080,
      username: `u${n}`,
      password: `secret-${n}`,
      country: null,
      expiresAtMs: nowMs + 600_000,
      usableUntilMs: nowMs + 590_000,
    });
    const added = await store.add({ id, projectId }, [proxy(1), proxy(2)], {
      nowMs,
      maxSize: 6,
    });
    await store.markChecked({ id, projectId }, [{ id: added.ids[0], passed: true }], {
      nowMs,
      reserve: null,
    });
    const filled = await h.request("GET", path, { token: h.tokens.viewer });
    expect(filled.body.counts).toMatchObject({ checking: 1, routed: 1 });
    expect(filled.body.live).toBe(2);
    expect(filled.text).not.toContain("203.0.113.");
    expect(filled.text).not.toContain("secret-");

    const stream = h.deps.keys.jobStream(JobKind.pool);
    const before = await h.deps.redis.xlen(stream);
    const viewerRun = await h.request("POST", `${path}/run`, { token: h.tokens.viewer });
    expect(viewerRun.status).toBe(403);
    const run = await h.request("POST", `${path}/run`, { token: h.tokens.editor });
    expect(run.status, run.text).toBe(202);
    const entries = await h.deps.redis.xrange(stream, "-", "+");
    expect(entries.length).toBe(before + 1);
    expect(entries.at(-1)?.[1]).toEqual(["key", id]);

    const plain = await h.request("POST", connectors, {
      token: h.tokens.editor,
      body: { name: "Plain list", kind: "static" },
    });
    const refused = await h.request("GET", `${connectors}/${plain.body.id}/pool`, {
      token: h.tokens.viewer,
    });
    expect(refused.status).toBe(404);
  });
});
