/**
 * `npm run lint`'s floor-plan check (scripts/lint/imports.ts over scripts/lint/layers.ts) on
 * trees of its own: an import toward a higher layer fails naming both files, so does a stack
 * importing one it may not use, two folders importing each other both ways, and a folder no
 * layer holds; imports down and across pass, and so does the checkout itself.
 */
import { spawnSync } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/gateway-command.ts";
import { placeOf, STACKS } from "../../scripts/lint/layers.ts";

const trees: string[] = [];

afterEach(async () => {
  await Promise.all(trees.splice(0).map((tree) => rm(tree, { recursive: true, force: true })));
});

/** A tree with these files (path from the root: text), npm packages as the checkout has them. */
async function tree(files: Record<string, string>): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), "octoprox-layers-test-"));
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
  return spawnSync(process.execPath, ["--import", "tsx", "scripts/lint/imports.ts", root], {
    cwd: ROOT,
    encoding: "utf8",
  });
}

/** A module exporting one constant, importing `from` (specifiers relative to it). */
const module = (...from: string[]) =>
  from.map((specifier, i) => `import { x as x${i} } from "${specifier}";\n`).join("") +
  `export const x = ${from.length === 0 ? "1" : from.map((_, i) => `x${i}`).join(" + ")};\n`;

describe("the floor-plan check", () => {
  it("passes imports down and across the layers", async () => {
    const root = await tree({
      "shared/routing/router.ts": module("../net/ip.ts"),
      "shared/net/ip.ts": module(),
      "control/model/proxies.ts": module("../../shared/net/ip.ts"),
      "control/core/store.ts": module("../model/proxies.ts"),
      "control/services/proxies.ts": module("../core/store.ts", "../vendors/catalogue.ts"),
      "control/vendors/catalogue.ts": module("../core/store.ts"),
      "control/api/routes.ts": module("../services/proxies.ts"),
      "control/node/node.ts": module("../api/routes.ts"),
      "gateway/base/admission.ts": module(),
      "gateway/net/session.ts": module("../base/admission.ts", "../../shared/routing/router.ts"),
      "gateway/app/wiring.ts": module("../net/session.ts"),
      "tests/api/routes.test.ts": module("../../control/api/routes.ts"),
    });
    const result = runCheck(root);
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
    expect(result.stdout).toContain("keep the floor plan");
  });

  it("fails a planted upward import, naming both files and the layers", async () => {
    const root = await tree({
      "control/model/proxies.ts": module("../api/validation.ts"),
      "control/api/validation.ts": module(),
      "gateway/base/admission.ts": module(),
      "gateway/net/session.ts": module("../app/metrics.ts"),
      "gateway/app/metrics.ts": module("../base/admission.ts"),
    });
    const result = runCheck(root);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(
      "control/model/proxies.ts:1 imports control/api/validation.ts: " +
        "control's model layer may not import its adapters layer (higher)",
    );
    expect(result.stderr).toContain(
      "gateway/net/session.ts:1 imports gateway/app/metrics.ts: " +
        "gateway's net layer may not import its app layer (higher)",
    );
    expect(result.stderr).toContain("2 import finding(s)");
  });

  it("fails a stack importing one it may not use", async () => {
    const root = await tree({
      "shared/routing/router.ts": module("../../control/core/store.ts"),
      "control/core/store.ts": module(),
      "gateway/net/session.ts": module("../../control/core/store.ts"),
    });
    const result = runCheck(root);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(
      "shared/routing/router.ts:1 imports control/core/store.ts: " +
        "the shared stack may not import the control stack",
    );
    expect(result.stderr).toContain(
      "gateway/net/session.ts:1 imports control/core/store.ts: " +
        "the gateway stack may not import the control stack",
    );
  });

  it("fails two folders of one layer importing each other both ways", async () => {
    const root = await tree({
      "control/services/connectors.ts": module("../vendors/catalogue.ts"),
      "control/vendors/catalogue.ts": module(),
      "control/vendors/verify.ts": module("../services/store.ts"),
      "control/services/store.ts": module(),
    });
    const result = runCheck(root);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("control/services and control/vendors import each other");
    expect(result.stderr).toContain(
      "control/services/connectors.ts:1 imports control/vendors/catalogue.ts",
    );
    expect(result.stderr).toContain(
      "control/vendors/verify.ts:1 imports control/services/store.ts",
    );
  });

  it("fails a folder no layer holds", async () => {
    const root = await tree({ "control/newthing/a.ts": module() });
    const result = runCheck(root);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(
      "control/newthing/a.ts: no layer holds it (add its folder to scripts/lint/layers.ts)",
    );
  });

  it("places every folder of the checkout, and the checkout keeps its plan", () => {
    expect(placeOf("control/api/routes/proxies.ts")).toMatchObject({
      stack: "control",
      layer: "adapters",
      folder: "control/api",
    });
    expect(placeOf("scripts/bench/index.ts")).toMatchObject({ layer: "harnesses" });
    expect(placeOf("scripts/start.ts")).toMatchObject({ layer: "tooling" });
    expect(STACKS.map((stack) => stack.name)).toEqual([
      "shared",
      "db",
      "control",
      "gateway",
      "tools",
    ]);
    const result = runCheck(ROOT);
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
  });
});
