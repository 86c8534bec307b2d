/**
 * A transaction whose connection Postgres ends midway (pg_terminate_backend, as a restart or a
 * failover does): the work fails as an outage, the process does not crash (postgres.js would
 * write the next query or its ROLLBACK to a closed socket from a timer, an uncaught error), and
 * the pool serves the next transaction. A transaction that fails on its own is rolled back.
 */
import postgres from "postgres";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, expect, test } from "vitest";
import { createDatabase, type Database, reservedTransaction } from "../../db/client.ts";
import { isPostgresUnavailable } from "../../db/errors.ts";
import {
  createTestDatabase,
  TEST_ADMIN_DATABASE_URL,
  type TestDatabase,
} from "../../testkit/stores.ts";

let testDatabase: TestDatabase;
let database: Database;
let admin: postgres.Sql;

beforeAll(async () => {
  testDatabase = await createTestDatabase(TEST_ADMIN_DATABASE_URL);
  // One connection: the transaction after a loss must get the healed one.
  database = createDatabase(testDatabase.url, { poolSize: 1 });
  admin = postgres(testDatabase.url, { max: 1, onnotice: () => {} });
  await admin`create table notes (text text not null)`;
});

afterAll(async () => {
  await admin?.end();
  await database?.close();
  await testDatabase?.drop();
});

const terminate = async (pid: number) => {
  await admin`select pg_terminate_backend(${pid})`;
  // Until the driver has seen the connection close. Kept as a pause: postgres.js shows no sign
  // of having read that end, and a query to watch the backend go (pg_stat_activity) from
  // here hangs the transaction under test.
  await new Promise((resolve) => setTimeout(resolve, 100));
};

test("a query after the connection was lost fails as an outage; the pool heals", async () => {
  const failure = await database.transaction(async (tx) => {
    await tx.execute(sql`insert into notes values ('lost')`);
    const [{ pid }] = await tx.execute<{ pid: number }>(sql`select pg_backend_pid() as pid`);
    await terminate(pid);
    await tx.execute(sql`select 1`);
  }).then(() => undefined, (error: unknown) => error);
  expect(isPostgresUnavailable(failure)).toBe(true);
  const [row] = await database.transaction((tx) =>
    tx.execute<{ n: number }>(sql`select count(*)::int as n from notes`)
  );
  expect(row.n).toBe(0);
});

test("work that throws after the loss gets no ROLLBACK on the dead connection", async () => {
  const failure = await reservedTransaction(database.sql, async (tx) => {
    const [{ pid }] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`;
    await terminate(pid);
    throw new Error("the work failed");
  }).then(() => undefined, (error: unknown) => error);
  expect((failure as Error).message).toBe("the work failed");
  const [row] = await database.sql<{ ok: number }[]>`select 1 as ok`;
  expect(row.ok).toBe(1);
});

test("a transaction that fails on its own is rolled back and its connection reused", async () => {
  await expect(database.transaction(async (tx) => {
    await tx.execute(sql`insert into notes values ('rolled back')`);
    throw new Error("no");
  })).rejects.toThrow("no");
  await database.transaction((tx) => tx.execute(sql`insert into notes values ('kept')`));
  const rows = await admin<{ text: string }[]>`select text from notes`;
  expect(rows.map((r) => r.text)).toEqual(["kept"]);
});
