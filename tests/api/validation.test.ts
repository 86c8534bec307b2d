/**
 * Every invalid body or query answers 422 naming each field at fault, and every duplicate name
 * answers 400 naming its field, regardless of case.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
let projectId: string;
let otherProjectId: string;
let connectorId: string;
let credentialId: string;
let otherCredentialId: string;

beforeAll(async () => {
  h = await startHarness();
  const create = async (path: string, body: unknown) => {
    const answer = await h.request("POST", path, { token: h.tokens.editor, body });
    if (answer.status !== 201) throw new Error(`${path}: ${answer.text}`);
    return answer.body.id as string;
  };
  projectId = await create("/api/v1/projects", { name: "Alpha", username: "alpha" });
  otherProjectId = await create("/api/v1/projects", { name: "Beta", username: "beta" });
  connectorId = await create(`/api/v1/projects/${projectId}/connectors`, {
    name: "Static One",
    kind: "static",
  });
  credentialId = await create(`/api/v1/projects/${projectId}/credentials`, {
    name: "Login",
    provider: "static",
  });
  otherCredentialId = await create(`/api/v1/projects/${otherProjectId}/credentials`, {
    name: "Login",
    provider: "static",
  });
});

afterAll(async () => {
  await h?.close();
});

interface Case {
  name: string;
  method: string;
  path: () => string;
  body?: unknown;
  text?: string;
  /** Exactly the fields the answer must name. */
  fields: string[];
}

const projects = () => "/api/v1/projects";
const project = () => `/api/v1/projects/${projectId}`;
const connectors = () => `/api/v1/projects/${projectId}/connectors`;
const connector = () => `/api/v1/projects/${projectId}/connectors/${connectorId}`;
const credentials = () => `/api/v1/projects/${projectId}/credentials`;
const credential = () => `/api/v1/projects/${projectId}/credentials/${credentialId}`;
const proxies = () => `/api/v1/projects/${projectId}/proxies`;
const good = { name: "N", username: "u" };

