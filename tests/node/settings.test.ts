/**
 * A bad or missing required setting stops the control process before it does anything: exit
 * code 2 and one line on standard error naming the variable.
 */
import { afterAll, describe, expect, it } from "vitest";
import { controlEnv, killAll, spawnScript } from "../support/processes.ts";

afterAll(killAll);

// No store is touched before the settings are checked, so these URLs are never dialled.
const valid = () =>
  controlEnv({
    databaseUrl: "postgres://postgres@127.0.0.1:1/none",
    redisUrl: "redis://127.0.0.1:1",
    prefix: "unused:",
    role: "all",
    port: 8000,
  });

async function runWith(env: Record<string, string | undefined>) {
  const run = spawnScript("control/main.ts", env);
  const exit = await run.exited;
  return { exit, stderr: run.stderr.filter(Boolean), stdout: run.stdout.filter(Boolean) };
}

describe("settings at start", () => {
  it("a bad API port exits 2 with one line naming it", async () => {
    const { exit, stderr, stdout } = await runWith({ ...valid(), OCTOPROX_API_PORT: "70000" });
    expect(exit.code).toBe(2);
    expect(stderr).toEqual(["octoprox: OCTOPROX_API_PORT must be a port number from 0 to 65535"]);
    expect(stdout).toEqual([]);
  });

  it("a missing database URL exits 2 with one line naming it", async () => {
    const { exit, stderr } = await runWith({ ...valid(), OCTOPROX_DATABASE_URL: undefined });
    expect(exit.code).toBe(2);
    expect(stderr).toEqual(["octoprox: OCTOPROX_DATABASE_URL is required but not set"]);
  });

  it("a bad role exits 2 with one line naming it", async () => {
    const { exit, stderr } = await runWith({ ...valid(), OCTOPROX_ROLE: "gatekeeper" });
    expect(exit.code).toBe(2);
    expect(stderr).toHaveLength(1);
    expect(stderr[0]).toMatch(/^octoprox: OCTOPROX_ROLE /);
  });
});
