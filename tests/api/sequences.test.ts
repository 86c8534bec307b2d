/**
 * Sequential routing over real stores: the sequence routes (validation naming the field, roles,
 * 404s, change entries), depletion moving a sequence on once under 20 concurrent callers by the
 * compare-and-set in Postgres, `stop`, `loop` and `stay_last` at the end of the list, deleting a
 * connector a sequence names, the feed's project entry, and the routing preview answering as the
 * router does.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { compile } from "../../control/feed/compile.ts";
import {
  clearDepleted,
  type DepletionOutcome,
  markDepleted,
  type SequenceDeps,
} from "../../control/services/sequences.ts";
import { createDatabase, type Database } from "../../db/client.ts";
import { deriveFeedKeys } from "../../shared/feed/codec.ts";
import type { GlobalSection } from "../../shared/feed/models.ts";
import { ProviderRegistry } from "../../shared/vendors/registry.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
/** A pool of its own, wide enough for 20 transactions at once. */
let wide: Database;
let racers: SequenceDeps;

beforeAll(async () => {
  h = await startHarness();
  wide = createDatabase(h.settings.databaseUrl, { poolSize: 24 });
  racers = { database: wide, changes: h.deps.changes };
});

afterAll(async () => {
  await wide?.close();
  await h?.close();
});

let serial = 0;

/** A project with `count` static connectors, named a, b, c…; answers their ids in order. */
async function projectWith(count: number): Promise<{ projectId: string; ids: string[] }> {
  serial++;
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: `Seq ${serial}`, username: `seq${serial}`, strategy: "round_robin" },
  });
  expect(project.status, project.text).toBe(201);
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const connector = await h.request("POST", `/api/v1/projects/${project.body.id}/connectors`, {
      token: h.tokens.editor,
      body: { name: String.fromCharCode(97 + i), kind: "static" },
    });
    expect(connector.status, connector.text).toBe(201);
    ids.push(connector.body.id);
  }
  return { projectId: project.body.id, ids };
}

const path = (projectId: string) => `/api/v1/projects/${projectId}/sequence`;

function put(projectId: string, body: unknown, token = h.tokens.editor) {
  return h.request("PUT", path(projectId), { token, body });
}

function get(projectId: string, token = h.tokens.viewer) {
  return h.request("GET", path(projectId), { token });
}

async function sequenceOf(projectId: string) {
  const answer = await get(projectId);
  expect(answer.status, answer.text).toBe(200);
  return answer.body;
}

async function set(projectId: string, body: Record<string, unknown>) {
  const answer = await put(projectId, body);
  expect(answer.status, answer.text).toBe(200);
  return answer.body;
}