const cases: Case[] = [
  // Projects
  {
    name: "project: nothing",
    method: "POST",
    path: projects,
    body: {},
    fields: ["body.name", "body.username"],
  },
  { name: "project: not an object", method: "POST", path: projects, body: [1], fields: ["body"] },
  {
    name: "project: empty name",
    method: "POST",
    path: projects,
    body: { ...good, name: "  " },
    fields: ["body.name"],
  },
  {
    name: "project: name not text",
    method: "POST",
    path: projects,
    body: { ...good, name: 5 },
    fields: ["body.name"],
  },
  {
    name: "project: reserved -cc-",
    method: "POST",
    path: projects,
    body: { ...good, username: "shop-cc-x" },
    fields: ["body.username"],
  },
  {
    name: "project: reserved -sessid-",
    method: "POST",
    path: projects,
    body: { ...good, username: "a-SESSID-b" },
    fields: ["body.username"],
  },
  {
    name: "project: reserved -sesstime-",
    method: "POST",
    path: projects,
    body: { ...good, username: "a-sesstime-b" },
    fields: ["body.username"],
  },
  {
    name: "project: reserved -st-",
    method: "POST",
    path: projects,
    body: { ...good, username: "a-st-b" },
    fields: ["body.username"],
  },
  {
    name: "project: reserved -city-",
    method: "POST",
    path: projects,
    body: { ...good, username: "a-city-b" },
    fields: ["body.username"],
  },
  {
    name: "project: ends like a delimiter",
    method: "POST",
    path: projects,
    body: { ...good, username: "shop-st" },
    fields: ["body.username"],
  },
  {
    name: "project: double hyphen",
    method: "POST",
    path: projects,
    body: { ...good, username: "a--b" },
    fields: ["body.username"],
  },
  {
    name: "project: username bad chars",
    method: "POST",
    path: projects,
    body: { ...good, username: "a b" },
    fields: ["body.username"],
  },
  {
    name: "project: username too long",
    method: "POST",
    path: projects,
    body: { ...good, username: "a".repeat(65) },
    fields: ["body.username"],
  },
  {
    name: "project: short password",
    method: "POST",
    path: projects,
    body: { ...good, password: "short" },
    fields: ["body.password"],
  },
  {
    name: "project: password colon",
    method: "POST",
    path: projects,
    body: { ...good, password: "has:colon-1" },
    fields: ["body.password"],
  },
  {
    name: "project: password space",
    method: "POST",
    path: projects,
    body: { ...good, password: "has space 1" },
    fields: ["body.password"],
  },
  {
    name: "project: strategy",
    method: "POST",
    path: projects,
    body: { ...good, strategy: "fastest" },
    fields: ["body.strategy"],
  },
  {
    name: "project: location policy",
    method: "POST",
    path: projects,
    body: { ...good, location_policy: "on" },
    fields: ["body.location_policy"],
  },
  {
    name: "project: preflight",
    method: "POST",
    path: projects,
    body: { ...good, location_preflight: "x" },
    fields: ["body.location_preflight"],
  },
  {
    name: "project: ttl zero",
    method: "POST",
    path: projects,
    body: { ...good, session_ttl_seconds: 0 },
    fields: ["body.session_ttl_seconds"],
  },
  {
    name: "project: ttl fraction",
    method: "POST",
    path: projects,
    body: { ...good, session_ttl_seconds: 1.5 },
    fields: ["body.session_ttl_seconds"],
  },
  {
    name: "project: retries",
    method: "POST",
    path: projects,
    body: { ...good, max_retries: 11 },
    fields: ["body.max_retries"],
  },
  {
    name: "project: timeout string",
    method: "POST",
    path: projects,
    body: { ...good, connection_timeout_seconds: "30" },
    fields: ["body.connection_timeout_seconds"],
  },
  {
    name: "project: sticky not boolean",
    method: "POST",
    path: projects,
    body: { ...good, sticky_quarantine: "yes" },
    fields: ["body.sticky_quarantine"],
  },
  {
    name: "project: unknown key",
    method: "POST",
    path: projects,
    body: { ...good, routing_strategy: "random" },
    fields: ["body.routing_strategy"],
  },
  {
    name: "project: read-only id",
    method: "POST",
    path: projects,
    body: { ...good, id: "x" },
    fields: ["body.id"],
  },
  {
    name: "project: many at once",
    method: "POST",
    path: projects,
    body: { name: "", username: "x-cc-y", strategy: "x", max_retries: -1, typo: 1 },
    fields: ["body.max_retries", "body.name", "body.strategy", "body.typo", "body.username"],
  },
  {
    name: "project edit: bad username",
    method: "PATCH",
    path: project,
    body: { username: "x-cc-" },
    fields: ["body.username"],
  },
  {
    name: "project edit: null name",
    method: "PATCH",
    path: project,
    body: { name: null },
    fields: ["body.name"],
  },
  // Credentials
  {
    name: "credential: unknown provider",
    method: "POST",
    path: credentials,
    body: { name: "v", provider: "nobody" },
    fields: ["body.provider"],
  },
  {
    name: "credential: config key",
    method: "POST",
    path: credentials,
    body: { name: "v", provider: "static", config: { token: "x" } },
    fields: ["body.config.token"],
  },
  {
    name: "credential: config password type",
    method: "POST",
    path: credentials,
    body: { name: "v", provider: "static", config: { password: 1 } },
    fields: ["body.config.password"],
  },
  {
    name: "credential edit: provider",
    method: "PATCH",
    path: credential,
    body: { provider: "static" },
    fields: ["body.provider"],
  },
  // Connectors
  {
    name: "connector: nothing",
    method: "POST",
    path: connectors,
    body: {},
    fields: ["body.kind", "body.name"],
  },
  {
    name: "connector: unknown kind",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "magic" },
    fields: ["body.kind"],
  },
  {
    name: "connector: vendor kind without a provider",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "vendor" },
    fields: ["body.provider"],
  },
  {
    name: "connector: cloud kind without a cloud provider",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "cloud" },
    fields: ["body.provider"],
  },
  {
    name: "connector: weight 0",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", weight: 0 },
    fields: ["body.weight"],
  },
  {
    name: "connector: weight 101",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", weight: 101 },
    fields: ["body.weight"],
  },
  {
    name: "connector: bad country",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", countries: ["US", "XX", "de", "Germany"] },
    fields: ["body.countries.1", "body.countries.3"],
  },
  {
    name: "connector: countries not a list",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", countries: "US" },
    fields: ["body.countries"],
  },
  {
    name: "connector: bad domain",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", domain_allow: ["ok.com", "not a host"] },
    fields: ["body.domain_allow.1"],
  },
  {
    name: "connector: both domain lists",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", domain_allow: ["a.com"], domain_deny: ["b.com"] },
    fields: ["body.domain_deny"],
  },
  {
    name: "connector: healthcheck scheme",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", healthcheck_url: "ftp://x" },
    fields: ["body.healthcheck_url"],
  },
  {
    name: "connector: credential id not uuid",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", credential_id: "abc" },
    fields: ["body.credential_id"],
  },
  {
    name: "connector: rate limit missing",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", rate_limit_config: {} },
    fields: ["body.rate_limit_config.max_requests", "body.rate_limit_config.window_seconds"],
  },
  {
    name: "connector: rate limit window",
    method: "POST",
    path: connectors,
    body: {
      name: "c",
      kind: "static",
      rate_limit_config: { max_requests: 1, window_seconds: 86401 },
    },
    fields: ["body.rate_limit_config.window_seconds"],
  },
  {
    name: "connector: quarantine min > max",
    method: "POST",
    path: connectors,
    body: {
      name: "c",
      kind: "static",
      rate_limit_config: {
        max_requests: 1,
        window_seconds: 10,
        quarantine_seconds_min: 50,
        quarantine_seconds_max: 20,
      },
    },
    fields: ["body.rate_limit_config.quarantine_seconds_max"],
  },
  {
    name: "connector: rate limit unknown key",
    method: "POST",
    path: connectors,
    body: {
      name: "c",
      kind: "static",
      rate_limit_config: { max_requests: 1, window_seconds: 10, burst: 3 },
    },
    fields: ["body.rate_limit_config.burst"],
  },
  {
    name: "connector: traffic period",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", traffic_config: { period: "year" } },
    fields: ["body.traffic_config.period"],
  },
  {
    name: "connector: traffic month day",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", traffic_config: { reset_day: 31 } },
    fields: ["body.traffic_config.reset_day"],
  },
  {
    name: "connector: traffic week day",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", traffic_config: { period: "week", reset_day: 8 } },
    fields: ["body.traffic_config.reset_day"],
  },
  {
    name: "connector: traffic status",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", traffic_config: { limit_status: 503 } },
    fields: ["body.traffic_config.limit_status"],
  },
  {
    name: "connector: traffic action",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", traffic_config: { action: "warn" } },
    fields: ["body.traffic_config.action"],
  },
  {
    name: "connector: traffic warn",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", traffic_config: { warn_percent: 0 } },
    fields: ["body.traffic_config.warn_percent"],
  },
  {
    name: "connector: traffic currency",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", traffic_config: { currency: "dollars" } },
    fields: ["body.traffic_config.currency"],
  },
  {
    name: "connector: traffic price",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", traffic_config: { price_per_gb: -1 } },
    fields: ["body.traffic_config.price_per_gb"],
  },
  {
    name: "connector: traffic limit",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", traffic_config: { limit_bytes: 0 } },
    fields: ["body.traffic_config.limit_bytes"],
  },
  {
    name: "connector: pending_deletion read-only",
    method: "POST",
    path: connectors,
    body: { name: "c", kind: "static", pending_deletion: true },
    fields: ["body.pending_deletion"],
  },
  {
    name: "connector edit: kind",
    method: "PATCH",
    path: connector,
    body: { kind: "static" },
    fields: ["body.kind"],
  },
  {
    name: "connector edit: both domain lists",
    method: "PATCH",
    path: connector,
    body: { domain_allow: ["a.com"], domain_deny: ["b.com"] },
    fields: ["body.domain_deny"],
  },
  // Proxies
  {
    name: "proxy: nothing",
    method: "POST",
    path: proxies,
    body: {},
    fields: ["body.connector_id", "body.url"],
  },
  {
    name: "proxy: scheme",
    method: "POST",
    path: proxies,
    body: { connector_id: "00000000-0000-4000-8000-000000000000", url: "ftp://h:1" },
    fields: ["body.url"],
  },
  {
    name: "proxy: no port",
    method: "POST",
    path: proxies,
    body: { connector_id: "00000000-0000-4000-8000-000000000000", url: "http://h" },
    fields: ["body.url"],
  },
  {
    name: "proxy: port range",
    method: "POST",
    path: proxies,
    body: { connector_id: "00000000-0000-4000-8000-000000000000", url: "http://h:65536" },
    fields: ["body.url"],
  },
  {
    name: "proxy: port zero",
    method: "POST",
    path: proxies,
    body: { connector_id: "00000000-0000-4000-8000-000000000000", url: "http://h:0" },
    fields: ["body.url"],
  },
  {
    name: "proxy: bad ipv4",
    method: "POST",
    path: proxies,
    body: { connector_id: "00000000-0000-4000-8000-000000000000", url: "http://1.2.3.256:80" },
    fields: ["body.url"],
  },
  {
    name: "proxy: bare ipv6",
    method: "POST",
    path: proxies,
    body: { connector_id: "00000000-0000-4000-8000-000000000000", url: "http://::1:80" },
    fields: ["body.url"],
  },
  {
    name: "proxy: path",
    method: "POST",
    path: proxies,
    body: { connector_id: "00000000-0000-4000-8000-000000000000", url: "http://h:80/x" },
    fields: ["body.url"],
  },
  {
    name: "proxy: bad escape",
    method: "POST",
    path: proxies,
    body: { connector_id: "00000000-0000-4000-8000-000000000000", url: "http://u:%zz@h:80" },
    fields: ["body.url"],
  },
  {
    name: "proxy: country",
    method: "POST",
    path: proxies,
    body: {
      connector_id: "00000000-0000-4000-8000-000000000000",
      url: "http://h:80",
      country: "ZZ",
    },
    fields: ["body.country"],
  },
  {
    name: "proxy: metadata",
    method: "POST",
    path: proxies,
    body: {
      connector_id: "00000000-0000-4000-8000-000000000000",
      url: "http://h:80",
      metadata: [1],
    },
    fields: ["body.metadata"],
  },
  {
    name: "proxy: status read-only",
    method: "POST",
    path: proxies,
    body: {
      connector_id: "00000000-0000-4000-8000-000000000000",
      url: "http://h:80",
      status: "healthy",
    },
    fields: ["body.status"],
  },
  {
    name: "proxies list: page size",
    method: "GET",
    path: () => `${proxies()}?page_size=1001`,
    fields: ["query.page_size"],
  },
  {
    name: "proxies list: page zero",
    method: "GET",
    path: () => `${proxies()}?page=0`,
    fields: ["query.page"],
  },
  {
    name: "proxies list: status",
    method: "GET",
    path: () => `${proxies()}?status=gone`,
    fields: ["query.status"],
  },
  {
    name: "proxies list: filters",
    method: "GET",
    path: () => `${proxies()}?connector_id=x&country=QQ`,
    fields: ["query.connector_id", "query.country"],
  },
  {
    name: "upload: no connector",
    method: "POST",
    path: () => `${proxies()}/upload`,
    text: "http://h:1",
    fields: ["query.connector_id"],
  },
  // Users and tokens
  {
    name: "user: nothing",
    method: "POST",
    path: () => "/api/v1/users",
    body: {},
    fields: ["body.password", "body.role", "body.username"],
  },
  {
    name: "user: role",
    method: "POST",
    path: () => "/api/v1/users",
    body: { username: "x", password: "long-enough", role: "root" },
    fields: ["body.role"],
  },
  {
    name: "user: short password",
    method: "POST",
    path: () => "/api/v1/users",
    body: { username: "x", password: "short", role: "viewer" },
    fields: ["body.password"],
  },
  {
    name: "user: email",
    method: "POST",
    path: () => "/api/v1/users",
    body: { username: "x", password: "long-enough", role: "viewer", email: "nope" },
    fields: ["body.email"],
  },
  {
    name: "user: username chars",
    method: "POST",
    path: () => "/api/v1/users",
    body: { username: "a b", password: "long-enough", role: "viewer" },
    fields: ["body.username"],
  },
  {
    name: "token: expiry",
    method: "POST",
    path: () => "/api/v1/tokens",
    body: { name: "t", expires_in_days: 0 },
    fields: ["body.expires_in_days"],
  },
  {
    name: "token: list user id",
    method: "GET",
    path: () => "/api/v1/tokens?user_id=me",
    fields: ["query.user_id"],
  },
];

