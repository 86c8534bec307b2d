/**
 * Login, tokens, the three roles' allowed and refused calls, the users rules, and the first
 * admin's seed, against real Postgres and Redis.
 */
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { users } from "../../db/schema.ts";
import { seedFirstAdmin } from "../../control/services/users.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
let projectId: string;
let connectorId: string;

beforeAll(async () => {
  h = await startHarness();
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.admin,
    body: { name: "Roles", username: "roles", password: "roles-password" },
  });
  projectId = project.body.id;
  const connector = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    token: h.tokens.admin,
    body: { name: "Static", kind: "static" },
  });
  connectorId = connector.body.id;
});

afterAll(async () => {
  await h?.close();
});

describe("login", () => {
  test("answers a bearer JWT and records the login", async () => {
    const answer = await h.request("POST", "/api/v1/auth/login", {
      body: { username: "EDITOR", password: "password-editor" },
    });
    expect(answer.status).toBe(200);
    expect(answer.body.token_type).toBe("bearer");
    expect(answer.body.expires_in).toBe(24 * 3600);
    expect(answer.body.access_token.split(".")).toHaveLength(3);
    const me = await h.request("GET", "/api/v1/auth/me", { token: answer.body.access_token });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ username: "editor", role: "editor", via: "jwt" });
    expect(me.body.last_login_at).not.toBeNull();
    expect(me.body.password_hash).toBeUndefined();
  });

  test("wrong password and unknown user get the same generic 401", async () => {
    const wrong = await h.request("POST", "/api/v1/auth/login", {
      body: { username: "editor", password: "nope-nope" },
    });
    const unknown = await h.request("POST", "/api/v1/auth/login", {
      body: { username: "nobody", password: "nope-nope" },
    });
    expect(wrong.status).toBe(401);
    expect(unknown.status).toBe(401);
    expect(wrong.body.error).toBe(unknown.body.error);
    expect(wrong.body.error).not.toContain("editor");
  });

  test("a login body missing fields is a 422 naming them", async () => {
    const answer = await h.request("POST", "/api/v1/auth/login", { body: {} });
    expect(answer.status).toBe(422);
    expect(answer.body.detail.map((d: { field: string }) => d.field).sort()).toEqual([
      "body.password",
      "body.username",
    ]);
  });
});

