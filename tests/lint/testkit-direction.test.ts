/**
 * Which way the test trees import: tests, e2e and the harness scripts (bench, loadgen, fuzz,
 * overload, screenshots) import the test kit (testkit/); the kit imports production code and
 * the tooling scripts it needs, never tests/ or e2e/; tooling scripts import none of testkit,
 * tests or e2e; tests and e2e do not import each other. Read off every relative import of the
 * checkout's TypeScript (static, dynamic and re-exports).
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative, sep } from "node:path";
import { expect, it } from "vitest";
import { ROOT } from "../../scripts/gateway-command.ts";

const TREES = ["testkit", "tests", "e2e", "scripts"] as const;
const HARNESS = /^scripts\/(bench|loadgen|fuzz|overload|screenshots)/;
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)"(\.{1,2}\/[^"]+)"/gm;

function files(folder: string): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (/\.tsx?$/.test(entry.name)) found.push(path);
    }
  };
  walk(join(ROOT, folder));
  return found;
}

/** Every `from -> to` import between the trees that breaks the direction. */
function wrongImports(): string[] {
  const wrong: string[] = [];
  for (const tree of TREES) {
    for (const file of files(tree)) {
      const from = relative(ROOT, file).split(sep).join("/");
      for (const match of readFileSync(file, "utf8").matchAll(SPECIFIER)) {
        const to = relative(ROOT, normalize(join(dirname(file), match[1]))).split(sep).join("/");
        const target = to.split("/")[0];
        const allowed = tree === "testkit"
          ? target !== "tests" && target !== "e2e"
          : tree === "scripts" && !HARNESS.test(from)
          ? !["testkit", "tests", "e2e"].includes(target)
          : tree === "tests" || tree === "e2e"
          ? target === tree || !["tests", "e2e"].includes(target)
          : !["tests", "e2e"].includes(target);
        if (!allowed) wrong.push(`${from} -> ${to}`);
      }
    }
  }
  return wrong;
}

it("keeps the test kit below the tests and the tooling scripts below the kit", () => {
  expect(wrongImports()).toEqual([]);
});
