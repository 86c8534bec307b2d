/**
 * Everything that runs under Deno, which `tsc` (Node's types) does not check: `npm run lint`
 * type-checks these with `deno check` (scripts/deno-check.ts). What starts a Deno process on a
 * file asks `denoEntry` first, so a new entry cannot be run before it is listed here.
 */
import { isAbsolute, join, relative, sep } from "node:path";
import { ROOT } from "./gateway-command.ts";

/** Folders checked whole: every file in them may run under Deno. */
export const DENO_FOLDERS: readonly string[] = [
  // The data plane: gateway/main.ts, gateway/app/isolate-worker.ts and all they load.
  "gateway/",
  // Runs unchanged on Deno and Node.
  "shared/",
  // The test kit's fixture gateway entry (testkit/gateway/fixture-gateway.ts).
  "testkit/gateway/fixture/",
];

/** Single files run with `deno run` (the benchmarks', scripts/bench/runtime.ts, services.ts). */
export const DENO_FILES: readonly string[] = [
  "scripts/bench/bare-relay.ts",
  "scripts/bench/bare-tls-relay.ts",
  "scripts/bench/core-entry.ts",
  "scripts/bench/collect-garbage.ts",
  "scripts/bench/render-entry.ts",
  "scripts/bench/feed-decode.ts",
  "scripts/bench/geo-lookup.ts",
  "scripts/bench/origin.ts",
  "scripts/bench/tls-mint.ts",
];

/** `path` (absolute, or from the checkout's root) once it is known to be type-checked. */
export function denoEntry(path: string): string {
  const fromRoot = relative(ROOT, isAbsolute(path) ? path : join(ROOT, path)).split(sep).join("/");
  const listed = DENO_FILES.includes(fromRoot) ||
    DENO_FOLDERS.some((folder) => fromRoot.startsWith(folder));
  if (!listed) {
    throw new Error(
      `${fromRoot} runs under Deno but no lint checks it: add it to scripts/deno-files.ts`,
    );
  }
  return path;
}
