/**
 * Runs once before the suite: checks the test bed's stores answer, drops the databases a
 * crashed earlier run left behind (hours old; a concurrent run's are left alone), and builds the
 * dashboard when it is missing or stale, once, before any file serves it (files run side by
 * side, and a build while another file's browser loads the app would pull its files away), and
 * the control plane's builds the files' control processes and CLI commands run.
 */
import postgres from "postgres";
import { Redis } from "ioredis";
import { ensureControlBuild } from "../scripts/build-control.ts";
import { ensureWebBuild } from "../scripts/build-web.ts";
import {
  isStaleTestDatabase,
  TEST_ADMIN_DATABASE_URL,
  TEST_DATABASE_PREFIX,
  TEST_REDIS_URL,
} from "./stores.ts";

export default async function setup(): Promise<void> {
  await ensureWebBuild();
  await Promise.all([ensureControlBuild("main"), ensureControlBuild("cli")]);
  const sql = postgres(TEST_ADMIN_DATABASE_URL, { max: 1, onnotice: () => {}, connect_timeout: 5 });
  try {
    const rows = await sql`select datname from pg_database where datname like ${
      TEST_DATABASE_PREFIX + "%"
    }`;
    // Only what a crashed run left: another run may be using the fresh ones.
    for (const row of rows.filter((r) => isStaleTestDatabase(String(r.datname)))) {
      await sql.unsafe(`drop database if exists ${row.datname} with (force)`);
    }
  } catch (error) {
    throw new Error(
      `Tests need Postgres at ${TEST_ADMIN_DATABASE_URL} (set OCTOPROX_TEST_DATABASE_URL): ${
        (error as Error).message
      }`,
    );
  } finally {
    await sql.end();
  }
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1, lazyConnect: true });
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    throw new Error(
      `Tests need Redis at ${TEST_REDIS_URL} (set OCTOPROX_TEST_REDIS_URL): ${
        (error as Error).message
      }`,
    );
  } finally {
    redis.disconnect();
  }
}
