/**
 * Suite `scaling`: how each cost grows with the work, as small tables with the curve's shape.
 *
 * - **Routing core** (Deno, core-entry.ts, a fresh process per run) at each size: snapshot
 *   build, dispatch p50 and p99 (round_robin, 200,000 timed cycles).
 * - **Feed compile** (Node, the controller's `compile` on Postgres) at each size.
 * - **Gateway RSS** at each size: the real gateway (gateway/main.ts under Deno) on a feed the
 *   real FeedPublisher writes (memory.ts's rows); the RSS before any feed is the fixed base the
 *   per-proxy figure leaves out. Every RSS here is read after a full garbage collection,
 *   through the gateway's inspector (collect-garbage.ts): what is live, not when V8 last
 *   collected.
 * - **Idle tunnels**: one gateway with a 1,000-proxy feed that opened and closed 1,000 tunnels
 *   (what the first traffic grows once stays in the base), its RSS settled, then 1,000 idle
 *   CONNECT tunnels and the RSS settled again, then up to BENCH_SCALING_TUNNELS in all (9,900:
 *   the gateway holds two descriptors a tunnel and the machine's hard limit is 20,000); per
 *   tunnel is the growth over the tunnels. Two upstreams (bare-relay.ts) share the tunnels so
 *   neither runs out of descriptors. The same again through the bare relay (bare-relay.ts
 *   straight to the origin, with read buffers of the gateway's quiet-tunnel size), side by side:
 *   the runtime's floor for an idle tunnel.
 *
 * Sizes: BENCH_SCALING_SIZES (default 1000,10000,100000,1000000). The largest size runs once
 * when it is 1,000,000 or more (a run takes about a minute there); the others `--runs` times.
 * A shape row gives the growth exponent between the two largest sizes (cost ∝ sizeᵏ): below
 * 0.2 constant, 0.8 to 1.2 linear, above 1.2 worse than linear.
 */
import type { HeapUsage } from "./collect-garbage.ts";
import { CORE_DEFAULTS, type CoreResult } from "./core-measure.ts";
import { timeCompile } from "./feed.ts";
import { idleTunnels, publishBigFeed } from "./memory.ts";
import { entryRuntime, runEntry } from "./runtime.ts";
import { httpProxyRow, startDenoService, startGateway } from "./services.ts";
import type { Service } from "../../testkit/upstreams/daemon.ts";
import { freePort } from "../../testkit/ports.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";
import {
  envPositive,
  formatNumber,
  MB,
  median,
  residentBytes,
  type Row,
  type Suite,
  type SuiteContext,
} from "./suite.ts";
import { sleep } from "../../shared/async/sleep.ts";

const DEFAULT_SIZES = [1_000, 10_000, 100_000, 1_000_000];
const DISPATCH_ITERATIONS = 200_000;
const DISPATCH_P99_BUDGET_US = 20;
/** Per-proxy RSS at the largest size over the one before it (1.0 is linear; 10% for noise). */
const RSS_PER_PROXY_RATIO_BUDGET = 1.1;
const TUNNEL_BUDGET_KB = 8;
const FIRST_TUNNELS = 1_000;

function sizesFromEnv(): number[] {
  const raw = process.env.BENCH_SCALING_SIZES;
  if (raw === undefined || raw === "") return DEFAULT_SIZES;
  const sizes = raw.split(",").map(Number);
  if (sizes.some((n) => !Number.isInteger(n) || n < 20)) {
    throw new Error("BENCH_SCALING_SIZES must be integers of at least 20, comma-separated");
  }
  return [...sizes].sort((a, b) => a - b);
}

/** Runs at this size: the heavy million once. */
function runsAt(context: SuiteContext, size: number): number {
  return size >= 1_000_000 ? 1 : context.runs;
}

