/**
 * Daemons the tests and benchmarks run as upstreams (Squid, Dante, a chained tinyproxy): the
 * service shape the bench measures, started in the foreground, killed when the process exits.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { portAccepts } from "../ports.ts";
import { waitUntil } from "../wait.ts";

export interface Service {
  readonly name: string;
  readonly port: number;
  /** The processes whose CPU is the service's. */
  readonly pids: number[];
  /** What it printed so far (standard output and error), where the bench keeps it. */
  output?(): string[];
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

export function track(child: ChildProcess): ChildProcess {
  live.add(child);
  child.once("exit", () => live.delete(child));
  return child;
}

export async function stopChild(child: ChildProcess, graceMs = 5_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await exited;
  clearTimeout(timer);
}

/**
 * Starts a daemon configured in `dir` (kept in the foreground) and answers once it accepts on
 * 127.0.0.1:`port`; if it exits or never listens, it is stopped, `dir` removed, and the error
 * holds its output (and `log`, where it writes more).
 */
export async function spawnListening(
  name: string,
  command: string,
  args: string[],
  where: { dir: string; port: number; log?: () => Promise<string> },
): Promise<ChildProcess> {
  const child = track(spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] }));
  let output = "";
  child.stdout!.setEncoding("utf8").on("data", (text: string) => (output += text));
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (output += text));
  try {
    await waitUntil(async () => {
      if (child.exitCode !== null) {
        const log = await (where.log?.() ?? Promise.resolve("")).catch(() => "");
        throw new Error(`${name} exited: ${output} ${log}`);
      }
      return await portAccepts("127.0.0.1", where.port, 500);
    }, { timeoutMs: 20_000, intervalMs: 50, message: `${name} to listen` });
  } catch (error) {
    await stopChild(child);
    await rm(where.dir, { recursive: true, force: true });
    throw error;
  }
  return child;
}

/** Every process below `pid` now, from /proc's children lists (none once it is gone). */
export function descendants(pid: number): number[] {
  const found: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const parent = queue.shift()!;
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${parent}/task`);
    } catch {
      continue;
    }
    for (const task of tasks) {
      let text = "";
      try {
        text = readFileSync(`/proc/${parent}/task/${task}/children`, "utf8");
      } catch {
        continue;
      }
      for (const child of text.split(" ").filter(Boolean).map(Number)) {
        found.push(child);
        queue.push(child);
      }
    }
  }
  return found;
}
