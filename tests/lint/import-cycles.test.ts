/**
 * `npm run lint`'s import-cycle check (scripts/import-cycles.ts) on trees of its own: it finds
 * a cycle of value imports, one closed by a type-only import, one through three modules, and
 * one on the Node side beside npm imports; it prints each and exits 1; an acyclic tree, and the
 * checkout itself, pass.
 */
import { spawnSync } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { describeCycle, importCycles } from "../../scripts/import-cycles.ts";
import { ROOT } from "../../scripts/gateway-command.ts";

const trees: string[] = [];

afterEach(async () => {
  await Promise.all(trees.splice(0).map((tree) => rm(tree, { recursive: true, force: true })));
});

/** A tree with these files (path from the root: text), npm packages as the checkout has them. */
async function tree(files: Record<string, string>): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), "octoprox-cycles-test-"));
  trees.push(root);
  await symlink(join(ROOT, "node_modules"), join(root, "node_modules"));
  await writeFile(join(root, "package.json"), JSON.stringify({ type: "module" }));
  for (const [path, text] of Object.entries(files)) {
    await mkdir(dirname(join(root, path)), { recursive: true });
    await writeFile(join(root, path), text);
  }
  return root;
}

function runCheck(root: string) {
  return spawnSync(process.execPath, ["--import", "tsx", "scripts/import-cycles.ts", root], {
    cwd: ROOT,
    encoding: "utf8",
  });
}

describe("the import-cycle check", () => {
  it("finds every cycle, type-only imports and the Node side's included", async () => {
    const root = await tree({
      "gateway/session.ts": 'import { forward } from "./forward.ts";\nexport const s = forward;\n',
      "gateway/forward.ts": 'import type { s } from "./session.ts";\nexport const forward = 1;\n',
      "shared/a.ts": 'export { b } from "./b.ts";\n',
      "shared/b.ts": 'import { c } from "./c.ts";\nexport const b = c;\n',
      "shared/c.ts": 'import { b } from "./a.ts";\nexport const c = 3;\nexport { b };\n',
      "control/api.ts": [
        'import { Hono } from "hono";',
        'import * as v from "valibot";',
        'import { readFileSync } from "node:fs";',
        'import { route } from "./route.ts";',
        "export const api = [Hono, v, readFileSync, route];",
        "",
      ].join("\n"),
      "control/route.ts": 'import { api } from "./api.ts";\nexport const route = () => api;\n',
      "tests/fine.test.ts": 'import { b } from "../shared/b.ts";\nexport const fine = b;\n',
    });
    const cycles = importCycles(root);
    expect(cycles.map((steps) => steps.map((step) => step.from))).toEqual([
      ["control/api.ts", "control/route.ts"],
      ["gateway/forward.ts", "gateway/session.ts"],
      ["shared/a.ts", "shared/b.ts", "shared/c.ts"],
    ]);
    expect(describeCycle(cycles[1])).toBe(
      [
        "Import cycle: gateway/forward.ts -> gateway/session.ts -> gateway/forward.ts",
        '  gateway/forward.ts:1 imports "./session.ts"',
        '  gateway/session.ts:1 imports "./forward.ts"',
      ].join("\n"),
    );

    const run = runCheck(root);
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(
      "Import cycle: shared/a.ts -> shared/b.ts -> shared/c.ts -> shared/a.ts",
    );
    expect(run.stderr).toContain('control/route.ts:1 imports "./api.ts"');
    expect(run.stderr).toContain("3 import cycle(s)");
  });

  it("finds a module importing itself", async () => {
    const root = await tree({ "db/self.ts": 'import "./self.ts";\nexport const self = 1;\n' });
    expect(importCycles(root).map((steps) => steps.map((step) => step.to))).toEqual([
      ["db/self.ts"],
    ]);
  });

  it("fails on a module it cannot read rather than pass", async () => {
    const root = await tree({ "scripts/broken.ts": "export const = ;\n" });
    expect(() => importCycles(root)).toThrow(/scripts\/broken.ts: SyntaxError/);
  });

  it("passes an acyclic tree, and the checkout", async () => {
    const root = await tree({
      "gateway/contract.ts": "export interface Session { id: string }\n",
      "gateway/session.ts":
        'import type { Session } from "./contract.ts";\nimport { forward } from "./forward.ts";\n' +
        "export const s: Session = { id: String(forward) };\n",
      "gateway/forward.ts":
        'import type { Session } from "./contract.ts";\nexport const forward = (s?: Session) => s;\n',
    });
    expect(importCycles(root)).toEqual([]);
    const run = runCheck(root);
    expect(run.status).toBe(0);
    expect(run.stdout).toContain("No import cycles among 3 modules");
    expect(importCycles()).toEqual([]);
  });
});
