/**
 * Suite `throughput`: keep-alive HTTP forward requests a second and new CONNECT tunnels a
 * second through the gateway, side by side with a bare relay on the same runtime, Squid and
 * tinyproxy, all chained to the same upstream proxy and the same origin on loopback.
 * Budgets (DESIGN.md): the gateway at least 0.7 of the bare relay, and above Squid and
 * tinyproxy, in both scenarios. The bare relay against Squid and tinyproxy is shown too, without
 * a budget: it routes nothing, so it tells how far above them any gateway on this runtime could
 * come on the machine at hand.
 *
 * The processes, each its own (so each one's CPU is read from /proc apart):
 * - the **origin**: origin.ts, Deno.serve answering 64 bytes, keep-alive;
 * - the **shared upstream**: bare-relay.ts without `--upstream`, a forward proxy of our own
 *   that keeps pooled keep-alive connections to the origin and answers CONNECT itself. Not
 *   tinyproxy: it closes every client connection after one answer, which would charge every
 *   target a new upstream connection per request whatever the target does;
 * - the targets, each chained to that upstream: the **gateway** (gateway/main.ts under Deno,
 *   shipped defaults, on a feed the real FeedPublisher writes into Redis: one project, one
 *   static connector whose one proxy is the upstream; no control plane); the **bare relay**
 *   (bare-relay.ts `--upstream`: no auth, no routing, pooled upstream connections: the
 *   ceiling); the bare relay with `--dial-per-request` (a new upstream connection per
 *   request, as the gateway makes: shown to tell what that alone costs; no budget);
 *   **Squid** (Debian's, `cache_peer` parent + `never_direct`, no cache, one worker); and
 *   **tinyproxy** (Debian's, `Upstream http`).
 * - the load: proxy-loadgen (scripts/loadgen) in a child process of its own per point:
 *   `http` keeps BENCH_THROUGHPUT_CONCURRENCY (32) connections busy with absolute-form GETs;
 *   `connect` keeps as many loops each opening a new connection, CONNECT, one GET through the
 *   tunnel, close.
 *
 * A point is one scenario through one target: a warm-up (BENCH_THROUGHPUT_WARMUP, 1 s, not
 * counted) then BENCH_THROUGHPUT_SECONDS (5) measured. A run measures every target in both
 * scenarios, the targets' order rotating from run to run, so drift in the machine's load
 * touches them alike; the ratios are taken within each run, then their median. Before the
 * runs every target serves a short pass of both scenarios, uncounted (JIT, pools). CPU is read
 * from /proc at the window's start and end, as the load generator reports them.
 *
 * The **gateway, rate limit on** target is the same gateway process through a second project
 * whose request-rate limit (BENCH_RATE_LIMIT, 50,000 a second, its burst the same) stays above
 * the load: every request spends a leased token, a lease every 100 ms of the rate goes to Redis.
 * Its CPU per request less the plain gateway's, run by run, is the limiter's cost (budget: at
 * most 10 µs).
 *
 * Other overrides: BENCH_THROUGHPUT_TARGETS (a comma list of gateway, gateway-rate, relay,
 * relay-dial, squid, tinyproxy), BENCH_GATEWAY_ISOLATES (the gateway's
 * OCTOPROX_GATEWAY_ISOLATES), BENCH_GATEWAY_V8_FLAGS (its DENO_V8_FLAGS, e.g. --prof).
 */
import { availableParallelism } from "node:os";
import type { LoadOptions, LoadReport } from "../loadgen/index.ts";
import { runLoadInChild, Scenario } from "../loadgen/index.ts";
import { feedBed } from "../../tests/feed/support.ts";
import { seriesValue } from "../../tests/support/promtool.ts";
import {
  BENCH_LOGIN,
  httpProxyRow,
  publishFeed,
  type Service,
  startChainedTinyproxy,
  startDenoService,
  startGateway,
  startSquid,
} from "./services.ts";
import {
  cpuMillisOf,
  envPositive,
  formatNumber,
  machineCpuMillis,
  median,
  type Row,
  type Suite,
  type SuiteContext,
} from "./suite.ts";

/** The second project's login, the one with a rate limit. */
const RATE_LOGIN = { username: "bench-rate", password: "bench-rate-pass" };

interface Target {
  key: string;
  label: string;
  service: Service;
  authorization?: string;
}

interface Point {
  report: LoadReport;
  targetCpuMs: number;
  sharedCpuMs: number;
  /** CPU the whole machine spent meanwhile, every process's. */
  machineCpuMs: number;
  wallMs: number;
}