/** The growth exponent k of cost ∝ sizeᵏ between two points, and what it means. */
export function curveShape(
  from: { size: number; cost: number },
  to: { size: number; cost: number },
): { exponent: number; shape: string } {
  const exponent = Math.log(to.cost / from.cost) / Math.log(to.size / from.size);
  const shape = exponent < 0.2
    ? "constant"
    : exponent < 0.8
    ? "sub-linear"
    : exponent <= 1.2
    ? "linear"
    : "worse than linear";
  return { exponent, shape };
}

/** RSS and the JavaScript heap in use, after a full collection (bytes). */
export interface Live {
  rss: number;
  heap: number;
  /** The JavaScript heap V8 holds (committed), used or not. */
  heapTotal: number;
}

/** A gateway whose inspector listens, so the bench can have it collect its garbage. */
export async function inspectedGateway(bed: FeedBed) {
  const inspectPort = await freePort();
  const gateway = await startGateway(bed, {}, {
    denoFlags: [`--inspect=127.0.0.1:${inspectPort}`],
  });
  return { gateway, liveResident: liveResidentOf(gateway.pids[0], inspectPort) };
}

/**
 * A Deno process's RSS with only what is live: a full collection first, through its inspector
 * (V8 otherwise leaves garbage until its next one, seconds or minutes later, which makes
 * readings wander by tens of MB), then a second for the freed pages to go back to the system.
 */
function liveResidentOf(pid: number, inspectPort: number): () => Promise<Live> {
  return async () => {
    const heap = await runEntry<HeapUsage>("deno", "collect-garbage.ts", [
      String(inspectPort),
    ], ["--allow-net"]);
    await sleep(1000);
    return {
      rss: (await residentBytes(pid)) ?? NaN,
      heap: heap.usedBytes,
      heapTotal: heap.totalBytes,
    };
  };
}

function shapeRow(
  figure: string,
  points: { size: number; cost: number }[],
  unit: string,
): Row {
  const [from, to] = points.slice(-2);
  const { exponent, shape } = curveShape(from, to);
  const perSize = points.map((p) => `${formatNumber(p.size, 0)}: ${formatNumber(p.cost)}`);
  return {
    figure: `${figure}: growth exponent ${formatNumber(from.size, 0)} → ${
      formatNumber(to.size, 0)
    }`,
    value: exponent,
    unit: "",
    digits: 2,
    detail: `${shape}; ${unit} ${perSize.join(", ")}`,
  };
}

async function coreCurve(context: SuiteContext, sizes: number[]): Promise<Row[]> {
  const runtime = entryRuntime("BENCH_CORE_RUNTIME");
  const rows: Row[] = [];
  const builds: { size: number; cost: number }[] = [];
  const p99s: { size: number; cost: number }[] = [];
  for (const size of sizes) {
    const results: CoreResult[] = [];
    for (let i = 0; i < runsAt(context, size); i++) {
      const result = await runEntry<CoreResult>(runtime, "core-entry.ts", [
        JSON.stringify({ ...CORE_DEFAULTS, proxies: size, iterations: DISPATCH_ITERATIONS }),
      ]);
      context.log(
        `scaling: core at ${size}: build ${result.buildMs.toFixed(1)} ms, dispatch p50 ${
          (result.dispatch.p50 * 1000).toFixed(2)
        } µs, p99 ${(result.dispatch.p99 * 1000).toFixed(2)} µs`,
      );
      results.push(result);
    }
    const n = formatNumber(size, 0);
    const us = (pick: (r: CoreResult) => number) => results.map((r) => pick(r) * 1000);
    const build = results.map((r) => r.buildMs);
    builds.push({ size, cost: median(build) });
    p99s.push({ size, cost: median(us((r) => r.dispatch.p99)) });
    rows.push(
      {
        figure: `snapshot build, ${n} proxies (${results[0].runtime})`,
        value: median(build),
        runs: build,
        unit: "ms",
        digits: 1,
        detail: `${formatNumber((median(build) / size) * 1e6, 0)} ns a proxy`,
      },
      {
        figure: `dispatch p50, ${n} proxies`,
        value: median(us((r) => r.dispatch.p50)),
        runs: us((r) => r.dispatch.p50),
        unit: "µs",
        digits: 2,
      },
      {
        figure: `dispatch p99, ${n} proxies`,
        value: median(us((r) => r.dispatch.p99)),
        runs: us((r) => r.dispatch.p99),
        unit: "µs",
        digits: 2,
        ...(size >= 1_000_000
          ? { budget: { op: "<=" as const, limit: DISPATCH_P99_BUDGET_US } }
          : {}),
        detail: `p99.9 ${formatNumber(median(us((r) => r.dispatch.p999)), 2)} µs; ${
          formatNumber(DISPATCH_ITERATIONS, 0)
        } timed`,
      },
    );
  }
  rows.push(shapeRow("snapshot build", builds, "ms"));
  rows.push(shapeRow("dispatch p99", p99s, "µs"));
  return rows;
}

