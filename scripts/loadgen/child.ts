/**
 * Runs proxy-loadgen in a child process of its own (the benchmarks do), so its CPU is its own
 * and its event loop shares nothing with the bench's. Answers the child's JSON report and its
 * pid's CPU as /proc saw it.
 */
import { spawn } from "node:child_process";
import type { LoadOptions } from "./options.ts";
import { toCommandLine } from "./options.ts";
import type { LoadHooks, LoadReport } from "./run.ts";

const CLI = new URL("./cli.ts", import.meta.url).pathname;
/** The checkout's root, where `--import tsx` resolves. */
const ROOT = new URL("../..", import.meta.url).pathname;

export function runLoadInChild(options: LoadOptions, hooks: LoadHooks = {}): Promise<LoadReport> {
  return runReportingChild<LoadReport>(
    "proxy-loadgen",
    [CLI, ...toCommandLine(options), "--json"],
    hooks.onWindow,
  );
}

/**
 * Runs a load script of the checkout (`node --import tsx <args>`) in a child process of its own:
 * `onWindow` hears the `{"window": "start"|"end"}` lines it prints as they come, and its last line
 * is its JSON report. `name` names it in the error when it exits without one.
 */
export function runReportingChild<Report>(
  name: string,
  args: readonly string[],
  onWindow?: (phase: "start" | "end") => void,
): Promise<Report> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", ...args], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let seen = 0;
    child.stdout.setEncoding("utf8").on("data", (text: string) => {
      stdout += text;
      // Window lines as they come; the report is the last line.
      for (;;) {
        const end = stdout.indexOf("\n", seen);
        if (end < 0) break;
        const line = stdout.slice(seen, end);
        seen = end + 1;
        if (line.startsWith('{"window"')) {
          onWindow?.((JSON.parse(line) as { window: "start" | "end" }).window);
        }
      }
    });
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text));
    child.once("error", reject);
    child.once("exit", (code) => {
      const line = stdout.trim().split("\n").pop() ?? "";
      try {
        resolve(JSON.parse(line) as Report);
      } catch {
        reject(new Error(`${name} exited ${code}: ${stderr.trim() || stdout.trim()}`));
      }
    });
  });
}
