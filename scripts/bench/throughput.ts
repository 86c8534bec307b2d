/**
 * Suite `throughput`: the CPU each proxy spends per request, side by side, for keep-alive HTTP
 * forward requests, new CONNECT tunnels and new SOCKS5 tunnels; the requests a second and the
 * latencies beside it; and the latency each proxy adds at a light fixed rate and at saturation.
 *
 * Why CPU per request is the headline: on a small machine the load generator, the proxy, the
 * upstream and the origin share the cores, so a proxy's requests a second mostly tell who got
 * the cores; the CPU the proxy itself spent per answered request does not (it is read for the
 * proxy's own processes from /proc/<pid>/stat, utime + stime, at the measured window's start
 * and end, divided by the requests answered in it).
 *
 * Budgets, ratios of CPU per request taken within each run (the same run's two points), then
 * the median over runs: keep-alive HTTP via the gateway at most 0.8 of Squid's; a new CONNECT
 * tunnel via the gateway at most tinyproxy's (ratio ≤ 1) and at most 1.1 of the bare relay's.
 * The rate limiter's cost (the gateway's CPU per request with a project rate limit on, less
 * off) at most 10 µs. Everything else (request rates and their ratios, proxy-chain, Dante, the
 * latency added) is information.
 *
 * The processes, each its own (so each one's CPU is read from /proc apart):
 * - the **origin**: origin.ts, Deno.serve answering 64 bytes, keep-alive;
 * - the **shared upstream**: bare-relay.ts without `--upstream`, a forward proxy of our own
 *   that keeps pooled keep-alive connections to the origin and answers CONNECT itself. Not
 *   tinyproxy: it closes every client connection after one answer, which would charge every
 *   target a new upstream connection per request whatever the target does;
 * - the HTTP targets, each chained to that upstream: the **gateway** (gateway/main.ts under
 *   Deno, shipped defaults, on a feed the real FeedPublisher writes into Redis: one project, one
 *   static connector whose one proxy is the upstream; no control plane); the **bare relay**
 *   (bare-relay.ts `--upstream`: no auth, no routing, pooled upstream connections); the bare
 *   relay with `--dial-per-request` (a new upstream connection per request); **Squid**
 *   (Debian's, `cache_peer` parent + `never_direct`, no cache, one worker); **tinyproxy**
 *   (Debian's, `Upstream http`); **proxy-chain** (the npm library's Server in a Node process,
 *   proxy-chain-peer.ts: Basic auth required, `upstreamProxyUrl` the shared upstream); and
 *   **direct**: the shared upstream itself, no proxy in front (the latency baseline);
 * - the SOCKS5 targets: the gateway's SOCKS5 listener (same process, same login; it leaves
 *   through the shared upstream with CONNECT, as every gateway request leaves through a proxy of
 *   the pool); **Dante** (Debian's danted, no auth, connecting to the origin itself, as it is
 *   usually run: one hop less than the gateway); and **direct**: new connections straight
 *   to the origin (the baseline; its "CPU per request" is the origin's);
 * - the load: proxy-loadgen (scripts/loadgen) in a child process of its own per point:
 *   `http` keeps BENCH_THROUGHPUT_CONCURRENCY (32) connections busy with absolute-form GETs;
 *   `connect` keeps as many loops each opening a new connection, CONNECT, one GET through the
 *   tunnel, close; `socks5` the same with a SOCKS5 handshake; `direct` the same straight.
 *
 * A point is one scenario through one target: a warm-up (BENCH_THROUGHPUT_WARMUP, 1 s, not
 * counted) then BENCH_THROUGHPUT_SECONDS (5) measured, closed-loop (as fast as answers come).
 * A run measures every target in every scenario, the targets' order rotating from run to run;
 * then, open-loop at BENCH_THROUGHPUT_RATE (200) requests a second for
 * BENCH_THROUGHPUT_RATE_SECONDS (3), every target but the two variants (gateway-rate,
 * relay-dial), for the latency added: each target's p50 and p99 less the same run's direct
 * baseline's, then the median. Before the runs every target serves a short pass, uncounted.
 *
 * The **gateway, 50 block rules with body markers** target (keep-alive HTTP only) is the same
 * gateway process through a third project whose 50 rules each look in the body for two markers
 * the origin's answer does not hold: every answer's first bytes are read, decoded and looked
 * through, and let go. Its CPU per request less the plain project's is judging's cost (at most
 * 10 µs a judged answer).
 *
 * The **gateway, rate limit on** target is the same gateway process through a second project
 * whose request-rate limit (BENCH_RATE_LIMIT, 50,000 a second, its burst the same) stays above
 * the load: every request spends a leased token, a lease every 100 ms of the rate goes to Redis.
 *
 * Other overrides: BENCH_THROUGHPUT_TARGETS (a comma list of gateway, gateway-rate, relay,
 * relay-dial, squid, tinyproxy, proxy-chain, dante, direct), BENCH_GATEWAY_ISOLATES (the
 * gateway's OCTOPROX_GATEWAY_ISOLATES), BENCH_GATEWAY_V8_FLAGS (its DENO_V8_FLAGS, e.g. --prof).
 */
