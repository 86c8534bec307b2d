/**
 * The dashboard's build (control/web, by Vite, into dist/web). `npm run build:web` builds it;
 * `ensureWebBuild` builds it only when the build is missing or older than any of its sources
 * (the app's files, the shared modules it imports, the lock file), which `npm start` and the
 * browser tests call.
 */
import { execFile } from "node:child_process";
import { readdir, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
export const WEB_SOURCE_DIR = join(ROOT, "control", "web");
export const WEB_BUILD_DIR = join(ROOT, "dist", "web");
export const WEB_BUILD_INDEX = join(WEB_BUILD_DIR, "index.html");
const VITE_BIN = join(ROOT, "node_modules", ".bin", "vite");
const CONFIG = join(WEB_SOURCE_DIR, "vite.config.ts");
/**
 * Sources besides control/web: what the app imports from shared/ and control/model/ (the one
 * secret mask), and the packages. Answer types come from control/api/answers as types only.
 */
const OTHER_SOURCES = [
  join(ROOT, "shared"),
  join(ROOT, "control", "model"),
  join(ROOT, "package-lock.json"),
];

/** The newest modification time under `path` (a file or a folder, walked whole). */
async function newestMs(path: string): Promise<number> {
  const info = await stat(path).catch(() => undefined);
  if (!info) return 0;
  if (!info.isDirectory()) return info.mtimeMs;
  let newest = info.mtimeMs;
  for (const entry of await readdir(path)) {
    if (entry === "node_modules" || entry === "dist") continue;
    newest = Math.max(newest, await newestMs(join(path, entry)));
  }
  return newest;
}

/** Whether the build is missing or older than a source. */
export async function webBuildStale(): Promise<boolean> {
  const built = await stat(WEB_BUILD_INDEX).catch(() => undefined);
  if (!built) return true;
  let newest = await newestMs(WEB_SOURCE_DIR);
  for (const path of OTHER_SOURCES) newest = Math.max(newest, await newestMs(path));
  return newest > built.mtimeMs;
}

/**
 * Builds the dashboard (about 2 s) into a folder of its own, then swaps it in by renames, so an
 * api serving the old build never finds it half written, and two builds at once cannot mix
 * files. The build's own errors are thrown with its output.
 */
export async function buildWeb(): Promise<void> {
  const stamp = `${process.pid}-${Date.now()}`;
  const staging = `${WEB_BUILD_DIR}.build-${stamp}`;
  try {
    await promisify(execFile)(VITE_BIN, ["build", "--config", CONFIG, "--outDir", staging], {
      cwd: ROOT,
      maxBuffer: 16 * 1024 * 1024,
    });
    const retired = `${WEB_BUILD_DIR}.old-${stamp}`;
    await rename(WEB_BUILD_DIR, retired).catch(() => undefined);
    await rename(staging, WEB_BUILD_DIR);
    await rm(retired, { recursive: true, force: true });
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    const failure = error as { stdout?: string; stderr?: string };
    throw new Error(
      `The dashboard's build failed:\n${failure.stderr ?? ""}${failure.stdout ?? ""}`,
      { cause: error },
    );
  }
}

/** Builds the dashboard when it is missing or stale; says whether it built. */
export async function ensureWebBuild(): Promise<boolean> {
  if (!(await webBuildStale())) return false;
  await buildWeb();
  return true;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await buildWeb();
  console.log(`Dashboard built into ${join("dist", "web")}`);
}
