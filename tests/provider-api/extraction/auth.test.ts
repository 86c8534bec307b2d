/**
 * Who may extract, through the real app over real stores: distribution keys made, listed and
 * revoked by role (viewers read, editors and admins write; the key shown once, stored as a
 * digest), a key that opens no admin route and no other project's extraction, admin tokens
 * refused by the extraction routes, and a revoked, deleted or expired key refused within the
 * documented bound.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REVOCATION_BOUND_SECONDS } from "../../../control/provider-api/extraction/keys.ts";
import { hashDistributionKey } from "../../../control/provider-api/extraction/distribution-keys.ts";
import { waitUntil } from "../../../testkit/wait.ts";
import {
  createConnector,
  createKey,
  createProject,
  type ExtractionBed,
  fill,
  startBed,
} from "../../../testkit/extraction.ts";

let bed: ExtractionBed;
let projectId: string;
let otherProjectId: string;

beforeAll(async () => {
  bed = await startBed();
  projectId = await createProject(bed.h, "keys");
  otherProjectId = await createProject(bed.h, "others");
  const connectorId = await createConnector(bed.h, projectId, { name: "pool", reserve: 0 });
  await fill(bed.store, { id: connectorId, projectId }, 50, 0);
});

afterAll(async () => {
  await bed?.close();
});

const keysPath = (id: string) => `/api/v1/projects/${id}/distribution-keys`;
const extractPath = (id: string) => `/api/v1/projects/${id}/extract`;

describe("distribution keys", () => {
  it("editors create them (shown once, kept as a digest), viewers list them, not create", async () => {
    const created = await bed.h.request("POST", keysPath(projectId), {
      token: bed.h.tokens.editor,
      body: {
        name: "scraper",
        allowed_cidrs: ["203.0.113.0/24", "203.0.113.0/24", "2001:db8::/32"],
        expires_at: "2999-01-01T00:00:00Z",
      },
    });
    expect(created.status, created.text).toBe(201);
    const key = created.body.key as string;
    expect(key).toMatch(/^oxd_[0-9A-Za-z]{43}$/);
    expect(created.body).toMatchObject({
      project_id: projectId,
      name: "scraper",
      prefix: key.slice(0, 12),
      allowed_cidrs: ["203.0.113.0/24", "2001:db8::/32"],
      expires_at: "2999-01-01T00:00:00.000Z",
      last_used_at: null,
      revoked_at: null,
      active: true,
    });
    const [row] = await bed.h.deps.database.sql`
      select key_hash, key_prefix from distribution_keys where id = ${created.body.id}`;
    expect(row).toEqual({ key_hash: hashDistributionKey(key), key_prefix: key.slice(0, 12) });

    const list = await bed.h.request("GET", keysPath(projectId), { token: bed.h.tokens.viewer });
    expect(list.status).toBe(200);
    expect(list.text).not.toContain(key);
    expect(list.body.map((k: { name: string }) => k.name)).toContain("scraper");

    const refused = await bed.h.request("POST", keysPath(projectId), {
      token: bed.h.tokens.viewer,
      body: { name: "nope" },
    });
    expect(refused.status).toBe(403);
    const revoke = await bed.h.request("DELETE", `${keysPath(projectId)}/${created.body.id}`, {
      token: bed.h.tokens.viewer,
    });
    expect(revoke.status).toBe(403);
  });

  it("refuses a taken name, bad blocks, a past expiry and unknown projects", async () => {
    await createKey(bed.h, projectId, { name: "twice" });
    const twice = await bed.h.request("POST", keysPath(projectId), {
      token: bed.h.tokens.admin,
      body: { name: "TWICE" },
    });
    expect(twice.status).toBe(400);
    expect(twice.body.detail).toEqual([{
      field: "body.name",
      message: "A distribution key with this name already exists in this project",
    }]);
    const bad = await bed.h.request("POST", keysPath(projectId), {
      token: bed.h.tokens.admin,
      body: { name: "bad", allowed_cidrs: ["300.1.1.1/8"], expires_at: "2001-01-01T00:00:00Z" },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.detail.map((d: { field: string }) => d.field).sort()).toEqual([
      "body.allowed_cidrs.0",
      "body.expires_at",
    ]);
    const nowhere = crypto.randomUUID();
    expect(
      (await bed.h.request("GET", keysPath(nowhere), { token: bed.h.tokens.viewer })).status,
    ).toBe(404);
    expect(
      (await bed.h.request("POST", keysPath(nowhere), {
        token: bed.h.tokens.editor,
        body: { name: "x" },
      })).status,
    ).toBe(404);
  });
});

describe("extraction's authentication", () => {
  it("is described in the OpenAPI document as a distribution key's", async () => {
    const doc = (await bed.h.request("GET", "/api/v1/openapi.json")).body;
    const extract = doc.paths["/api/v1/projects/{id}/extract"].post;
    expect(extract.security).toEqual([{ distribution_bearer: [] }, { distribution_api_key: [] }]);
    expect(extract.responses["401"].description).toMatch(/distribution key/);
    expect(doc.paths["/api/v1/projects/{id}/extract/{lease}/renew"].post).toBeDefined();
    expect(doc.paths["/api/v1/projects/{id}/extract/{lease}/release"].post).toBeDefined();
    expect(doc.paths["/api/v1/projects/{id}/distribution-keys"].post.security).toEqual([
      { bearer: [] },
    ]);
    expect(doc.components.securitySchemes.distribution_api_key).toMatchObject({
      type: "apiKey",
      in: "header",
      name: "X-API-Key",
    });
  });

  it("takes a key as a bearer or as X-API-Key, and writes its last use", async () => {
    const { key, id } = await createKey(bed.h, projectId);
    const asBearer = await bed.call("POST", extractPath(projectId), {
      bearer: key,
      body: { count: 1 },
    });
    expect(asBearer.status, asBearer.text).toBe(200);
    const asHeader = await bed.call("POST", extractPath(projectId), { key, body: { count: 1 } });
    expect(asHeader.status, asHeader.text).toBe(200);
    const both = await bed.call("POST", extractPath(projectId), {
      key,
      bearer: `${key}x`,
      body: { count: 1 },
    });
    expect(both.status).toBe(401);
    await waitUntil(async () => {
      const [row] = await bed.h.deps.database.sql`
        select last_used_at from distribution_keys where id = ${id}`;
      return row.last_used_at !== null;
    }, { message: "the key's last use written" });
  });

  it("refuses admin tokens and anything but a key, before reading the body", async () => {
    const apiToken = await bed.h.request("POST", "/api/v1/tokens", {
      token: bed.h.tokens.admin,
      body: { name: "scripts" },
    });
    const refused: Record<string, string>[] = [
      {},
      { authorization: `Bearer ${bed.h.tokens.admin}` },
      { authorization: `Bearer ${apiToken.body.token}` },
      { "x-api-key": apiToken.body.token },
      { authorization: "Basic YWRtaW46cGFzc3dvcmQ=" },
      { "x-api-key": "oxd_not-a-key" },
    ];
    for (const headers of refused) {
      const answer = await bed.call("POST", extractPath(projectId), {
        headers,
        body: { count: "not even valid" },
      });
      expect(answer.status, JSON.stringify(headers)).toBe(401);
      expect(answer.headers.get("www-authenticate")).toBe("Bearer");
    }
  });

  it("a key opens no admin route, and not another project's extraction", async () => {
    const { key } = await createKey(bed.h, projectId);
    for (
      const [method, path] of [
        ["GET", "/api/v1/projects"],
        ["GET", `/api/v1/projects/${projectId}`],
        ["GET", keysPath(projectId)],
        ["POST", keysPath(projectId)],
        ["GET", "/api/v1/auth/me"],
      ]
    ) {
      const body = method === "GET" ? undefined : { name: "mine" };
      const asBearer = await bed.call(method, path, { bearer: key, body });
      expect(asBearer.status, `${method} ${path}`).toBe(401);
      expect(asBearer.body.error).toBe("A distribution key calls a project's extraction API only");
      const asHeader = await bed.call(method, path, { key, body });
      expect(asHeader.status, `${method} ${path}`).toBe(401);
    }
    const other = await bed.call("POST", extractPath(otherProjectId), {
      key,
      body: { count: 1 },
    });
    expect(other.status).toBe(403);
    expect(other.body.error).toBe("This distribution key is another project's");
    // A project that does not exist answers the same: nothing is told of other projects.
    const nowhere = await bed.call("POST", extractPath(crypto.randomUUID()), {
      key,
      body: { count: 1 },
    });
    expect(nowhere.status).toBe(403);
  });

  it(`a revoked, deleted or expired key is refused within ${REVOCATION_BOUND_SECONDS} s`, async () => {
    const revoked = await createKey(bed.h, projectId);
    const deleted = await createKey(bed.h, projectId);
    const expired = await createKey(bed.h, projectId, {
      expires_at: new Date(Date.now() + 3_600_000).toISOString(),
    });
    const extract = (key: string) =>
      bed.call("POST", extractPath(projectId), { key, body: { count: 1 } });
    for (const { key } of [revoked, deleted, expired]) {
      expect((await extract(key)).status).toBe(200);
    }

    const startedMs = Date.now();
    expect(
      (await bed.h.request("DELETE", `${keysPath(projectId)}/${revoked.id}`, {
        token: bed.h.tokens.editor,
      })).status,
    ).toBe(204);
    expect(
      (await bed.h.request("DELETE", `${keysPath(projectId)}/${deleted.id}?purge=true`, {
        token: bed.h.tokens.admin,
      })).status,
    ).toBe(204);
    await bed.h.deps.database.sql`
      update distribution_keys set expires_at = now() - interval '1 second'
      where id = ${expired.id}`;
    const refusedAt: Record<string, number> = {};
    await waitUntil(async () => {
      for (const [name, { key }] of Object.entries({ revoked, deleted, expired })) {
        if (refusedAt[name] !== undefined) continue;
        const answer = await extract(key);
        if (answer.status === 401) refusedAt[name] = Date.now() - startedMs;
        else expect(answer.status).toBe(200);
      }
      return Object.keys(refusedAt).length === 3;
    }, { timeoutMs: REVOCATION_BOUND_SECONDS * 1000 + 1000, intervalMs: 100, message: "refusals" });
    for (const ms of Object.values(refusedAt)) {
      expect(ms).toBeLessThanOrEqual(REVOCATION_BOUND_SECONDS * 1000);
    }
    const list = await bed.h.request("GET", keysPath(projectId), { token: bed.h.tokens.viewer });
    const byId = new Map(list.body.map((k: { id: string }) => [k.id, k]));
    expect(byId.get(revoked.id)).toMatchObject({ active: false });
    expect(byId.has(deleted.id)).toBe(false);
    expect(byId.get(expired.id)).toMatchObject({ active: false, revoked_at: null });
  });
});
