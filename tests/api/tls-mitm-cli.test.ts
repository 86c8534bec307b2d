/**
 * `octoprox projects` with the interception flags, as a user runs it (the bin, a child process)
 * against the admin API in process on a real socket: a project created with plain interception
 * and a bypass list, changed by `update`, its list cleared; a browser-grade mode refused with
 * exit 1 and the API's reason; a flag value outside the vocabulary refused before any request.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../../testkit/cli.ts";
import { type ApiHarness, listen, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
let api: { port: number; close(): Promise<void> };
let dir: string;

/** `octoprox ...args` as an editor, without a stored login. */
function octoprox(args: string[]) {
  return runCli({ port: api.port, token: h.tokens.editor, configHome: dir }, args);
}

async function json<T>(args: string[]): Promise<T> {
  const run = await octoprox([...args, "--json"]);
  if (run.code !== 0) {
    throw new Error(`octoprox ${args.join(" ")} exited ${run.code}: ${run.stderr}`);
  }
  return JSON.parse(run.stdout) as T;
}

interface Interception {
  tls_mitm_mode: string;
  tls_mitm_browser: string | null;
  tls_mitm_bypass: string[];
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "ox-mitm-cli-"));
  h = await startHarness();
  api = await listen(h.app);
});

afterAll(async () => {
  await api?.close();
  await h?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("octoprox projects and interception", () => {
  it("creates with plain and a bypass list, updates, clears the list, shows them", async () => {
    const created = await json<Interception>([
      "projects",
      "create",
      "shop",
      "--tls-mitm-mode",
      "plain",
      "--tls-mitm-bypass",
      "Bank.example, .pinned.example",
      "--tls-mitm-bypass",
      "bank.example",
    ]);
    expect(created).toMatchObject({
      tls_mitm_mode: "plain",
      tls_mitm_browser: null,
      tls_mitm_bypass: ["bank.example", ".pinned.example"],
    });
    const shown = await octoprox(["projects", "get", "shop"]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/TLS interception\s+plain/);
    expect(shown.stdout).toMatch(/Interception bypass\s+bank\.example, \.pinned\.example/);
    const listed = await octoprox(["projects", "list"]);
    expect(listed.stdout).toMatch(/shop\s+│\s+shop\s+│\s+\S+\s+│\s+plain/);

    const updated = await json<Interception>([
      "projects",
      "update",
      "shop",
      "--tls-mitm-bypass",
      "",
    ]);
    expect(updated).toMatchObject({ tls_mitm_mode: "plain", tls_mitm_bypass: [] });
    const off = await octoprox(["projects", "update", "shop", "--tls-mitm-mode", "off"]);
    expect(off.code, off.stderr).toBe(0);
    expect(off.stdout).toContain("Updated project shop");
    expect(off.stdout).toMatch(/TLS interception\s+off/);
  });

  it("refuses Safari with the API's reason, and a value off the list", async () => {
    const refused = await octoprox([
      "projects",
      "update",
      "shop",
      "--tls-mitm-mode",
      "override_ua",
      "--tls-mitm-browser",
      "safari",
    ]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("422");
    expect(refused.stderr).toContain("tls_mitm_browser");
    expect(refused.stderr).toContain("has no Safari fingerprint");
    const typo = await octoprox(["projects", "update", "shop", "--tls-mitm-mode", "on"]);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain("Allowed choices are off, plain, match_ua, override_ua");
    const nothing = await octoprox(["projects", "update", "shop"]);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toContain("Nothing to change");
    const [row] = await h.deps.database.sql`select tls_mitm_mode from projects`;
    expect(row.tls_mitm_mode).toBe("off");
  });
});
