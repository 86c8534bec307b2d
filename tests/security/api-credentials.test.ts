/**
 * The admin API against forged and stale credentials, on every route of its table (read from
 * the registry, so a new route is covered the day it is added): a JWT with `alg: none`, one
 * signed with the internal secret instead of the JWT secret, an expired one, one of a deleted
 * user, an API token of a deleted user, a revoked API token, a distribution key: each is 401
 * everywhere a login is needed. A viewer is 403 on every route that needs more, and a refused
 * call changes nothing (no row of any table, no change entry).
 */
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { apiRoutes } from "../../control/api/app.ts";
import type { Route } from "../../control/api/registry.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
let routes: Route[];
/** Stale or forged bearer credentials, by what they are. */
const forged: Record<string, string> = {};

const FILLER_ID = "00000000-0000-4000-8000-000000000001";

/**
 * Routes a viewer may call although their method is not GET: each acts on the caller's own
 * account, or (the routing preview) reads and computes without storing anything. A new route
 * that lets a viewer write must be added here on purpose.
 */
const VIEWER_WRITES = new Set([
  "PATCH /api/v1/users/me",
  "POST /api/v1/tokens",
  "DELETE /api/v1/tokens/:id",
  "POST /api/v1/projects/:id/routing-preview",
  // Where the databases in force place an address: a POST that writes nothing.
  "POST /api/v1/geo/lookup",
]);

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

function sign(secret: string, subject: string, expiresAt: number): Promise<string> {
  return new SignJWT({ role: "admin" }).setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setSubject(subject).setIssuer("octoprox").setAudience("octoprox-api")
    .setIssuedAt().setExpirationTime(expiresAt).sign(new TextEncoder().encode(secret));
}

/** A route's path with every parameter filled (the refusal comes before any lookup). */
const concrete = (route: Route) => route.path.replace(/:[a-z_]+/gi, FILLER_ID);
const label = (route: Route) => `${route.method.toUpperCase()} ${route.path}`;

async function call(route: Route, token: string) {
  return await h.request(route.method.toUpperCase(), concrete(route), {
    token,
    ...(route.method === "get" || route.method === "delete"
      ? {}
      : route.textBody
      ? { text: "http://1.2.3.4:8080" }
      : { body: {} }),
  });
}

/**
 * Every table's rows and the change stream, as one value: equal means nothing changed. The
 * outbox is left out: the rows of writes announced before are deleted a few ms later, together.
 */
async function fingerprint(): Promise<string> {
  const tables = await h.deps.database.sql<{ name: string }[]>`
    select table_name as name from information_schema.tables
    where table_schema = 'public' and table_type = 'BASE TABLE' and table_name <> 'change_outbox'
    order by table_name`;
  const parts: string[] = [];
  for (const { name } of tables) {
    const [row] = await h.deps.database.sql.unsafe(
      `select count(*)::text as n, coalesce(md5(string_agg(t::text, ',' order by t::text)), '')
         as digest from "${name}" t`,
    );
    parts.push(`${name}:${row.n}:${row.digest}`);
  }
  parts.push(`changes:${JSON.stringify(await h.changes())}`);
  return parts.join("\n");
}

beforeAll(async () => {
  h = await startHarness();
  routes = apiRoutes(h.deps);
  const nowSeconds = Math.floor(Date.now() / 1000);
  const adminId = h.userIds.admin;
  forged["alg none"] = `${base64url({ alg: "none", typ: "JWT" })}.${
    base64url({
      sub: adminId,
      role: "admin",
      iss: "octoprox",
      aud: "octoprox-api",
      iat: nowSeconds,
      exp: nowSeconds + 600,
    })
  }.`;
  forged["signed with the internal secret"] = await sign(
    h.settings.internalSecret,
    adminId,
    nowSeconds + 600,
  );
  forged["expired"] = await sign(h.settings.jwtSecret, adminId, nowSeconds - 10);

  // A user with a login and an API token, then deleted.
  const user = await h.request("POST", "/api/v1/users", {
    token: h.tokens.admin,
    body: { username: "gone", password: "password-gone", role: "admin" },
  });
  const login = await h.request("POST", "/api/v1/auth/login", {
    body: { username: "gone", password: "password-gone" },
  });
  const goneToken = await h.request("POST", "/api/v1/tokens", {
    token: login.body.access_token,
    body: { name: "gone" },
  });
  const deleted = await h.request("DELETE", `/api/v1/users/${user.body.id}`, {
    token: h.tokens.admin,
  });
  expect(deleted.status).toBe(204);
  forged["a deleted user's JWT"] = login.body.access_token;
  forged["a deleted user's API token"] = goneToken.body.token;

  const revoked = await h.request("POST", "/api/v1/tokens", {
    token: h.tokens.admin,
    body: { name: "revoked" },
  });
  await h.request("DELETE", `/api/v1/tokens/${revoked.body.id}`, { token: h.tokens.admin });
  forged["a revoked API token"] = revoked.body.token;

  // A distribution key is for its project's extraction API only.
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.admin,
    body: { name: "Keys", username: "keys" },
  });
  const key = await h.request("POST", `/api/v1/projects/${project.body.id}/distribution-keys`, {
    token: h.tokens.admin,
    body: { name: "k" },
  });
  expect(key.status).toBe(201);
  forged["a distribution key"] = key.body.key;
});

afterAll(async () => {
  await h?.close();
});

describe("forged and stale credentials", () => {
  test("the credentials were good ones before they went stale (the test can fail)", async () => {
    // A well signed JWT of a live admin passes where the forged ones are refused.
    const good = await sign(
      h.settings.jwtSecret,
      h.userIds.admin,
      Math.floor(Date.now() / 1000) + 600,
    );
    expect((await h.request("GET", "/api/v1/projects", { token: good })).status).toBe(200);
    expect(Object.keys(forged)).toHaveLength(7);
  });

  test("each is 401 on every route that needs a login, and changes nothing", async () => {
    const before = await fingerprint();
    const guarded = routes.filter((route) => route.access !== "public");
    expect(guarded.length).toBeGreaterThan(50);
    const wrong: string[] = [];
    for (const route of guarded) {
      for (const [what, token] of Object.entries(forged)) {
        const answer = await call(route, token);
        // A distribution route takes a key of the project in its path: another project's key
        // is forbidden there rather than unknown.
        const refused = route.access === "distribution" && what === "a distribution key"
          ? [403]
          : [401];
        if (!refused.includes(answer.status)) {
          wrong.push(`${label(route)} with ${what}: ${answer.status}`);
        } else if (answer.text.includes(token)) wrong.push(`${label(route)} echoed ${what}`);
      }
    }
    expect(wrong).toEqual([]);
    expect(await fingerprint()).toBe(before);
  });
});

describe("a viewer", () => {
  test("is 403 on every route that needs more than a viewer, and changes nothing", async () => {
    const before = await fingerprint();
    const above = routes.filter((route) => route.access === "editor" || route.access === "admin");
    expect(above.length).toBeGreaterThan(30);
    const wrong: string[] = [];
    for (const route of above) {
      const answer = await call(route, h.tokens.viewer);
      if (answer.status !== 403) wrong.push(`${label(route)}: ${answer.status}`);
    }
    expect(wrong).toEqual([]);
    expect(await fingerprint()).toBe(before);
  });

  test("may write only on its own account: every other write route needs more", () => {
    const viewerWrites = routes
      .filter((route) => route.access === "viewer" && route.method !== "get")
      .map(label);
    expect(new Set(viewerWrites)).toEqual(VIEWER_WRITES);
  });
});
