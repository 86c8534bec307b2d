/**
 * Suite `single-instance`: what one new CONNECT tunnel costs the gateway in the shape users run
 * it, the whole single instance (what `npm start` runs: the control process of role `all` and its
 * gateway, on the test bed's Postgres and Redis) on one core and the load on the other, beside
 * the same gateway code alone on a published feed (tunnel-ops' shape: no control plane) and the
 * bare relay, pinned alike, side by side in each run.
 *
 *   npm run bench -- single-instance
 *
 * - **Core 0**: the control process, both gateways, the bare relay (bare-relay.ts --upstream), the
 *   shared upstream (bare-relay.ts) and the origin (origin.ts); **core 1**: this process and the
 *   load generator (proxy-loadgen in a child process, `connect`: a new tunnel, one GET through
 *   it, closed; 32 in flight). The test bed's Postgres and Redis are the machine's, not pinned.
 * - The single instance's project is made through its admin API (one static connector, one proxy:
 *   the shared upstream), its proxy checked healthy by its own health checks, its gateway fed by
 *   its controller; metering, heartbeats, the feed follower and the IP databases run as they do
 *   on an install.
 * - Per target and point: the CPU (user + system, /proc) of the target's process alone over the
 *   counted window, divided by the tunnels completed in it; the control process's CPU in the same
 *   window, and the shared upstream's and origin's.
 *
 * Then a profile of each target over one load (perf, as tunnel-ops takes it): its samples by area
 * (kernel, the deno binary, JIT-compiled JavaScript, libc), each also as its part of the target's
 * CPU per tunnel, and the top frames, printed on standard error; the folded stacks written to
 * BENCH_SINGLE_INSTANCE_OUT (default: a temp folder). BENCH_SINGLE_INSTANCE_SECONDS (5 s a point),
 * BENCH_SINGLE_INSTANCE_PROFILE_SECONDS (5; 0 skips the profiles), BENCH_THROUGHPUT_CONCURRENCY
 * (32).
 */
import { mkdtemp, writeFile } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Cluster } from "../../testkit/cluster.ts";
import { createRoutedProject } from "../../testkit/routing.ts";
import type { LoadOptions, LoadReport } from "../loadgen/index.ts";
import { runLoadInChild, Scenario } from "../loadgen/index.ts";
import { JS_FRAME_FLAGS, perfProfile, pin } from "./cpu-profile.ts";
import { startDenoService, startRoutedGateway } from "./services.ts";
import {
  cpuMillisOf,
  envPositive,
  formatNumber,
  median,
  pairedMedian,
  rotate,
  type Row,
  type Suite,
  type SuiteContext,
} from "./suite.ts";

const ALL_CPUS = `0-${cpus().length - 1}`;
const BUDGET = 1.1;

type TargetKey = "single" | "feed" | "relay";

interface Target {
  key: TargetKey;
  label: string;
  pids: number[];
  port: number;
  authorization?: string;
}

interface Point {
  report: LoadReport;
  cpuMs: number;
  controlCpuMs: number;
  sharedCpuMs: number;
}

async function measure(
  target: Target,
  control: readonly number[],
  shared: readonly number[],
  options: LoadOptions,
): Promise<Point> {
  const sample = async () => {
    const [cpuMs, controlCpuMs, sharedCpuMs] = await Promise.all([
      cpuMillisOf(target.pids),
      cpuMillisOf(control),
      cpuMillisOf(shared),
    ]);
    return { cpuMs, controlCpuMs, sharedCpuMs };
  };
  let start: ReturnType<typeof sample> | undefined;
  let end: typeof start;
  const report = await runLoadInChild(options, {
    onWindow(phase) {
      if (phase === "start") start = sample();
      else end = sample();
    },
  });
  if (!start || !end) throw new Error("the load generator reported no window");
  const [a, b] = await Promise.all([start, end]);
  return {
    report,
    cpuMs: b.cpuMs - a.cpuMs,
    controlCpuMs: b.controlCpuMs - a.controlCpuMs,
    sharedCpuMs: b.sharedCpuMs - a.sharedCpuMs,
  };
}

