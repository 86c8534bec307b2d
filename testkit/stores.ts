/**
 * The test bed's stores: the machine's Postgres and Redis (127.0.0.1:5432 and :6379 unless
 * OCTOPROX_TEST_DATABASE_URL / OCTOPROX_TEST_REDIS_URL say otherwise). Each test file makes its
 * own database and uses its own Redis key prefix, so files run side by side.
 */
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { Redis } from "ioredis";

export const TEST_ADMIN_DATABASE_URL = process.env.OCTOPROX_TEST_DATABASE_URL ??
  "postgres://postgres@127.0.0.1:5432/postgres";
export const TEST_REDIS_URL = process.env.OCTOPROX_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/** Databases made by tests start with this, then their creation time in epoch seconds. */
export const TEST_DATABASE_PREFIX = "ox_t_";

/** A test database older than this was left by a crashed run (no run lasts this long). */
export const STALE_TEST_DATABASE_MS = 3 * 3_600_000;

/** Whether a database name is a test database created longer ago than the stale age. */
export function isStaleTestDatabase(name: string, nowMs = Date.now()): boolean {
  const match = new RegExp(`^${TEST_DATABASE_PREFIX}(\\d+)_`).exec(name);
  if (!match) return name.startsWith(TEST_DATABASE_PREFIX); // an older naming: always stale
  return nowMs - Number(match[1]) * 1000 > STALE_TEST_DATABASE_MS;
}

const token = (bytes = 4) => randomBytes(bytes).toString("hex");

export function databaseUrl(adminUrl: string, database: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

export interface TestDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

export async function createTestDatabase(
  adminUrl = TEST_ADMIN_DATABASE_URL,
): Promise<TestDatabase> {
  // The creation time in the name lets a later run drop only what a crashed run left.
  const name = `${TEST_DATABASE_PREFIX}${Math.floor(Date.now() / 1000)}_${token(4)}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database ${name}`);
  } finally {
    await admin.end();
  }
  return {
    name,
    url: databaseUrl(adminUrl, name),
    async drop() {
      const sql = postgres(adminUrl, { max: 1, onnotice: () => {} });
      try {
        await sql.unsafe(`drop database if exists ${name} with (force)`);
      } finally {
        await sql.end();
      }
    },
  };
}

/** A key prefix of its own for one test (or file). */
export function testPrefix(): string {
  return `oxt:${token(6)}:`;
}

/** Deletes every key under a prefix. */
export async function deletePrefix(redisUrl: string, prefix: string): Promise<void> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  // A private server a test stopped: the scan fails (callers decide), no unhandled event.
  redis.on("error", () => {});
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
}

/** Secrets for one test's processes. */
export function testSecrets(): { internal: string; jwt: string } {
  return { internal: token(32), jwt: token(32) };
}