describe("the sequence routes", () => {
  test("a new sequence starts at its first connector; the answer shows each connector", async () => {
    const { projectId, ids } = await projectWith(3);
    const before = (await h.changes()).length;
    const answer = await put(projectId, { connector_ids: [ids[1], ids[0], ids[2]] });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body).toMatchObject({
      project_id: projectId,
      connector_ids: [ids[1], ids[0], ids[2]],
      current_index: 0,
      current_connector_id: ids[1],
      on_end: "stop",
      on_unavailable: "reject",
      exhausted: false,
      version: 1,
      switched_at: null,
      connectors: [
        { id: ids[1], name: "b", depleted_at: null },
        { id: ids[0], name: "a", depleted_at: null },
        { id: ids[2], name: "c", depleted_at: null },
      ],
    });
    expect((await h.changes()).slice(before)).toEqual([{ kind: "project", ref: projectId }]);
    expect(await sequenceOf(projectId)).toEqual(answer.body);
  });

  test("bad bodies are 422 naming the field", async () => {
    const { projectId, ids } = await projectWith(2);
    const other = await projectWith(1);
    const cases: [unknown, string, RegExp][] = [
      [{ connector_ids: [ids[0]] }, "body.connector_ids", /at least two/],
      [{ connector_ids: [ids[0], ids[0]] }, "body.connector_ids", /each connector once/],
      [{ connector_ids: [ids[0], "nope"] }, "body.connector_ids.1", /uuid/],
      [{ connector_ids: "a,b" }, "body.connector_ids", /list of connector ids/],
      [{}, "body.connector_ids", /required/],
      [{ connector_ids: ids, on_end: "forever" }, "body.on_end", /stop, loop, stay_last/],
      [{ connector_ids: ids, on_unavailable: "fallback" }, "body.on_unavailable", /reject/],
      [{ connector_ids: ids, current_index: 1 }, "body.current_index", /read-only/],
      [{ connector_ids: ids, weights: [1, 2] }, "body.weights", /not a known field/],
      [
        { connector_ids: [ids[0], other.ids[0]] },
        "body.connector_ids",
        new RegExp(`${other.ids[0]} is not a connector of this project`),
      ],
    ];
    for (const [body, field, message] of cases) {
      const answer = await put(projectId, body);
      expect(answer.status, JSON.stringify(body)).toBe(422);
      const issue = answer.body.detail.find((d: { field: string }) => d.field === field);
      expect(issue, `${JSON.stringify(body)}: ${answer.text}`).toBeDefined();
      expect(issue.message).toMatch(message);
    }
    // Nothing was stored by any of them.
    expect((await get(projectId)).status).toBe(404);
  });

  test("404 without a sequence or a project; viewers read, editors write", async () => {
    const { projectId, ids } = await projectWith(2);
    const none = await get(projectId);
    expect(none.status).toBe(404);
    expect(none.body.error).toBe("This project has no connector sequence");
    const gone = "00000000-0000-4000-8000-000000000000";
    expect((await get(gone)).body.error).toBe("Project not found");
    expect((await put(gone, { connector_ids: ids })).status).toBe(404);

    expect((await put(projectId, { connector_ids: ids }, h.tokens.viewer)).status).toBe(403);
    expect((await put(projectId, { connector_ids: ids }, h.tokens.admin)).status).toBe(200);
    expect((await get(projectId, h.tokens.viewer)).status).toBe(200);
    const remove = (token: string) => h.request("DELETE", path(projectId), { token });
    expect((await remove(h.tokens.viewer)).status).toBe(403);
    const before = (await h.changes()).length;
    expect((await remove(h.tokens.editor)).status).toBe(204);
    expect((await h.changes()).slice(before)).toEqual([{ kind: "project", ref: projectId }]);
    expect((await get(projectId)).status).toBe(404);
    expect((await remove(h.tokens.editor)).status).toBe(404);
  });

  test("setting again starts over: first connector, not exhausted, the version moved on", async () => {
    const { projectId, ids } = await projectWith(2);
    await set(projectId, { connector_ids: ids });
    await markDepleted(h.deps, ids[0]);
    await markDepleted(h.deps, ids[1]);
    expect(await sequenceOf(projectId)).toMatchObject({ exhausted: true, version: 3 });
    const again = await set(projectId, { connector_ids: ids, on_end: "loop" });
    expect(again).toMatchObject({
      current_index: 0,
      current_connector_id: ids[0],
      exhausted: false,
      on_end: "loop",
      version: 4,
      switched_at: null,
    });
  });

  test("the OpenAPI document describes the three routes", async () => {
    const doc = (await h.request("GET", "/api/v1/openapi.json")).body;
    const routes = doc.paths["/api/v1/projects/{id}/sequence"];
    expect(Object.keys(routes).sort()).toEqual(["delete", "get", "put"]);
    const schema = routes.put.requestBody.content["application/json"].schema;
    expect(schema.required).toEqual(["connector_ids"]);
    expect(schema.properties.on_end.enum).toEqual(["stop", "loop", "stay_last"]);
    expect(routes.put.responses["422"]).toBeDefined();
    expect(routes.get.description).toMatch(/Role: viewer or higher/);
    expect(routes.put.description).toMatch(/Role: editor or higher/);
  });
});