describe("bearer tokens", () => {
  test("no token, a malformed header and a garbage token are 401", async () => {
    const none = await h.request("GET", "/api/v1/projects");
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toBe("Bearer");
    const basic = await h.request("GET", "/api/v1/projects", {
      headers: { authorization: "Basic YWRtaW46YWRtaW4=" },
    });
    expect(basic.status).toBe(401);
    const garbage = await h.request("GET", "/api/v1/projects", { token: "not-a-jwt" });
    expect(garbage.status).toBe(401);
    const fakeApiToken = await h.request("GET", "/api/v1/projects", { token: "oxp_bogus" });
    expect(fakeApiToken.status).toBe(401);
  });

  test("a JWT signed with another secret, or expired, is 401", async () => {
    const sign = (secret: string, expiresAt: number) =>
      new SignJWT({ role: "admin" }).setProtectedHeader({ alg: "HS256" })
        .setSubject(h.userIds.admin).setIssuer("octoprox").setAudience("octoprox-api")
        .setIssuedAt().setExpirationTime(expiresAt).sign(new TextEncoder().encode(secret));
    const nowSeconds = Math.floor(Date.now() / 1000);
    const forged = await sign("x".repeat(40), nowSeconds + 600);
    expect((await h.request("GET", "/api/v1/projects", { token: forged })).status).toBe(401);
    const expired = await sign(h.settings.jwtSecret, nowSeconds - 10);
    expect((await h.request("GET", "/api/v1/projects", { token: expired })).status).toBe(401);
    const good = await sign(h.settings.jwtSecret, nowSeconds + 600);
    expect((await h.request("GET", "/api/v1/projects", { token: good })).status).toBe(200);
  });

  test("an API token works until revoked, is shown once and stored hashed", async () => {
    const created = await h.request("POST", "/api/v1/tokens", {
      token: h.tokens.viewer,
      body: { name: "cli", expires_in_days: 30 },
    });
    expect(created.status).toBe(201);
    const token: string = created.body.token;
    expect(token).toMatch(/^oxp_[A-Za-z0-9_-]{43}$/);
    expect(created.body.prefix).toBe(token.slice(0, 12));

    const me = await h.request("GET", "/api/v1/auth/me", { token });
    expect(me.body).toMatchObject({ username: "viewer", via: "api_token" });

    const listed = await h.request("GET", "/api/v1/tokens", { token: h.tokens.viewer });
    expect(listed.status).toBe(200);
    expect(listed.body).toHaveLength(1);
    expect(listed.text).not.toContain(token);
    const stored = await h.deps.database.sql`select token_hash from api_tokens`;
    expect(stored.map((row) => row.token_hash)).not.toContain(token);

    // Another viewer may not revoke it; an admin may list it.
    const asEditor = await h.request("DELETE", `/api/v1/tokens/${created.body.id}`, {
      token: h.tokens.editor,
    });
    expect(asEditor.status).toBe(404);
    const adminList = await h.request("GET", `/api/v1/tokens?user_id=${h.userIds.viewer}`, {
      token: h.tokens.admin,
    });
    expect(adminList.body).toHaveLength(1);
    const viewerPeek = await h.request("GET", `/api/v1/tokens?user_id=${h.userIds.admin}`, {
      token: h.tokens.viewer,
    });
    expect(viewerPeek.status).toBe(403);

    const revoked = await h.request("DELETE", `/api/v1/tokens/${created.body.id}`, {
      token: h.tokens.viewer,
    });
    expect(revoked.status).toBe(204);
    const refused = await h.request("GET", "/api/v1/auth/me", { token });
    expect(refused.status).toBe(401);
    const after = await h.request("GET", "/api/v1/tokens", { token: h.tokens.viewer });
    expect(after.body[0]).toMatchObject({ active: false });
    expect(after.body[0].revoked_at).not.toBeNull();
  });

  test("an expired API token is 401", async () => {
    const created = await h.request("POST", "/api/v1/tokens", {
      token: h.tokens.editor,
      body: { name: "short" },
    });
    expect((await h.request("GET", "/api/v1/auth/me", { token: created.body.token })).status)
      .toBe(200);
    await h.deps.database.sql`
      update api_tokens set expires_at = now() - interval '1 second' where id = ${created.body.id}`;
    expect((await h.request("GET", "/api/v1/auth/me", { token: created.body.token })).status)
      .toBe(401);
  });

  test("a deactivated user's JWT and tokens stop working at once", async () => {
    const user = await h.request("POST", "/api/v1/users", {
      token: h.tokens.admin,
      body: { username: "temp", password: "password-temp", role: "editor" },
    });
    const login = await h.request("POST", "/api/v1/auth/login", {
      body: { username: "temp", password: "password-temp" },
    });
    const apiToken = await h.request("POST", "/api/v1/tokens", {
      token: login.body.access_token,
      body: { name: "t" },
    });
    await h.request("PATCH", `/api/v1/users/${user.body.id}`, {
      token: h.tokens.admin,
      body: { is_active: false },
    });
    for (const token of [login.body.access_token, apiToken.body.token]) {
      expect((await h.request("GET", "/api/v1/projects", { token })).status).toBe(401);
    }
    const again = await h.request("POST", "/api/v1/auth/login", {
      body: { username: "temp", password: "password-temp" },
    });
    expect(again.status).toBe(401);
  });
});

