/**
 * Stores that stop answering. Each outage uses a private server started for this file, so
 * stopping it disturbs no other test:
 * - Redis away: a write still commits and answers within the request deadline; its change
 *   entry is kept and arrives, once, when Redis is back. Proxies read without their
 *   quarantines (soft state), so does the routing preview, and a quarantine lift answers 503
 *   and lifts nothing.
 * - Postgres away: routes answer 503 with Retry-After and no driver text, one warn line each,
 *   the process keeps answering, and the routes recover when Postgres returns.
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { LocalPostgres, LocalRedis } from "../../scripts/local-stores.ts";
import { freePort } from "../../testkit/ports.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let folder: string;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "octoprox-outages-"));
  // Postgres runs as its own user when we are root: it must be able to reach its folder.
  await chmod(folder, 0o755);
});

afterAll(async () => {
  await rm(folder, { recursive: true, force: true });
});

describe("Redis refuses the change entry", () => {
  let redis: LocalRedis;
  let h: ApiHarness;

  beforeAll(async () => {
    // It keeps its data across a restart, as a partitioned Redis would.
    redis = new LocalRedis({
      dir: join(folder, "redis"),
      port: await freePort(),
      persist: true,
    });
    await redis.start();
    h = await startHarness({ redisUrl: redis.url });
  });

  afterAll(async () => {
    await h?.close();
    await redis?.stop();
  });

  test("the write stands and its entry arrives once Redis is back", async () => {
    await redis.stop();
    const startedMs = performance.now();
    const created = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name: "Through the outage", username: "outage" },
    });
    const elapsedMs = performance.now() - startedMs;
    expect(created.status).toBe(201);
    // The change log waits at most one deadline; the write never waits on Redis beyond it.
    expect(elapsedMs).toBeLessThan(h.settings.redisRequestTimeoutMs + 1500);
    expect(h.deps.changes.pending).toBeGreaterThan(0);

    const edited = await h.request("PATCH", `/api/v1/projects/${created.body.id}`, {
      token: h.tokens.editor,
      body: { description: "edited while Redis is away" },
    });
    expect(edited.status).toBe(200);
    const read = await h.request("GET", `/api/v1/projects/${created.body.id}`, {
      token: h.tokens.viewer,
    });
    expect(read.body.description).toBe("edited while Redis is away");

    await redis.start();
    const entries = await waitUntil(async () => {
      const all = await h.changes();
      return all.some((e) => e.ref === created.body.id) && h.deps.changes.pending === 0
        ? all
        : undefined;
    }, { timeoutMs: 15_000, message: "the kept change entry" });
    // Kept entries naming the same thing are one entry: it says what to read again.
    expect(entries.filter((e) => e.ref === created.body.id)).toEqual([
      { kind: "project", ref: created.body.id },
    ]);
    expect(h.lines.some((line) => line.msg.startsWith("Change entry not taken by Redis"))).toBe(
      true,
    );
  });

  test("proxies read without their quarantines; a lift answers 503 and changes nothing", async () => {
    const project = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name: "Resting", username: "resting" },
    });
    const connector = await h.request("POST", `/api/v1/projects/${project.body.id}/connectors`, {
      token: h.tokens.editor,
      body: { name: "static", kind: "static" },
    });
    const proxies = `/api/v1/projects/${project.body.id}/proxies`;
    const proxy = await h.request("POST", proxies, {
      token: h.tokens.editor,
      body: { connector_id: connector.body.id, url: "http://resting.example:3128" },
    });
    const untilMs = Date.now() + 600_000;
    await h.deps.redis.zadd(h.deps.keys.proxyQuarantined, untilMs, proxy.body.id);
    const item = `${proxies}/${proxy.body.id}`;
    expect((await h.request("GET", item, { token: h.tokens.viewer })).body.quarantined).toBe(true);

    await redis.stop();
    const read = await h.request("GET", item, { token: h.tokens.viewer });
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ quarantined: false, quarantine_remaining_seconds: 0 });
    const listed = await h.request("GET", proxies, { token: h.tokens.viewer });
    expect(listed.status).toBe(200);
    expect(listed.body.items).toHaveLength(1);
    // The routing preview answers from Postgres alone, saying it saw no runtime state.
    const preview = await h.request("POST", `/api/v1/projects/${project.body.id}/routing-preview`, {
      token: h.tokens.viewer,
      body: { username: "resting" },
    });
    expect(preview.status).toBe(200);
    expect(preview.body).toMatchObject({ runtime_included: false, chosen: null });
    expect(preview.body.refusal).toMatchObject({ status: 503 });
    expect(h.lines.some((line) => line.msg === "Runtime state unavailable, shown without it"))
      .toBe(true);

    const lift = await h.request("POST", `${item}/unquarantine`, { token: h.tokens.editor });
    expect(lift.status).toBe(503);
    expect(lift.headers.get("retry-after")).toBe("5");
    expect(lift.body).toEqual({ error: "Service temporarily unavailable: Redis did not answer" });

    // Nothing was lifted: the quarantine shows again once Redis is back.
    await redis.start();
    await waitUntil(
      async () => (await h.request("GET", item, { token: h.tokens.viewer })).body.quarantined,
      { timeoutMs: 15_000, message: "the quarantine to show again" },
    );
    expect(Number(await h.deps.redis.zscore(h.deps.keys.proxyQuarantined, proxy.body.id)))
      .toBe(untilMs);
  });
});

describe("Postgres does not answer", () => {
  let postgres: LocalPostgres;
  let h: ApiHarness;

  beforeAll(async () => {
    postgres = new LocalPostgres({ dir: join(folder, "postgres"), port: await freePort() });
    await postgres.start();
    await postgres.createDatabase("octoprox_outage");
    h = await startHarness({ databaseUrl: postgres.url("octoprox_outage") });
  }, 120_000);

  afterAll(async () => {
    await h?.close();
    await postgres?.stop();
  });

  test("routes answer 503 with Retry-After, the process stays up, and recovers", async () => {
    const list = () => h.request("GET", "/api/v1/projects", { token: h.tokens.viewer });
    expect((await list()).status).toBe(200);

    await postgres.stop();

    const calls = [
      () => list(),
      () =>
        h.request("POST", "/api/v1/projects", {
          token: h.tokens.editor,
          body: { name: "During", username: "during" },
        }),
      () =>
        h.request("POST", "/api/v1/auth/login", {
          body: { username: "admin", password: "password-admin" },
        }),
    ];
    for (const [index, call] of calls.entries()) {
      const answer = await call();
      expect(answer.status, answer.text).toBe(503);
      expect(answer.headers.get("retry-after")).toBe("5");
      expect(answer.body).toEqual({
        error: "Service temporarily unavailable: Postgres did not answer",
      });
      const requestId = answer.headers.get("x-request-id");
      const lines = h.lines.filter((line) => line.request_id === requestId);
      const warnings = lines.filter((line) => line.level === "warn");
      expect(warnings, `call ${index}`).toHaveLength(1);
      expect(lines.filter((line) => line.level === "error")).toEqual([]);
      const logged = JSON.stringify(lines);
      expect(logged).not.toMatch(/select |insert into|params|stack|password-admin/i);
    }

    // The process keeps answering what needs no Postgres.
    expect((await h.request("GET", "/live")).status).toBe(200);
    expect((await h.request("GET", "/echo")).status).toBe(200);
    expect((await h.request("GET", "/api/v1/openapi.json")).status).toBe(200);

    await postgres.start();
    await waitUntil(async () => (await list()).status === 200, {
      timeoutMs: 30_000,
      message: "the API to answer again once Postgres is back",
    });
    const created = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name: "After", username: "after" },
    });
    expect(created.status).toBe(201);
  }, 120_000);
});