describe("every validation error names its field", () => {
  for (const item of cases) {
    test(item.name, async () => {
      const answer = await h.request(item.method, item.path(), {
        token: h.tokens.admin,
        body: item.body,
        text: item.text,
      });
      expect(answer.status, answer.text).toBe(422);
      const fields = answer.body.detail.map((d: { field: string }) => d.field).sort();
      expect(fields).toEqual([...item.fields].sort());
      for (const detail of answer.body.detail) expect(detail.message).toMatch(/\w/);
      expect(typeof answer.body.error).toBe("string");
    });
  }

  test("says a missing field is required and an unknown one is not known", async () => {
    const answer = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name: "Gamma", colour: "blue" },
    });
    expect(answer.status).toBe(422);
    expect(answer.body.detail).toEqual([
      { field: "body.username", message: "is required" },
      { field: "body.colour", message: "is not a known field" },
    ]);
    const count = await h.request("GET", "/api/v1/projects", { token: h.tokens.editor });
    expect(count.body.map((item: { name: string }) => item.name)).not.toContain("Gamma");
  });

  test("a body that is not JSON is a 422 naming body", async () => {
    for (const text of ["{not json", ""]) {
      const answer = await h.request("POST", "/api/v1/projects", {
        token: h.tokens.admin,
        text,
        headers: { "content-type": "application/json" },
      });
      expect(answer.status).toBe(422);
      expect(answer.body.detail).toEqual([{ field: "body", message: expect.any(String) }]);
    }
  });

  test("a validation error's message never repeats a password", async () => {
    const answer = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.admin,
      body: { name: "P", username: "p", password: "secret:value" },
    });
    expect(answer.status).toBe(422);
    expect(answer.text).not.toContain("secret:value");
    const proxy = await h.request("POST", proxies(), {
      token: h.tokens.admin,
      body: { connector_id: connectorId, url: "http://user:topsecret@bad host:80" },
    });
    expect(proxy.status).toBe(422);
    expect(proxy.text).not.toContain("topsecret");
  });

  test("a credential of another project is refused with 400 naming credential_id", async () => {
    const answer = await h.request("POST", connectors(), {
      token: h.tokens.admin,
      body: { name: "cross", kind: "static", credential_id: otherCredentialId },
    });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatch(/credential_id/);
    const own = await h.request("POST", connectors(), {
      token: h.tokens.admin,
      body: { name: "own", kind: "static", credential_id: credentialId },
    });
    expect(own.status).toBe(201);
  });

  test("a proxy for a connector of another project is refused with 400", async () => {
    const answer = await h.request("POST", `/api/v1/projects/${otherProjectId}/proxies`, {
      token: h.tokens.admin,
      body: { connector_id: connectorId, url: "http://h:80" },
    });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatch(/connector_id/);
  });

  test("malformed and unknown ids are 404s naming the entity", async () => {
    const malformed = await h.request("GET", "/api/v1/projects/not-a-uuid", {
      token: h.tokens.admin,
    });
    expect(malformed.status).toBe(404);
    expect(malformed.body.error).toBe("Project not found");
    const unknown = await h.request(
      "GET",
      `/api/v1/projects/${projectId}/connectors/00000000-0000-4000-8000-000000000000`,
      { token: h.tokens.admin },
    );
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toBe("Connector not found");
    const noProject = await h.request(
      "GET",
      "/api/v1/projects/00000000-0000-4000-8000-000000000000/connectors",
      { token: h.tokens.admin },
    );
    expect(noProject.body.error).toBe("Project not found");
  });
});