const TARGET_KEYS = [
  "gateway",
  "gateway-rate",
  "relay",
  "relay-dial",
  "squid",
  "tinyproxy",
] as const;
const LABELS: Record<string, string> = {
  gateway: "gateway",
  "gateway-rate": "gateway, rate limit on",
  relay: "bare relay",
  "relay-dial": "bare relay, new upstream connection per request",
  squid: "Squid",
  tinyproxy: "tinyproxy",
};

function rotate<T>(items: readonly T[], by: number): T[] {
  const k = by % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}

async function measure(
  target: Target,
  shared: readonly number[],
  options: LoadOptions,
): Promise<Point> {
  const pids = target.service.pids;
  type Sample = [number, number, number, number];
  let start: Promise<Sample> | undefined;
  let end: Promise<Sample> | undefined;
  const sample = async (): Promise<Sample> => {
    const at = performance.now();
    const [target, others, machine] = await Promise.all([
      cpuMillisOf(pids),
      cpuMillisOf(shared),
      machineCpuMillis(),
    ]);
    return [at, target, others, machine.busy];
  };
  const report = await runLoadInChild(options, {
    onWindow(phase) {
      if (phase === "start") start = sample();
      else end = sample();
    },
  });
  if (!start || !end) throw new Error("the load generator reported no window");
  const [[t0, target0, shared0, machine0], [t1, target1, shared1, machine1]] = await Promise.all(
    [start, end],
  );
  return {
    report,
    targetCpuMs: target1 - target0,
    sharedCpuMs: shared1 - shared0,
    machineCpuMs: machine1 - machine0,
    wallMs: t1 - t0,
  };
}

/** Cores busy with neither the proxy, the upstream side nor the load generator meanwhile. */
function otherCores(point: Point): number {
  const ours = point.targetCpuMs + point.sharedCpuMs + point.report.cpu.userMs +
    point.report.cpu.systemMs;
  return Math.max(0, point.machineCpuMs - ours) / point.wallMs;
}