describe("roles", () => {
  type Call = {
    what: string;
    method: string;
    path: () => string;
    body?: () => unknown;
    text?: string;
    /** The status each role gets. */
    expect: { admin: number; editor: number; viewer: number };
  };
  let counter = 0;
  const unique = () => `r${++counter}`;
  const calls: Call[] = [
    {
      what: "list users",
      method: "GET",
      path: () => "/api/v1/users",
      expect: { admin: 200, editor: 403, viewer: 403 },
    },
    {
      what: "create a user",
      method: "POST",
      path: () => "/api/v1/users",
      body: () => ({ username: unique(), password: "long-enough", role: "viewer" }),
      expect: { admin: 201, editor: 403, viewer: 403 },
    },
    {
      what: "read a user",
      method: "GET",
      path: () => `/api/v1/users/${h.userIds.viewer}`,
      expect: { admin: 200, editor: 403, viewer: 403 },
    },
    {
      what: "list projects",
      method: "GET",
      path: () => "/api/v1/projects",
      expect: { admin: 200, editor: 200, viewer: 200 },
    },
    {
      what: "create a project",
      method: "POST",
      path: () => "/api/v1/projects",
      body: () => ({ name: unique(), username: unique() }),
      expect: { admin: 201, editor: 201, viewer: 403 },
    },
    {
      what: "edit a project",
      method: "PATCH",
      path: () => `/api/v1/projects/${projectId}`,
      body: () => ({ description: unique() }),
      expect: { admin: 200, editor: 200, viewer: 403 },
    },
    {
      what: "list connectors",
      method: "GET",
      path: () => `/api/v1/projects/${projectId}/connectors`,
      expect: { admin: 200, editor: 200, viewer: 200 },
    },
    {
      what: "create a connector",
      method: "POST",
      path: () => `/api/v1/projects/${projectId}/connectors`,
      body: () => ({ name: unique(), kind: "static" }),
      expect: { admin: 201, editor: 201, viewer: 403 },
    },
    {
      what: "edit a connector",
      method: "PATCH",
      path: () => `/api/v1/projects/${projectId}/connectors/${connectorId}`,
      body: () => ({ weight: 1 + (counter++ % 100) }),
      expect: { admin: 200, editor: 200, viewer: 403 },
    },
    {
      what: "list credentials",
      method: "GET",
      path: () => `/api/v1/projects/${projectId}/credentials`,
      expect: { admin: 200, editor: 200, viewer: 200 },
    },
    {
      what: "create a credential",
      method: "POST",
      path: () => `/api/v1/projects/${projectId}/credentials`,
      body: () => ({ name: unique(), provider: "static" }),
      expect: { admin: 201, editor: 201, viewer: 403 },
    },
    {
      what: "list proxies",
      method: "GET",
      path: () => `/api/v1/projects/${projectId}/proxies`,
      expect: { admin: 200, editor: 200, viewer: 200 },
    },
    {
      what: "add a proxy",
      method: "POST",
      path: () => `/api/v1/projects/${projectId}/proxies`,
      body: () => ({ connector_id: connectorId, url: `http://${unique()}.example:8080` }),
      expect: { admin: 201, editor: 201, viewer: 403 },
    },
    {
      what: "upload proxies",
      method: "POST",
      path: () => `/api/v1/projects/${projectId}/proxies/upload?connector_id=${connectorId}`,
      text: "http://upload.example:1\n",
      expect: { admin: 200, editor: 200, viewer: 403 },
    },
  ];

  for (const call of calls) {
    for (const role of ["admin", "editor", "viewer"] as const) {
      test(`${role}: ${call.what} → ${call.expect[role]}`, async () => {
        const answer = await h.request(call.method, call.path(), {
          token: h.tokens[role],
          body: call.body?.(),
          text: call.text,
        });
        expect(answer.status, answer.text).toBe(call.expect[role]);
        if (answer.status === 403) expect(answer.body.error).toMatch(/role/);
      });
    }
  }

  test("deletes: a viewer is refused, an editor may delete projects, connectors, proxies", async () => {
    const project = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name: "Doomed", username: "doomed" },
    });
    const connector = await h.request("POST", `/api/v1/projects/${project.body.id}/connectors`, {
      token: h.tokens.editor,
      body: { name: "c", kind: "static" },
    });
    const proxy = await h.request("POST", `/api/v1/projects/${project.body.id}/proxies`, {
      token: h.tokens.editor,
      body: { connector_id: connector.body.id, url: "socks5://1.2.3.4:1080" },
    });
    const paths = [
      `/api/v1/projects/${project.body.id}/proxies/${proxy.body.id}`,
      `/api/v1/projects/${project.body.id}/connectors/${connector.body.id}`,
      `/api/v1/projects/${project.body.id}`,
    ];
    for (const path of paths) {
      expect((await h.request("DELETE", path, { token: h.tokens.viewer })).status).toBe(403);
      expect((await h.request("DELETE", path, { token: h.tokens.editor })).status).toBe(204);
      expect((await h.request("DELETE", path, { token: h.tokens.editor })).status).toBe(404);
    }
    const user = await h.request("DELETE", `/api/v1/users/${h.userIds.viewer}`, {
      token: h.tokens.editor,
    });
    expect(user.status).toBe(403);
  });

  test("the project password is shown to editors and admins, not viewers", async () => {
    const path = `/api/v1/projects/${projectId}`;
    expect((await h.request("GET", path, { token: h.tokens.admin })).body.password)
      .toBe("roles-password");
    expect((await h.request("GET", path, { token: h.tokens.editor })).body.password)
      .toBe("roles-password");
    const asViewer = await h.request("GET", path, { token: h.tokens.viewer });
    expect(asViewer.status).toBe(200);
    expect(asViewer.body.password).toBeUndefined();
    expect(asViewer.text).not.toContain("roles-password");
  });
});

