/**
 * `npm run lint`'s import-cycle check: no TypeScript module of the checkout may import itself
 * through others, type-only imports included (two sides that depend on each other share a
 * contract in a file of its own instead). The module graph is Deno's own (`deno info --json`),
 * which resolves the Node side's files as well (bare npm names stay outside it), so what is
 * checked is what the runtimes load. Every cycle found is printed, one line per import in it,
 * and the exit code is 1.
 *
 *   npx tsx scripts/import-cycles.ts          the checkout
 *   npx tsx scripts/import-cycles.ts <dir>    another tree (the folders below, where present)
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { DENO_BIN, DENO_ENV, ROOT } from "./gateway-command.ts";

/** Where the checkout's TypeScript lives, besides its top-level files. */
export const CHECKED_FOLDERS: readonly string[] = [
  "gateway",
  "shared",
  "control",
  "db",
  "scripts",
  "testkit",
  "tests",
  "e2e",
];

const SKIPPED = new Set(["node_modules", "dist", "data"]);

/** One import of a cycle: `from` imports `to` with `specifier` at `line` (1-based). */
export interface CycleStep {
  from: string;
  to: string;
  specifier: string;
  line: number;
}

/** Every `.ts` file of `root`'s checked folders and its top level, paths from `root`. */
export function checkedFiles(root: string): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (SKIPPED.has(entry.name)) continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (/\.tsx?$/.test(entry.name)) files.push(relative(root, path).split(sep).join("/"));
    }
  };
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    if (entry.isFile() && entry.name.endsWith(".ts")) files.push(entry.name);
  }
  for (const folder of CHECKED_FOLDERS) {
    if (existsSync(join(root, folder))) walk(join(root, folder));
  }
  return files.sort();
}

/** What `deno info --json` tells of one module (the fields read here). */
interface InfoModule {
  specifier: string;
  /** Why Deno could not read the module (a syntax error, a missing file). */
  error?: string;
  dependencies?: {
    specifier: string;
    code?: { specifier?: string; span?: { start: { line: number } } };
    type?: { specifier?: string; span?: { start: { line: number } } };
  }[];
}

export interface Edge {
  to: string;
  specifier: string;
  line: number;
}

/**
 * The import graph of `files` (paths from `root`) as Deno resolves it: one `deno info` of an
 * entry that imports them all. Only edges between `root`'s own modules are kept.
 */