describe("location_preflight", () => {
  const modes = ["report", "retry", "reject"] as const;

  test("report, retry and reject are taken on create and edit and shown", async () => {
    for (const mode of modes) {
      const created = await h.request("POST", projects(), {
        token: h.tokens.admin,
        body: { name: `Preflight ${mode}`, username: `pf${mode}`, location_preflight: mode },
      });
      expect(created.status, created.text).toBe(201);
      expect(created.body.location_preflight).toBe(mode);
      const edited = await h.request("PATCH", `/api/v1/projects/${created.body.id}`, {
        token: h.tokens.admin,
        body: { location_preflight: "off" },
      });
      expect(edited.status, edited.text).toBe(200);
      expect(edited.body.location_preflight).toBe("off");
    }
  });

  test("a mode is refused when the project's own sources could not check a vendor's claim", async () => {
    const before = await h.request("GET", project(), { token: h.tokens.admin });
    for (const mode of modes) {
      const created = await h.request("POST", projects(), {
        token: h.tokens.admin,
        body: {
          name: `Vendor only ${mode}`,
          username: `vo${mode}`,
          location_preflight: mode,
          location_sources: ["vendor"],
        },
      });
      expect(created.status, created.text).toBe(422);
      expect(created.body.detail).toEqual([{
        field: "body.location_preflight",
        message: expect.stringMatching(
          new RegExp(`cannot be ${mode}: .*location_sources \\(vendor\\) name neither database`),
        ),
      }]);
      // So is an edit asking both of an existing project.
      const edited = await h.request("PATCH", project(), {
        token: h.tokens.admin,
        body: { location_preflight: mode, location_sources: ["vendor"] },
      });
      expect(edited.status, edited.text).toBe(422);
      expect(edited.body.detail[0].field).toBe("body.location_preflight");
    }
    const after = await h.request("GET", project(), { token: h.tokens.admin });
    expect(after.body).toEqual(before.body);
  });

  test("a project inheriting the install's sources is held to them", async () => {
    const sql = h.deps.database.sql;
    await sql`insert into geo_settings (id, location_sources) values (1, '["vendor"]'::jsonb)
      on conflict (id) do update set location_sources = excluded.location_sources`;
    try {
      const created = await h.request("POST", projects(), {
        token: h.tokens.admin,
        body: { name: "Inherits vendor", username: "inhvendor", location_preflight: "reject" },
      });
      expect(created.status, created.text).toBe(422);
      expect(created.body.detail).toEqual([{
        field: "body.location_preflight",
        message: expect.stringContaining(
          "the install's location sources (GET /api/v1/geo/settings)",
        ),
      }]);
      // Its own sources, naming the database, make the mode possible.
      const own = await h.request("POST", projects(), {
        token: h.tokens.admin,
        body: {
          name: "Own sources",
          username: "ownsources",
          location_preflight: "reject",
          location_sources: ["database", "vendor"],
        },
      });
      expect(own.status, own.text).toBe(201);
    } finally {
      await sql`update geo_settings set location_sources = '["database","vendor","endpoint"]'::jsonb`;
    }
  });
});