async function compileCurve(context: SuiteContext, sizes: number[]): Promise<Row[]> {
  const rows: Row[] = [];
  const points: { size: number; cost: number }[] = [];
  for (const size of sizes) {
    const times = await timeCompile(context, size, runsAt(context, size));
    points.push({ size, cost: median(times.compiles) });
    rows.push({
      figure: `feed compile, ${formatNumber(times.count, 0)} proxies (Node)`,
      value: median(times.compiles),
      runs: times.compiles,
      unit: "ms",
      digits: 0,
      detail: `of which the Postgres read ${formatNumber(median(times.reads), 0)} ms; ${
        formatNumber(((median(times.compiles) / size) * 1e6) / 1000, 2)
      } µs a proxy; feed JSON ${formatNumber(times.jsonBytes / MB, 1)} MiB`,
    });
  }
  rows.push(shapeRow("feed compile", points, "ms"));
  return rows;
}

interface RssRun {
  baseMb: number;
  rssMb: number;
  heapMb: number;
  applyMs: number;
}

async function gatewayRss(size: number, upstream: Service): Promise<RssRun> {
  const bed = await feedBed();
  await bed.lead();
  const { gateway, liveResident } = await inspectedGateway(bed);
  try {
    await sleep(2000);
    const base = await liveResident();
    await publishBigFeed(
      bed,
      [httpProxyRow("shared-upstream", "127.0.0.1", upstream.port)],
      size,
    );
    const applied = await gateway.line("First feed applied", 300_000);
    await gateway.waitForProxy();
    const live = await liveResident();
    return {
      baseMb: base.rss / MB,
      rssMb: live.rss / MB,
      heapMb: live.heap / MB,
      applyMs: Number(applied.applyMs),
    };
  } finally {
    await gateway.stop();
    await bed.close();
  }
}

async function rssCurve(context: SuiteContext, sizes: number[]): Promise<Row[]> {
  const upstream = await startDenoService("upstream", "bare-relay.ts");
  const rows: Row[] = [];
  const perProxy: { size: number; bytes: number }[] = [];
  const points: { size: number; cost: number }[] = [];
  try {
    for (const size of sizes) {
      const runs: RssRun[] = [];
      for (let i = 0; i < runsAt(context, size); i++) {
        runs.push(await gatewayRss(size, upstream));
        context.log(
          `scaling: gateway RSS at ${size}: ${runs[i].rssMb.toFixed(0)} MB (base ${
            runs[i].baseMb.toFixed(0)
          }, apply ${runs[i].applyMs} ms)`,
        );
      }
      const rss = median(runs.map((r) => r.rssMb));
      const base = median(runs.map((r) => r.baseMb));
      const bytes = ((rss - base) * MB) / size;
      perProxy.push({ size, bytes });
      points.push({ size, cost: rss - base });
      rows.push({
        figure: `gateway RSS, ${formatNumber(size, 0)} proxies (Deno, one isolate)`,
        value: rss,
        runs: runs.map((r) => r.rssMb),
        unit: "MB",
        digits: 0,
        detail: `${formatNumber(bytes, 0)} bytes a proxy over the base of ${
          formatNumber(base, 0)
        } MB (before any feed); JS heap ${
          formatNumber(median(runs.map((r) => r.heapMb)), 0)
        } MB; first apply ${formatNumber(median(runs.map((r) => r.applyMs)), 0)} ms`,
      });
    }
  } finally {
    await upstream.stop();
  }
  rows.push(shapeRow("gateway RSS over its base", points, "MB"));
  if (perProxy.length >= 2) {
    const [from, to] = perProxy.slice(-2);
    rows.push({
      figure: `gateway RSS a proxy, ${formatNumber(to.size, 0)} over ${
        formatNumber(from.size, 0)
      } proxies`,
      value: to.bytes / from.bytes,
      unit: "×",
      digits: 2,
      budget: { op: "<=", limit: RSS_PER_PROXY_RATIO_BUDGET },
      detail: `${formatNumber(to.bytes, 0)} against ${
        formatNumber(from.bytes, 0)
      } bytes a proxy; at most linear (1.0, 10% for noise)`,
    });
  }
  return rows;
}