async function run(context: SuiteContext): Promise<Row[]> {
  const seconds = envPositive("BENCH_THROUGHPUT_SECONDS") ?? 5;
  const warmup = envPositive("BENCH_THROUGHPUT_WARMUP") ?? 1;
  const concurrency = Math.round(envPositive("BENCH_THROUGHPUT_CONCURRENCY") ?? 32);
  const wanted = (process.env.BENCH_THROUGHPUT_TARGETS ?? TARGET_KEYS.join(","))
    .split(",").map((key) => key.trim()).filter(Boolean);
  for (const key of wanted) {
    if (!(TARGET_KEYS as readonly string[]).includes(key)) {
      throw new Error(`BENCH_THROUGHPUT_TARGETS: unknown ${key}; known ${TARGET_KEYS.join(", ")}`);
    }
  }
  const stops: (() => Promise<void>)[] = [];
  try {
    context.log("throughput: starting the origin, the shared upstream and the targets");
    const origin = await startDenoService("origin", "origin.ts");
    stops.push(() => origin.stop());
    const upstream = await startDenoService("upstream", "bare-relay.ts");
    stops.push(() => upstream.stop());
    const shared = [...origin.pids, ...upstream.pids];

    const targets: Target[] = [];
    let gatewayStatusPort: number | undefined;
    if (wanted.includes("gateway") || wanted.includes("gateway-rate")) {
      const bed = await feedBed();
      stops.push(() => bed.close());
      await bed.lead();
      const gatewayEnv: Record<string, string> = {};
      if (process.env.BENCH_GATEWAY_ISOLATES) {
        gatewayEnv.OCTOPROX_GATEWAY_ISOLATES = process.env.BENCH_GATEWAY_ISOLATES;
      }
      // V8's own flags for the gateway (a profile: --prof), as Deno reads them.
      if (process.env.BENCH_GATEWAY_V8_FLAGS) {
        gatewayEnv.DENO_V8_FLAGS = process.env.BENCH_GATEWAY_V8_FLAGS;
      }
      const gateway = await startGateway(bed, gatewayEnv);
      stops.push(() => gateway.stop());
      const rate = envPositive("BENCH_RATE_LIMIT") ?? 50_000;
      await publishFeed(bed, {
        projects: [
          { id: "bench", ...BENCH_LOGIN },
          {
            id: "bench-rate",
            ...RATE_LOGIN,
            rateLimit: { requests_per_second: rate, burst: rate },
          },
        ],
        connectors: [
          {
            id: "upstream",
            projectId: "bench",
            proxies: [httpProxyRow("shared-upstream", "127.0.0.1", upstream.port)],
          },
          {
            id: "upstream-rate",
            projectId: "bench-rate",
            proxies: [httpProxyRow("shared-upstream-rate", "127.0.0.1", upstream.port)],
          },
        ],
      });
      await gateway.waitForProxy();
      gatewayStatusPort = gateway.statusPort;
      const basic = (login: { username: string; password: string }) =>
        `Basic ${btoa(`${login.username}:${login.password}`)}`;
      for (
        const [key, login] of [["gateway", BENCH_LOGIN], ["gateway-rate", RATE_LOGIN]] as const
      ) {
        if (!wanted.includes(key)) continue;
        targets.push({ key, label: LABELS[key], service: gateway, authorization: basic(login) });
      }
    }
    const starters: Record<string, () => Promise<Service>> = {
      relay: () =>
        startDenoService("relay", "bare-relay.ts", ["--upstream", `127.0.0.1:${upstream.port}`]),
      "relay-dial": () =>
        startDenoService("relay-dial", "bare-relay.ts", [
          "--upstream",
          `127.0.0.1:${upstream.port}`,
          "--dial-per-request",
        ]),
      squid: () => startSquid(upstream.port),
      tinyproxy: () => startChainedTinyproxy(upstream.port),
    };
    for (const key of ["relay", "relay-dial", "squid", "tinyproxy"]) {
      if (!wanted.includes(key)) continue;
      const service = await starters[key]();
      stops.push(() => service.stop());
      targets.push({ key, label: LABELS[key], service });
    }

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

    const scenarios = [Scenario.http, Scenario.connect];
    context.log("throughput: a warm-up pass through every target");
    for (const target of targets) {
      for (const scenario of scenarios) {
        const point = await measure(target, shared, options(target, scenario, 1.5, 0.5));
        const failed = point.report.requests - point.report.ok;
        if (point.report.ok === 0) {
          throw new Error(
            `${target.label} answered nothing (${scenario}): ${
              JSON.stringify(point.report.errors)
            }`,
          );
        }
        if (failed > 0) {
          context.log(
            `throughput: warm-up ${target.key}/${scenario}: ${failed} failed ${
              JSON.stringify(point.report.errors)
            }`,
          );
        }
      }
    }

    const points = new Map<string, Point[]>();
    for (let r = 0; r < context.runs; r++) {
      for (const scenario of scenarios) {
        for (const target of rotate(targets, r)) {
          const point = await measure(target, shared, options(target, scenario, seconds, warmup));
          const key = `${scenario}/${target.key}`;
          points.set(key, [...(points.get(key) ?? []), point]);
          const rep = point.report;
          context.log(
            `throughput run ${r + 1} ${scenario.padEnd(7)} ${target.key.padEnd(10)} ` +
              `${rep.throughput.toFixed(0).padStart(6)}/s p50 ${rep.latencyMs.p50.toFixed(2)} ms ` +
              `p99 ${rep.latencyMs.p99.toFixed(2)} ms, proxy ${
                (point.targetCpuMs / point.wallMs).toFixed(2)
              } cores, upstream+origin ${(point.sharedCpuMs / point.wallMs).toFixed(2)}, ` +
              `loadgen ${rep.cpu.cores.toFixed(2)}, others ${otherCores(point).toFixed(2)}` +
              (rep.requests > rep.ok ? `, failed ${JSON.stringify(rep.errors)}` : ""),
          );
        }
      }
    }
    // Proof the limited project's requests went through the limiter: its own count of them.
    let limiterCounts: string | undefined;
    if (gatewayStatusPort !== undefined && wanted.includes("gateway-rate")) {
      const text = await (await fetch(`http://127.0.0.1:${gatewayStatusPort}/metrics`)).text();
      const count = (result: string) =>
        seriesValue(text, `octoprox_gateway_project_rate_requests_total{result="${result}"}`) ?? 0;
      limiterCounts = `the limiter admitted ${formatNumber(count("admitted"), 0)}, refused ${
        formatNumber(count("refused"), 0)
      }, leased ${
        formatNumber(
          seriesValue(text, 'octoprox_gateway_project_rate_leases_total{result="leased"}') ?? 0,
          0,
        )
      } times`;
    }
    return rows(targets, points, { seconds, concurrency, runs: context.runs, limiterCounts });
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
  }
}

