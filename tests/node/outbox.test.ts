/**
 * The transactional outbox with real processes: an api killed between a write's commit and its
 * announcement (the `after_commit` fault point) leaves the change entry in Postgres, and the next
 * api process's relay announces it, with no controller (and so no reconcile) running. A write
 * that nothing interrupts is announced by its writer before it answers, once, and leaves no row.
 */
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redisKeys } from "../../shared/redis-keys.ts";
import {
  createTestDatabase,
  deletePrefix,
  TEST_REDIS_URL,
  type TestDatabase,
  testPrefix,
} from "../../testkit/stores.ts";
import { waitUntil } from "../../testkit/wait.ts";
import {
  type ControlProcess,
  killAll,
  startControl,
  waitForReady,
} from "../../testkit/processes.ts";

let database: TestDatabase;
let sql: postgres.Sql;
let redis: Redis;
const prefix = testPrefix();
const keys = redisKeys(prefix);
const ADMIN = { OCTOPROX_ADMIN_USERNAME: "admin", OCTOPROX_ADMIN_PASSWORD: "outbox-admin-pass" };

beforeAll(async () => {
  database = await createTestDatabase();
  sql = postgres(database.url, { max: 2, onnotice: () => {} });
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  await killAll();
  await sql?.end();
  redis?.disconnect();
  await deletePrefix(TEST_REDIS_URL, prefix);
  await database?.drop();
});

async function api(extra: Record<string, string> = {}): Promise<ControlProcess> {
  const control = await startControl({
    databaseUrl: database.url,
    prefix,
    role: "api",
    instance: `t-outbox-${randomBytes(3).toString("hex")}`,
    extra: { ...ADMIN, ...extra },
  });
  await waitForReady(control);
  return control;
}

async function login(control: ControlProcess): Promise<string> {
  const answer = await fetch(`${control.url}/api/v1/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ username: "admin", password: ADMIN.OCTOPROX_ADMIN_PASSWORD }),
  });
  expect(answer.status).toBe(200);
  return (await answer.json() as { access_token: string }).access_token;
}

/** The change stream's entries naming `ref`. */
async function announced(ref: string): Promise<{ kind: string; ref: string }[]> {
  const entries = await redis.xrange(keys.changesStream, "-", "+");
  return entries.map(([, fields]) => ({
    kind: fields[fields.indexOf("kind") + 1],
    ref: fields[fields.indexOf("ref") + 1],
  })).filter((entry) => entry.ref === ref);
}

describe("the outbox", () => {
  it("announces a committed write whose process died before announcing it, after a restart", async () => {
    // A first start seeds the admin (a write of its own), so the armed process starts on it.
    await (await api()).stop();
    const doomed = await api({ OCTOPROX_FAULT_POINT: "after_commit" });
    const token = await login(doomed);
    // The process kills itself between the commit and the announcement: no answer comes.
    const write = await fetch(`${doomed.url}/api/v1/projects`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify({ name: "Outboxed", username: "outboxed" }),
    }).then(() => "answered", () => "no answer");
    expect(write).toBe("no answer");
    expect((await doomed.exited).signal).toBe("SIGKILL");

    const [project] = await sql<{ id: string }[]>`
      select id::text from projects where name = 'Outboxed'`;
    expect(project).toBeDefined();
    expect(await sql`select kind, ref from change_outbox`).toEqual([
      { kind: "project", ref: project.id },
    ]);
    expect(await announced(project.id)).toEqual([]);

    // Another api process (no controller runs: no reconcile) relays it.
    const next = await api();
    await waitUntil(async () => (await announced(project.id)).length > 0, {
      timeoutMs: 15_000,
      message: "the relay to announce the write",
    });
    expect(await announced(project.id)).toEqual([{ kind: "project", ref: project.id }]);
    // The relay announces, then commits the delete: the row goes a moment after the entry shows.
    await waitUntil(async () => (await sql`select id from change_outbox`).length === 0, {
      timeoutMs: 5_000,
      message: "the relay to delete the row it announced",
    });
    // Its count on /metrics (read from the process's last heartbeat snapshot).
    await waitUntil(async () =>
      /^octoprox_outbox_relayed_total(\{[^}]*\})? 1$/m.test(
        await (await fetch(`${next.url}/metrics`)).text(),
      ), { message: "the relay's count on /metrics" });

    // A write nothing interrupts: announced by its writer before it answers, no row left.
    const answer = await fetch(`${next.url}/api/v1/projects`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${await login(next)}`,
      },
      body: JSON.stringify({ name: "Direct", username: "direct" }),
    });
    expect(answer.status).toBe(201);
    const made = await answer.json() as { id: string };
    expect(await announced(made.id)).toEqual([{ kind: "project", ref: made.id }]);
    // Its row goes with the deletes of the writes beside it, a few ms on; not relayed again.
    await waitUntil(async () => (await sql`select id from change_outbox`).length === 0, {
      message: "the announced write's row to go",
    });
    expect(await announced(made.id)).toEqual([{ kind: "project", ref: made.id }]);
  });
});