describe("depletion", () => {
  test("20 concurrent switchers move A to B exactly once, never on to C", async () => {
    const { projectId, ids } = await projectWith(3);
    const [a, b] = ids;
    const start = await set(projectId, { connector_ids: ids });
    const before = (await h.changes()).length;

    // Watches the row the whole time: C must never be current, not even for a moment.
    let racing = true;
    const seen = new Set<number>();
    const watcher = (async () => {
      while (racing) {
        const [row] = await h.deps.database.sql<{ current_index: number }[]>`
          select current_index from project_sequences where project_id = ${projectId}`;
        seen.add(row.current_index);
      }
    })();
    let outcomes: DepletionOutcome[];
    try {
      outcomes = await Promise.all(Array.from({ length: 20 }, () => markDepleted(racers, a)));
    } finally {
      racing = false;
      await watcher;
    }

    const movers = outcomes.filter((o) => o.moved.length > 0);
    expect(movers).toHaveLength(1);
    expect(movers[0].moved).toEqual([{
      projectId,
      fromIndex: 0,
      toIndex: 1,
      exhausted: false,
      version: start.version + 1,
    }]);
    expect(outcomes.filter((o) => o.marked)).toHaveLength(1);
    expect(seen.has(2)).toBe(false);
    const after = await sequenceOf(projectId);
    expect(after).toMatchObject({
      current_index: 1,
      current_connector_id: b,
      version: start.version + 1,
      exhausted: false,
    });
    expect(after.switched_at).not.toBeNull();
    expect(after.connectors[0].depleted_at).not.toBeNull();
    expect(after.connectors[1].depleted_at).toBeNull();
    // One switch, one entry: the feed is compiled again once for it.
    expect((await h.changes()).slice(before)).toEqual([{ kind: "project", ref: projectId }]);
  });

  test("20 more for the already depleted A, after a reset: one move again", async () => {
    const { projectId, ids } = await projectWith(3);
    const [a, b] = ids;
    await markDepleted(h.deps, a);
    // A was depleted before the sequence existed: nothing to move then; the reset puts A first.
    const start = await set(projectId, { connector_ids: ids });
    const outcomes = await Promise.all(
      Array.from({ length: 20 }, () => markDepleted(racers, a)),
    );
    expect(outcomes.filter((o) => o.moved.length > 0)).toHaveLength(1);
    expect(outcomes.filter((o) => o.marked)).toHaveLength(0);
    expect(await sequenceOf(projectId)).toMatchObject({
      current_index: 1,
      current_connector_id: b,
      version: start.version + 1,
    });
  });

  test("a connector that is not current is marked but moves nothing", async () => {
    const { projectId, ids } = await projectWith(3);
    const start = await set(projectId, { connector_ids: ids });
    const before = (await h.changes()).length;
    expect(await markDepleted(h.deps, ids[1])).toEqual({ marked: true, moved: [] });
    expect(await markDepleted(h.deps, ids[1])).toEqual({ marked: false, moved: [] });
    const after = await sequenceOf(projectId);
    expect(after).toMatchObject({ current_index: 0, version: start.version });
    expect(after.connectors[1].depleted_at).not.toBeNull();
    // depleted_at is not in the feed: nothing announced.
    expect((await h.changes()).slice(before)).toEqual([]);

    expect(await clearDepleted(h.deps, ids[1])).toBe(true);
    expect(await clearDepleted(h.deps, ids[1])).toBe(false);
    expect((await sequenceOf(projectId)).connectors[1].depleted_at).toBeNull();
    expect(await markDepleted(h.deps, "00000000-0000-4000-8000-000000000000")).toEqual({
      marked: false,
      moved: [],
    });
  });

  test("stop: past the last connector the sequence is exhausted and stays so", async () => {
    const { projectId, ids } = await projectWith(3);
    await set(projectId, { connector_ids: ids, on_end: "stop" });
    await markDepleted(h.deps, ids[0]);
    await markDepleted(h.deps, ids[1]);
    expect(await sequenceOf(projectId)).toMatchObject({ current_index: 2, exhausted: false });
    const last = await markDepleted(h.deps, ids[2]);
    expect(last.moved).toEqual([{
      projectId,
      fromIndex: 2,
      toIndex: 2,
      exhausted: true,
      version: 4,
    }]);
    expect(await sequenceOf(projectId)).toMatchObject({
      current_index: 2,
      current_connector_id: null,
      exhausted: true,
      version: 4,
    });
    // Exhausted: nothing moves it, not even its first connector running dry again.
    await clearDepleted(h.deps, ids[0]);
    expect((await markDepleted(h.deps, ids[0])).moved).toEqual([]);
    expect((await markDepleted(h.deps, ids[2])).moved).toEqual([]);
    expect(await sequenceOf(projectId)).toMatchObject({ exhausted: true, version: 4 });
  });

  test("loop: past the last connector back to the first", async () => {
    const { projectId, ids } = await projectWith(3);
    await set(projectId, { connector_ids: ids, on_end: "loop" });
    for (const id of ids) await markDepleted(h.deps, id);
    expect(await sequenceOf(projectId)).toMatchObject({
      current_index: 0,
      current_connector_id: ids[0],
      exhausted: false,
      version: 4,
    });
    // Still depleted, A is marked again at its next empty run: on to B.
    expect((await markDepleted(h.deps, ids[0])).moved[0]).toMatchObject({ toIndex: 1 });
  });

  test("stay_last: the last connector stays current", async () => {
    const { projectId, ids } = await projectWith(3);
    await set(projectId, { connector_ids: ids, on_end: "stay_last" });
    await markDepleted(h.deps, ids[0]);
    await markDepleted(h.deps, ids[1]);
    expect((await markDepleted(h.deps, ids[2])).moved).toEqual([]);
    expect(await sequenceOf(projectId)).toMatchObject({
      current_index: 2,
      current_connector_id: ids[2],
      exhausted: false,
      version: 3,
    });
  });
});

