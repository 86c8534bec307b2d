/**
 * The literals sent as text with a transaction's BEGIN (its writer) and COMMIT (the outbox's
 * entry): whatever a username, a token's name or a change's ref holds, Postgres reads back the
 * same string, and nothing of it runs as SQL.
 */
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { sqlLiteral } from "../../db/client.ts";
import { TEST_ADMIN_DATABASE_URL } from "../../testkit/stores.ts";

const sql = postgres(TEST_ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} });

afterAll(async () => {
  await sql.end();
});

describe("sqlLiteral", () => {
  it("reads back every string as given, quotes and backslashes included", async () => {
    const strings = [
      "",
      "plain",
      "it's",
      "back\\slash",
      "\\'; drop table users; --",
      "'); select pg_sleep(10); --",
      "emoji 🐙 and ü",
      "new\nline\ttab",
      "$$dollar$$",
      '{"name":"o\'brien","path":"C:\\\\temp"}',
    ];
    for (const text of strings) {
      const [row] = await sql.unsafe(`select ${sqlLiteral(text)} as value`).simple();
      expect(row.value).toBe(text);
    }
    for (const setting of ["on", "off"]) {
      await sql.unsafe(`set standard_conforming_strings = ${setting}`);
      const [row] = await sql.unsafe(`select ${sqlLiteral("a\\b'c")} as value`).simple();
      expect(row.value).toBe("a\\b'c");
    }
  });

  it("refuses a NUL, which no Postgres text can hold", () => {
    expect(() => sqlLiteral("a\u0000b")).toThrow(/NUL/);
  });
});
