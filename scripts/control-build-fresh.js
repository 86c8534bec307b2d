// @ts-check
/**
 * Whether a build of the control plane (scripts/build-control.ts) is current: its manifest lists
 * every source file the bundle was made from with its size and modification time, and each must
 * still match. Plain JavaScript, so the `octoprox` bin can ask before it loads any TypeScript.
 */
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
export const CONTROL_BUILD_DIR = join(ROOT, "dist", "control");

/**
 * The bundle of a build (`main` or `cli`).
 * @param {string} name
 */
export function controlBundlePath(name) {
  return join(CONTROL_BUILD_DIR, `${name}.mjs`);
}

/**
 * The manifest of a build: `{ inputs: { [path from the checkout]: [size, mtimeMs] } }`.
 * @param {string} name
 */
export function controlManifestPath(name) {
  return join(CONTROL_BUILD_DIR, `${name}.inputs.json`);
}

/**
 * Whether the bundle exists and no source it was made from changed since.
 * @param {string} name
 * @returns {boolean}
 */
export function controlBuildFresh(name) {
  /** @type {{ inputs: Record<string, [number, number]> }} */
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(controlManifestPath(name), "utf8"));
    statSync(controlBundlePath(name));
  } catch {
    return false;
  }
  for (const [path, [size, mtimeMs]] of Object.entries(manifest.inputs)) {
    const info = statSync(join(ROOT, path), { throwIfNoEntry: false });
    if (!info || info.size !== size || info.mtimeMs !== mtimeMs) return false;
  }
  return true;
}