async function run(context: SuiteContext): Promise<Row[]> {
  const seconds = envPositive("BENCH_SINGLE_INSTANCE_SECONDS") ?? 5;
  const profileSeconds = Number(process.env.BENCH_SINGLE_INSTANCE_PROFILE_SECONDS ?? 5);
  const concurrency = Math.round(envPositive("BENCH_THROUGHPUT_CONCURRENCY") ?? 32);
  const stops: (() => Promise<void>)[] = [];
  const pinned: number[] = [];
  const self = process.pid;
  try {
    context.log(
      `single-instance: load average ${loadavg().map((l) => l.toFixed(2)).join(" / ")}`,
    );
    const v8 = { DENO_V8_FLAGS: JS_FRAME_FLAGS };
    // The feed gateway, the origin and the shared upstream.
    const routed = await startRoutedGateway(v8);
    stops.push(() => routed.stop());
    const { origin, upstream } = routed;
    const shared = [...origin.pids, ...upstream.pids];

    // The single instance: the control process of role all, its gateway, a project through its
    // API whose one proxy is the shared upstream.
    const cluster = await Cluster.create({ defaults: true });
    stops.push(() => cluster.close());
    const control = await cluster.start("all");
    const gateway = await cluster.startGateway({ env: v8 });
    const project = await createRoutedProject(cluster, [
      `http://127.0.0.1:${upstream.port}`,
    ]);
    const controlPids = [control.child.pid!];

    const relay = await startDenoService(
      "relay",
      "bare-relay.ts",
      ["--upstream", `127.0.0.1:${upstream.port}`],
      v8,
    );
    stops.push(() => relay.stop());

    const basic = (username: string, password: string) =>
      `Basic ${btoa(`${username}:${password}`)}`;
    const targets: Target[] = [
      {
        key: "single",
        label: "gateway of the single instance",
        pids: [gateway.child.pid!],
        port: gateway.proxyPort,
        authorization: basic(project.credentials.username, project.credentials.password),
      },
      {
        key: "feed",
        label: "gateway alone on a feed",
        pids: routed.gateway.pids,
        port: routed.gateway.port,
        authorization: routed.authorization,
      },
      { key: "relay", label: "bare relay", pids: relay.pids, port: relay.port },
    ];
    const url = new URL(`http://127.0.0.1:${origin.port}/`);
    const options = (target: Target, measured: number, warm: number): LoadOptions => ({
      proxy: {
        host: "127.0.0.1",
        port: target.port,
        ...(target.authorization ? { authorization: target.authorization } : {}),
      },
      url,
      scenario: Scenario.connect,
      durationMs: measured * 1000,
      warmupMs: warm * 1000,
      concurrency,
      timeoutMs: 10_000,
      method: "GET",
      headers: [],
    });

    pinned.push(...controlPids, ...shared, ...relay.pids, ...routed.gateway.pids);
    pinned.push(gateway.child.pid!);
    for (const pid of pinned) await pin(pid, "0");
    await pin(self, "1");

    context.log("single-instance: a warm-up pass through every target");
    for (const target of targets) {
      const point = await measure(target, controlPids, shared, options(target, 1.5, 0.5));
      if (point.report.ok === 0) {
        throw new Error(`${target.label} answered nothing: ${JSON.stringify(point.report.errors)}`);
      }
    }

    const points = new Map<TargetKey, Point[]>();
    for (let r = 0; r < context.runs; r++) {
      for (const target of rotate(targets, r)) {
        const point = await measure(target, controlPids, shared, options(target, seconds, 1));
        points.set(target.key, [...(points.get(target.key) ?? []), point]);
        const rep = point.report;
        context.log(
          `single-instance run ${r + 1} ${target.key.padEnd(6)} ${
            rep.throughput.toFixed(0).padStart(6)
          }/s, CPU ${((point.cpuMs * 1000) / rep.ok).toFixed(1)} µs/tunnel, control ${
            ((point.controlCpuMs * 1000) / rep.ok).toFixed(1)
          } µs/tunnel` + (rep.requests > rep.ok ? `, failed ${JSON.stringify(rep.errors)}` : ""),
        );
      }
    }

    if (profileSeconds > 0) {
      const out = process.env.BENCH_SINGLE_INSTANCE_OUT ??
        await mkdtemp(join(tmpdir(), "ox-single-instance-"));
      const lines: string[] = [];
      for (const target of targets) {
        const profile = await perfProfile(
          target.pids[0],
          options(target, profileSeconds, 0),
          profileSeconds,
        );
        const path = join(out, `single-instance-${target.key}.folded`);
        await writeFile(path, `${profile.folded}\n`);
        // Each area's share of the samples, applied to the target's median CPU per tunnel.
        const perTunnel = median((points.get(target.key) ?? []).map(cpuPerTunnel));
        const share = (n: number) => n / profile.samples;
        lines.push(
          `  ${target.label} (${profile.samples} samples, ${path}): ${
            [...profile.areas].sort((a, b) => b[1] - a[1]).map(([area, n]) =>
              `${area} ${(100 * share(n)).toFixed(1)}% ≈ ${(share(n) * perTunnel).toFixed(0)} µs`
            ).join(", ")
          }\n${
            profile.selfTop.slice(0, 8).map(([name, n]) =>
              `      ${(100 * share(n)).toFixed(1).padStart(5)}%  ${name}`
            ).join("\n")
          }`,
        );
      }
      context.log(
        `single-instance profiles, new tunnels on one core, by area (share of samples, and of ` +
          `the target's CPU per tunnel), then the top frames by self time:\n${lines.join("\n")}`,
      );
    }
    return rows(targets, points, { seconds, concurrency });
  } finally {
    for (const pid of [...pinned, self]) await pin(pid, ALL_CPUS).catch(() => {});
    for (const stop of stops.reverse()) await stop().catch(() => {});
  }
}

