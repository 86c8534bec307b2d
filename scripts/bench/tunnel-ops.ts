/**
 * Suite `tunnel-ops`: what one new CONNECT tunnel and one forwarded keep-alive request cost the
 * gateway against the bare relay (bare-relay.ts `--upstream`), counted rather than timed, on the
 * throughput suite's chain (origin.ts, the shared upstream bare-relay.ts, the gateway on a
 * published feed, proxy-loadgen in a child process, 32 in flight).
 *
 *   npm run bench -- tunnel-ops            (or npm run bench:tunnel-ops)
 *
 * Per request, for each target in the same run (targets alternate; ratios within a run, then
 * the median):
 * - **CPU** (user + system, /proc) and the requests a second;
 * - **context switches** of all the process's threads (/proc/<pid>/task/<tid>/status): a
 *   voluntary one is a thread going to sleep, mostly the event loop waiting in `epoll_wait`
 *   with nothing to do, so they count the event-loop turns that ended in a wait;
 * - **V8 heap** allocated, what of it was still alive at a young collection (copied within the
 *   young generation, or promoted to the old one: what makes a young collection cost), and GC
 *   pause (V8's `--trace-gc-nvp`, one record per collection, summed over the window);
 * - **system calls** by name (`strace -c -f` on every thread, a window of its own, since strace
 *   slows the process down; the counts per request stay what they are). `epoll_wait` counts
 *   every event-loop turn that polled;
 * - a **profile** of each scenario (`perf record -g` at 499 Hz with V8's `--perf-basic-prof`, so JavaScript
 *   frames have names): the top frames by self time, and by area (kernel, the `deno` binary,
 *   JIT-compiled JavaScript, libc), printed on standard error; the folded stacks (the input of a
 *   flame graph: flamegraph.pl, speedscope, inferno) are written to BENCH_TUNNEL_OPS_OUT
 *   (default: a temp folder, named on standard error).
 *
 * Keep-alive requests are measured twice: as the other scenarios, and **pinned**, the gateway
 * (or relay), the upstream and the origin on core 0 (`taskset`) and the load generator on core
 * 1, as on a small VM where the proxy shares a core with what it talks to.
 *
 * BENCH_TUNNEL_OPS_BASE=<git revision> adds that revision's gateway as a third target on the same
 * feed (its CPU figures and ratios, no system calls or profile): before and after a change,
 * side by side in one run, as a loaded machine needs.
 *
 * Both targets run with the same V8 flags (`--trace-gc-nvp --perf-basic-prof`), so their CPU
 * figures are a few percent above the throughput suite's.
 * Settings: BENCH_TUNNEL_OPS_SECONDS (5 s a point), BENCH_THROUGHPUT_CONCURRENCY (32),
 * BENCH_TUNNEL_OPS_PROFILE_SECONDS (5; 0 skips strace and perf), BENCH_TUNNEL_OPS_MODES (a comma
 * list of connect, http, http-pinned; all by default).
 */
