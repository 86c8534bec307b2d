/**
 * The Inspector's routes over real Postgres and Redis: captures written as a gateway writes them
 * (encodeMitmCapture into the project's capped stream) come back newest first with every field
 * in snake_case and the exit's connector name and proxy address, a page at a time by cursor;
 * `count` and `cursor` out of bounds are a 422 naming the field; a viewer reads and may not
 * clear; an editor clears; an unknown project is a 404; without Redis both answer 503 with
 * Retry-After.
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { LocalRedis } from "../../scripts/local-stores.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";
import { sampleCapture, writeCaptures } from "../../testkit/mitm-captures.ts";
import { freePort } from "../../testkit/ports.ts";

let h: ApiHarness;
let projectId: string;
let connectorId: string;
let proxyId: string;
const UNKNOWN = "00000000-0000-4000-8000-000000000000";

const path = (id = projectId) => `/api/v1/projects/${id}/mitm/requests`;
const get = (url: string, token = h.tokens.viewer) => h.request("GET", url, { token });

beforeAll(async () => {
  h = await startHarness();
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Inspected", username: "inspected" },
  });
  projectId = project.body.id;
  const connector = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    token: h.tokens.editor,
    body: { name: "main", kind: "static" },
  });
  connectorId = connector.body.id;
  const proxy = await h.request("POST", `/api/v1/projects/${projectId}/proxies`, {
    token: h.tokens.editor,
    body: { connector_id: connectorId, url: "http://user:secret-pass@203.0.113.7:3128" },
  });
  expect(proxy.status, proxy.text).toBe(201);
  proxyId = proxy.body.id;
});

afterAll(async () => {
  await h?.close();
});

describe("GET /projects/{id}/mitm/requests", () => {
  test("an empty list before any capture", async () => {
    const answer = await get(path());
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ items: [], next_cursor: null });
  });

  test("captures newest first, every field, the exit named, paged by cursor", async () => {
    const base = Date.UTC(2025, 0, 2, 3, 4, 5);
    const ids = await writeCaptures(
      h.deps.redis,
      h.deps.keys,
      projectId,
      Array.from({ length: 7 }, (_, i) =>
        sampleCapture({
          atMs: base + i * 1000,
          path: `/item/${i}`,
          status: i === 6 ? 502 : 200,
          proxyStatus: i === 6 ? "destination_unavailable" : "",
          firstByteMs: i === 6 ? null : 10 + i,
          connectorId,
          proxyId,
        })),
    );
    const first = await get(`${path()}?count=3`);
    expect(first.status).toBe(200);
    expect(first.body.items.map((item: { path: string }) => item.path)).toEqual([
      "/item/6",
      "/item/5",
      "/item/4",
    ]);
    expect(first.body.next_cursor).toBe(ids[4]);
    expect(first.body.items[0]).toEqual({
      id: ids[6],
      at: new Date(base + 6000).toISOString(),
      method: "GET",
      host: "shop.example:443",
      path: "/item/6",
      status: 502,
      proxy_status: "destination_unavailable",
      first_byte_ms: null,
      total_ms: 57,
      connector_id: connectorId,
      connector_name: "main",
      proxy_id: proxyId,
      proxy_address: "203.0.113.7:3128",
      bytes_up: 312,
      bytes_down: 5120,
      request_headers: [
        ["Host", "shop.example"],
        ["User-Agent", "curl/8.5.0"],
        ["Authorization", "[scrubbed]"],
        ["X-Octoprox-Session", "42"],
      ],
      sent_headers: [["Host", "shop.example"], ["User-Agent", "curl/8.5.0"]],
      response_headers: [["Content-Type", "text/html"], ["Set-Cookie", "[scrubbed]"]],
      ja3: "cd08e31494f9531f560d64c695473da9",
      ja4: "t13d1516h2_8daaf6152771_e5627efa2ab1",
      sni: "shop.example",
      http2: "",
      mode: "plain",
    });
    // The proxy's login is nowhere in the answer.
    expect(first.text).not.toContain("secret-pass");
    expect(first.text).not.toContain("user:");

    const seen: string[] = first.body.items.map((item: { id: string }) => item.id);
    let cursor: string | null = first.body.next_cursor;
    while (cursor) {
      const page = await get(`${path()}?count=3&cursor=${cursor}`);
      expect(page.status).toBe(200);
      seen.push(...page.body.items.map((item: { id: string }) => item.id));
      cursor = page.body.next_cursor;
    }
    expect(seen).toEqual([...ids].reverse());
    // The default page is 50: all seven.
    expect((await get(path())).body.items).toHaveLength(7);
  });

  test("an exit that is gone, or none, reads null; an unreadable entry is passed over", async () => {
    await h.deps.redis.del(h.deps.keys.mitmRequests(projectId));
    const [refused] = await writeCaptures(h.deps.redis, h.deps.keys, projectId, [
      sampleCapture({ status: 429, proxyStatus: "rate_limited", path: "/refused" }),
    ]);
    await h.deps.redis.xadd(h.deps.keys.mitmRequests(projectId), "*", "junk", "1");
    const [gone] = await writeCaptures(h.deps.redis, h.deps.keys, projectId, [
      sampleCapture({ connectorId: UNKNOWN, proxyId: "not-a-uuid", path: "/gone" }),
    ]);
    const answer = await get(`${path()}?count=2`);
    expect(answer.status).toBe(200);
    // Two entries read, one of them unreadable: the page holds one and goes on past both.
    expect(answer.body.items.map((item: { id: string }) => item.id)).toEqual([gone]);
    expect(answer.body.items[0]).toMatchObject({
      connector_id: UNKNOWN,
      connector_name: null,
      proxy_id: "not-a-uuid",
      proxy_address: null,
    });
    const next = await get(`${path()}?count=2&cursor=${answer.body.next_cursor}`);
    expect(next.body).toMatchObject({ next_cursor: null });
    expect(next.body.items.map((item: { id: string }) => item.id)).toEqual([refused]);
    expect(next.body.items[0]).toMatchObject({
      status: 429,
      proxy_status: "rate_limited",
      connector_name: null,
      proxy_address: null,
    });
  });

  test("count and cursor out of bounds are a 422 naming the field", async () => {
    for (const count of ["0", "1001", "abc", "-1", "2.5"]) {
      const answer = await get(`${path()}?count=${count}`);
      expect(answer.status, count).toBe(422);
      expect(answer.body.detail.map((d: { field: string }) => d.field)).toEqual(["query.count"]);
      expect(answer.body.detail[0].message).toBe("must be a whole number from 1 to 1000");
    }
    expect((await get(`${path()}?count=1000`)).status).toBe(200);
    for (
      const cursor of ["zz", "1-", "1-2-3", "+", `(1-0`, "9".repeat(21) + "-0", `${2n ** 64n}-0`]
    ) {
      const answer = await get(`${path()}?cursor=${encodeURIComponent(cursor)}`);
      expect(answer.status, cursor).toBe(422);
      expect(answer.body.detail.map((d: { field: string }) => d.field)).toEqual(["query.cursor"]);
    }
    // The largest id there can be, and the smallest (before which there is nothing).
    const last = await get(`${path()}?cursor=${2n ** 64n - 1n}-${2n ** 64n - 1n}`);
    expect(last.status).toBe(200);
    expect(last.body.items.length).toBeGreaterThan(0);
    expect((await get(`${path()}?cursor=0-0`)).body).toEqual({ items: [], next_cursor: null });
  });

  test("an unknown project is a 404, read or cleared", async () => {
    const read = await get(path(UNKNOWN));
    expect(read.status).toBe(404);
    expect(read.body.error).toBe("Project not found");
    const cleared = await h.request("DELETE", path(UNKNOWN), { token: h.tokens.editor });
    expect(cleared.status).toBe(404);
  });
});

describe("DELETE /projects/{id}/mitm/requests", () => {
  test("a viewer may not clear; an editor clears, and it is logged", async () => {
    await writeCaptures(h.deps.redis, h.deps.keys, projectId, [sampleCapture()]);
    const refused = await h.request("DELETE", path(), { token: h.tokens.viewer });
    expect(refused.status).toBe(403);
    expect((await get(path())).body.items.length).toBeGreaterThan(0);
    const cleared = await h.request("DELETE", path(), { token: h.tokens.editor });
    expect(cleared.status).toBe(204);
    expect((await get(path())).body).toEqual({ items: [], next_cursor: null });
    expect(await h.deps.redis.exists(h.deps.keys.mitmRequests(projectId))).toBe(0);
    expect(h.lines.find((l) => l.msg === "Interception captures cleared")).toMatchObject({
      project: projectId,
      user: "editor",
    });
    // Clearing an empty list is done as well.
    expect((await h.request("DELETE", path(), { token: h.tokens.admin })).status).toBe(204);
  });

  test("a project's deletion removes its captures", async () => {
    const project = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name: "Doomed", username: "doomed" },
    });
    await writeCaptures(h.deps.redis, h.deps.keys, project.body.id, [sampleCapture()]);
    const deleted = await h.request("DELETE", `/api/v1/projects/${project.body.id}`, {
      token: h.tokens.editor,
    });
    expect(deleted.status).toBe(204);
    expect(await h.deps.redis.exists(h.deps.keys.mitmRequests(project.body.id))).toBe(0);
  });
});

test("the OpenAPI document has both routes, with their roles and query", async () => {
  const doc = (await get("/api/v1/openapi.json")).body;
  const item = doc.paths["/api/v1/projects/{id}/mitm/requests"];
  expect(item.get.description).toContain("Role: viewer or higher.");
  expect(item.delete.description).toContain("Role: editor or higher.");
  expect(item.get.parameters.map((p: { name: string }) => p.name)).toEqual([
    "id",
    "count",
    "cursor",
  ]);
  expect(Object.keys(item.get.responses)).toEqual(
    expect.arrayContaining(["200", "404", "422", "503"]),
  );
  expect(Object.keys(item.delete.responses)).toEqual(expect.arrayContaining(["204", "403"]));
});

describe("without Redis", () => {
  let folder: string;
  let redis: LocalRedis;
  let own: ApiHarness;

  beforeAll(async () => {
    folder = await mkdtemp(join(tmpdir(), "ox-mitm-redis-"));
    await chmod(folder, 0o755);
    redis = new LocalRedis({ dir: join(folder, "redis"), port: await freePort() });
    await redis.start();
    own = await startHarness({ redisUrl: redis.url });
  });

  afterAll(async () => {
    await own?.close();
    await redis?.stop();
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  test("reading and clearing answer 503 with Retry-After", async () => {
    const project = await own.request("POST", "/api/v1/projects", {
      token: own.tokens.editor,
      body: { name: "Away", username: "away" },
    });
    const url = `/api/v1/projects/${project.body.id}/mitm/requests`;
    await redis.stop();
    for (const method of ["GET", "DELETE"]) {
      const answer = await own.request(method, url, { token: own.tokens.editor });
      expect(answer.status, method).toBe(503);
      expect(answer.headers.get("retry-after")).toBe("5");
      expect(answer.body.error).toBe("Service temporarily unavailable: Redis did not answer");
    }
  });
});
