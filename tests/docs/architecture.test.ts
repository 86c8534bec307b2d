/**
 * docs/architecture.md's "Where code lives" names every folder: each folder of control/, gateway/
 * and shared/ (control/web/src down to its top level only), and the checkout's other code folders.
 * A folder added on disk and not named there fails here; so does one named there that is gone.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** Top-level folders named alone; `testkit/` may not exist yet in every checkout. */
const TOP_LEVEL = ["db", "scripts", "tests", "e2e", "testkit"];
const OPTIONAL = new Set(["testkit/"]);
/** Folders whose subfolders are their own business. */
const NOT_DESCENDED = new Set(["control/web/src"]);

function foldersUnder(relativePath: string): string[] {
  const found = [`${relativePath}/`];
  if (NOT_DESCENDED.has(relativePath)) return found;
  for (const entry of readdirSync(join(ROOT, relativePath), { withFileTypes: true })) {
    if (!entry.isDirectory() || entry.name.startsWith(".") || entry.name === "node_modules") {
      continue;
    }
    found.push(...foldersUnder(`${relativePath}/${entry.name}`));
  }
  return found;
}

function whereCodeLives(): Set<string> {
  const page = readFileSync(join(ROOT, "docs/architecture.md"), "utf8");
  const start = page.indexOf("## Where code lives");
  expect(start, 'docs/architecture.md has a section "Where code lives"').toBeGreaterThan(-1);
  const rest = page.slice(start + 3);
  const next = rest.search(/^## /m);
  const section = next === -1 ? rest : rest.slice(0, next);
  return new Set([...section.matchAll(/^\|\s*`([^`]+\/)`/gm)].map((match) => match[1]));
}

it("names every folder of control/, gateway/ and shared/, and the other code folders", () => {
  const onDisk = [
    ...["control", "gateway", "shared"].flatMap(foldersUnder),
    ...TOP_LEVEL.filter((name) => existsSync(join(ROOT, name))).map((name) => `${name}/`),
  ];
  const named = whereCodeLives();
  expect(onDisk.filter((folder) => !named.has(folder))).toEqual([]);
});

it("names no folder that is gone", () => {
  const gone = [...whereCodeLives()].filter((folder) =>
    !OPTIONAL.has(folder) && !existsSync(join(ROOT, folder))
  );
  expect(gone).toEqual([]);
});

it("holds the layers section as `npm run docs` writes it from the floor plan", async () => {
  const { ARCHITECTURE_PAGE, architecturePage } = await import("../../scripts/docs/layers.ts");
  const page = readFileSync(ARCHITECTURE_PAGE, "utf8");
  expect(page).toContain("## Layers");
  expect(architecturePage(page), "docs/architecture.md is stale: run `npm run docs`").toBe(page);
});
