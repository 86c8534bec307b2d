/**
 * The gateway as one JavaScript file for `deno run`, what `deno compile --bundle` would embed:
 * gateway/main.ts and the packages it imports (ioredis, @upstash/redis, valibot), bundled by
 * `deno bundle` (esbuild inside Deno), and the worker isolates' entry bundled beside it, since
 * isolates load it by URL, which no bundler follows. Needs no download of Deno's runtime build, only Deno.
 *
 * Run it with `deno run --no-config <the gateway's permissions, reading its folder> <file>`
 * (gatewayBundleRunArgs); nothing of this checkout is read at run time.
 */
import { spawn } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import {
  DENO_BIN,
  DENO_ENV,
  GATEWAY_BUNDLE,
  GATEWAY_ENTRY,
  GATEWAY_WORKER_BUNDLE_NAME,
  GATEWAY_WORKER_ENTRY,
  ROOT,
} from "./gateway-command.ts";

export interface GatewayBundle {
  /** The gateway's file, to give `deno run`. */
  bundle: string;
  /** The worker isolates' file, beside it. */
  worker: string;
}

function denoBundle(entry: string, output: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      DENO_BIN,
      ["bundle", "--platform", "deno", "--quiet", "--output", output, relative(ROOT, entry)],
      { cwd: ROOT, env: { ...process.env, ...DENO_ENV }, stdio: ["ignore", "ignore", "pipe"] },
    );
    let stderr = "";
    child.stderr!.setEncoding("utf8").on("data", (text: string) => {
      stderr += text;
    });
    child.once(
      "error",
      (error) => reject(new Error(`could not run ${DENO_BIN}`, { cause: error })),
    );
    child.once("exit", (code) => {
      if (code === 0) resolve();
      else reject(new Error(`deno bundle ${relative(ROOT, entry)} failed (${code}):\n${stderr}`));
    });
  });
}

/** Writes the bundle (and its worker beside it) at `output`: dist/octoprox-gateway.js unless told. */
export async function buildGatewayBundle(output: string = GATEWAY_BUNDLE): Promise<GatewayBundle> {
  await mkdir(dirname(output), { recursive: true });
  const worker = join(dirname(output), GATEWAY_WORKER_BUNDLE_NAME);
  await Promise.all([denoBundle(GATEWAY_ENTRY, output), denoBundle(GATEWAY_WORKER_ENTRY, worker)]);
  return { bundle: output, worker };
}