import { execFile, spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { waitUntil } from "../../testkit/wait.ts";
import type { LoadOptions, LoadReport } from "../loadgen/index.ts";
import { runLoadInChild, Scenario } from "../loadgen/index.ts";
import { ROOT } from "../gateway-command.ts";
import { JS_FRAME_FLAGS, perfProfile, pin } from "./cpu-profile.ts";
import { startDenoService, startGateway, startRoutedGateway } from "./services.ts";
import type { Service } from "../../testkit/upstreams/daemon.ts";
import {
  cpuMillisOf,
  envPositive,
  formatNumber,
  machineCpuMillis,
  median,
  rotate,
  type Row,
  type Suite,
  type SuiteContext,
} from "./suite.ts";

const run$ = promisify(execFile);

/** Every CPU of the machine, as taskset lists them (read before anything is pinned). */
const ALL_CPUS = `0-${cpus().length - 1}`;

// Deno takes V8 flags from DENO_V8_FLAGS comma-separated; BENCH_TUNNEL_OPS_V8_FLAGS adds more to
// every target (`--prof`, say, for V8's own tick profile).
const V8_FLAGS = [`--trace-gc-nvp,${JS_FRAME_FLAGS}`, process.env.BENCH_TUNNEL_OPS_V8_FLAGS]
  .filter((flags) => flags !== undefined && flags !== "").join(",");

interface Target {
  key: "gateway" | "gateway-base" | "relay";
  label: string;
  service: Service;
  authorization?: string;
}

/** Where a target's counters stood at one moment. */
interface Sample {
  atMs: number;
  cpuMs: number;
  sharedCpuMs: number;
  machineBusyMs: number;
  voluntary: number;
  involuntary: number;
  /** Milliseconds since the target's process started. */
  sinceStartMs: number;
}

interface Point {
  report: LoadReport;
  cpuMs: number;
  sharedCpuMs: number;
  otherCores: number;
  voluntary: number;
  involuntary: number;
  /** Filled in once every run is over (V8 writes its trace in blocks). */
  gc: GcTotals;
  wallMs: number;
  /** The window on the target's GC trace clock. */
  fromMs: number;
  toMs: number;
}

/** Context switches of every thread of `pid` so far. */
async function switches(pid: number): Promise<{ voluntary: number; involuntary: number }> {
  let voluntary = 0;
  let involuntary = 0;
  let tids: string[] = [];
  try {
    tids = await readdir(`/proc/${pid}/task`);
  } catch {
    return { voluntary, involuntary };
  }
  for (const tid of tids) {
    const text = await readFile(`/proc/${pid}/task/${tid}/status`, "utf8").catch(() => "");
    voluntary += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(text)?.[1] ?? 0);
    involuntary += Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(text)?.[1] ?? 0);
  }
  return { voluntary, involuntary };
}

/** What the GC records stamped inside one window add up to. */
interface GcTotals {
  /** Heap allocated. */
  bytes: number;
  /** Young objects alive at a young collection: copied within the young generation, promoted. */
  copiedBytes: number;
  promotedBytes: number;
  pauseMs: number;
  /** Of which in collections of the whole heap. */
  fullPauseMs: number;
}

const NO_GC: GcTotals = Object.freeze({
  bytes: 0,
  copiedBytes: 0,
  promotedBytes: 0,
  pauseMs: 0,
  fullPauseMs: 0,
});

/**
 * Sums the `--trace-gc-nvp` records stamped between `fromMs` and `toMs` ("[pid:isolate:0]  1234
 * ms: GC: {"gc":"s","pause":0.9,"allocated":...}"; the stamp counts from the isolate's start):
 * bytes allocated since the collection before, young bytes that survived (copied or promoted),
 * the pause. The stamps place each record in its window although V8 writes its output in
 * blocks; a record a log line of the process split is skipped.
 */
function gcOf(lines: readonly string[], fromMs: number, toMs: number): GcTotals {
  const totals = { ...NO_GC };
  const pattern = /\]\s+(\d+) ms: GC: (\{.*\})\s*$/;
  for (const line of lines) {
    const match = pattern.exec(line);
    if (!match) continue;
    const atMs = Number(match[1]);
    if (atMs < fromMs || atMs >= toMs) continue;
    let record: Record<string, unknown>;
    try {
      record = JSON.parse(match[2]);
    } catch {
      continue;
    }
    const number = (key: string) => (typeof record[key] === "number" ? record[key] as number : 0);
    totals.bytes += number("allocated");
    totals.copiedBytes += number("new_space_survived");
    totals.promotedBytes += number("promoted");
    totals.pauseMs += number("pause");
    // "mc" is the whole heap's mark-compact; the others collect the young generation.
    if (record.gc === "mc") totals.fullPauseMs += number("pause");
  }
  return totals;
}

/**
 * Milliseconds since `pid` started, on the clock its GC trace is stamped with (from /proc: its
 * start time and the uptime, 10 ms resolution; the isolate starts a few ms after the process).
 */
async function msSinceStart(pid: number): Promise<number> {
  const [stat, uptime] = await Promise.all([
    readFile(`/proc/${pid}/stat`, "utf8"),
    readFile("/proc/uptime", "utf8"),
  ]);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const startTicks = Number(fields[19]); // starttime, field 22
  return Number(uptime.split(" ")[0]) * 1000 - startTicks * 10;
}

