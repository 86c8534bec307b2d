/**
 * Runs a runtime-neutral benchmark entry (core-entry.ts, feed-decode.ts) in a fresh process
 * under Deno (the gateway's runtime: `deno run` with no permissions beyond `extra`) or Node
 * (tsx), and answers the JSON object it printed last.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { denoEntry } from "../deno-files.ts";
import { DENO_BIN, DENO_ENV, ROOT } from "../gateway-command.ts";

export type EntryRuntime = "deno" | "node";

/** BENCH_<NAME>_RUNTIME: deno (default) or node. */
export function entryRuntime(variable: string): EntryRuntime {
  const value = process.env[variable] ?? "deno";
  if (value !== "deno" && value !== "node") throw new Error(`${variable} must be deno or node`);
  return value;
}

export function runEntry<T>(
  runtime: EntryRuntime,
  script: string,
  args: string[] = [],
  denoFlags: string[] = [],
): Promise<T> {
  const path = join(ROOT, "scripts", "bench", script);
  const [command, argv] = runtime === "deno"
    ? [DENO_BIN, ["run", ...denoFlags, denoEntry(path), ...args]]
    : [process.execPath, ["--import", "tsx", path, ...args]];
  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, {
      cwd: ROOT,
      env: { ...process.env, ...DENO_ENV },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (text: string) => (stdout += text));
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text));
    child.once("error", reject);
    child.once("exit", (code) => {
      const last = stdout.trim().split("\n").pop() ?? "";
      try {
        if (code !== 0) throw new Error("failed");
        resolve(JSON.parse(last) as T);
      } catch {
        reject(
          new Error(`${script} under ${runtime} exited ${code}: ${stderr.trim().slice(-1500)}`),
        );
      }
    });
  });
}
