/**
 * The systemd units in infra/systemd/ as systemd reads them: `systemd-analyze verify` on every
 * unit, with no warning or error printed, and an env example whose every OCTOPROX_* line is a
 * real setting with a value the settings accept.
 *
 * verify runs in a root of its own (--root): the units under etc/systemd/system, the host's
 * system units beside them (sysinit.target and the others every service depends on), and an
 * empty executable at each ExecStart path, which verify checks exists. The user the units run
 * as need not exist for verify. --man=no and --generators=no: no man pages to look up, and no
 * generators to run in a container without systemd as PID 1.
 */
import { execFile } from "node:child_process";
import { chmod, cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  parseControlSettings,
  parseGatewaySettings,
  SETTING_NAMES,
} from "../../shared/settings.ts";
import { ROOT } from "../../testkit/processes.ts";

const run = promisify(execFile);
const SYSTEMD_ANALYZE = process.env.OCTOPROX_SYSTEMD_ANALYZE_BIN ?? "/usr/bin/systemd-analyze";
const UNITS_DIR = join(ROOT, "infra", "systemd");
const HOST_UNITS = "/usr/lib/systemd/system";

let root: string;
let units: string[];

/** `Key=value` lines of a unit or env file, comments and continuations left out. */
function assignments(text: string): { key: string; value: string }[] {
  return text.split("\n").flatMap((line) => {
    const match = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line.trim());
    return match ? [{ key: match[1], value: match[2] }] : [];
  });
}

beforeAll(async () => {
  units = (await readdir(UNITS_DIR)).filter((name) => name.endsWith(".service")).sort();
  root = await mkdtemp(join(tmpdir(), "ox-systemd-verify-"));
  const unitDir = join(root, "etc", "systemd", "system");
  await mkdir(unitDir, { recursive: true });
  await cp(HOST_UNITS, join(root, HOST_UNITS), { recursive: true });
  for (const unit of units) {
    const text = await readFile(join(UNITS_DIR, unit), "utf8");
    await writeFile(join(unitDir, unit), text);
    for (const { key, value } of assignments(text)) {
      if (key !== "ExecStart") continue;
      // A stub where the command will be installed; verify only checks it is executable.
      const path = value.replace(/^[-@:+!]+/, "").split(/\s+/)[0];
      await mkdir(join(root, dirname(path)), { recursive: true });
      await writeFile(join(root, path), "#!/bin/sh\nexit 0\n");
      await chmod(join(root, path), 0o755);
    }
  }
});

afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

describe("systemd units", () => {
  it("has the four units", () => {
    expect(units).toEqual([
      "octoprox-api.service",
      "octoprox-controller.service",
      "octoprox-gateway.service",
      "octoprox-worker.service",
    ]);
  });

  it("passes systemd-analyze verify with nothing printed", async () => {
    const paths = units.map((unit) => join(root, "etc", "systemd", "system", unit));
    const result = await run(
      SYSTEMD_ANALYZE,
      ["verify", `--root=${root}`, "--man=no", "--generators=no", ...paths],
      { cwd: root },
    ).then(
      ({ stdout, stderr }) => ({ code: 0, output: stdout + stderr }),
      (error: { code?: number; stdout?: string; stderr?: string }) => ({
        code: error.code,
        output: `${error.stdout ?? ""}${error.stderr ?? ""}`,
      }),
    );
    expect(result).toEqual({ code: 0, output: "" });
  });

  it("sees verify complain about a broken unit (the check is not blind)", async () => {
    const broken = join(root, "etc", "systemd", "system", "octoprox-broken.service");
    await writeFile(
      broken,
      "[Service]\nExecStart=/opt/octoprox/bin/missing\nRestart=sometimes\n",
    );
    const failed = await run(
      SYSTEMD_ANALYZE,
      ["verify", `--root=${root}`, "--man=no", "--generators=no", broken],
      { cwd: root },
    ).then(() => undefined, (error: { stderr?: string }) => error.stderr ?? "");
    await rm(broken);
    expect(failed).toContain("Failed to parse service restart specifier");
    expect(failed).toContain("/opt/octoprox/bin/missing");
  });

  it("sets only real OCTOPROX_* settings in the units", async () => {
    for (const unit of units) {
      const text = await readFile(join(UNITS_DIR, unit), "utf8");
      const names = assignments(text)
        .filter(({ key }) => key === "Environment")
        .map(({ value }) => value.split("=")[0])
        .filter((name) => name.startsWith("OCTOPROX_"));
      expect(names.filter((name) => !SETTING_NAMES.includes(name)), unit).toEqual([]);
    }
  });
});

describe("octoprox.env.example", () => {
  let text: string;
  beforeAll(async () => {
    text = await readFile(join(UNITS_DIR, "octoprox.env.example"), "utf8");
  });

  it("names only real settings, set or commented out", () => {
    const named = [...text.matchAll(/^#?(OCTOPROX_[A-Z0-9_]+)=/gm)].map((match) => match[1]);
    expect(named.length).toBeGreaterThan(10);
    expect(named.filter((name) => !SETTING_NAMES.includes(name))).toEqual([]);
  });

  it("does not set what the units set themselves", () => {
    const set = assignments(text).map(({ key }) => key);
    expect(set).not.toContain("OCTOPROX_ROLE");
    expect(set).not.toContain("OCTOPROX_API_PORT");
  });

  it("is taken by both sides once its secrets are filled in", () => {
    const env: Record<string, string> = {};
    for (const { key, value } of assignments(text)) env[key] = value;
    // The placeholders are short on purpose: nothing starts until they are replaced.
    expect(() => parseControlSettings(env)).toThrow(/OCTOPROX_INTERNAL_SECRET/);
    env.OCTOPROX_INTERNAL_SECRET = "i".repeat(64);
    env.OCTOPROX_JWT_SECRET = "j".repeat(64);
    expect(parseControlSettings({ ...env, OCTOPROX_ROLE: "api" }).apiHost).toBe("0.0.0.0");
    const gateway = parseGatewaySettings(env);
    expect([gateway.proxyPort, gateway.statusPort]).toEqual([8080, 8081]);
  });
});