async function measure(target: Target, shared: readonly number[], options: LoadOptions) {
  const pid = target.service.pids[0];
  const sample = async (): Promise<Sample> => {
    const atMs = performance.now();
    const [cpuMs, sharedCpuMs, machine, counts, sinceStartMs] = await Promise.all([
      cpuMillisOf(target.service.pids),
      cpuMillisOf(shared),
      machineCpuMillis(),
      switches(pid),
      msSinceStart(pid),
    ]);
    return { atMs, cpuMs, sharedCpuMs, machineBusyMs: machine.busy, ...counts, sinceStartMs };
  };
  let start: Promise<Sample> | undefined;
  let end: Promise<Sample> | undefined;
  const report = await runLoadInChild(options, {
    onWindow(phase) {
      if (phase === "start") start = sample();
      else end = sample();
    },
  });
  if (!start || !end) throw new Error("the load generator reported no window");
  const [a, b] = await Promise.all([start, end]);
  const wallMs = b.atMs - a.atMs;
  const cpuMs = b.cpuMs - a.cpuMs;
  const sharedCpuMs = b.sharedCpuMs - a.sharedCpuMs;
  const ours = cpuMs + sharedCpuMs + report.cpu.userMs + report.cpu.systemMs;
  return {
    report,
    cpuMs,
    sharedCpuMs,
    otherCores: Math.max(0, b.machineBusyMs - a.machineBusyMs - ours) / wallMs,
    voluntary: b.voluntary - a.voluntary,
    involuntary: b.involuntary - a.involuntary,
    gc: NO_GC,
    wallMs,
    fromMs: a.sinceStartMs,
    toMs: b.sinceStartMs,
  } satisfies Point;
}

/**
 * System calls by name over one load, counted by `strace -c -f` on every thread of `pid`;
 * `requests` is what the load generator sent meanwhile (no warm-up, so all of it counts).
 */