describe("users", () => {
  test("an admin cannot delete, demote or deactivate itself", async () => {
    const self = `/api/v1/users/${h.userIds.admin}`;
    const remove = await h.request("DELETE", self, { token: h.tokens.admin });
    expect(remove.status).toBe(400);
    expect(remove.body.error).toMatch(/own account/);
    const demote = await h.request("PATCH", self, {
      token: h.tokens.admin,
      body: { role: "viewer" },
    });
    expect(demote.status).toBe(400);
    const deactivate = await h.request("PATCH", self, {
      token: h.tokens.admin,
      body: { is_active: false },
    });
    expect(deactivate.status).toBe(400);
    const me = await h.request("GET", "/api/v1/users/me", { token: h.tokens.admin });
    expect(me.body).toMatchObject({ role: "admin", is_active: true });
  });

  test("users never carry a password hash; create, edit and delete work", async () => {
    const created = await h.request("POST", "/api/v1/users", {
      token: h.tokens.admin,
      body: { username: "Carol", password: "carol-password", role: "viewer", email: "" },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ username: "Carol", role: "viewer", email: null });
    const list = await h.request("GET", "/api/v1/users", { token: h.tokens.admin });
    expect(list.text).not.toMatch(/password/);
    const edited = await h.request("PATCH", `/api/v1/users/${created.body.id}`, {
      token: h.tokens.admin,
      body: { role: "editor", email: "carol@example.com" },
    });
    expect(edited.body).toMatchObject({ role: "editor", email: "carol@example.com" });
    const removed = await h.request("DELETE", `/api/v1/users/${created.body.id}`, {
      token: h.tokens.admin,
    });
    expect(removed.status).toBe(204);
    const gone = await h.request("GET", `/api/v1/users/${created.body.id}`, {
      token: h.tokens.admin,
    });
    expect(gone.status).toBe(404);
  });

  test("a user changes its own password only with the current one", async () => {
    await h.request("POST", "/api/v1/users", {
      token: h.tokens.admin,
      body: { username: "dave", password: "dave-password", role: "viewer" },
    });
    const login = await h.request("POST", "/api/v1/auth/login", {
      body: { username: "dave", password: "dave-password" },
    });
    const token = login.body.access_token;
    const missing = await h.request("PATCH", "/api/v1/users/me", {
      token,
      body: { password: "new-password" },
    });
    expect(missing.status).toBe(422);
    expect(missing.body.detail[0].field).toBe("body.current_password");
    const wrong = await h.request("PATCH", "/api/v1/users/me", {
      token,
      body: { password: "new-password", current_password: "not-it" },
    });
    expect(wrong.status).toBe(422);
    const ok = await h.request("PATCH", "/api/v1/users/me", {
      token,
      body: { password: "new-password", current_password: "dave-password" },
    });
    expect(ok.status).toBe(200);
    const relogin = await h.request("POST", "/api/v1/auth/login", {
      body: { username: "dave", password: "new-password" },
    });
    expect(relogin.status).toBe(200);
    const role = await h.request("PATCH", "/api/v1/users/me", { token, body: { role: "admin" } });
    expect(role.status).toBe(422);
    expect(role.body.detail[0].field).toBe("body.role");
  });
});

describe("first admin seed", () => {
  test("seeds once when there are no users; two seeds at once create one admin", async () => {
    const seeded = await startHarness({
      noUsers: true,
      env: { OCTOPROX_ADMIN_USERNAME: "root" },
    });
    try {
      const results = await Promise.all([seedFirstAdmin(seeded.deps), seedFirstAdmin(seeded.deps)]);
      expect(results.filter((r) => r.created)).toHaveLength(1);
      const winner = results.find((r) => r.created);
      expect(winner?.generatedPassword).toMatch(/^[A-Za-z0-9_-]{24}$/);
      const rows = await seeded.deps.database.db.select().from(users);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ username: "root", role: "admin" });
      const login = await seeded.request("POST", "/api/v1/auth/login", {
        body: { username: "root", password: winner?.generatedPassword },
      });
      expect(login.status).toBe(200);
      // With a user present, a later start seeds nothing.
      expect(await seedFirstAdmin(seeded.deps)).toMatchObject({ created: false });
      expect((await seeded.changes()).filter((c) => c.kind === "user")).toHaveLength(1);
    } finally {
      await seeded.close();
    }
  });

  test("uses the configured password when set", async () => {
    const seeded = await startHarness({
      noUsers: true,
      env: { OCTOPROX_ADMIN_PASSWORD: "configured-pw" },
    });
    try {
      const result = await seedFirstAdmin(seeded.deps);
      expect(result).toEqual({ created: true, username: "admin", generatedPassword: undefined });
      const login = await seeded.request("POST", "/api/v1/auth/login", {
        body: { username: "admin", password: "configured-pw" },
      });
      expect(login.status).toBe(200);
    } finally {
      await seeded.close();
    }
  });
});