/** What a proxy's RSS grew by with idle tunnels through it, read at each count. */
interface TunnelPoints {
  base: Live;
  points: (Live & { count: number })[];
  /** Tunnels still open at the end. */
  open: number;
}

/**
 * Opens FIRST_TUNNELS tunnels through `port` and closes them again (what the first traffic grows
 * once, compiled code and pools, stays in the base), reads the base, then opens idle tunnels up
 * to each count and reads again; closes them all before it returns.
 */
async function idleTunnelPoints(
  context: SuiteContext,
  who: string,
  port: number,
  target: string,
  counts: number[],
  liveResident: () => Promise<Live>,
): Promise<TunnelPoints> {
  const tunnels = idleTunnels(port, target);
  try {
    const warmUp = idleTunnels(port, target);
    await warmUp.open(FIRST_TUNNELS);
    warmUp.destroy();
    await waitUntil(() => warmUp.closed === FIRST_TUNNELS, { timeoutMs: 30_000 });
    await sleep(1000); // the proxy's side of the closes
    const base = await liveResident();
    const points: (Live & { count: number })[] = [];
    for (const count of counts) {
      await tunnels.open(count - tunnels.sockets.length);
      points.push({ count, ...await liveResident() });
      context.log(
        `scaling: ${count} idle tunnels via ${who}: RSS ${
          (points.at(-1)!.rss / MB).toFixed(1)
        } MB, ` +
          `heap ${(points.at(-1)!.heap / MB).toFixed(1)} (base ${
            (base.rss / MB).toFixed(1)
          }, heap ${(base.heap / MB).toFixed(1)})`,
      );
    }
    return { base, points, open: tunnels.sockets.length - tunnels.closed };
  } finally {
    tunnels.destroy();
  }
}

function tunnelRows(
  who: string,
  measured: TunnelPoints,
  total: number,
  budget: Row["budget"],
): Row[] {
  const { base, points, open } = measured;
  const rows: Row[] = points.map(({ count, rss, heap }) => ({
    figure: `${who} RSS an idle CONNECT tunnel, ${formatNumber(count, 0)} open`,
    value: (rss - base.rss) / count / 1000,
    unit: "KB",
    digits: 1,
    ...(budget ? { budget } : {}),
    detail: `of which JS heap ${formatNumber((heap - base.heap) / count / 1000, 1)} KB; RSS ${
      formatNumber(rss / MB, 1)
    } MB over ${formatNumber(base.rss / MB, 1)} MB with none; ${
      count === total && open < total ? `only ${open} still open` : "every tunnel open"
    }`,
  }));
  if (points.length === 2 && points[1].count > points[0].count) {
    const [a, b] = points;
    rows.push({
      figure: `${who} RSS a further idle tunnel, ${formatNumber(a.count, 0)} → ${
        formatNumber(b.count, 0)
      }`,
      value: (b.rss - a.rss) / (b.count - a.count) / 1000,
      unit: "KB",
      digits: 1,
      detail: "the slope: constant per tunnel is a linear curve",
    });
  }
  return rows;
}

/** The quiet-tunnel buffer of the gateway (gateway/net/io/buffers.ts), given to the floor. */
const FLOOR_BUFFER_BYTES = 1024;

