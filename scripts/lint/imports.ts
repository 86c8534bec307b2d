/**
 * `npm run lint`'s import checks, on one module graph (Deno's, scripts/import-cycles.ts):
 * - every module sits in a layer of the floor plan (scripts/lint/layers.ts);
 * - no import points to a higher layer of its stack, or to a stack it may not use;
 * - no two folders import each other both ways;
 * - no module imports itself through others.
 * Each finding names the importing file and line and the imported file; the exit code is 1.
 *
 *   npx tsx scripts/lint/imports.ts          the checkout
 *   npx tsx scripts/lint/imports.ts <dir>    another tree (tests plant faults in one)
 */
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  checkedFiles,
  describeCycle,
  type Edge,
  findCycles,
  importGraph,
} from "../import-cycles.ts";
import { ROOT } from "../gateway-command.ts";
import { type Place, placeOf, refusal } from "./layers.ts";

/** What the checks found, as lines to print. */
export interface Findings {
  unplaced: string[];
  upward: string[];
  twoWay: string[];
  cycles: string[];
  modules: number;
}

export function checkImports(root: string = ROOT): Findings {
  const files = checkedFiles(root);
  const graph = importGraph(root, files);
  return judge(graph, files.length);
}

/** The findings of the rules over `graph` (module path to its imports). */
export function judge(graph: ReadonlyMap<string, readonly Edge[]>, modules: number): Findings {
  const unplaced = new Set<string>();
  const upward: string[] = [];
  /** `a -> b` folder pairs, with one import that makes each. */
  const between = new Map<string, string>();
  const place = (path: string): Place | undefined => {
    const found = placeOf(path);
    if (found === undefined) unplaced.add(path);
    return found;
  };
  for (const [from, edges] of [...graph].sort(([a], [b]) => a.localeCompare(b))) {
    const fromPlace = place(from);
    for (const edge of edges) {
      const toPlace = place(edge.to);
      if (fromPlace === undefined || toPlace === undefined) continue;
      const why = refusal(fromPlace, toPlace);
      if (why !== undefined) {
        upward.push(`${from}:${edge.line} imports ${edge.to}: ${why}`);
      }
      if (fromPlace.folder !== toPlace.folder) {
        const key = `${fromPlace.folder} -> ${toPlace.folder}`;
        if (!between.has(key)) between.set(key, `${from}:${edge.line} imports ${edge.to}`);
      }
    }
  }
  const twoWay: string[] = [];
  for (const [key, example] of between) {
    const [a, b] = key.split(" -> ");
    if (a > b) continue;
    const back = between.get(`${b} -> ${a}`);
    if (back === undefined) continue;
    twoWay.push(`${a} and ${b} import each other:\n  ${example}\n  ${back}`);
  }
  return {
    unplaced: [...unplaced].sort().map((path) =>
      `${path}: no layer holds it (add its folder to scripts/lint/layers.ts)`
    ),
    upward,
    twoWay,
    cycles: findCycles(graph).map(describeCycle),
    modules,
  };
}

/** Every finding, one entry each; empty when the tree keeps its plan. */
export function failures(findings: Findings): string[] {
  return [...findings.unplaced, ...findings.upward, ...findings.twoWay, ...findings.cycles];
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const findings = checkImports(resolve(process.argv[2] ?? ROOT));
  const found = failures(findings);
  if (found.length > 0) {
    for (const line of found) console.error(line);
    console.error(
      `${found.length} import finding(s): import down the layers (scripts/lint/layers.ts); ` +
        "put a contract two sides need in a file of its own, at the lower side",
    );
    process.exit(1);
  }
  console.log(
    `${findings.modules} modules keep the floor plan: no upward import, no two-way ` +
      "folders, no cycle",
  );
}
