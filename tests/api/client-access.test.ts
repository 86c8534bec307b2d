/**
 * Who may use a project from where, in the api: `allowed_cidrs` and `passwordless_cidrs` are
 * presented as saved; a password-less list that lets every address in (within the allowed
 * ones) is a 422 naming the field, and a password-less block another project lists (as a
 * network) a 400 naming it, even against a write in flight; a refused write changes nothing.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { PASSWORDLESS_LOCK } from "../../control/services/projects.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { type Answer, type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.close();
});

const create = (body: Record<string, unknown>) =>
  h.request("POST", "/api/v1/projects", { token: h.tokens.editor, body });
const edit = (id: string, body: Record<string, unknown>) =>
  h.request("PATCH", `/api/v1/projects/${id}`, { token: h.tokens.editor, body });
const read = async (id: string) =>
  (await h.request("GET", `/api/v1/projects/${id}`, { token: h.tokens.viewer })).body;

let counter = 0;
const named = () => {
  counter++;
  return { name: `Access ${counter}`, username: `access${counter}` };
};

describe("a password-less list open to anyone", () => {
  test("is refused with 422 naming passwordless_cidrs, on create and on edit", async () => {
    for (
      const open of [
        ["0.0.0.0/0"],
        ["::/0"],
        ["0.0.0.0/1", "128.0.0.0/1"],
        ["::ffff:0:0/96"],
        ["10.0.0.0/8", "0.0.0.0/0"],
      ]
    ) {
      const answer = await create({ ...named(), passwordless_cidrs: open });
      expect(answer.status, JSON.stringify(open)).toBe(422);
      expect(answer.body.detail).toEqual([
        { field: "body.passwordless_cidrs", message: expect.stringMatching(/every address/) },
      ]);
    }
    const project = await create({ ...named(), passwordless_cidrs: ["192.0.2.0/24"] });
    expect(project.status).toBe(201);
    const refused = await edit(project.body.id, {
      passwordless_cidrs: ["0.0.0.0/0"],
      max_connections: 5,
    });
    expect(refused.status).toBe(422);
    expect(await read(project.body.id)).toMatchObject({
      passwordless_cidrs: ["192.0.2.0/24"],
      max_connections: null,
    });
  });

  test("is taken when the allowed list narrows who gets in, and refused once it no longer does", async () => {
    const project = await create({
      ...named(),
      allowed_cidrs: ["10.0.0.0/8"],
      passwordless_cidrs: ["0.0.0.0/0"],
    });
    expect(project.status).toBe(201);
    expect(project.body).toMatchObject({
      allowed_cidrs: ["10.0.0.0/8"],
      passwordless_cidrs: ["0.0.0.0/0"],
    });
    // Dropping the allowed list would let anyone in without a password.
    const widened = await edit(project.body.id, { allowed_cidrs: [] });
    expect(widened.status).toBe(422);
    expect(widened.body.detail[0].field).toBe("body.passwordless_cidrs");
    expect((await read(project.body.id)).allowed_cidrs).toEqual(["10.0.0.0/8"]);
  });
});

describe("a password-less block another project lists", () => {
  test("is refused with 400 naming the field and the project, as a network", async () => {
    const first = await create({ ...named(), passwordless_cidrs: ["198.51.100.0/24"] });
    expect(first.status).toBe(201);
    const second = await create({ ...named(), passwordless_cidrs: ["198.51.100.77/24"] });
    expect(second.status).toBe(400);
    expect(second.body.detail).toEqual([{
      field: "body.passwordless_cidrs",
      message: expect.stringContaining(
        `198.51.100.0/24 is already a password-less block of ` +
          `project ${first.body.name}`,
      ),
    }]);
    // An IPv4-mapped spelling of the same network is the same network.
    const mapped = await create({ ...named(), passwordless_cidrs: ["::ffff:198.51.100.0/120"] });
    expect(mapped.status).toBe(400);
    // A more specific block is another network: the most specific one selects its project.
    const narrower = await create({ ...named(), passwordless_cidrs: ["198.51.100.128/25"] });
    expect(narrower.status).toBe(201);
    // An edit of the project's own list keeps its blocks.
    const own = await edit(first.body.id, {
      passwordless_cidrs: ["198.51.100.0/24", "203.0.113.9"],
    });
    expect(own.status).toBe(200);
    const taken = await edit(narrower.body.id, { passwordless_cidrs: ["203.0.113.9/32"] });
    expect(taken.status).toBe(400);
    expect((await read(narrower.body.id)).passwordless_cidrs).toEqual(["198.51.100.128/25"]);
  });

  test("an edit for a block a write in flight holds waits for it, then is refused", async () => {
    const a = await create(named());
    const b = await create(named());
    let answer: Promise<Answer> | undefined;
    let settled = false;
    // A write of project a, under way: it holds the lock and has set the block, uncommitted.
    await h.deps.database.sql.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(hashtext(${PASSWORDLESS_LOCK}))`;
      await tx`update projects set passwordless_cidrs = '["192.0.2.128/26"]'::jsonb
        where id = ${a.body.id}`;
      answer = edit(b.body.id, { passwordless_cidrs: ["192.0.2.128/26"] });
      void answer.finally(() => (settled = true));
      // Without the lock, b's write would not see a's block and be answered meanwhile.
      await waitUntil(async () => {
        if (settled) return true;
        const [row] = await h.deps.database.sql<{ waiting: number }[]>`
          select count(*)::int as waiting from pg_locks
          where locktype = 'advisory' and not granted`;
        return row.waiting > 0;
      }, { timeoutMs: 10_000, message: "b's write to wait for the lock" });
      expect(settled).toBe(false);
    });
    const refused = await answer!;
    expect(refused.status).toBe(400);
    expect(refused.body.detail[0].field).toBe("body.passwordless_cidrs");
    expect((await read(b.body.id)).passwordless_cidrs).toEqual([]);
  });
});