async function straceCounts(
  pid: number,
  options: LoadOptions,
): Promise<{ calls: Map<string, number>; requests: number }> {
  const dir = await mkdtemp(join(tmpdir(), "ox-tunnel-ops-strace-"));
  const file = join(dir, "counts.txt");
  // -f with -p attaches every thread of the process.
  const child = spawn("strace", ["-c", "-f", "-o", file, "-p", String(pid)], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  try {
    await waitUntil(() => {
      if (child.exitCode !== null) throw new Error(`strace exited: ${stderr}`);
      return stderr.includes("attached");
    }, { timeoutMs: 10_000, intervalMs: 20, message: "strace to attach" });
    const report = await runLoadInChild({ ...options, warmupMs: 0 });
    child.kill("SIGINT");
    await exited;
    const calls = new Map<string, number>();
    for (const line of (await readFile(file, "utf8")).split("\n")) {
      // % time, seconds, usecs/call, calls, [errors], syscall
      const match = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?([a-z_0-9]+)\s*$/.exec(line);
      if (match && match[2] !== "total") calls.set(match[2], Number(match[1]));
    }
    return { calls, requests: report.requests + report.retries };
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * An earlier revision's gateway/ and shared/ (with deno.json and package.json) in a temp folder,
 * beside a link to this checkout's node_modules: its gateway runs side by side with this one's.
 */
async function exportRevision(revision: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "ox-tunnel-ops-base-"));
  await run$("sh", [
    "-c",
    'git archive "$1" gateway shared deno.json package.json | tar -x -C "$2"',
    "sh",
    revision,
    dir,
  ], { cwd: ROOT });
  await symlink(join(ROOT, "node_modules"), join(dir, "node_modules"));
  return dir;
}

const PLAIN = ["connect", "http"] as const;
type Mode = (typeof PLAIN)[number] | "http-pinned";
const MODES: readonly Mode[] = [...PLAIN, "http-pinned"];

/** The points to measure: BENCH_TUNNEL_OPS_MODES (connect,http,http-pinned; all by default). */
function selectedModes(): Set<Mode> {
  const listed = process.env.BENCH_TUNNEL_OPS_MODES;
  if (!listed) return new Set(MODES);
  const chosen = listed.split(",").map((mode) => mode.trim());
  const unknown = chosen.filter((mode) => !(MODES as readonly string[]).includes(mode));
  if (unknown.length > 0) {
    throw new Error(`BENCH_TUNNEL_OPS_MODES: unknown ${unknown.join(", ")} (${MODES.join(", ")})`);
  }
  return new Set(chosen as Mode[]);
}

async function run(context: SuiteContext): Promise<Row[]> {
  const seconds = envPositive("BENCH_TUNNEL_OPS_SECONDS") ?? 5;
  const profileSeconds = Number(process.env.BENCH_TUNNEL_OPS_PROFILE_SECONDS ?? 5);
  const concurrency = Math.round(envPositive("BENCH_THROUGHPUT_CONCURRENCY") ?? 32);
  const modes = selectedModes();
  const plain = PLAIN.filter((mode) => modes.has(mode));
  const pinned = modes.has("http-pinned");
  const stops: (() => Promise<void>)[] = [];
  const pinnable: number[] = [];
  try {
    context.log(`tunnel-ops: load average ${loadavg().map((l) => l.toFixed(2)).join(" / ")}`);
    const routed = await startRoutedGateway({ DENO_V8_FLAGS: V8_FLAGS });
    stops.push(() => routed.stop());
    const { gateway, origin, upstream } = routed;
    const shared = [...origin.pids, ...upstream.pids];
    const relay = await startDenoService(
      "relay",
      "bare-relay.ts",
      ["--upstream", `127.0.0.1:${upstream.port}`],
      { DENO_V8_FLAGS: V8_FLAGS },
    );
    stops.push(() => relay.stop());
    pinnable.push(...shared, ...gateway.pids, ...relay.pids);
    const baseRevision = process.env.BENCH_TUNNEL_OPS_BASE;
    const base: Target[] = [];
    if (baseRevision) {
      const root = await exportRevision(baseRevision);
      stops.push(() => rm(root, { recursive: true, force: true }));
      const old = await startGateway(
        routed.bed,
        { DENO_V8_FLAGS: V8_FLAGS, OCTOPROX_INSTANCE_ID: "bench-base" },
        { root },
      );
      stops.push(() => old.stop());
      await old.waitForProxy();
      pinnable.push(...old.pids);
      base.push({
        key: "gateway-base",
        label: `gateway at ${baseRevision}`,
        service: old,
        authorization: routed.authorization,
      });
    }
    const targets: Target[] = [
      ...base,
      {
        key: "gateway",
        label: "gateway",
        service: gateway,
        authorization: routed.authorization,
      },
      { key: "relay", label: "bare relay", service: relay },
    ];
    const url = new URL(`http://127.0.0.1:${origin.port}/`);
    const options = (target: Target, scenario: Scenario, measured: number, warm: number) =>
      ({
        proxy: {
          host: "127.0.0.1",
          port: target.service.port,
          ...(target.authorization ? { authorization: target.authorization } : {}),
        },
        url,
        scenario,
        durationMs: measured * 1000,
        warmupMs: warm * 1000,
        concurrency,
        timeoutMs: 10_000,
        method: "GET",
        headers: [],
      }) satisfies LoadOptions;
    const scenarioOf = (mode: Mode) => (mode === "connect" ? Scenario.connect : Scenario.http);

    context.log("tunnel-ops: a warm-up pass through every target");
    for (const target of targets) {
      for (const mode of plain.length > 0 ? plain : ["http" as const]) {
        const point = await measure(target, shared, options(target, scenarioOf(mode), 1.5, 0.5));
        if (point.report.ok === 0) throw new Error(`${target.label} answered nothing (${mode})`);
      }
    }

    const points = new Map<string, Point[]>();
    const keep = (mode: Mode, target: Target, point: Point) => {
      const key = `${mode}/${target.key}`;
      points.set(key, [...(points.get(key) ?? []), point]);
      const rep = point.report;
      context.log(
        `tunnel-ops run ${mode.padEnd(11)} ${target.key.padEnd(7)} ${
          rep.throughput.toFixed(0).padStart(6)
        }/s, CPU ${((point.cpuMs * 1000) / rep.ok).toFixed(1)} µs/req, switches ${
          ((point.voluntary + point.involuntary) / rep.ok).toFixed(2)
        }/req, others ${point.otherCores.toFixed(2)} cores` +
          (rep.requests > rep.ok ? `, failed ${JSON.stringify(rep.errors)}` : ""),
      );
    };
    const self = process.pid;
    for (let r = 0; r < context.runs; r++) {
      for (const mode of plain) {
        for (const target of rotate(targets, r)) {
          keep(
            mode,
            target,
            await measure(target, shared, options(target, scenarioOf(mode), seconds, 1)),
          );
        }
      }
      if (!pinned) continue;
      // The chain on core 0, the load generator (a child of this process) on core 1.
      try {
        for (const pid of pinnable) await pin(pid, "0");
        await pin(self, "1");
        for (const target of rotate(targets, r)) {
          keep(
            "http-pinned",
            target,
            await measure(target, shared, options(target, Scenario.http, seconds, 1)),
          );
        }
      } finally {
        for (const pid of [...pinnable, self]) await pin(pid, ALL_CPUS).catch(() => {});
      }
    }

    // V8 writes its GC trace in blocks, and a process stopped by a signal never writes its last
    // one: a short uncounted load through each target pushes the last window's lines out.
    for (const target of targets) await runLoadInChild(options(target, Scenario.http, 2, 0));

    const syscalls = new Map<string, { calls: Map<string, number>; requests: number }>();
    if (profileSeconds > 0) {
      const out = process.env.BENCH_TUNNEL_OPS_OUT ??
        await mkdtemp(join(tmpdir(), "ox-tunnel-ops-"));
      // The earlier revision is measured for its CPU only: its calls are the same kind.
      for (const target of targets.filter((t) => t.key !== "gateway-base")) {
        const pid = target.service.pids[0];
        for (const mode of plain) {
          syscalls.set(
            `${mode}/${target.key}`,
            await straceCounts(pid, options(target, scenarioOf(mode), profileSeconds, 0)),
          );
        }
        if (pinned) {
          try {
            for (const p of pinnable) await pin(p, "0");
            await pin(self, "1");
            syscalls.set(
              `http-pinned/${target.key}`,
              await straceCounts(pid, options(target, Scenario.http, profileSeconds, 0)),
            );
          } finally {
            for (const p of [...pinnable, self]) await pin(p, ALL_CPUS).catch(() => {});
          }
        }
        for (const mode of plain) {
          const profile = await perfProfile(
            pid,
            options(target, scenarioOf(mode), profileSeconds, 0),
            profileSeconds,
          );
          const path = join(out, `tunnel-ops-${mode}-${target.key}.folded`);
          await writeFile(path, `${profile.folded}\n`);
          const share = (n: number) => `${((100 * n) / profile.samples).toFixed(1)}%`;
          context.log(
            `tunnel-ops profile, ${WHAT[mode]}s via ${target.label}: ${profile.samples} ` +
              `samples; folded stacks in ${path}\n  by area: ${
                [...profile.areas].sort((a, b) => b[1] - a[1]).map(([a, n]) => `${a} ${share(n)}`)
                  .join(", ")
              }\n  top frames by self time:\n${
                profile.selfTop.map(([name, n]) => `    ${share(n).padStart(6)}  ${name}`).join(
                  "\n",
                )
              }`,
          );
        }
      }
    }
    // Stopped first, so the gateway writes out what its trace still holds.
    for (const stop of stops.splice(0).reverse()) await stop().catch(() => {});
    for (const target of targets) {
      const lines = target.service.output?.() ?? [];
      for (const mode of [...PLAIN, "http-pinned"] as const) {
        for (const point of points.get(`${mode}/${target.key}`) ?? []) {
          point.gc = gcOf(lines, point.fromMs, point.toMs);
        }
      }
    }
    return rows(targets, points, syscalls, { seconds, concurrency });
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    // The symbol maps V8's --perf-basic-prof wrote for each target.
    for (const pid of pinnable) await rm(`/tmp/perf-${pid}.map`, { force: true });
  }
}

const WHAT: Record<Mode, string> = {
  connect: "new CONNECT tunnel",
  http: "keep-alive request",
  "http-pinned": "keep-alive request, chain pinned to one core",
};

function rows(
  targets: readonly Target[],
  points: Map<string, Point[]>,
  syscalls: Map<string, { calls: Map<string, number>; requests: number }>,
  setup: { seconds: number; concurrency: number },
): Row[] {
  const out: Row[] = [];
  const modes: Mode[] = ["connect", "http", "http-pinned"];
  const perRequest = (list: Point[], pick: (p: Point) => number) =>
    median(list.map((p) => pick(p) / p.report.ok));
  for (const mode of modes) {
    for (const target of targets) {
      const list = points.get(`${mode}/${target.key}`) ?? [];
      if (list.length === 0) continue;
      out.push({
        figure: `${WHAT[mode]}: CPU per request via ${target.label}`,
        value: perRequest(list, (p) => p.cpuMs * 1000),
        runs: list.map((p) => (p.cpuMs * 1000) / p.report.ok),
        unit: "µs",
        digits: 1,
        detail: `${
          formatNumber(median(list.map((p) => p.report.throughput)), 0)
        }/s; per request: ` +
          `${formatNumber(perRequest(list, (p) => p.voluntary), 2)} voluntary + ${
            formatNumber(perRequest(list, (p) => p.involuntary), 2)
          } involuntary context switches, ${
            formatNumber(perRequest(list, (p) => p.gc.bytes / 1024), 1)
          } KB of V8 heap allocated (alive at a young collection: ${
            formatNumber(perRequest(list, (p) => p.gc.copiedBytes / 1024), 1)
          } KB copied, ${
            formatNumber(perRequest(list, (p) => p.gc.promotedBytes / 1024), 1)
          } KB promoted), ${
            formatNumber(perRequest(list, (p) => p.gc.pauseMs * 1000), 1)
          } µs of GC pause (${
            formatNumber(perRequest(list, (p) => p.gc.fullPauseMs * 1000), 1)
          } in whole-heap collections); upstream+origin ${
            formatNumber(perRequest(list, (p) => p.sharedCpuMs * 1000), 0)
          } µs; other processes ${formatNumber(median(list.map((p) => p.otherCores)), 2)} cores`,
      });
      const counted = syscalls.get(`${mode}/${target.key}`);
      if (counted && counted.requests > 0) {
        const total = [...counted.calls.values()].reduce((a, b) => a + b, 0);
        const top = [...counted.calls].sort((a, b) => b[1] - a[1]).slice(0, 10);
        out.push({
          figure: `${WHAT[mode]}: system calls per request via ${target.label}`,
          value: total / counted.requests,
          unit: "",
          digits: 1,
          detail: `strace -c -f over ${counted.requests} requests: ${
            top.map(([name, n]) => `${name} ${(n / counted.requests).toFixed(2)}`).join(", ")
          }`,
        });
      }
    }
    const ratio = (mine: Target, other: Target, what: "CPU" | "rate") => {
      const ours = points.get(`${mode}/${mine.key}`);
      const theirs = points.get(`${mode}/${other.key}`);
      if (!ours || !theirs) return;
      const cpu = (p: Point) => p.cpuMs / p.report.ok;
      const runs = ours.map((p, i) =>
        what === "CPU" ? cpu(p) / cpu(theirs[i]) : p.report.throughput / theirs[i].report.throughput
      );
      const budgeted = what === "CPU" && mode === "connect" && mine.key === "gateway" &&
        other.key === "relay";
      out.push({
        figure: `${WHAT[mode]}: ${mine.label} ÷ ${other.label}, ${
          what === "CPU" ? "CPU per request" : "requests a second"
        }`,
        value: median(runs),
        runs,
        unit: "×",
        digits: 2,
        ...(budgeted ? { budget: { op: "<=" as const, limit: 1.1 } } : {}),
        detail: "the same run's figures divided, then the median",
      });
    };
    const [gateway, base, relay] = (["gateway", "gateway-base", "relay"] as const).map((key) =>
      targets.find((t) => t.key === key)
    );
    if (gateway && relay) {
      ratio(gateway, relay, "CPU");
      ratio(gateway, relay, "rate");
    }
    if (base && relay) {
      ratio(base, relay, "CPU");
      ratio(base, relay, "rate");
    }
    if (gateway && base) ratio(gateway, base, "CPU");
  }
  out.push({
    figure: "tunnel-ops: seconds measured per point, client concurrency",
    value: setup.seconds,
    unit: `s, ${setup.concurrency} in flight`,
    digits: 0,
  });
  return out;
}

export const tunnelOpsSuite: Suite = {
  name: "tunnel-ops",
  description:
    "per new tunnel and keep-alive request (also pinned to one core): CPU, switches, heap, " +
    "system calls and a profile, gateway vs bare relay",
  run,
};