describe("deleting a connector a sequence names", () => {
  const remove = (projectId: string, id: string) =>
    h.request("DELETE", `/api/v1/projects/${projectId}/connectors/${id}`, {
      token: h.tokens.editor,
    });

  test("an earlier one: dropped, the same connector stays current", async () => {
    const { projectId, ids } = await projectWith(4);
    await set(projectId, { connector_ids: ids });
    await markDepleted(h.deps, ids[0]);
    await markDepleted(h.deps, ids[1]);
    const before = await sequenceOf(projectId);
    expect(before.current_connector_id).toBe(ids[2]);
    expect((await remove(projectId, ids[0])).status).toBe(204);
    const after = await sequenceOf(projectId);
    expect(after).toMatchObject({
      connector_ids: [ids[1], ids[2], ids[3]],
      current_index: 1,
      current_connector_id: ids[2],
      version: before.version + 1,
      switched_at: before.switched_at,
    });
    // A later one: the index stays.
    expect((await remove(projectId, ids[3])).status).toBe(204);
    expect(await sequenceOf(projectId)).toMatchObject({
      connector_ids: [ids[1], ids[2]],
      current_index: 1,
      current_connector_id: ids[2],
    });
  });

  test("the current one: the sequence moves on as a depletion would", async () => {
    const { projectId, ids } = await projectWith(3);
    await set(projectId, { connector_ids: ids, on_end: "stop" });
    await markDepleted(h.deps, ids[0]);
    expect((await remove(projectId, ids[1])).status).toBe(204);
    expect(await sequenceOf(projectId)).toMatchObject({
      connector_ids: [ids[0], ids[2]],
      current_index: 1,
      current_connector_id: ids[2],
      exhausted: false,
    });

    // The current and last one, with stop: exhausted. With loop: back to the first.
    const stop = await projectWith(3);
    await set(stop.projectId, { connector_ids: stop.ids, on_end: "stop" });
    await markDepleted(h.deps, stop.ids[0]);
    await markDepleted(h.deps, stop.ids[1]);
    expect((await remove(stop.projectId, stop.ids[2])).status).toBe(204);
    expect(await sequenceOf(stop.projectId)).toMatchObject({
      connector_ids: [stop.ids[0], stop.ids[1]],
      current_index: 1,
      current_connector_id: null,
      exhausted: true,
    });
    const loop = await projectWith(3);
    await set(loop.projectId, { connector_ids: loop.ids, on_end: "loop" });
    await markDepleted(h.deps, loop.ids[0]);
    await markDepleted(h.deps, loop.ids[1]);
    expect((await remove(loop.projectId, loop.ids[2])).status).toBe(204);
    expect(await sequenceOf(loop.projectId)).toMatchObject({
      current_index: 0,
      current_connector_id: loop.ids[0],
    });
  });

  test("fewer than two left: the sequence is cleared, in the same transaction", async () => {
    const { projectId, ids } = await projectWith(2);
    await set(projectId, { connector_ids: ids });
    expect((await remove(projectId, ids[1])).status).toBe(204);
    expect((await get(projectId)).status).toBe(404);
  });
});