const cpuPerTunnel = (p: Point) => (p.cpuMs * 1000) / p.report.ok;
const controlPerTunnel = (p: Point) => (p.controlCpuMs * 1000) / p.report.ok;

function rows(
  targets: readonly Target[],
  points: Map<TargetKey, Point[]>,
  setup: { seconds: number; concurrency: number },
): Row[] {
  const out: Row[] = [];
  for (const target of targets) {
    const list = points.get(target.key) ?? [];
    const rate = median(list.map((p) => p.report.throughput));
    out.push({
      figure: `new CONNECT tunnel, one core: CPU per tunnel via ${target.label}`,
      key: `single-instance-${target.key}-cpu-us`,
      value: median(list.map(cpuPerTunnel)),
      runs: list.map(cpuPerTunnel),
      unit: "µs",
      digits: 1,
      facts: { tunnelsPerSecond: rate },
      detail: `${formatNumber(rate, 0)} tunnels/s; the control process meanwhile ${
        formatNumber(median(list.map(controlPerTunnel)), 1)
      } µs/tunnel; upstream+origin ${
        formatNumber(median(list.map((p) => (p.sharedCpuMs * 1000) / p.report.ok)), 0)
      } µs/tunnel`,
    });
  }
  const label = (key: TargetKey) => targets.find((t) => t.key === key)!.label;
  const ratio = (mine: TargetKey, other: TargetKey, limit?: number) => {
    const cpu = pairedMedian(
      points.get(mine) ?? [],
      points.get(other) ?? [],
      (a, b) => cpuPerTunnel(a) / cpuPerTunnel(b),
    );
    out.push({
      figure: `new CONNECT tunnel, one core: ${label(mine)} ÷ ${label(other)}, CPU per tunnel`,
      key: `single-instance-${mine}-vs-${other}-cpu`,
      value: cpu.value,
      runs: cpu.runs,
      unit: "×",
      digits: 2,
      ...(limit === undefined ? {} : { budget: { op: "<=" as const, limit } }),
      detail: "the same run's figures divided, then the median",
    });
  };
  ratio("single", "relay", BUDGET);
  ratio("feed", "relay");
  ratio("single", "feed");
  out.push({
    figure: "single-instance: seconds measured per point, tunnels in flight",
    value: setup.seconds,
    unit: `s, ${setup.concurrency} in flight`,
    digits: 0,
  });
  return out;
}

export const singleInstanceSuite: Suite = {
  name: "single-instance",
  description:
    "new CONNECT tunnels on one core: the single instance's gateway (npm start's shape) vs the " +
    "gateway alone on a feed and the bare relay, CPU per tunnel, and where the difference goes",
  run,
};
