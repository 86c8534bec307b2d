/**
 * The control plane built whole: `main` (control/main.ts, every control process) and `cli`
 * (control/cli/main.ts, the `octoprox` bin), each bundled by esbuild into one file under
 * dist/control/, the packages left to node_modules. Node then loads one file instead of some
 * hundreds of modules through tsx's loader hooks, which is most of what a start costs: a control
 * process loads on about 0.4 of the CPU, a CLI command on about a third (`npm run bench -- start`).
 *
 * Each module keeps its own `import.meta.url` (rewritten to its source file's URL, found from the
 * bundle's), so the files it reads beside itself (Lua scripts, migrations, package.json, the
 * dashboard's build) are found as when run from the sources. A build writes a manifest of its
 * sources with their sizes and times (scripts/control-build-fresh.js), and `ensureControlBuild`
 * builds again only when one changed: `npm start`, the tests and the bin call it, so a checkout
 * never runs a stale build. `npm run build:control` builds both.
 */
import { execFile } from "node:child_process";
import { mkdir, readFile, rename, stat, writeFile } from "node:fs/promises";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { build, type Plugin } from "esbuild";
import {
  CONTROL_BUILD_DIR,
  controlBuildFresh,
  controlBundlePath,
  controlManifestPath,
} from "./control-build-fresh.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The builds and their entries. */
export const CONTROL_ENTRIES = {
  main: "control/main.ts",
  cli: "control/cli/main.ts",
} as const;
export type ControlBuild = keyof typeof CONTROL_ENTRIES;

/** This file and the freshness check: a change to how builds are made makes them stale too. */
const BUILD_SOURCES = ["scripts/build-control.ts", "scripts/control-build-fresh.js"];

/** `[size, mtimeMs]` of a file, as the manifest records it. */
async function stamp(path: string): Promise<[number, number]> {
  const info = await stat(path);
  return [info.size, info.mtimeMs];
}

/** A path from the checkout's root, with forward slashes. */
const fromRoot = (path: string) => relative(ROOT, path).split(sep).join("/");

/**
 * Loads the checkout's own TypeScript, each file's `import.meta.url` rewritten to its source's
 * URL (relative to the bundle's own, so the checkout can move), and stamps each file as it reads
 * it, so a file changed during the build is stale in the manifest rather than missed.
 */
function ownSources(outDir: string, inputs: Map<string, [number, number]>): Plugin {
  return {
    name: "octoprox-own-sources",
    setup(builder) {
      builder.onLoad({ filter: /\.tsx?$/ }, async (args) => {
        if (args.path.includes(`${sep}node_modules${sep}`)) return undefined;
        inputs.set(fromRoot(args.path), await stamp(args.path));
        const text = await readFile(args.path, "utf8");
        if (/import\.meta\.(?!url\b)\w/.test(text)) {
          return { errors: [{ text: "only import.meta.url is kept per module in a build" }] };
        }
        const url = JSON.stringify(relative(outDir, args.path).split(sep).join("/"));
        return {
          contents: text.replaceAll("import.meta.url", `new URL(${url}, import.meta.url).href`),
          loader: args.path.endsWith("x") ? "tsx" : "ts",
        };
      });
    },
  };
}

/**
 * Builds one bundle and its source map, then its manifest. Files are written beside their final
 * names and renamed into place, the map before the bundle and the manifest last, so a process
 * that finds the manifest current finds the bundle it describes, and two builds at once cannot
 * mix their files.
 */
export async function buildControl(name: ControlBuild): Promise<void> {
  const outfile = controlBundlePath(name);
  const inputs = new Map<string, [number, number]>();
  for (const path of BUILD_SOURCES) inputs.set(path, await stamp(join(ROOT, path)));
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: [join(ROOT, CONTROL_ENTRIES[name])],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    sourcemap: "linked",
    legalComments: "none",
    write: false,
    logLevel: "silent",
    plugins: [ownSources(dirname(outfile), inputs)],
  }).catch((error: unknown) => {
    throw new Error(`The control plane's build (${name}) failed: ${(error as Error).message}`, {
      cause: error,
    });
  });
  await mkdir(CONTROL_BUILD_DIR, { recursive: true });
  const suffix = `.build-${process.pid}-${Date.now()}`;
  const place = async (path: string, contents: string | Uint8Array) => {
    await writeFile(path + suffix, contents);
    await rename(path + suffix, path);
  };
  const files = [...result.outputFiles].sort((a, b) =>
    Number(b.path.endsWith(".map")) - Number(a.path.endsWith(".map"))
  );
  for (const file of files) await place(file.path, file.contents);
  await place(
    controlManifestPath(name),
    JSON.stringify({ entry: CONTROL_ENTRIES[name], inputs: Object.fromEntries(inputs) }),
  );
}

/** Builds `name` when it is missing or a source changed; says whether it built. */
export async function ensureControlBuild(name: ControlBuild): Promise<boolean> {
  if (controlBuildFresh(name)) return false;
  await buildControl(name);
  return true;
}

/**
 * The command of a control process (`OCTOPROX_ROLE` says which roles it runs): Node on the
 * `main` build, stack traces mapped back to the sources. Call `ensureControlBuild("main")` first.
 */
export function controlCommand(): [string, ...string[]] {
  return [process.execPath, "--enable-source-maps", controlBundlePath("main")];
}

/**
 * Runs `node --import <probe> ...args` to its exit with no OCTOPROX_* setting (a control process
 * then stops at its settings check, every module loaded) and answers what it wrote to stderr:
 * how the start bench and the start tests read what a start cost or loaded.
 */
export async function probedStart(probe: string, args: readonly string[]): Promise<string> {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("OCTOPROX_")) env[key] = value;
  }
  const result = await promisify(execFile)(process.execPath, ["--import", probe, ...args], {
    cwd: ROOT,
    env,
    timeout: 60_000,
  }).catch((error: { stderr?: string }) => ({ stderr: error.stderr ?? "" }));
  return result.stderr;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const name of Object.keys(CONTROL_ENTRIES) as ControlBuild[]) await buildControl(name);
  console.log(`Control plane built into ${fromRoot(CONTROL_BUILD_DIR)}`);
}