describe("the feed and the routing preview", () => {
  test("the project's entry carries its sequence, in stable bytes", async () => {
    const { projectId, ids } = await projectWith(3);
    const plain = await projectWith(1);
    await set(projectId, { connector_ids: [ids[2], ids[0], ids[1]], on_end: "loop" });
    await markDepleted(h.deps, ids[2]);
    const options = {
      keys: await deriveFeedKeys(h.settings.internalSecret),
      defaultStrategy: "round_robin" as const,
      providers: new ProviderRegistry(),
    };
    const first = await compile(h.deps.database, options);
    const second = await compile(h.deps.database, options);
    expect(second.sections.get("global")).toEqual(first.sections.get("global"));
    const global = JSON.parse(first.sections.get("global")!.json) as GlobalSection;
    const entry = global.projects.find((p) => p.id === projectId)!;
    expect(entry.sequence).toEqual({
      connectors: [ids[2], ids[0], ids[1]],
      current: 1,
      on_end: "loop",
      on_unavailable: "reject",
      exhausted: false,
    });
    expect(Object.keys(entry).slice(-4)).toEqual([
      "sequence",
      "tls_mitm",
      "blocking",
      "domain_rules",
    ]);
    expect(global.projects.find((p) => p.id === plain.projectId)!.sequence).toBeNull();
  });

  test("the preview routes the current connector alone, and refuses as the gateway does", async () => {
    const { projectId, ids } = await projectWith(3);
    for (const [i, id] of ids.entries()) {
      const added = await h.request("POST", `/api/v1/projects/${projectId}/proxies`, {
        token: h.tokens.editor,
        body: { connector_id: id, url: `http://203.0.113.${30 + i}:3128` },
      });
      expect(added.status, added.text).toBe(201);
    }
    await h.deps.database
      .sql`update proxies set status = 'healthy' where project_id = ${projectId}`;
    await set(projectId, { connector_ids: ids, on_end: "stop" });
    await markDepleted(h.deps, ids[0]);
    const preview = () =>
      h.request("POST", `/api/v1/projects/${projectId}/routing-preview`, {
        token: h.tokens.viewer,
        body: { username: `seq${serial}` },
      });

    const served = await preview();
    expect(served.status, served.text).toBe(200);
    expect(served.body.sequence).toEqual({
      connector_ids: ids,
      current_index: 1,
      current_connector_id: ids[1],
      exhausted: false,
    });
    expect(served.body.chosen.connector_id).toBe(ids[1]);
    expect(served.body.proxies.total).toBe(1);
    // deno-lint-ignore no-explicit-any -- answer rows, read by the assertions.
    const codes = served.body.connectors.map((c: any) => [c.id, c.code]);
    expect(codes).toEqual(
      [[ids[0], "out_of_sequence"], [ids[1], null], [ids[2], "out_of_sequence"]]
        .sort((x, y) => (x[0]! < y[0]! ? -1 : 1)),
    );
    // deno-lint-ignore no-explicit-any -- as above.
    const first = served.body.connectors.find((c: any) => c.id === ids[0]);
    expect(first.reason).toBe(
      "The connector is 1 of 3 in the project's sequence; only its current one (2 of 3) serves",
    );

    // The current connector disabled: 503 with the reason, no other connector stands in.
    await h.request("PATCH", `/api/v1/projects/${projectId}/connectors/${ids[1]}`, {
      token: h.tokens.editor,
      body: { enabled: false },
    });
    const disabled = await preview();
    expect(disabled.body.chosen).toBeNull();
    expect(disabled.body.refusal).toEqual({
      status: 503,
      proxy_status: "destination_unavailable",
      reason: "The current connector of this project's sequence (2 of 3) is disabled",
      rejection: "sequence_unavailable",
    });

    await markDepleted(h.deps, ids[1]);
    await markDepleted(h.deps, ids[2]);
    const exhausted = await preview();
    expect(exhausted.body.refusal).toEqual({
      status: 503,
      proxy_status: "destination_unavailable",
      reason: "This project's connector sequence is exhausted: its last connector ran dry",
      rejection: "sequence_exhausted",
    });
  });
});

describe("a configuration prune", () => {
  // Last in the file: a prune deletes every project the document does not name.
  test("drops a connector it deletes from the sequence, in the same transaction", async () => {
    const document = (names: string[]) => ({
      version: 1,
      projects: [{
        name: "Pruned",
        username: "pruned",
        password: "pruned-secret-1",
        connectors: names.map((name) => ({ name, proxies: [] })),
      }],
    });
    const apply = (names: string[]) =>
      h.request("POST", "/api/v1/config/apply", {
        token: h.tokens.editor,
        body: { config: document(names), prune: true },
      });
    const created = await apply(["a", "b", "c"]);
    expect(created.status, created.text).toBe(200);
    const [{ id: projectId }] = await h.deps.database.sql<{ id: string }[]>`
      select id from projects where username = 'pruned'`;
    const rows = await h.deps.database.sql<{ id: string; name: string }[]>`
      select id, name from connectors where project_id = ${projectId} order by name`;
    const ids = rows.map((row) => row.id);
    await set(projectId, { connector_ids: ids });
    await markDepleted(h.deps, ids[0]);

    const pruned = await apply(["b", "c"]);
    expect(pruned.status, pruned.text).toBe(200);
    expect(await sequenceOf(projectId)).toMatchObject({
      connector_ids: [ids[1], ids[2]],
      current_index: 0,
      current_connector_id: ids[1],
    });
    expect((await apply(["c"])).status).toBe(200);
    expect((await get(projectId)).status).toBe(404);
  });
});