function rows(
  targets: readonly Target[],
  points: Map<string, Point[]>,
  setup: { seconds: number; concurrency: number; runs: number; limiterCounts?: string },
): Row[] {
  const out: Row[] = [];
  const cores = availableParallelism();
  for (const scenario of [Scenario.http, Scenario.connect]) {
    const what = scenario === Scenario.http ? "keep-alive HTTP requests" : "new CONNECT tunnels";
    for (const target of targets) {
      const list = points.get(`${scenario}/${target.key}`) ?? [];
      const runs = list.map((p) => p.report.throughput);
      const m = (pick: (p: Point) => number) => median(list.map(pick));
      const perRequest = (pick: (p: Point) => number) =>
        formatNumber(m((p) => (p.report.ok > 0 ? (pick(p) * 1000) / p.report.ok : NaN)), 0);
      const failed = list.reduce((n, p) => n + p.report.requests - p.report.ok, 0);
      const classes = new Map<string, number>();
      for (const p of list) {
        for (const [name, count] of Object.entries(p.report.errors)) {
          classes.set(name, (classes.get(name) ?? 0) + count);
        }
      }
      const resent = list.reduce((n, p) => n + p.report.retries, 0);
      out.push({
        figure: `${what} a second via ${target.label}`,
        value: median(runs),
        runs,
        unit: "/s",
        digits: 0,
        detail: `p50 ${
          formatNumber(m((p) => p.report.latencyMs.p50), 2)
        } ms, p99 ${formatNumber(m((p) => p.report.latencyMs.p99), 2)} ms; CPU per request: proxy ${
          perRequest((p) => p.targetCpuMs)
        } µs, upstream+origin ${perRequest((p) => p.sharedCpuMs)} µs, loadgen ${
          perRequest((p) => p.report.cpu.userMs + p.report.cpu.systemMs)
        } µs; ` +
          `cores busy: proxy ${formatNumber(m((p) => p.targetCpuMs / p.wallMs), 2)}, ` +
          `upstream+origin ${formatNumber(m((p) => p.sharedCpuMs / p.wallMs), 2)}, loadgen ${
            formatNumber(m((p) => p.report.cpu.cores), 2)
          }, other processes ${formatNumber(m(otherCores), 2)}, of ${cores}; failed ${failed}` +
          (classes.size > 0
            ? ` (${[...classes].map(([name, count]) => `${name}: ${count}`).join(", ")})`
            : "") +
          (resent > 0 ? `; ${resent} resent after the proxy closed the connection` : ""),
      });
    }
    const label = scenario === Scenario.http ? "keep-alive HTTP" : "new CONNECT tunnels";
    const ratio = (
      mine: string,
      other: string,
      budget: Row["budget"],
      detail = "the same run's figures divided, then the median",
    ) => {
      const ours = points.get(`${scenario}/${mine}`);
      const theirs = points.get(`${scenario}/${other}`);
      if (!ours || !theirs) return;
      const runs = ours.map((p, i) => p.report.throughput / theirs[i].report.throughput);
      out.push({
        figure: `${label}: ${LABELS[mine]} ÷ ${LABELS[other]}`,
        value: median(runs),
        runs,
        unit: "×",
        digits: 2,
        ...(budget ? { budget } : {}),
        detail,
      });
    };
    ratio("gateway", "relay", { op: ">=", limit: 0.7 });
    // The rate limiter's cost: the same process's CPU per request, limit on less limit off.
    const plain = points.get(`${scenario}/gateway`);
    const limited = points.get(`${scenario}/gateway-rate`);
    if (plain && limited) {
      const cpuPerRequest = (p: Point) => (p.targetCpuMs * 1000) / p.report.ok;
      const runs = limited.map((p, i) => cpuPerRequest(p) - cpuPerRequest(plain[i]));
      out.push({
        figure: `${label}: gateway CPU per request, project rate limit on less off`,
        value: median(runs),
        runs,
        unit: "µs",
        digits: 1,
        budget: { op: "<=", limit: 10 },
        detail: "the same gateway process, the same run's two points, then the median" +
          (setup.limiterCounts ? `; over the whole suite ${setup.limiterCounts}` : ""),
      });
    }
    ratio("gateway", "squid", { op: ">", limit: 1 });
    ratio("gateway", "tinyproxy", { op: ">", limit: 1 });
    // The bare relay routes nothing: what one event loop on this runtime reaches at best, so
    // how far above a C proxy the gateway could possibly come on this machine.
    const ceiling = "the runtime's ceiling on this machine (no budget): same run, then the median";
    ratio("relay", "squid", undefined, ceiling);
    ratio("relay", "tinyproxy", undefined, ceiling);
  }
  out.push({
    figure: "throughput: seconds measured per point, client concurrency",
    value: setup.seconds,
    unit: `s, ${setup.concurrency} in flight`,
    digits: 0,
  });
  return out;
}

export const throughputSuite: Suite = {
  name: "throughput",
  description:
    "keep-alive HTTP and new CONNECT tunnels a second: gateway vs bare relay, Squid, tinyproxy",
  run,
};