export function importGraph(root: string, files: readonly string[]): Map<string, Edge[]> {
  const scratch = mkdtempSync(join(tmpdir(), "octoprox-import-cycles-"));
  try {
    const entry = join(scratch, "entry.ts");
    writeFileSync(
      entry,
      files.map((file) => `import ${JSON.stringify(pathToFileURL(join(root, file)).href)};\n`)
        .join(""),
    );
    const result = spawnSync(DENO_BIN, ["info", "--json", entry], {
      cwd: root,
      env: { ...process.env, ...DENO_ENV },
      encoding: "utf8",
      maxBuffer: 256 * 1024 * 1024,
    });
    if (result.error) throw result.error;
    if (result.status !== 0) {
      throw new Error(`deno info failed (exit ${result.status}): ${result.stderr.trim()}`);
    }
    const info = JSON.parse(result.stdout) as { modules: InfoModule[] };
    const own = (specifier: string | undefined): string | undefined => {
      if (specifier === undefined || !specifier.startsWith("file:")) return undefined;
      const path = relative(root, fileURLToPath(specifier)).split(sep).join("/");
      if (path.startsWith("..") || path.split("/").some((part) => SKIPPED.has(part))) {
        return undefined;
      }
      return path;
    };
    const graph = new Map<string, Edge[]>();
    const unread: string[] = [];
    for (const module of info.modules) {
      const from = own(module.specifier);
      if (from === undefined) continue;
      // A module Deno could not read could hide a cycle: the check fails rather than pass.
      if (module.error !== undefined && /\.tsx?$/.test(from)) {
        unread.push(`${from}: ${module.error}`);
      }
      const edges: Edge[] = [];
      for (const dependency of module.dependencies ?? []) {
        // A value import and a type-only one of the same file are one edge.
        const resolved = dependency.code ?? dependency.type;
        const to = own(dependency.code?.specifier ?? dependency.type?.specifier);
        if (to === undefined) continue;
        edges.push({
          to,
          specifier: dependency.specifier,
          line: (resolved?.span?.start.line ?? 0) + 1,
        });
      }
      graph.set(from, edges);
    }
    if (unread.length > 0) {
      throw new Error(`Modules the import graph cannot be read for:\n${unread.join("\n")}`);
    }
    return graph;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/**
 * The cycles of `graph`: one per strongly connected component of more than one module (or a
 * module importing itself), as the shortest way round from its first module by name.
 */
export function findCycles(graph: ReadonlyMap<string, readonly Edge[]>): CycleStep[][] {
  // Tarjan's algorithm, iterative: the graph is a few hundred modules deep at most, but a
  // recursion per module is no way to find out.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  let counter = 0;
  for (const start of [...graph.keys()].sort()) {
    if (index.has(start)) continue;
    const work: { node: string; next: number }[] = [{ node: start, next: 0 }];
    index.set(start, counter);
    low.set(start, counter++);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const frame = work[work.length - 1];
      const edges = graph.get(frame.node) ?? [];
      if (frame.next < edges.length) {
        const to = edges[frame.next++].to;
        if (!index.has(to)) {
          index.set(to, counter);
          low.set(to, counter++);
          stack.push(to);
          onStack.add(to);
          work.push({ node: to, next: 0 });
        } else if (onStack.has(to)) {
          low.set(frame.node, Math.min(low.get(frame.node)!, index.get(to)!));
        }
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1].node;
        low.set(parent, Math.min(low.get(parent)!, low.get(frame.node)!));
      }
      if (low.get(frame.node) === index.get(frame.node)) {
        const component: string[] = [];
        for (;;) {
          const node = stack.pop()!;
          onStack.delete(node);
          component.push(node);
          if (node === frame.node) break;
        }
        const selfLoop = (graph.get(frame.node) ?? []).some((edge) => edge.to === frame.node);
        if (component.length > 1 || selfLoop) components.push(component.sort());
      }
    }
  }
  return components.sort((a, b) => a[0].localeCompare(b[0])).map((component) =>
    shortestCycle(graph, component)
  );
}

/** The shortest way from the component's first module back to it, inside the component. */
function shortestCycle(
  graph: ReadonlyMap<string, readonly Edge[]>,
  component: readonly string[],
): CycleStep[] {
  const members = new Set(component);
  const start = component[0];
  const cameBy = new Map<string, CycleStep>();
  const queue = [start];
  for (let at = 0; at < queue.length; at++) {
    const from = queue[at];
    for (const edge of graph.get(from) ?? []) {
      if (!members.has(edge.to)) continue;
      const step = { from, to: edge.to, specifier: edge.specifier, line: edge.line };
      if (edge.to === start) {
        const steps = [step];
        for (let back = cameBy.get(from); back !== undefined; back = cameBy.get(back.from)) {
          steps.unshift(back);
        }
        return steps;
      }
      if (cameBy.has(edge.to)) continue;
      cameBy.set(edge.to, step);
      queue.push(edge.to);
    }
  }
  throw new Error(`No cycle through ${start}: not a strongly connected component`);
}

/** The lines that tell one cycle. */
export function describeCycle(steps: readonly CycleStep[]): string {
  const path = [steps[0].from, ...steps.map((step) => step.to)].join(" -> ");
  const lines = steps.map((step) => `  ${step.from}:${step.line} imports "${step.specifier}"`);
  return [`Import cycle: ${path}`, ...lines].join("\n");
}

/** The cycles among `root`'s modules (the checkout's by default). */
export function importCycles(root: string = ROOT): CycleStep[][] {
  return findCycles(importGraph(root, checkedFiles(root)));
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = resolve(process.argv[2] ?? ROOT);
  const cycles = importCycles(root);
  if (cycles.length > 0) {
    for (const cycle of cycles) console.error(describeCycle(cycle));
    console.error(
      `${cycles.length} import cycle(s): put the contract both sides need in a file of its own`,
    );
    process.exit(1);
  }
  console.log(`No import cycles among ${checkedFiles(root).length} modules`);
}
