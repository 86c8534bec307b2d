/**
 * The machine a benchmark ran on, as the bench's record states it: figures from two machines
 * differ by up to two times (docs/performance.md), so a figure without its machine says little.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { arch, availableParallelism, cpus, release, totalmem, type } from "node:os";
import { DENO_BIN, DENO_ENV } from "../gateway-command.ts";
import type { Machine } from "./record.ts";

/** The distribution's name from os-release, else the OS's. */
function osName(): string {
  try {
    const text = readFileSync("/etc/os-release", "utf8");
    const match = /^PRETTY_NAME="?([^"\n]*)"?$/m.exec(text);
    if (match) return match[1];
  } catch {
    // Not every system has the file: the OS's own name below.
  }
  return type();
}

/** The version of the Deno the gateway runs under (the npm package's binary). */
function denoVersion(): string {
  try {
    const text = execFileSync(DENO_BIN, ["--version"], {
      encoding: "utf8",
      env: { ...process.env, ...DENO_ENV },
      stdio: ["ignore", "pipe", "ignore"],
    });
    return /^deno (\S+)/.exec(text)?.[1] ?? "unknown";
  } catch {
    return "unknown";
  }
}

export function describeMachine(): Machine {
  return {
    cpu: cpus()[0]?.model.trim().replace(/\s+/g, " ") ?? "unknown",
    cores: availableParallelism(),
    memoryBytes: totalmem(),
    os: osName(),
    kernel: `${type()} ${release()} ${arch()}`,
    node: process.versions.node,
    deno: denoVersion(),
  };
}
