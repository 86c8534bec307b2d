/**
 * Input Postgres would refuse is refused where it is read, on every write route of the registry
 * (enumerated, so a new route is covered without a new case): a NUL or a lone surrogate in any
 * path parameter, query value or body string (keys and free JSON included) is a 422 naming the
 * field, an over-long string or a number past its column a 4xx, and the login a 401; nothing is
 * written and no error-level line is logged. The same input without the fault still works.
 */
import { generateKeyPairSync } from "node:crypto";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { apiRoutes } from "../../control/api/app.ts";
import type { Route } from "../../control/api/registry.ts";
import { MAX_JSON_DEPTH } from "../../control/core/unstorable.ts";
import { type Answer, type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
let projectId: string;
let connectorId: string;
let otherConnectorId: string;
let credentialId: string;
let proxyId: string;
let userId: string;
let distributionKey: string;
let backup: Record<string, unknown>;
let databaseId: string;
let ruleId: string;
let channelId: string;
let peerId: string;
let openvpnPeerId: string;

/** A WireGuard public key as a device makes it (base64 of the raw 32 bytes). */
function devicePublicKey(): string {
  const jwk = generateKeyPairSync("x25519").publicKey.export({ format: "jwk" });
  return Buffer.from(jwk.x!, "base64url").toString("base64");
}
const DEVICE_KEYS = [devicePublicKey(), devicePublicKey()];

const PASSPHRASE = "correct horse battery staple";

/** Fields of a bigint column, or a count kept in jsonb: any safe integer, so past 32 bits too. */
const BIGINT = [/\.limit_bytes$/];

/** Fields that hold free JSON or text of any length by design (bounded by the body's size). */
const FREE_TEXT = [
  /^body\.metadata\./,
  /^body\.descriptor\./,
  /^body\.backup\./,
];

function json<T>(answer: Answer, status: number): T {
  if (answer.status !== status) throw new Error(`${answer.status}: ${answer.text.slice(0, 300)}`);
  return answer.body as T;
}

beforeAll(async () => {
  h = await startHarness();
  const post = async (path: string, body: unknown) =>
    json<{ id: string }>(await h.request("POST", path, { token: h.tokens.admin, body }), 201).id;
  projectId = await post("/api/v1/projects", { name: "Alpha", username: "alpha" });
  const base = `/api/v1/projects/${projectId}`;
  connectorId = await post(`${base}/connectors`, { name: "Static", kind: "static" });
  otherConnectorId = await post(`${base}/connectors`, { name: "Other", kind: "static" });
  credentialId = await post(`${base}/credentials`, { name: "Login", provider: "static" });
  proxyId = await post(`${base}/proxies`, {
    connector_id: connectorId,
    url: "http://203.0.113.7:3128",
  });
  userId = await post("/api/v1/users", {
    username: "someone",
    password: "password-someone",
    role: "viewer",
  });
  distributionKey = json<{ key: string }>(
    await h.request("POST", `${base}/distribution-keys`, {
      token: h.tokens.admin,
      body: { name: "probe" },
    }),
    201,
  ).key;
  databaseId = json<{ id: string }>(
    await h.request("POST", "/api/v1/geo/databases?name=exits&format=geofeed", {
      token: h.tokens.admin,
      text: "198.51.100.0/24,DE,DE-BE,Berlin,\n",
    }),
    201,
  ).id;
  channelId = await post("/api/v1/alerts/channels", {
    name: "Fixture channel",
    url: "http://127.0.0.1:9/hook",
    allow_private_address: true,
  });
  ruleId = await post("/api/v1/alerts/rules", { name: "Fixture rule", kind: "traffic_limit" });
  peerId = await post(`${base}/wireguard/peers`, { name: "Fixture device" });
  openvpnPeerId = await post(`${base}/openvpn/peers`, { name: "Fixture tablet" });
  backup = json<Record<string, unknown>>(
    await h.request("POST", "/api/v1/backup/export", {
      token: h.tokens.admin,
      body: { passphrase: PASSPHRASE },
    }),
    200,
  );
});

afterAll(async () => {
  await h?.close();
});

/** A provider descriptor whose one call reaches `api.acme-proxies.example`. */
function descriptor(id: string) {
  return {
    id,
    name: "Acme Proxies",
    credential_fields: [
      { key: "api_key", label: "API key", type: "password", secret: true, required: true },
    ],
    proxy_types: [{
      id: "proxy_list",
      name: "Proxy list",
      mode: "list",
      call: {
        url: "https://api.acme-proxies.example/v1/proxies",
        headers: { Authorization: "Token {credential.api_key}" },
        items: "results",
      },
      item: { host: "{item.host}", port: "{item.port}" },
    }],
  };
}

/**
 * A valid body for each write route that reads one, by `METHOD path`. A route with a body and
 * no example here fails the test below: add one.
 */
const EXAMPLES: Record<string, () => Record<string, unknown>> = {
  "POST /api/v1/auth/login": () => ({ username: "viewer", password: "password-viewer" }),
  "POST /api/v1/tokens": () => ({ name: "Probe", expires_in_days: 30 }),
  "PATCH /api/v1/users/me": () => ({ email: "me@example.com" }),
  "POST /api/v1/users": () => ({
    username: "probe-user",
    password: "password-probe",
    role: "viewer",
    email: "probe@example.com",
  }),
  "PATCH /api/v1/users/:id": () => ({ email: "someone@example.com", is_active: true }),
  "POST /api/v1/users/invite": () => ({
    username: "probe-invitee",
    role: "viewer",
    email: "invitee@example.com",
  }),
  // A token no invitation has: the field checks run before it is looked for.
  "POST /api/v1/auth/set-password": () => ({ token: "probe-token", password: "password-probe" }),
  "POST /api/v1/projects": () => ({ name: "Probe", username: "probe", description: "A probe" }),
  "PATCH /api/v1/projects/:id": () => ({
    description: "Edited",
    session_ttl_seconds: 600,
    max_connections: 10,
    rate_limit: { requests_per_second: 50, burst: 100 },
    tls_mitm_mode: "plain",
    tls_mitm_bypass: ["bank.example", ".pinned.example"],
  }),
  "POST /api/v1/projects/:id/distribution-keys": () => ({
    name: "Key",
    allowed_cidrs: ["10.0.0.0/8"],
  }),
  "POST /api/v1/projects/:id/extract": () => ({ count: 1, carrier: "acme", lease_seconds: 60 }),
  "POST /api/v1/projects/:id/extract/:lease/renew": () => ({ lease_seconds: 60 }),
  "POST /api/v1/projects/:id/credentials": () => ({
    name: "Cred",
    provider: "static",
    config: { username: "bob", password: "pw-1" },
  }),
  "PATCH /api/v1/projects/:id/credentials/:cid": () => ({
    name: "Login",
    config: { username: "alice" },
  }),
  "POST /api/v1/projects/:id/connectors": () => ({
    name: "Conn",
    kind: "static",
    weight: 2,
    countries: ["de"],
    domain_allow: ["example.com"],
    healthcheck_url: "http://example.com/health",
    rate_limit_config: { max_requests: 10, window_seconds: 60 },
    traffic_config: { limit_bytes: 1_000_000, price_per_gb: 1.5, currency: "USD" },
  }),
  "PATCH /api/v1/projects/:id/connectors/:cid": () => ({ weight: 3, name: "Static" }),
  "POST /api/v1/providers": () => ({
    descriptor: descriptor("probe-vendor"),
    confirm_hosts: ["api.acme-proxies.example"],
  }),
  "PUT /api/v1/providers/:pid": () => ({
    descriptor: descriptor("probe-vendor"),
    confirm_hosts: ["api.acme-proxies.example"],
  }),
  "POST /api/v1/projects/:id/proxies": () => ({
    connector_id: connectorId,
    url: "http://u:p@203.0.113.9:3128",
    country: "de",
    metadata: { note: "rack 4", slot: 2, tags: ["a"] },
  }),
  "PATCH /api/v1/projects/:id/proxies/:pid": () => ({ country: "fr", metadata: { note: "b" } }),
  "POST /api/v1/projects/:id/routing-preview": () => ({
    username: "alpha",
    target: "example.com:443",
  }),
  "PUT /api/v1/projects/:id/sequence": () => ({
    connector_ids: [connectorId, otherConnectorId],
  }),
  "POST /api/v1/config/diff": () => ({ config: configDocument() }),
  "POST /api/v1/config/apply": () => ({ config: configDocument() }),
  "POST /api/v1/backup/export": () => ({ passphrase: PASSPHRASE, include_history: false }),
  "POST /api/v1/backup/import": () => ({ passphrase: PASSPHRASE, backup }),
  "PUT /api/v1/geo/settings": () => ({
    location_sources: ["database", "vendor"],
    location_conflict_rule: "first",
    observation_retention_days: 30,
    exit_ip_retention_days: 365,
  }),
  "POST /api/v1/geo/databases/from-url": () => ({
    name: "remote",
    format: "mmdb",
    url: "https://203.0.113.5/{YYYY}-{MM}/country.mmdb",
    update_interval_hours: 24,
  }),
  "PATCH /api/v1/geo/databases/:id": () => ({ name: "exits", enabled: true, position: 1 }),
  "POST /api/v1/geo/lookup": () => ({ ip: "198.51.100.7" }),
  "POST /api/v1/geo/reattribute": () => ({ project_id: projectId }),
  "POST /api/v1/alerts/rules": () => ({
    name: "Probe rule",
    kind: "healthy_share",
    threshold: 50,
    project_id: projectId,
    severity: "critical",
    quiet_period_seconds: 600,
    channel_ids: [channelId],
  }),
  "PATCH /api/v1/alerts/rules/:id": () => ({ name: "Fixture rule", quiet_period_seconds: 60 }),
  "POST /api/v1/alerts/channels": () => ({
    name: "Probe channel",
    url: "http://127.0.0.1:9/probe",
    format: "slack",
    allow_private_address: true,
  }),
  "PATCH /api/v1/alerts/channels/:id": () => ({ name: "Fixture channel", format: "json" }),
  "PUT /api/v1/wireguard/settings": () => ({
    subnet: "10.66.0.0/16",
    listen_port: 51820,
    endpoint_host: "vpn.example.com",
    mtu: 1420,
    persistent_keepalive_seconds: 25,
  }),
  "POST /api/v1/projects/:id/wireguard/peers": () => ({
    name: "Probe phone",
    country: "de",
    state: "be",
    city: "Berlin",
    session_id: "probe-1",
    public_key: DEVICE_KEYS[0],
  }),
  "PATCH /api/v1/projects/:id/wireguard/peers/:peer": () => ({
    name: "Fixture device",
    enabled: true,
    country: "fr",
    city: "Paris",
    session_id: "s-2",
  }),
  "POST /api/v1/projects/:id/wireguard/peers/:peer/rotate-keys": () => ({
    public_key: DEVICE_KEYS[1],
  }),
  "PUT /api/v1/openvpn/settings": () => ({
    subnet: "10.67.0.0/16",
    transport: "udp",
    listen_port: 1194,
    endpoint_host: "vpn.example.com",
    mtu: 1500,
    keepalive_interval_seconds: 10,
    keepalive_timeout_seconds: 60,
  }),
  "POST /api/v1/projects/:id/openvpn/peers": () => ({
    name: "Probe tablet",
    country: "de",
    state: "be",
    city: "Berlin",
    session_id: "probe-2",
  }),
  "PATCH /api/v1/projects/:id/openvpn/peers/:peer": () => ({
    name: "Fixture tablet",
    enabled: true,
    country: "fr",
    city: "Paris",
    session_id: "s-3",
  }),
};

/**
 * Valid examples a route still refuses after reading them: a URL database is downloaded at
 * once, and the egress guard refuses a documentation address before any connection (on body.url).
 */
const REFUSED_AFTER_READING: Record<string, number> = {
  "POST /api/v1/geo/databases/from-url": 422,
  // No invitation has the example's token: refused on body.token once the body was read.
  "POST /api/v1/auth/set-password": 422,
};

function configDocument() {
  return {
    version: 1,
    projects: [{
      name: "Shop",
      username: "shop",
      password: "shop-secret-1",
      credentials: [{ name: "login", provider: "static", config: { username: "bob" } }],
      connectors: [{
        name: "main",
        credential: "login",
        weight: 3,
        traffic_config: { limit_bytes: 1_000_000, period: "day" },
        proxies: ["http://203.0.113.7:3128", { url: "http://203.0.113.8:3128", country: "fr" }],
      }],
    }],
  };
}

/** Whether sending a valid example changes what the other cases find (it replaces the data). */
const NOT_REPLAYED = new Set(["POST /api/v1/backup/import"]);

/** The path with each parameter filled: the fixtures' ids, so a handler would find its rows. */
function pathOf(route: Route): string {
  const ids: Record<string, string> = {
    id: route.path.startsWith("/api/v1/users")
      ? userId
      : route.path.startsWith("/api/v1/geo/")
      ? databaseId
      : route.path.startsWith("/api/v1/alerts/rules")
      ? ruleId
      : route.path.startsWith("/api/v1/alerts/channels")
      ? channelId
      : projectId,
    cid: route.path.includes("/credentials/") ? credentialId : connectorId,
    pid: route.path.includes("/providers/") ? "probe-vendor" : proxyId,
    peer: route.path.includes("/openvpn/") ? openvpnPeerId : peerId,
    keyId: crypto.randomUUID(),
    lease: crypto.randomUUID(),
  };
  return route.path.replace(/:(\w+)/g, (_, name: string) => ids[name] ?? crypto.randomUUID());
}

function authOf(route: Route): Record<string, string> {
  if (route.access === "public") return {};
  if (route.access === "distribution") return { authorization: `Bearer ${distributionKey}` };
  return { authorization: `Bearer ${h.tokens.admin}` };
}

const writeRoutes = () =>
  apiRoutes(h.deps).filter((route) => route.method !== "get")
    .map((route) => ({ route, key: `${route.method.toUpperCase()} ${route.path}` }));

/** Sends a raw body, so a case can carry what JSON.stringify would not write (1e400). */
async function send(route: Route, raw: string | undefined, path = pathOf(route)) {
  const headers = { ...authOf(route), "content-type": "application/json" };
  return await h.request(route.method.toUpperCase(), path, { headers, text: raw });
}

let errorLinesSeen = 0;

/** The answer must be `status` (a 4xx range when given as "4xx"); nothing logged as an error. */
async function expectRefused(
  answer: Answer,
  expected: number | "4xx",
  what: string,
  changesBefore: number,
) {
  if (expected === "4xx") {
    expect(answer.status, `${what}: ${answer.text.slice(0, 300)}`).toBeGreaterThanOrEqual(400);
    expect(answer.status, `${what}: ${answer.text.slice(0, 300)}`).toBeLessThan(500);
  } else {
    expect(answer.status, `${what}: ${answer.text.slice(0, 300)}`).toBe(expected);
  }
  const errors = h.lines.filter((line) => line.level === "error");
  expect(errors.slice(errorLinesSeen), what).toEqual([]);
  errorLinesSeen = errors.length;
  // Nothing written: no change entry (every write of the api leaves one).
  expect((await h.changes()).length, `${what}: a change entry was written`).toBe(changesBefore);
}

function fieldsOf(answer: Answer): string[] {
  return (answer.body?.detail ?? []).map((issue: { field: string }) => issue.field);
}

interface Leaf {
  /** The path in the body, `body.a.0.b`. */
  field: string;
  keys: (string | number)[];
  value: string | number;
}

function leaves(value: unknown, keys: (string | number)[] = []): Leaf[] {
  if (typeof value === "string" || typeof value === "number") {
    return [{ field: ["body", ...keys].join("."), keys, value }];
  }
  if (Array.isArray(value)) return value.flatMap((item, index) => leaves(item, [...keys, index]));
  if (typeof value === "object" && value !== null) {
    return Object.entries(value).flatMap(([key, item]) => leaves(item, [...keys, key]));
  }
  return [];
}

function replaced(body: Record<string, unknown>, keys: (string | number)[], value: unknown) {
  const copy = structuredClone(body);
  let at: Record<string | number, unknown> = copy;
  for (const key of keys.slice(0, -1)) at = at[key] as Record<string | number, unknown>;
  at[keys[keys.length - 1]] = value;
  return copy;
}

/**
 * The field a configuration document's own checks name: from the document
 * (`config.projects.0.name`), as a file's would be; the check of every body names it from the
 * body (`body.config.projects.0.name`).
 */
function documentField(key: string, field: string): string {
  return key.startsWith("POST /api/v1/config/") ? field.replace(/^body\./, "") : field;
}

/**
 * Whether an answer's field names the leaf: the leaf itself, or the list item holding it (a
 * union such as a proxy's address-or-object names its item), never just the whole body.
 */
function names(key: string, named: string, leaf: string): boolean {
  return [leaf, documentField(key, leaf)].some((path) =>
    named === path || (path.startsWith(`${named}.`) && named.split(".").length > 2)
  );
}

/** What the login answers for any input it refuses: what a wrong password gets. */
const LOGIN = "POST /api/v1/auth/login";

describe("every write route", () => {
  test("every route that reads a JSON body has a valid example here", () => {
    const missing = writeRoutes().filter(({ route, key }) => route.body && !EXAMPLES[key]);
    expect(missing.map(({ key }) => key)).toEqual([]);
  });

  test("the valid examples still work", async () => {
    for (const { route, key } of writeRoutes()) {
      const example = EXAMPLES[key];
      if (!route.body || !example || NOT_REPLAYED.has(key)) continue;
      const answer = await send(route, JSON.stringify(example()));
      // A renew of a lease no one took is a 404, after the body was read and found valid.
      const expected = key.endsWith("/renew") ? 404 : REFUSED_AFTER_READING[key];
      if (expected) expect(answer.status, key).toBe(expected);
      else expect(answer.status, `${key}: ${answer.text.slice(0, 300)}`).toBeLessThan(300);
      expect(h.lines.filter((line) => line.level === "error").slice(errorLinesSeen), key)
        .toEqual([]);
    }
  });

  test("a NUL or lone surrogate anywhere in a body is refused before the schema and the handler", async () => {
    for (const { route, key } of writeRoutes()) {
      if (!route.body) continue;
      const bad = [
        ['{"zz":"a\\u0000b"}', "body.zz"],
        ['{"zz":{"deep":["ok","\\ud800"]}}', "body.zz.deep.1"],
        ['{"a\\u0000":1}', "body"],
        ['{"zz":{"\\udc00x":1}}', "body.zz"],
        ['{"zz":1e400}', "body.zz"],
        // Named where the nesting passes the bound, inside `zz`.
        [`{"zz":${"[".repeat(MAX_JSON_DEPTH + 1)}${"]".repeat(MAX_JSON_DEPTH + 1)}}`, "body.zz."],
      ] as const;
      for (const [raw, field] of bad) {
        const before = (await h.changes()).length;
        const answer = await send(route, raw);
        const what = `${key} ${raw.slice(0, 40)}`;
        // On the login too: an unknown key is not a credential, and is named like any field.
        await expectRefused(answer, 422, what, before);
        const named = fieldsOf(answer);
        if (field.endsWith(".")) expect(named.some((f) => f.startsWith(field)), what).toBe(true);
        else expect(named, what).toContain(field);
      }
    }
  });

  test("a NUL in a path parameter or a query value is a 422 naming it", async () => {
    for (const { route, key } of writeRoutes()) {
      const before = (await h.changes()).length;
      const query = await send(route, undefined, `${pathOf(route)}?purge=tr%00ue`);
      await expectRefused(query, 422, `${key} query`, before);
      expect(fieldsOf(query), key).toEqual(["query.purge"]);
      const surrogateKey = await send(route, undefined, `${pathOf(route)}?a%00=1`);
      await expectRefused(surrogateKey, 422, `${key} query key`, before);
      expect(fieldsOf(surrogateKey), key).toEqual(["query"]);
      for (const name of route.params) {
        const path = route.path.replace(
          /:(\w+)/g,
          (_, param: string) =>
            param === name
              ? "ab%00cd"
              : pathOf(route).split("/")[route.path.split("/").indexOf(`:${param}`)],
        );
        const answer = await send(route, undefined, path);
        if (route.access === "distribution" && name === "id") {
          // Authentication comes first, and a distribution key is checked against the
          // project in the path: a project id no key can belong to is another project's.
          await expectRefused(answer, 403, `${key} path.${name}`, before);
          continue;
        }
        await expectRefused(answer, 422, `${key} path.${name}`, before);
        expect(fieldsOf(answer), key).toEqual([`path.${name}`]);
      }
    }
  });

  test("each field of a valid body: NUL, lone surrogates, too long or too large are a 422 naming it", async () => {
    for (const { route, key } of writeRoutes()) {
      const example = EXAMPLES[key];
      if (!route.body || !example) continue;
      const body = example();
      for (const leaf of leaves(body)) {
        const free = FREE_TEXT.some((pattern) => pattern.test(leaf.field));
        const bigint = BIGINT.some((pattern) => pattern.test(leaf.field));
        // Refused by the field's own bound: a 422 naming it (before any duplicate check).
        const bounded = free ? "free" : 422;
        const cases: [string, unknown, 422 | "free"][] = [];
        if (typeof leaf.value === "string") {
          const text = leaf.value;
          const half = Math.ceil(text.length / 2);
          cases.push(
            ["NUL", `${text.slice(0, half)}\u0000${text.slice(half)}`, 422],
            ["lone surrogate", `${text}\ud83d`, 422],
            ["over-long", text + "x".repeat(100_000), bounded],
            // Within most fields' bound in characters, past it in bytes: stored or refused.
            ["long in bytes", text + "\u20ac".repeat(1000), "free"],
          );
        } else {
          cases.push(
            ["past 32 bits", 2 ** 31, bigint ? "free" : bounded],
            ["past safe integers", 2 ** 53 + 2, bounded],
          );
        }
        for (const [name, value, expected] of cases) {
          const what = `${key} ${leaf.field} ${name}`;
          const before = (await h.changes()).length;
          const answer = await send(route, JSON.stringify(replaced(body, leaf.keys, value)));
          if (expected === "free") {
            // Free JSON keeps any text or number that fits the body, and text within its
            // bound is kept whatever its bytes: what matters is no 500.
            expect(answer.status, `${what}: ${answer.text.slice(0, 300)}`).toBeLessThan(500);
            expect(h.lines.filter((line) => line.level === "error").slice(errorLinesSeen), what)
              .toEqual([]);
            continue;
          }
          if (key === LOGIN) {
            await expectRefused(answer, 401, what, before);
            expect(answer.body, what).toEqual({ error: "Invalid username or password" });
            continue;
          }
          await expectRefused(answer, expected, what, before);
          expect(fieldsOf(answer).some((field) => names(key, field, leaf.field)), what).toBe(true);
        }
        // An infinite number, which JSON.stringify cannot write.
        if (typeof leaf.value === "number") {
          const raw = JSON.stringify(replaced(body, leaf.keys, "__INF__")).replace(
            '"__INF__"',
            "1e400",
          );
          const before = (await h.changes()).length;
          const answer = await send(route, raw);
          const what = `${key} ${leaf.field} 1e400`;
          await expectRefused(answer, key === LOGIN ? 401 : 422, what, before);
        }
      }
    }
  });
});

describe("the login", () => {
  const login = (body: unknown) => h.request("POST", "/api/v1/auth/login", { body });

  test("a NUL, a lone surrogate or an over-long username or password is a wrong login", async () => {
    const wrong = await login({ username: "viewer", password: "not-it" });
    expect(wrong.status).toBe(401);
    for (
      const body of [
        { username: "vie\u0000wer", password: "password-viewer" },
        { username: "viewer", password: "password-\u0000viewer" },
        { username: "viewer\ud800", password: "password-viewer" },
        { username: "viewer", password: "\udfffpassword-viewer" },
        { username: "v".repeat(100_000), password: "password-viewer" },
        { username: "viewer", password: "p".repeat(100_000) },
        { username: "nobody\u0000", password: "x" },
      ]
    ) {
      const before = (await h.changes()).length;
      const answer = await login(body);
      await expectRefused(answer, 401, JSON.stringify(body).slice(0, 60), before);
      // The same answer as a wrong password: it tells nothing of whether the user exists.
      expect(answer.body).toEqual(wrong.body);
    }
    expect((await login({ username: "viewer", password: "password-viewer" })).status).toBe(200);
  });

  test("a missing or non-text username is still a 422 naming it", async () => {
    const answer = await login({ password: "x" });
    expect(answer.status).toBe(422);
    expect(fieldsOf(answer)).toEqual(["body.username"]);
  });
});

describe("what reaches Postgres by another way", () => {
  test("a descriptor's YAML or JSON text whose escapes spell a NUL is a 422 naming the field", async () => {
    for (
      const text of ['{"id": "esc-vendor", "name": "A\\u0000"}', 'id: esc-vendor\nname: "A\\0"']
    ) {
      const before = (await h.changes()).length;
      const answer = await h.request("POST", "/api/v1/providers", {
        token: h.tokens.admin,
        body: { descriptor: text },
      });
      await expectRefused(answer, 422, text, before);
      expect(fieldsOf(answer)).toEqual(["body.descriptor.name"]);
    }
  });

  test("an upload's text with a NUL is a 422 naming the body", async () => {
    const before = (await h.changes()).length;
    const upload = `/api/v1/projects/${projectId}/proxies/upload?connector_id=${connectorId}`;
    const answer = await h.request("POST", upload, {
      token: h.tokens.admin,
      text: `http://203.0.113.20:3128\nhttp://203.0.1\u000013.21:3128\n`,
      headers: { "content-type": "text/plain" },
    });
    await expectRefused(answer, 422, "upload", before);
    expect(fieldsOf(answer)).toEqual(["body"]);
  });

  test("a proxy whose login is long in bytes is refused or stored, never a database error", async () => {
    const before = (await h.changes()).length;
    // A login of 1000 characters (within their bound) in 3000 bytes that do not compress:
    // past the 2704 a unique index entry holds.
    const text = Array.from({ length: 1000 }, (_, i) => String.fromCodePoint(0x4e00 + i * 7));
    const user = encodeURIComponent(text.join(""));
    const answer = await h.request("POST", `/api/v1/projects/${projectId}/proxies`, {
      token: h.tokens.admin,
      body: { connector_id: connectorId, url: `http://${user}:p@203.0.113.30:3128` },
    });
    await expectRefused(answer, "4xx", "proxy login", before);
  });
});
