/**
 * The migrator: applies the committed drizzle-kit migrations, one process at a time.
 *
 * The lock is a session advisory lock taken with pg_try_advisory_lock on a connection of its
 * own, polled once a second. Never the blocking pg_advisory_lock: a backend blocked there holds
 * a snapshot, and CREATE INDEX CONCURRENTLY waits for every older snapshot, a cycle Postgres
 * cannot see. A revision recorded in the database that this build does not know stops the start.
 */
import { readFile } from "node:fs/promises";
import postgres from "postgres";
import { reservedTransaction } from "./client.ts";
import { UnknownRevisionError } from "../shared/errors.ts";
import { sleep } from "../shared/async/sleep.ts";

/** A fixed 64-bit key: "octoprox migrate". */
export const MIGRATION_LOCK_KEY = 0x6f63_7470_726f_786dn & 0x7fff_ffff_ffff_ffffn;
export const MIGRATIONS_TABLE = "octoprox_migrations";

const MIGRATIONS_DIR = new URL("./migrations/", import.meta.url);

interface JournalEntry {
  idx: number;
  tag: string;
  breakpoints: boolean;
}

export interface Migration {
  tag: string;
  statements: string[];
}

/** The committed migrations' journal, in order. */
async function journalEntries(): Promise<JournalEntry[]> {
  const journal = JSON.parse(
    await readFile(new URL("meta/_journal.json", MIGRATIONS_DIR), "utf8"),
  ) as { entries: JournalEntry[] };
  return [...journal.entries].sort((a, b) => a.idx - b.idx);
}

/**
 * This build's schema version: the index of its last migration. Every process migrates to it
 * at start (and refuses a database that is ahead), so it is the running install's version too.
 */
export async function schemaVersion(): Promise<number> {
  const last = (await journalEntries()).at(-1);
  if (!last) throw new Error("The migrations journal lists no migration");
  return last.idx;
}

export async function loadMigrations(): Promise<Migration[]> {
  const entries = await journalEntries();
  return Promise.all(entries.map(async (entry) => {
    const text = await readFile(new URL(`${entry.tag}.sql`, MIGRATIONS_DIR), "utf8");
    const statements = text.split("--> statement-breakpoint").map((s) => s.trim()).filter(
      Boolean,
    );
    return { tag: entry.tag, statements };
  }));
}

export interface MigrateLogger {
  info(fields: Record<string, unknown>, message: string): void;
}

export interface MigrateOptions {
  logger?: MigrateLogger;
  lockPollMs?: number;
  signal?: AbortSignal;
}

export interface MigrateResult {
  /** Tags this process applied; empty when another process had already brought it to head. */
  applied: string[];
  head: string | undefined;
}

export async function migrate(
  databaseUrl: string,
  options: MigrateOptions = {},
): Promise<MigrateResult> {
  const migrations = await loadMigrations();
  const known = new Set(migrations.map((m) => m.tag));
  const sql = postgres(databaseUrl, {
    max: 2,
    onnotice: () => {},
    connect_timeout: 5,
    connection: { application_name: "octoprox-migrate" },
  });
  try {
    const lock = await sql.reserve();
    let locked = false;
    try {
      let waitingLogged = false;
      for (;;) {
        const [row] =
          await lock`select pg_try_advisory_lock(${MIGRATION_LOCK_KEY.toString()}::bigint) as ok`;
        if (row.ok === true) {
          locked = true;
          break;
        }
        if (!waitingLogged) {
          options.logger?.info({}, "Waiting for the migration lock");
          waitingLogged = true;
        }
        await sleep(options.lockPollMs ?? 1000, options.signal);
      }

      await sql.unsafe(
        `create table if not exists ${MIGRATIONS_TABLE} (
           tag text primary key,
           applied_at timestamptz not null default now()
         )`,
      );
      const done = (await sql.unsafe(`select tag from ${MIGRATIONS_TABLE}`)).map((r) =>
        String(r.tag)
      );
      const unknown = done.filter((tag) => !known.has(tag));
      if (unknown.length > 0) {
        throw new UnknownRevisionError(
          `The database holds migration ${unknown.join(", ")}, which this build does not know; ` +
            "run the release that wrote it or a newer one",
        );
      }
      const applied: string[] = [];
      for (const migration of migrations) {
        if (done.includes(migration.tag)) continue;
        await reservedTransaction(sql, async (tx) => {
          for (const statement of migration.statements) await tx.unsafe(statement);
          await tx.unsafe(`insert into ${MIGRATIONS_TABLE} (tag) values ($1)`, [migration.tag]);
        });
        applied.push(migration.tag);
        options.logger?.info({ migration: migration.tag }, "Migration applied");
      }
      return { applied, head: migrations.at(-1)?.tag };
    } finally {
      if (locked) {
        await lock`select pg_advisory_unlock(${MIGRATION_LOCK_KEY.toString()}::bigint)`.catch(
          () => {},
        );
      }
      lock.release();
    }
  } finally {
    await sql.end({ timeout: 5 }).catch(() => {});
  }
}