import { availableParallelism } from "node:os";
import type { LatencySummary, LoadOptions, LoadReport } from "../loadgen/index.ts";
import { runLoadInChild, Scenario } from "../loadgen/index.ts";
import { feedBed } from "../../testkit/feed.ts";
import { seriesValue } from "../../testkit/promtool.ts";
import {
  BENCH_LOGIN,
  httpProxyRow,
  publishFeed,
  startDenoService,
  startGateway,
  startProxyChain,
} from "./services.ts";
import type { Service } from "../../testkit/upstreams/daemon.ts";
import { startSquid } from "../../testkit/upstreams/squid.ts";
import { startDante } from "../../testkit/upstreams/dante.ts";
import { startChainedTinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import {
  cpuMillisOf,
  envPositive,
  formatNumber,
  machineCpuMillis,
  median,
  pairedMedian,
  rotate,
  type Row,
  type Suite,
  type SuiteContext,
} from "./suite.ts";

/** The third project's login: every answer judged by JUDGED_RULES. */
const JUDGED_LOGIN = { username: "bench-judged", password: "bench-judged-pass" };

/**
 * 50 rules that each look in the body (no status or header condition, so every answer's first
 * bytes are read and every rule's markers looked for), none matching the origin's answer: the
 * worst case of judging a good answer.
 */
const JUDGED_RULES = Array.from({ length: 50 }, (_, index) => ({
  name: `marker-${index}`,
  mode: "on",
  body_contains: [`captcha-marker-${index}`, `<title>blocked ${index}</title>`],
  verdict: "blocked",
  cool_down_seconds: 60,
}));

/** The second project's login, the one with a rate limit. */
const RATE_LOGIN = { username: "bench-rate", password: "bench-rate-pass" };

/** The kinds of work measured: each a group of rows. */
const GROUPS = ["http", "connect", "socks5"] as const;
type Group = (typeof GROUPS)[number];
const GROUP_NAMES: Record<Group, string> = {
  http: "keep-alive HTTP",
  connect: "new CONNECT tunnels",
  socks5: "new SOCKS5 tunnels",
};

interface Target {
  key: string;
  label: string;
  group: Group;
  /** The load generator's scenario (direct for the SOCKS5 baseline). */
  scenario: Scenario;
  /** The processes whose CPU is the target's. */
  service: Service;
  port: number;
  authorization?: string;
}

export interface Point {
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
  "gateway-judged",
  "relay",
  "relay-dial",
  "squid",
  "tinyproxy",
  "proxy-chain",
  "dante",
  "direct",
] as const;
const LABELS: Record<string, string> = {
  gateway: "gateway",
  "gateway-rate": "gateway, rate limit on",
  "gateway-judged": "gateway, 50 block rules with body markers",
  relay: "bare relay",
  "relay-dial": "bare relay, new upstream connection per request",
  squid: "Squid",
  tinyproxy: "tinyproxy",
  "proxy-chain": "proxy-chain",
  dante: "Dante",
  direct: "direct (the baseline)",
};
/** Variants of another target: measured at saturation only. */
const SATURATION_ONLY = new Set(["gateway-rate", "relay-dial"]);

/**
 * One closed- or open-loop load through a target (its load generator in a child process), with
 * the CPU its processes, the shared ones and the machine spent over the measured window.
 */
export async function measure(
  target: Pick<Target, "service">,
  shared: readonly number[],
  options: LoadOptions,
): Promise<Point> {
  type Sample = [number, number, number, number];
  let start: Promise<Sample> | undefined;
  let end: Promise<Sample> | undefined;
  const sample = async (): Promise<Sample> => {
    const at = performance.now();
    // Read afresh: a multi-process server (Dante) forks and reaps children as it goes.
    const pids = target.service.pids;
    const [mine, others, machine] = await Promise.all([
      cpuMillisOf(pids),
      cpuMillisOf(shared.filter((pid) => !pids.includes(pid))),
      machineCpuMillis(),
    ]);
    return [at, mine, others, machine.busy];
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

/** The proxy's CPU per answered request, in µs. */
function cpuPerRequest(point: Point): number {
  return point.report.ok > 0 ? (point.targetCpuMs * 1000) / point.report.ok : NaN;
}

/** How far a target's latency lies above the baseline's in the same run: p50 and p99, in ms. */
export function latencyAdded(
  ours: readonly LatencySummary[],
  base: readonly LatencySummary[],
): { p50: { value: number; runs: number[] }; p99: { value: number; runs: number[] } } {
  return {
    p50: pairedMedian(ours, base, (mine, other) => mine.p50 - other.p50),
    p99: pairedMedian(ours, base, (mine, other) => mine.p99 - other.p99),
  };
}

async function run(context: SuiteContext): Promise<Row[]> {
  const seconds = envPositive("BENCH_THROUGHPUT_SECONDS") ?? 5;
  const warmup = envPositive("BENCH_THROUGHPUT_WARMUP") ?? 1;
  const concurrency = Math.round(envPositive("BENCH_THROUGHPUT_CONCURRENCY") ?? 32);
  const rate = envPositive("BENCH_THROUGHPUT_RATE") ?? 200;
  const rateSeconds = envPositive("BENCH_THROUGHPUT_RATE_SECONDS") ?? 3;
  const wanted = (process.env.BENCH_THROUGHPUT_TARGETS ?? TARGET_KEYS.join(","))
    .split(",").map((key) => key.trim()).filter(Boolean);
  for (const key of wanted) {
    if (!(TARGET_KEYS as readonly string[]).includes(key)) {
      throw new Error(`BENCH_THROUGHPUT_TARGETS: unknown ${key}; known ${TARGET_KEYS.join(", ")}`);
    }
  }
  const began = performance.now();
  const stops: (() => Promise<void>)[] = [];
  try {
    context.log("throughput: starting the origin, the shared upstream and the targets");
    const origin = await startDenoService("origin", "origin.ts");
    stops.push(() => origin.stop());
    const upstream = await startDenoService("upstream", "bare-relay.ts");
    stops.push(() => upstream.stop());
    const shared = [...origin.pids, ...upstream.pids];
    const basic = (login: { username: string; password: string }) =>
      `Basic ${btoa(`${login.username}:${login.password}`)}`;

    const targets: Target[] = [];
    const add = (
      key: string,
      service: Service,
      groups: readonly Group[],
      extra: { port?: number; authorization?: string; scenario?: Scenario; label?: string } = {},
    ) => {
      for (const group of groups) {
        targets.push({
          key,
          label: extra.label ?? LABELS[key],
          group,
          scenario: extra.scenario ?? group,
          service,
          port: extra.port ?? service.port,
          ...(extra.authorization ? { authorization: extra.authorization } : {}),
        });
      }
    };
    let gatewayStatusPort: number | undefined;
    if (
      wanted.includes("gateway") || wanted.includes("gateway-rate") ||
      wanted.includes("gateway-judged")
    ) {
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
      const limit = envPositive("BENCH_RATE_LIMIT") ?? 50_000;
      await publishFeed(bed, {
        projects: [
          { id: "bench", ...BENCH_LOGIN },
          {
            id: "bench-rate",
            ...RATE_LOGIN,
            rateLimit: { requests_per_second: limit, burst: limit },
          },
          {
            id: "bench-judged",
            ...JUDGED_LOGIN,
            blocking: { rules: JUDGED_RULES, retry: null, body_bytes: null },
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
          {
            id: "upstream-judged",
            projectId: "bench-judged",
            proxies: [httpProxyRow("shared-upstream-judged", "127.0.0.1", upstream.port)],
          },
        ],
      });
      await gateway.waitForProxy();
      gatewayStatusPort = gateway.statusPort;
      if (wanted.includes("gateway")) {
        const socks = await gateway.line("SOCKS5 listener bound");
        add("gateway", gateway, ["http", "connect"], { authorization: basic(BENCH_LOGIN) });
        add("gateway", gateway, ["socks5"], {
          port: Number(socks.port),
          authorization: basic(BENCH_LOGIN),
        });
      }
      if (wanted.includes("gateway-rate")) {
        add("gateway-rate", gateway, ["http", "connect"], { authorization: basic(RATE_LOGIN) });
      }
      // Only forwarded answers are judged: keep-alive HTTP alone.
      if (wanted.includes("gateway-judged")) {
        add("gateway-judged", gateway, ["http"], { authorization: basic(JUDGED_LOGIN) });
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
      "proxy-chain": () => startProxyChain(upstream.port, BENCH_LOGIN),
    };
    for (const key of ["relay", "relay-dial", "squid", "tinyproxy", "proxy-chain"]) {
      if (!wanted.includes(key)) continue;
      const service = await starters[key]();
      stops.push(() => service.stop());
      add(
        key,
        service,
        ["http", "connect"],
        key === "proxy-chain" ? { authorization: basic(BENCH_LOGIN) } : {},
      );
    }
    if (wanted.includes("dante")) {
      const dante = await startDante();
      stops.push(() => dante.stop());
      add("dante", dante, ["socks5"]);
    }
    if (wanted.includes("direct")) {
      // The upstream alone (HTTP, CONNECT); the origin alone (what a SOCKS5 tunnel carries).
      add("direct", upstream, ["http", "connect"], {
        label: "the shared upstream alone (no proxy in front; its CPU)",
      });
      add("direct", origin, ["socks5"], {
        scenario: Scenario.direct,
        label: "straight to the origin (no proxy; the origin's CPU)",
      });
    }

    const url = new URL(`http://127.0.0.1:${origin.port}/`);
    const options = (
      target: Target,
      measured: number,
      warm: number,
      fixedRate?: number,
    ) =>
      ({
        proxy: {
          host: "127.0.0.1",
          port: target.port,
          ...(target.authorization ? { authorization: target.authorization } : {}),
        },
        url,
        scenario: target.scenario,
        durationMs: measured * 1000,
        warmupMs: warm * 1000,
        concurrency,
        ...(fixedRate === undefined ? {} : { rate: fixedRate }),
        timeoutMs: 10_000,
        method: "GET",
        headers: [],
      }) satisfies LoadOptions;
    const pointKey = (target: Target, load: "saturation" | "rate") =>
      `${load}/${target.group}/${target.key}`;

    context.log("throughput: a warm-up pass through every target");
    for (const target of targets) {
      const point = await measure(target, shared, options(target, 1.5, 0.5));
      const failed = point.report.requests - point.report.ok;
      if (point.report.ok === 0) {
        throw new Error(
          `${target.label} answered nothing (${target.group}): ${
            JSON.stringify(point.report.errors)
          }`,
        );
      }
      if (failed > 0) {
        context.log(
          `throughput: warm-up ${target.key}/${target.group}: ${failed} failed ${
            JSON.stringify(point.report.errors)
          }`,
        );
      }
    }

    const points = new Map<string, Point[]>();
    const keep = (key: string, point: Point) =>
      points.set(key, [...(points.get(key) ?? []), point]);
    const logPoint = (r: number, target: Target, load: string, point: Point) => {
      const rep = point.report;
      context.log(
        `throughput run ${r + 1} ${load.padEnd(10)} ${target.group.padEnd(7)} ${
          target.key.padEnd(11)
        } ${formatNumber(cpuPerRequest(point), 0).padStart(5)} µs/req ` +
          `${rep.throughput.toFixed(0).padStart(6)}/s p50 ${rep.latencyMs.p50.toFixed(2)} ms ` +
          `p99 ${rep.latencyMs.p99.toFixed(2)} ms, proxy ${
            (point.targetCpuMs / point.wallMs).toFixed(2)
          } cores, upstream+origin ${(point.sharedCpuMs / point.wallMs).toFixed(2)}, ` +
          `loadgen ${rep.cpu.cores.toFixed(2)}, others ${otherCores(point).toFixed(2)}` +
          (rep.requests > rep.ok ? `, failed ${JSON.stringify(rep.errors)}` : ""),
      );
    };
    for (let r = 0; r < context.runs; r++) {
      for (const group of GROUPS) {
        for (const target of rotate(targets.filter((t) => t.group === group), r)) {
          const point = await measure(target, shared, options(target, seconds, warmup));
          keep(pointKey(target, "saturation"), point);
          logPoint(r, target, "saturation", point);
        }
      }
      for (const group of GROUPS) {
        const light = targets.filter((t) => t.group === group && !SATURATION_ONLY.has(t.key));
        for (const target of rotate(light, r)) {
          const point = await measure(target, shared, options(target, rateSeconds, 0.5, rate));
          keep(pointKey(target, "rate"), point);
          logPoint(r, target, `${rate}/s`, point);
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
    // Proof the judged project's answers were judged and none blocked.
    let judgedCounts: string | undefined;
    if (gatewayStatusPort !== undefined && wanted.includes("gateway-judged")) {
      const text = await (await fetch(`http://127.0.0.1:${gatewayStatusPort}/metrics`)).text();
      const blocked = seriesValue(
        text,
        'octoprox_gateway_block_verdicts_total{verdict="blocked",mode="on"}',
      ) ?? 0;
      judgedCounts = `blocked verdicts over the suite: ${formatNumber(blocked, 0)}`;
    }
    const suiteSeconds = (performance.now() - began) / 1000;
    return rows(targets, points, pointKey, {
      seconds,
      concurrency,
      rate,
      rateSeconds,
      suiteSeconds,
      limiterCounts,
      judgedCounts,
    });
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
  }
}

function rows(
  targets: readonly Target[],
  points: Map<string, Point[]>,
  pointKey: (target: Target, load: "saturation" | "rate") => string,
  setup: {
    seconds: number;
    concurrency: number;
    rate: number;
    rateSeconds: number;
    suiteSeconds: number;
    limiterCounts?: string;
    judgedCounts?: string;
  },
): Row[] {
  const out: Row[] = [];
  const cores = availableParallelism();
  const find = (group: Group, key: string) =>
    targets.find((t) => t.group === group && t.key === key);
  const saturated = (group: Group, key: string) => {
    const target = find(group, key);
    return target ? points.get(pointKey(target, "saturation")) : undefined;
  };
  for (const group of GROUPS) {
    const name = GROUP_NAMES[group];
    for (const target of targets.filter((t) => t.group === group)) {
      const list = points.get(pointKey(target, "saturation")) ?? [];
      const m = (pick: (p: Point) => number) => median(list.map(pick));
      const failed = list.reduce((n, p) => n + p.report.requests - p.report.ok, 0);
      const classes = new Map<string, number>();
      for (const p of list) {
        for (const [label, count] of Object.entries(p.report.errors)) {
          classes.set(label, (classes.get(label) ?? 0) + count);
        }
      }
      const resent = list.reduce((n, p) => n + p.report.retries, 0);
      const rates = list.map((p) => p.report.throughput);
      const baseline = target.key === "direct";
      const perRequestOf = (pick: (p: Point) => number) =>
        m((p) => (p.report.ok > 0 ? (pick(p) * 1000) / p.report.ok : NaN));
      const perRequest = (pick: (p: Point) => number) => formatNumber(perRequestOf(pick), 0);
      out.push({
        figure: `${name}: CPU per request, ${target.label}`,
        key: `${group}/${target.key}/cpu-per-request`,
        value: m(cpuPerRequest),
        runs: list.map(cpuPerRequest),
        unit: "µs",
        digits: 0,
        // What `npm run capacity` sizes with: the rate beside the CPU, and how much of the
        // machine the proxy had while it was measured.
        facts: {
          perSecond: median(rates),
          proxyCores: m((p) => p.targetCpuMs / p.wallMs),
          upstreamOriginCpuUs: perRequestOf((p) => p.sharedCpuMs),
          loadgenCores: m((p) => p.report.cpu.cores),
          otherCores: m(otherCores),
          failed,
        },
        detail: `${formatNumber(median(rates), 0)}/s (runs ${
          rates.map((r) => formatNumber(r, 0)).join(", ")
        }); p50 ${
          formatNumber(m((p) => p.report.latencyMs.p50), 2)
        } ms, p99 ${formatNumber(m((p) => p.report.latencyMs.p99), 2)} ms; CPU per request: ${
          baseline ? "others" : "upstream+origin"
        } ${perRequest((p) => p.sharedCpuMs)} µs, loadgen ${
          perRequest((p) => p.report.cpu.userMs + p.report.cpu.systemMs)
        } µs; ` +
          `cores busy: proxy ${formatNumber(m((p) => p.targetCpuMs / p.wallMs), 2)}, ` +
          `upstream+origin ${formatNumber(m((p) => p.sharedCpuMs / p.wallMs), 2)}, loadgen ${
            formatNumber(m((p) => p.report.cpu.cores), 2)
          }, other processes ${formatNumber(m(otherCores), 2)}, of ${cores}; failed ${failed}` +
          (classes.size > 0
            ? ` (${[...classes].map(([label, count]) => `${label}: ${count}`).join(", ")})`
            : "") +
          (resent > 0 ? `; ${resent} resent after the proxy closed the connection` : ""),
      });
    }
    // Ours over theirs, run by run, then the median: CPU per request (the budgets), or requests
    // a second (information only: it tells who got the cores).
    const ratio = (
      of: "cpu" | "rate",
      mine: string,
      other: string,
      budget?: Row["budget"],
    ) => {
      const ours = saturated(group, mine);
      const theirs = saturated(group, other);
      if (!ours || !theirs) return;
      const pick = of === "cpu" ? cpuPerRequest : (p: Point) => p.report.throughput;
      const { value, runs } = pairedMedian(ours, theirs, (a, b) => pick(a) / pick(b));
      const what = of === "cpu" ? "CPU per request" : "requests a second";
      out.push({
        figure: `${name}: ${what}, ${LABELS[mine]} ÷ ${LABELS[other]}`,
        key: `${group}/${of}-ratio/${mine}/${other}`,
        value,
        runs,
        unit: "×",
        digits: 2,
        ...(budget ? { budget } : {}),
        detail: `the same run's ${what} divided, then the median${
          budget ? "" : of === "cpu" ? " (no budget)" : " (no budget: shared cores)"
        }`,
      });
    };
    const cpuRatio = (mine: string, other: string, budget?: Row["budget"]) =>
      ratio("cpu", mine, other, budget);
    if (group === "http") {
      cpuRatio("gateway", "squid", { op: "<=", limit: 0.8 });
      cpuRatio("gateway", "tinyproxy");
      cpuRatio("gateway", "relay");
    } else if (group === "connect") {
      cpuRatio("gateway", "tinyproxy", { op: "<=", limit: 1 });
      cpuRatio("gateway", "relay", { op: "<=", limit: 1.1 });
      cpuRatio("gateway", "squid");
    }
    if (group !== "socks5") cpuRatio("gateway", "proxy-chain");
    else cpuRatio("gateway", "dante");
    // The rate limiter's cost: the same process's CPU per request, limit on less limit off.
    const plain = saturated(group, "gateway");
    const limited = saturated(group, "gateway-rate");
    if (plain && limited) {
      const { value, runs } = pairedMedian(
        limited,
        plain,
        (a, b) => cpuPerRequest(a) - cpuPerRequest(b),
      );
      out.push({
        figure: `${name}: gateway CPU per request, project rate limit on less off`,
        key: `${group}/gateway-rate/cpu-added`,
        value,
        runs,
        unit: "µs",
        digits: 1,
        budget: { op: "<=", limit: 10 },
        detail: "the same gateway process, the same run's two points, then the median" +
          (setup.limiterCounts ? `; over the whole suite ${setup.limiterCounts}` : ""),
      });
    }
    // Judging's cost: the same process's CPU per request, 50 rules with markers less none.
    const judged = saturated(group, "gateway-judged");
    if (plain && judged) {
      const { value, runs } = pairedMedian(
        judged,
        plain,
        (a, b) => cpuPerRequest(a) - cpuPerRequest(b),
      );
      out.push({
        figure: `${name}: gateway CPU per judged answer, 50 rules with body markers less none`,
        key: `${group}/gateway-judged/cpu-added`,
        value,
        runs,
        unit: "µs",
        digits: 1,
        budget: { op: "<=", limit: 10 },
        detail: "the same gateway process, the same run's two points, then the median; every " +
          "answer's body read (64 bytes) and 100 markers looked for" +
          (setup.judgedCounts ? `; ${setup.judgedCounts}` : ""),
      });
    }
    for (const other of ["relay", "squid", "tinyproxy", "proxy-chain", "dante"]) {
      ratio("rate", "gateway", other);
    }
    // Latency added over the direct baseline, open-loop at the light rate and at saturation.
    const base = find(group, "direct");
    if (base) {
      const baseName = group === "socks5" ? "straight to the origin" : "straight to the upstream";
      for (const target of targets.filter((t) => t.group === group && t !== base)) {
        const light = points.get(pointKey(target, "rate"));
        const lightBase = points.get(pointKey(base, "rate"));
        const full = points.get(pointKey(target, "saturation"));
        const fullBase = points.get(pointKey(base, "saturation"));
        if (!full || !fullBase) continue;
        const latencies = (list: readonly Point[]) => list.map((p) => p.report.latencyMs);
        const atSaturation = latencyAdded(latencies(full), latencies(fullBase));
        const ms = (n: number) => `${n >= 0 ? "+" : ""}${formatNumber(n, 2)} ms`;
        const saturation = `at saturation (${setup.concurrency} in flight) p50 ${
          ms(atSaturation.p50.value)
        }, p99 ${ms(atSaturation.p99.value)}`;
        if (light && lightBase) {
          const atRate = latencyAdded(latencies(light), latencies(lightBase));
          out.push({
            figure: `${name}: latency added by ${target.label} at ${setup.rate}/s, p50`,
            value: atRate.p50.value,
            runs: atRate.p50.runs,
            unit: "ms",
            digits: 2,
            detail: `over ${baseName}, the same run's p50 less the baseline's, then the median; ` +
              `p99 ${ms(atRate.p99.value)} (runs ${
                atRate.p99.runs.map((n) => formatNumber(n, 2)).join(", ")
              }); ${saturation}; baseline at ${setup.rate}/s p50 ${
                formatNumber(median(lightBase.map((p) => p.report.latencyMs.p50)), 2)
              } ms, p99 ${
                formatNumber(median(lightBase.map((p) => p.report.latencyMs.p99)), 2)
              } ms`,
          });
        } else {
          out.push({
            figure: `${name}: latency added by ${target.label} at saturation, p50`,
            value: atSaturation.p50.value,
            runs: atSaturation.p50.runs,
            unit: "ms",
            digits: 2,
            detail: `over ${baseName}, the same run's p50 less the baseline's, then the median; ` +
              saturation,
          });
        }
      }
    }
  }
  out.push({
    figure: "throughput: seconds measured per point, client concurrency",
    value: setup.seconds,
    unit: `s, ${setup.concurrency} in flight`,
    digits: 0,
    detail: `closed-loop; the latency points open-loop at ${setup.rate}/s for ${
      formatNumber(setup.rateSeconds, 0)
    } s each`,
  });
  out.push({
    figure: "throughput: the suite's wall time (all runs, start-up included)",
    value: setup.suiteSeconds,
    unit: "s",
    digits: 0,
  });
  return out;
}

export const throughputSuite: Suite = {
  name: "throughput",
  description: "CPU per request (keep-alive HTTP, new CONNECT and SOCKS5 tunnels), latency " +
    "added: gateway vs bare relay, Squid, tinyproxy, proxy-chain, Dante",
  run,
};
