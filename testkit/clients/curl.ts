/** curl with a deadline: its exit code and output, never a throw. */
import { execFile } from "node:child_process";

export interface CurlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function curl(args: string[], timeoutMs = 20_000): Promise<CurlResult> {
  return new Promise((resolve) => {
    execFile(
      "curl",
      ["-sS", "--max-time", String(timeoutMs / 1000), ...args],
      { encoding: "utf8", maxBuffer: 64 * 1024 * 1024, env: { PATH: process.env.PATH ?? "" } },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}