describe("duplicates answer 400 naming the field, regardless of case", () => {
  const duplicate = async (path: string, first: unknown, second: unknown, field: string) => {
    const a = await h.request("POST", path, { token: h.tokens.admin, body: first });
    expect(a.status, a.text).toBe(201);
    const before = (await h.changes()).length;
    const b = await h.request("POST", path, { token: h.tokens.admin, body: second });
    expect(b.status, b.text).toBe(400);
    expect(b.body.detail).toEqual([{ field, message: b.body.error }]);
    // A refused write announces nothing.
    expect((await h.changes()).length).toBe(before);
    return b;
  };

  test("project name", async () => {
    const answer = await duplicate(
      "/api/v1/projects",
      { name: "Gamma", username: "gamma1" },
      { name: "GAMMA", username: "gamma2" },
      "body.name",
    );
    expect(answer.body.error).toMatch(/name/);
  });

  test("project username", async () => {
    const answer = await duplicate(
      "/api/v1/projects",
      { name: "Delta 1", username: "Delta" },
      { name: "Delta 2", username: "dELTA" },
      "body.username",
    );
    expect(answer.body.error).toMatch(/username/);
  });

  test("project rename onto another's name", async () => {
    const answer = await h.request("PATCH", `/api/v1/projects/${otherProjectId}`, {
      token: h.tokens.admin,
      body: { name: "alpha" },
    });
    expect(answer.status).toBe(400);
    expect(answer.body.detail[0].field).toBe("body.name");
  });

  test("connector name within a project (another project may reuse it)", async () => {
    await duplicate(
      connectors(),
      { name: "Pool", kind: "static" },
      { name: "POOL", kind: "static" },
      "body.name",
    );
    const elsewhere = await h.request("POST", `/api/v1/projects/${otherProjectId}/connectors`, {
      token: h.tokens.admin,
      body: { name: "pool", kind: "static" },
    });
    expect(elsewhere.status).toBe(201);
  });

  test("credential name within a project", async () => {
    await duplicate(
      credentials(),
      { name: "Vault", provider: "static" },
      { name: "vault", provider: "static" },
      "body.name",
    );
  });

  test("user username", async () => {
    await duplicate(
      "/api/v1/users",
      { username: "Erin", password: "long-enough", role: "viewer" },
      { username: "ERIN", password: "long-enough", role: "viewer" },
      "body.username",
    );
  });

  test("proxy address within a connector", async () => {
    await duplicate(
      proxies(),
      { connector_id: connectorId, url: "http://user:a@Host.example:3128" },
      { connector_id: connectorId, url: "http://user:b@host.EXAMPLE:3128" },
      "body.url",
    );
  });
});
