/**
 * What the CPU suites share to see where a process's time goes: pinning a process (every thread)
 * to CPUs, and a `perf record -g` profile of it over one load from the load generator, its
 * samples by area (kernel, the deno binary, JIT-compiled JavaScript, libc) and by top frame, and
 * folded as a flame graph takes them. JavaScript frames have names when the process runs with
 * V8's `--perf-basic-prof` (JS_FRAME_FLAGS, through DENO_V8_FLAGS).
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { LoadOptions } from "../loadgen/index.ts";
import { runLoadInChild } from "../loadgen/index.ts";

const run$ = promisify(execFile);

/** V8 flags that give `perf` the names of JIT-compiled JavaScript frames. */
export const JS_FRAME_FLAGS = "--perf-basic-prof";

/** Sets the CPUs every thread of `pid` may run on (`taskset` list syntax: "0", "0-1"). */
export async function pin(pid: number, cpus: string): Promise<void> {
  await run$("taskset", ["-a", "-p", "-c", cpus, String(pid)]);
}

export interface Profile {
  samples: number;
  areas: Map<string, number>;
  selfTop: [string, number][];
  folded: string;
}

/** Which part of the process a frame's code lives in. */
function areaOf(dso: string): string {
  if (dso.includes("kernel")) return "kernel";
  if (/perf-\d+\.map/.test(dso)) return "JavaScript (JIT)";
  if (/\/deno$/.test(dso)) return "deno binary (runtime, V8, GC)";
  if (/libc[.-]/.test(dso)) return "libc";
  return "other";
}

/** `perf record -g` of `pid` over one load; the samples folded as a flame graph takes them. */
export function perfProfile(pid: number, options: LoadOptions, seconds: number): Promise<Profile> {
  return perfProfileOf(
    pid,
    (durationMs) => runLoadInChild({ ...options, warmupMs: 500, durationMs }),
    seconds,
  );
}

/**
 * `perf record -g` of `pid` for `seconds` while `startLoad` runs a load of its own: it warms up
 * for half a second, then measures for the duration it is given (the recording starts half a
 * second in and ends half a second before the load does).
 */
export async function perfProfileOf(
  pid: number,
  startLoad: (durationMs: number) => Promise<unknown>,
  seconds: number,
): Promise<Profile> {
  const dir = await mkdtemp(join(tmpdir(), "ox-bench-perf-"));
  const data = join(dir, "perf.data");
  try {
    const load = startLoad(seconds * 1000 + 500);
    await new Promise((resolve) => setTimeout(resolve, 500));
    await run$("perf", [
      "record",
      "-e",
      "cpu-clock",
      "-F",
      "499",
      "-g",
      "-o",
      data,
      "-p",
      String(pid),
      "--",
      "sleep",
      String(seconds),
    ]);
    await load;
    const { stdout } = await run$("perf", ["script", "-i", data], { maxBuffer: 512 * 1024 * 1024 });
    const stacks = new Map<string, number>();
    const self = new Map<string, number>();
    const areas = new Map<string, number>();
    let samples = 0;
    for (const block of stdout.split("\n\n")) {
      const frames = block.split("\n").slice(1).map((line) => line.trim()).filter(Boolean).map(
        (line) => {
          // "<address> <symbol> (<dso>)"
          const match = /^[0-9a-f]+\s+(.*?)\s+\(([^)]*)\)$/.exec(line);
          return match ? { symbol: match[1].replace(/\+0x[0-9a-f]+$/, ""), dso: match[2] } : {
            symbol: line,
            dso: "",
          };
        },
      );
      if (frames.length === 0) continue;
      samples++;
      const top = frames[0];
      const name = top.symbol === "[unknown]" ? `[unknown] ${top.dso}` : top.symbol;
      self.set(name, (self.get(name) ?? 0) + 1);
      const area = areaOf(top.dso);
      areas.set(area, (areas.get(area) ?? 0) + 1);
      const key = frames.map((f) => f.symbol.replaceAll(";", ":")).reverse().join(";");
      stacks.set(key, (stacks.get(key) ?? 0) + 1);
    }
    const selfTop = [...self].sort((a, b) => b[1] - a[1]).slice(0, 25);
    const folded = [...stacks].map(([stack, count]) => `${stack} ${count}`).join("\n");
    return { samples, areas, selfTop, folded };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
