/**
 * The docs hang together: every page of docs/ is linked from the index (docs/README.md), and every
 * relative link of README.md and docs/*.md reaches a file or folder that exists.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const DOCS = join(ROOT, "docs");
const PAGES = readdirSync(DOCS).filter((name) => name.endsWith(".md")).sort();

/** The targets of a page's markdown links and images, outside code blocks and code spans. */
function linkTargets(markdown: string): string[] {
  const prose = markdown.replace(/^```[^\n]*\n[\s\S]*?^```/gm, "").replace(/`[^`\n]*`/g, "");
  const targets: string[] = [];
  for (const match of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    targets.push(match[1]);
  }
  for (const match of prose.matchAll(/^\s*\[[^\]]+\]:\s*(\S+)/gm)) targets.push(match[1]);
  return targets;
}

/** Links that point into the checkout: no scheme, no bare fragment. */
function relativeTargets(markdown: string): string[] {
  return linkTargets(markdown).filter((target) =>
    !/^[a-z][a-z0-9+.-]*:/i.test(target) && !target.startsWith("#")
  );
}

describe("the docs index", () => {
  const index = readFileSync(join(DOCS, "README.md"), "utf8");
  const linked = new Set(
    relativeTargets(index).map((target) => decodeURIComponent(target.split("#")[0])),
  );

  it("links every page of docs/", () => {
    const missing = PAGES.filter((page) => page !== "README.md" && !linked.has(page));
    expect(missing).toEqual([]);
  });

  it("is linked from the README", () => {
    expect(relativeTargets(readFileSync(join(ROOT, "README.md"), "utf8"))).toContain(
      "docs/README.md",
    );
  });
});

describe("relative links resolve", () => {
  const files = [join(ROOT, "README.md"), ...PAGES.map((page) => join(DOCS, page))];
  for (const file of files) {
    it(relative(ROOT, file), () => {
      const broken = relativeTargets(readFileSync(file, "utf8")).filter((target) => {
        const path = decodeURIComponent(target.split("#")[0]);
        return path !== "" && !existsSync(join(dirname(file), path));
      });
      expect(broken).toEqual([]);
    });
  }
});
