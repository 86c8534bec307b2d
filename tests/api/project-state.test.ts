/**
 * What a removed project leaves in Redis goes with it, over real Postgres and Redis: deleted
 * through the api, pruned by an apply, or left out of a backup that is imported. Its own keys
 * and key families, its and its connectors' traffic marks and blocks, its proxies' soft state
 * and quarantines go; another project's stay.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.close();
});

interface Seeded {
  projectId: string;
  connectorId: string;
  proxyId: string;
  /** Every key a test expects gone (or kept) with the project. */
  keys: string[];
}

/** A project with a connector and a proxy, and the Redis state its traffic would leave. */
async function seeded(name: string): Promise<Seeded> {
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name, username: name.toLowerCase() },
  });
  expect(project.status, project.text).toBe(201);
  const projectId: string = project.body.id;
  const connector = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    token: h.tokens.editor,
    body: { name: "main", kind: "static" },
  });
  const connectorId: string = connector.body.id;
  const proxy = await h.request("POST", `/api/v1/projects/${projectId}/proxies`, {
    token: h.tokens.editor,
    body: { connector_id: connectorId, url: `http://${name.toLowerCase()}.example:3128` },
  });
  const proxyId: string = proxy.body.id;
  const { redis, keys } = h.deps;
  const owned = [
    keys.projectRate(projectId),
    keys.sticky(projectId, "session-1"),
    keys.preflightVerdict(projectId, proxyId),
    keys.demand(projectId, 29_000_000),
    keys.extractIdempotency(projectId, "digest"),
    keys.failures(projectId, "connect_timeout"),
    keys.mitmRequests(projectId),
    keys.proxyHealth(proxyId),
    keys.proxyRequests(proxyId),
    keys.proxyLastExit(proxyId),
  ];
  for (const key of owned) await redis.set(key, "x");
  await redis.hset(keys.trafficPending, `project:${projectId}`, "mark", connectorId, "mark");
  await redis.hset(keys.trafficBlocked, connectorId, '{"until_ms":1}');
  await redis.zadd(keys.proxyQuarantined, Date.now() + 60_000, proxyId);
  return { projectId, connectorId, proxyId, keys: owned };
}

/** Which of the seeded state is still in Redis. */
async function left(s: Seeded) {
  const { redis, keys } = h.deps;
  return {
    keys: await redis.exists(...s.keys),
    pending: await redis.hmget(keys.trafficPending, `project:${s.projectId}`, s.connectorId),
    blocked: await redis.hget(keys.trafficBlocked, s.connectorId),
    quarantine: await redis.zscore(keys.proxyQuarantined, s.proxyId),
  };
}

const GONE = { keys: 0, pending: [null, null], blocked: null, quarantine: null };

describe("a removed project's Redis state", () => {
  test("goes when the project is deleted through the api; another project's stays", async () => {
    const doomed = await seeded("Doomed");
    const kept = await seeded("Kept");
    const deleted = await h.request("DELETE", `/api/v1/projects/${doomed.projectId}`, {
      token: h.tokens.editor,
    });
    expect(deleted.status, deleted.text).toBe(204);
    expect(await left(doomed)).toEqual(GONE);
    expect((await left(kept)).keys).toBe(kept.keys.length);
    expect((await left(kept)).quarantine).not.toBeNull();
  });

  test("goes when an apply with prune removes the project", async () => {
    const pruned = await seeded("Pruned");
    const exported = await h.request("GET", "/api/v1/config", { token: h.tokens.editor });
    expect(exported.status, exported.text).toBe(200);
    const document = exported.body.config;
    document.projects = document.projects.filter((p: { name: string }) => p.name !== "Pruned");
    const applied = await h.request("POST", "/api/v1/config/apply", {
      token: h.tokens.editor,
      body: { config: document, prune: true },
    });
    expect(applied.status, applied.text).toBe(200);
    expect(await left(pruned)).toEqual(GONE);
  });

  test("goes when an imported backup does not hold the project", async () => {
    const passphrase = "correct horse battery staple";
    const backup = await h.request("POST", "/api/v1/backup/export", {
      token: h.tokens.admin,
      body: { passphrase, include_history: false },
    });
    expect(backup.status).toBe(200);
    const later = await seeded("Later");
    const imported = await h.request("POST", "/api/v1/backup/import", {
      token: h.tokens.admin,
      body: { passphrase, backup: backup.body },
    });
    expect(imported.status, imported.text).toBe(200);
    expect(await left(later)).toEqual(GONE);
  });
});