async function tunnelCurve(context: SuiteContext): Promise<Row[]> {
  const total = envPositive("BENCH_SCALING_TUNNELS", true) ?? 9_900;
  const counts = [Math.min(FIRST_TUNNELS, total), total];
  const origin = await startDenoService("origin", "origin.ts");
  const target = `127.0.0.1:${origin.port}`;
  const stops: (() => Promise<void>)[] = [() => origin.stop()];
  try {
    const upstreams = [
      await startDenoService("upstream", "bare-relay.ts"),
      await startDenoService("upstream", "bare-relay.ts"),
    ];
    for (const upstream of upstreams) stops.push(() => upstream.stop());
    const bed = await feedBed();
    stops.push(() => bed.close());
    await bed.lead();
    const { gateway, liveResident } = await inspectedGateway(bed);
    stops.push(() => gateway.stop());
    await publishBigFeed(
      bed,
      upstreams.map((u, i) => httpProxyRow(`upstream-${i}`, "127.0.0.1", u.port)),
      1_000,
    );
    await gateway.waitForProxy();
    const ours = await idleTunnelPoints(
      context,
      "the gateway",
      gateway.port,
      target,
      counts,
      liveResident,
    );

    // The runtime's floor, side by side: the bare relay (same runtime and socket calls, no
    // session, admission, routing or metering) holding the same tunnels with buffers of the
    // gateway's quiet-tunnel size, straight to the origin.
    const inspectPort = await freePort();
    const relay = await startDenoService(
      "relay",
      "bare-relay.ts",
      ["--buffer-bytes", String(FLOOR_BUFFER_BYTES)],
      {},
      [`--inspect=127.0.0.1:${inspectPort}`],
    );
    stops.push(() => relay.stop());
    const floor = await idleTunnelPoints(
      context,
      "the bare relay",
      relay.port,
      target,
      counts,
      liveResidentOf(relay.pids[0], inspectPort),
    );
    const rows = [
      ...tunnelRows("gateway", ours, total, { op: "<=", limit: TUNNEL_BUDGET_KB }),
      ...tunnelRows(
        `bare relay (${FLOOR_BUFFER_BYTES}-byte buffers)`,
        floor,
        total,
        undefined,
      ),
    ];
    for (const [index, count] of counts.entries()) {
      const perTunnel = (m: TunnelPoints) => (m.points[index].rss - m.base.rss) / count;
      rows.push({
        figure: `gateway ÷ bare relay, RSS an idle tunnel, ${formatNumber(count, 0)} open`,
        value: perTunnel(ours) / perTunnel(floor),
        unit: "×",
        digits: 2,
        detail: "the same tunnels through each; the relay is the runtime's floor",
      });
    }
    return rows;
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
  }
}

/** Which curves to run: BENCH_SCALING_CURVES (core,compile,rss,tunnels; all by default). */
function curvesFromEnv(): Set<string> {
  const all = ["core", "compile", "rss", "tunnels"];
  const raw = process.env.BENCH_SCALING_CURVES;
  const chosen = raw === undefined || raw === "" ? all : raw.split(",");
  const unknown = chosen.filter((c) => !all.includes(c));
  if (unknown.length > 0) throw new Error(`BENCH_SCALING_CURVES: unknown ${unknown.join(", ")}`);
  return new Set(chosen);
}

export const scalingSuite: Suite = {
  name: "scaling",
  description: "cost against size: core, compile and RSS at 1k-1M proxies; idle tunnels",
  async run(context) {
    const sizes = sizesFromEnv();
    const curves = curvesFromEnv();
    const rows: Row[] = [];
    if (curves.has("core")) rows.push(...await coreCurve(context, sizes));
    if (curves.has("compile")) rows.push(...await compileCurve(context, sizes));
    if (curves.has("rss")) rows.push(...await rssCurve(context, sizes));
    if (curves.has("tunnels")) rows.push(...await tunnelCurve(context));
    return rows;
  },
};
