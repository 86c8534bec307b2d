/**
 * `npm run build:gateway` (scripts/build-gateway.ts) without Deno's runtime build at hand: with
 * DENORT_BIN unset and an empty Deno cache, and with DENORT_BIN naming a missing file, it exits 1
 * with one line saying what it looked for, and never starts deno compile (whose download would
 * hang or fail obscurely offline).
 */
import { spawnSync } from "node:child_process";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/gateway-command.ts";

const folders: string[] = [];

afterEach(async () => {
  await Promise.all(
    folders.splice(0).map((folder) => rm(folder, { recursive: true, force: true })),
  );
});

async function emptyFolder(): Promise<string> {
  const folder = await mkdtemp(join(tmpdir(), "octoprox-build-gateway-test-"));
  folders.push(folder);
  return folder;
}

function runBuild(env: Record<string, string | undefined>) {
  const { DENORT_BIN: _, ...rest } = process.env;
  return spawnSync(process.execPath, ["--import", "tsx", "scripts/build-gateway.ts"], {
    cwd: ROOT,
    env: { ...rest, ...env },
    encoding: "utf8",
    timeout: 30_000,
  });
}

describe("build:gateway without a runtime build", () => {
  it("names the cache path it looked in and points to the bundle", async () => {
    const denoDir = await emptyFolder();
    const result = runBuild({ DENO_DIR: denoDir });
    expect(result.status).toBe(1);
    const lines = result.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^build:gateway: no Deno runtime build \(denort\) found/);
    expect(lines[0]).toContain("DENORT_BIN is unset");
    // Deno's cache layout: <DENO_DIR>/dl/release/v<version>/denort-<target>.zip.
    const cached = lines[0].split(" ").find((word) => word.startsWith(denoDir));
    expect(cached?.slice(denoDir.length)).toMatch(
      /^\/dl\/release\/v\d+\.\d+\.\d+\/denort-[\w-]+\.zip$/,
    );
    expect(lines[0]).toContain(`${cached} does not exist`);
    expect(lines[0]).toContain("npm run build:gateway -- --bundle");
    // deno compile never ran: it would have filled the cache folder.
    expect(await readdir(denoDir)).toEqual([]);
  });

  it("names DENORT_BIN when it points at a missing file", async () => {
    const missing = join(await emptyFolder(), "denort");
    const result = runBuild({ DENORT_BIN: missing });
    expect(result.status).toBe(1);
    expect(result.stderr.trim()).toBe(
      `build:gateway: DENORT_BIN is set to ${missing}, which does not exist`,
    );
  });
});
