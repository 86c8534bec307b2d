/**
 * Invitations through the api: an admin invites a user (no password anyone knows) and gets a
 * one-time link; the link sets the password once, and a second use, a replaced link or one past
 * its end is refused on `body.token`, changing nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";
import { INVITE_UNKNOWN } from "../../control/services/invites.ts";

let h: ApiHarness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.close();
});

const tokenOf = (url: string) => new URL(url).searchParams.get("token")!;
const setPassword = (token: string, password: string) =>
  h.request("POST", "/api/v1/auth/set-password", { body: { token, password } });
const login = (username: string, password: string) =>
  h.request("POST", "/api/v1/auth/login", { body: { username, password } });

describe("an invitation", () => {
  it("sets the password once; a second use is refused and changes nothing", async () => {
    const invited = await h.request("POST", "/api/v1/users/invite", {
      token: h.tokens.admin,
      body: { username: "newcomer", role: "editor", email: "new@example.com" },
    });
    expect(invited.status, invited.text).toBe(201);
    expect(invited.body.user).toMatchObject({ username: "newcomer", role: "editor" });
    expect(invited.body.invite_url).toMatch(/\/set-password\?token=[A-Za-z0-9_-]{43}$/);
    const ends = Date.parse(invited.body.expires_at) - Date.now();
    expect(ends).toBeGreaterThan(6.9 * 86_400_000);
    expect(ends).toBeLessThanOrEqual(7 * 86_400_000);
    const token = tokenOf(invited.body.invite_url);
    // Only its digest is stored.
    const stored = await h.deps.database.sql`select token_hash from user_invites`;
    expect(JSON.stringify(stored)).not.toContain(token);

    const short = await setPassword(token, "short");
    expect(short.status).toBe(422);
    expect(short.body.detail[0].field).toBe("body.password");
    expect((await setPassword(token, "first-password")).status).toBe(204);
    expect((await login("newcomer", "first-password")).status).toBe(200);
    // The audit log names the link's user as the writer of its password.
    const audit = await h.request("GET", "/api/v1/audit?entity=user&action=update&limit=1", {
      token: h.tokens.admin,
    });
    expect(audit.body.items[0]).toMatchObject({
      actor: { kind: "user", name: "newcomer", user: "newcomer" },
      request: "POST /api/v1/auth/set-password",
      entity_name: "newcomer",
      before: { password_hash: "********" },
      after: { password_hash: "********" },
    });

    const again = await setPassword(token, "second-password");
    expect(again.status).toBe(422);
    expect(again.body.detail).toEqual([{ field: "body.token", message: INVITE_UNKNOWN }]);
    expect((await login("newcomer", "second-password")).status).toBe(401);
    expect((await login("newcomer", "first-password")).status).toBe(200);
  });

  it("is replaced by a reinvite, and refused past its end", async () => {
    const invited = await h.request("POST", "/api/v1/users/invite", {
      token: h.tokens.admin,
      body: { username: "latecomer", role: "viewer" },
    });
    const first = tokenOf(invited.body.invite_url);
    const again = await h.request("POST", `/api/v1/users/${invited.body.user.id}/reinvite`, {
      token: h.tokens.admin,
    });
    expect(again.status).toBe(200);
    const second = tokenOf(again.body.invite_url);
    expect(second).not.toBe(first);
    expect((await setPassword(first, "late-password")).body.detail[0].message).toBe(
      INVITE_UNKNOWN,
    );
    await h.deps.database.sql`update user_invites set expires_at = now() - interval '1 minute'`;
    const expired = await setPassword(second, "late-password");
    expect(expired.status).toBe(422);
    expect(expired.body.detail[0]).toMatchObject({ field: "body.token" });
    expect(expired.body.detail[0].message).toMatch(/^expired at \S+: ask an admin/);
    expect((await login("latecomer", "late-password")).status).toBe(401);
  });

  it("is an admin's to make", async () => {
    const editor = await h.request("POST", "/api/v1/users/invite", {
      token: h.tokens.editor,
      body: { username: "sneaky", role: "admin" },
    });
    expect(editor.status).toBe(403);
    const taken = await h.request("POST", "/api/v1/users/invite", {
      token: h.tokens.admin,
      body: { username: "Editor", role: "viewer" },
    });
    expect(taken.status).toBe(400);
    expect((await setPassword("not-a-token", "whatever-password")).status).toBe(422);
  });
});
