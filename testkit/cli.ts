/**
 * The `octoprox` bin as a user runs it against an api of the test's own: a child process with
 * the parent's environment less every OCTOPROX_* (each test says which it means), no colour, and
 * the settings given (its config folder, the api's URL, the token), to its end.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { ROOT } from "./processes.ts";

export const CLI_BIN = join(ROOT, "control/cli/octoprox.js");

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Where a run goes: the api's port, the token it presents, the config folder it keeps. */
export interface CliTarget {
  port: number;
  token: string;
  configHome: string;
}

/** The parent's environment without OCTOPROX_*. */
export function cliBaseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("OCTOPROX_") && value !== undefined) env[key] = value;
  }
  return env;
}

/** Runs `octoprox ...args` at `target`; `env` adds to (or overrides) what the run is given. */
export function runCli(
  target: CliTarget,
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 120_000,
): Promise<CliRun> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [CLI_BIN, ...args], {
      cwd: ROOT,
      env: {
        ...cliBaseEnv(),
        NO_COLOR: "1",
        XDG_CONFIG_HOME: target.configHome,
        OCTOPROX_URL: `http://127.0.0.1:${target.port}`,
        OCTOPROX_TOKEN: target.token,
        ...env,
      },
      timeout: timeoutMs,
    }, (error, stdout, stderr) => {
      resolve({
        code: error ? (typeof error.code === "number" ? error.code : 1) : 0,
        stdout,
        stderr,
      });
    });
    child.stdin?.end();
  });
}
