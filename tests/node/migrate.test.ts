/**
 * The migrator at start: an empty database gets every table; processes starting together
 * migrate once; a revision this build does not know stops the start.
 */
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { loadMigrations, migrate, MIGRATION_LOCK_KEY, MIGRATIONS_TABLE } from "../../db/migrate.ts";
import { createTestDatabase, type TestDatabase, testPrefix } from "../../testkit/stores.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { killAll, spawnScript, startControl } from "../../testkit/processes.ts";

const databases: TestDatabase[] = [];

async function freshDatabase(): Promise<TestDatabase> {
  const database = await createTestDatabase();
  databases.push(database);
  return database;
}

async function query<T extends Record<string, unknown>>(
  url: string,
  text: string,
): Promise<T[]> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    return [...await sql.unsafe<T[]>(text)];
  } finally {
    await sql.end();
  }
}

afterAll(async () => {
  await killAll();
  for (const database of databases) await database.drop();
});

describe("migrations", () => {
  it("bring an empty database to head, and a second run applies nothing", async () => {
    const database = await freshDatabase();
    const tags = (await loadMigrations()).map((m) => m.tag);

    const first = await migrate(database.url);
    expect(first).toEqual({ applied: tags, head: tags.at(-1) });

    const tables = (await query<{ table_name: string }>(
      database.url,
      "select table_name from information_schema.tables where table_schema = 'public'",
    )).map((row) => row.table_name);
    expect(tables).toEqual(expect.arrayContaining([
      MIGRATIONS_TABLE,
      "users",
      "api_tokens",
      "projects",
      "credentials",
      "connectors",
      "proxies",
      "metric_totals",
      "metric_flushes",
    ]));

    expect(await migrate(database.url)).toEqual({ applied: [], head: tags.at(-1) });
  });

  it("runs once when two processes start together", async () => {
    const database = await freshDatabase();
    const tags = (await loadMigrations()).map((m) => m.tag);
    const env = { OCTOPROX_DATABASE_URL: database.url };
    const runs = [
      spawnScript("scripts/migrate.ts", env, ["--json"]),
      spawnScript("scripts/migrate.ts", env, ["--json"]),
    ];
    const exits = await Promise.all(runs.map((run) => run.exited));
    expect(exits.map((exit) => exit.code), runs.map((run) => run.stderr.join("\n")).join("\n"))
      .toEqual([0, 0]);

    const results = runs.map((run) =>
      JSON.parse(run.stdout.filter(Boolean).at(-1) ?? "{}") as { applied: string[] }
    );
    const appliers = results.filter((result) => result.applied.length > 0);
    expect(appliers).toHaveLength(1);
    expect(appliers[0].applied).toEqual(tags);

    const rows = await query<{ tag: string; n: number }>(
      database.url,
      `select tag, count(*)::int as n from ${MIGRATIONS_TABLE} group by tag order by tag`,
    );
    expect(rows).toEqual(tags.map((tag) => ({ tag, n: 1 })));
  });

  it("stops the start on a revision this build does not know", async () => {
    const database = await freshDatabase();
    await migrate(database.url);
    const unknown = "9999_from_a_newer_release";
    await query(database.url, `insert into ${MIGRATIONS_TABLE} (tag) values ('${unknown}')`);

    const control = await startControl({
      databaseUrl: database.url,
      prefix: testPrefix(),
      role: "worker",
    });
    const exit = await control.exited;
    expect(exit.code).not.toBe(0);
    expect(exit.code).not.toBeNull();
    expect(control.stderr.join("\n")).toContain(unknown);

    const cli = spawnScript("scripts/migrate.ts", { OCTOPROX_DATABASE_URL: database.url });
    expect((await cli.exited).code).toBe(1);
    expect(cli.stderr.join("\n")).toContain(unknown);
  });

  it("waits for the lock while another process migrates, and a stop ends the wait", async () => {
    const database = await freshDatabase();
    const holder = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      await holder`select pg_advisory_lock(${MIGRATION_LOCK_KEY.toString()}::bigint)`;
      const control = await startControl({
        databaseUrl: database.url,
        prefix: testPrefix(),
        role: "worker",
      });
      await waitUntil(
        () => control.stdout.some((line) => line.includes("Waiting for the migration lock")),
        { message: "the process to wait for the lock" },
      );
      const tables = await query(database.url, `select to_regclass('${MIGRATIONS_TABLE}') as t`);
      expect(tables).toEqual([{ t: null }]);

      const startedAt = Date.now();
      expect(await control.stop("SIGTERM")).toEqual({ code: 0, signal: null });
      expect(Date.now() - startedAt).toBeLessThan(5000);
    } finally {
      await holder.end();
    }
  });
});
