/**
 * `npm run migrate`: brings the database named by OCTOPROX_DATABASE_URL to this build's head,
 * one process at a time through the migration lock, as every control process does at start.
 * It needs no other setting, so operators can migrate ahead of a rollout.
 *
 *   npm run migrate            lines for people
 *   npm run migrate -- --json  one JSON line: {"applied": [...], "head": "..."}
 */
import { migrate } from "../db/migrate.ts";
import { errorText } from "../shared/errors.ts";

const json = process.argv.includes("--json");
const url = process.env.OCTOPROX_DATABASE_URL?.trim();

function fail(message: string, code: number): never {
  process.stderr.write(`octoprox migrate: ${message}\n`);
  process.exit(code);
}

if (!url) fail("OCTOPROX_DATABASE_URL is required but not set", 2);
try {
  if (!["postgres:", "postgresql:"].includes(new URL(url).protocol)) throw new Error();
} catch {
  fail("OCTOPROX_DATABASE_URL must be a Postgres URL (postgres:// or postgresql://…)", 2);
}

const logger = {
  info(fields: Record<string, unknown>, message: string): void {
    if (json) return;
    const migration = typeof fields.migration === "string" ? ` ${fields.migration}` : "";
    process.stdout.write(`${message}${migration}\n`);
  },
};

try {
  const result = await migrate(url, { logger });
  if (json) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } else if (result.applied.length === 0) {
    process.stdout.write(`Database already at ${result.head ?? "(no migrations)"}\n`);
  } else {
    process.stdout.write(
      `Database at ${result.head}: applied ${result.applied.length} migration(s)\n`,
    );
  }
} catch (error) {
  fail(errorText(error), 1);
}
