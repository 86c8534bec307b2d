/**
 * Suite `scale-out`: what each gateway costs Redis, on either transport, as gateways are added,
 * and what the HTTP transport costs the request path.
 *
 * Everything runs on a Redis server of the suite's own (so its `INFO` counts only this), with the
 * origin and the shared upstream of the throughput suite (origin.ts, bare-relay.ts), a feed the
 * real FeedPublisher writes under a lease (no control plane), and the Upstash REST stand-in
 * (testkit/upstreams/upstash-rest.ts, in this process) in front of that Redis for the HTTP
 * transport, as one endpoint serves every gateway.
 *
 * 1. **Transports side by side.** Two gateways on one feed, one on TCP and one on HTTP, each
 *    given the throughput suite's keep-alive HTTP load in turn (proxy-loadgen in a child, 32
 *    connections, BENCH_SCALE_OUT_LOAD_SECONDS (5) measured after a second's warm-up), in
 *    A B B A order within a run (whichever is measured second in a pair runs slower here, even
 *    two TCP gateways), A alternating by run: requests a second and the gateway's CPU per
 *    request, each run's two points of a transport merged. Budgets, paired
 *    within each run: HTTP's requests a second at least 0.9 of TCP's, its CPU per request at most
 *    1.1 of TCP's. Metering sends every 5 s and the request path reads memory, so the request
 *    path must not feel the transport.
 * 2. **Scale-out.** For each transport, gateways are added until there are 1, 2, 4 and 8
 *    (BENCH_SCALE_OUT_SIZES). At each size:
 *    - **idle**: BENCH_SCALE_OUT_SECONDS (30) with no traffic;
 *    - **steady**: as long with BENCH_SCALE_OUT_RATE (20) requests a second through every gateway
 *      (open loop, in this process);
 *    - **edits**: BENCH_SCALE_OUT_EDITS (10) feed edits half a second apart (a connector's proxy
 *      changes), each timed from its publish's commit to the moment every gateway logged it
 *      applied (the gateways' own "Feed applied" lines, same machine clock): p50 and p99 over
 *      every edit and gateway.
 *    Redis commands a second per gateway come from Redis's own `INFO commandstats` (every
 *    command's calls, `INFO` itself left out), less what the suite's own lease sends (measured
 *    with no gateway, the same way), over the gateways; TCP bytes a second per gateway from
 *    `INFO stats` (`total_net_input_bytes` + `total_net_output_bytes`, less the same baseline);
 *    HTTP bytes a second per gateway from the gateways' `octoprox_gateway_redis_http_bytes_total`
 *    (request and answer bodies). Each window is cut in three; a figure is the median of the
 *    three. Budgets: per-gateway commands a second at 8 gateways within 10 % of 1 gateway's, idle
 *    and steady, on each transport (a gateway's cost must not grow with the number of gateways).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { type LoadOptions, runLoad, Scenario } from "../loadgen/index.ts";
import { LocalRedis } from "../local-stores.ts";
import { readHead } from "../../shared/feed/manifest.ts";
import { sleep } from "../../shared/async/sleep.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";
import { freePort } from "../../testkit/ports.ts";
import { seriesValue } from "../../testkit/promtool.ts";
import { startUpstashRest, type UpstashRest } from "../../testkit/upstreams/upstash-rest.ts";
import { waitUntil } from "../../testkit/wait.ts";
import {
  BENCH_AUTHORIZATION,
  BENCH_LOGIN,
  type GatewayService,
  httpProxyRow,
  publishFeed,
  startDenoService,
  startGateway,
} from "./services.ts";
import {
  envPositive,
  formatNumber,
  median,
  pairedMedian,
  percentile,
  rotate,
  type Row,
  type Suite,
  type SuiteContext,
} from "./suite.ts";
import { measure, type Point } from "./throughput.ts";

const TRANSPORTS = ["tcp", "http"] as const;
type Transport = (typeof TRANSPORTS)[number];
const DEFAULT_SIZES = [1, 2, 4, 8];
const TOKEN = "scale-out-bench-token";
/** Per-gateway commands a second, the largest size against one gateway: within 10 %. */
const CONSTANT_BUDGET = 0.1;
const HTTP_BYTES = "octoprox_gateway_redis_http_bytes_total";

interface Bed {
  redis: LocalRedis;
  /** The suite's own client: INFO only. */
  info: Redis;
  bed: FeedBed;
  rest: UpstashRest;
  origin: { port: number; pids: number[]; stop(): Promise<void> };
  upstream: { port: number; pids: number[]; stop(): Promise<void> };
  /** Publishes the feed again, its edited connector's proxy named anew (an edit). */
  publishEdit(): Promise<void>;
}

/** Redis's counters: every command's calls (INFO left out), and bytes in and out. */
interface RedisCounts {
  atMs: number;
  bytes: number;
  /** Calls by command. */
  byCommand: Map<string, number>;
}

async function redisCounts(info: Redis): Promise<RedisCounts> {
  const [commandStats, stats] = await Promise.all([
    info.info("commandstats"),
    info.info("stats"),
  ]);
  const byCommand = new Map<string, number>();
  for (const match of commandStats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (match[1] !== "info") byCommand.set(match[1], Number(match[2]));
  }
  const field = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, "m").exec(stats)?.[1]);
  return {
    atMs: performance.now(),
    bytes: field("total_net_input_bytes") + field("total_net_output_bytes"),
    byCommand,
  };
}

/** The gateways' HTTP transport bytes (both directions), summed. */
async function httpBytes(gateways: readonly GatewayService[]): Promise<number> {
  const values = await Promise.all(gateways.map(async (gateway) => {
    const text = await (await fetch(`http://127.0.0.1:${gateway.statusPort}/metrics`)).text();
    return (seriesValue(text, `${HTTP_BYTES}{direction="sent"}`) ?? 0) +
      (seriesValue(text, `${HTTP_BYTES}{direction="received"}`) ?? 0);
  }));
  return values.reduce((a, b) => a + b, 0);
}

/** Rates over one window: Redis commands and bytes a second, and the gateways' HTTP bytes. */
interface WindowRates {
  commandsPerSecond: number;
  /** Commands a second by command (for the log). */
  byCommand?: Map<string, number>;
  redisBytesPerSecond: number;
  httpBytesPerSecond: number;
}

/** `parts` consecutive windows of `seconds` in all. */
async function windows(
  bed: Bed,
  gateways: readonly GatewayService[],
  seconds: number,
  parts: number,
): Promise<WindowRates[]> {
  const out: WindowRates[] = [];
  let before = await redisCounts(bed.info);
  let beforeHttp = await httpBytes(gateways);
  for (let part = 0; part < parts; part++) {
    await sleep((seconds * 1000) / parts);
    const after = await redisCounts(bed.info);
    const afterHttp = await httpBytes(gateways);
    const elapsed = (after.atMs - before.atMs) / 1000;
    const byCommand = new Map<string, number>();
    for (const [name, calls] of after.byCommand) {
      const delta = calls - (before.byCommand.get(name) ?? 0);
      if (delta > 0) byCommand.set(name, delta / elapsed);
    }
    out.push({
      byCommand,
      commandsPerSecond: [...byCommand.values()].reduce((a, b) => a + b, 0),
      redisBytesPerSecond: (after.bytes - before.bytes) / elapsed,
      httpBytesPerSecond: (afterHttp - beforeHttp) / elapsed,
    });
    before = after;
    beforeHttp = afterHttp;
  }
  return out;
}

async function startBed(): Promise<Bed & { stop(): Promise<void> }> {
  const folder = await mkdtemp(join(tmpdir(), "ox-bench-scale-out-"));
  const redis = new LocalRedis({ dir: folder, port: await freePort() });
  await redis.start();
  const info = new Redis(redis.url);
  const bed = await feedBed({ redisUrl: redis.url });
  await bed.lead();
  const rest = await startUpstashRest({ redisUrl: redis.url, token: TOKEN });
  const origin = await startDenoService("origin", "origin.ts");
  const upstream = await startDenoService("upstream", "bare-relay.ts");
  let edits = 0;
  const publishEdit = () =>
    publishFeed(bed, {
      projects: [{ id: "bench", ...BENCH_LOGIN }],
      connectors: [
        {
          id: "upstream",
          projectId: "bench",
          proxies: [httpProxyRow("shared-upstream", "127.0.0.1", upstream.port)],
        },
        {
          id: "edited",
          projectId: "bench",
          proxies: [httpProxyRow(`edit-${edits++}`, "127.0.0.1", upstream.port)],
        },
      ],
    });
  await publishEdit();
  return {
    redis,
    info,
    bed,
    rest,
    origin,
    upstream,
    publishEdit,
    async stop() {
      await Promise.allSettled([origin.stop(), upstream.stop(), rest.close()]);
      await bed.close().catch(() => {});
      info.disconnect();
      await redis.stop();
      await rm(folder, { recursive: true, force: true });
    },
  };
}

function gatewayEnv(bed: Bed, transport: Transport): Record<string, string> {
  return transport === "tcp"
    ? { OCTOPROX_REDIS_URL: bed.redis.url }
    : { OCTOPROX_REDIS_URL: bed.rest.url, OCTOPROX_REDIS_TOKEN: TOKEN };
}

async function routedGateway(bed: Bed, transport: Transport): Promise<GatewayService> {
  const gateway = await startGateway(bed.bed, gatewayEnv(bed, transport));
  await gateway.waitForProxy();
  return gateway;
}

// ---------------------------------------------------------------------------------------------
// 1. The transports side by side.

/** Keep-alive GETs of the origin through `gateway`, as BENCH_LOGIN. */
function keepAlive(
  bed: Bed,
  gateway: GatewayService,
  shape: Pick<LoadOptions, "durationMs" | "warmupMs" | "concurrency" | "rate">,
): LoadOptions {
  return {
    proxy: { host: "127.0.0.1", port: gateway.port, authorization: BENCH_AUTHORIZATION },
    url: new URL(`http://127.0.0.1:${bed.origin.port}/`),
    scenario: Scenario.http,
    timeoutMs: 10_000,
    method: "GET",
    headers: [],
    ...shape,
  };
}

/** A run's two points of one target as one: requests a second, CPU per request (µs), errors. */
interface Merged {
  rps: number;
  cpuUs: number;
  errors: number;
}

function merge(points: readonly Point[]): Merged {
  const ok = points.reduce((sum, p) => sum + p.report.ok, 0);
  const ms = points.reduce((sum, p) => sum + p.report.elapsedMs, 0);
  const cpuMs = points.reduce((sum, p) => sum + p.targetCpuMs, 0);
  return {
    rps: (ok * 1000) / ms,
    cpuUs: (cpuMs * 1000) / ok,
    errors: points.reduce(
      (sum, p) => sum + Object.values(p.report.errors).reduce((a, b) => a + b, 0),
      0,
    ),
  };
}

async function sideBySide(context: SuiteContext, bed: Bed): Promise<Row[]> {
  const seconds = envPositive("BENCH_SCALE_OUT_LOAD_SECONDS") ?? 5;
  const gateways = {
    tcp: await routedGateway(bed, "tcp"),
    http: await routedGateway(bed, "http"),
  };
  try {
    const shared = [...bed.origin.pids, ...bed.upstream.pids];
    /** Per transport, each run's two points merged: requests a second and CPU per request. */
    const points: Record<Transport, Merged[]> = { tcp: [], http: [] };
    // Measured in A B B A order, A alternating by run: the one measured second in a pair runs
    // some 10 % slower here whichever it is (two TCP gateways show it), and ABBA cancels that.
    const runs = Math.max(context.runs, 3);
    for (let run = 0; run < runs; run++) {
      const [a, b] = rotate(TRANSPORTS, run);
      const taken: Record<Transport, Point[]> = { tcp: [], http: [] };
      for (const transport of [a, b, b, a]) {
        const gateway = gateways[transport];
        const point = await measure(
          { service: gateway },
          shared,
          keepAlive(bed, gateway, { durationMs: seconds * 1000, warmupMs: 1000, concurrency: 32 }),
        );
        taken[transport].push(point);
      }
      for (const transport of TRANSPORTS) {
        const merged = merge(taken[transport]);
        points[transport].push(merged);
        context.log(
          `scale-out: keep-alive over ${transport}: ${formatNumber(merged.rps, 0)} requests/s, ${
            formatNumber(merged.cpuUs, 1)
          } µs CPU a request`,
        );
      }
    }
    const rpsRatio = pairedMedian(points.http, points.tcp, (h, t) => h.rps / t.rps);
    const cpuRatio = pairedMedian(points.http, points.tcp, (h, t) => h.cpuUs / t.cpuUs);
    const rows: Row[] = [];
    for (const transport of TRANSPORTS) {
      const list = points[transport];
      rows.push({
        figure: `keep-alive HTTP via a gateway on Redis over ${transport.toUpperCase()}`,
        value: median(list.map((p) => p.rps)),
        runs: list.map((p) => p.rps),
        unit: "requests/s",
        key: `scale_out.keepalive_rps.${transport}`,
        detail: `CPU ${formatNumber(median(list.map((p) => p.cpuUs)), 1)} µs a request; errors ${
          list.reduce((sum, p) => sum + p.errors, 0)
        }`,
      });
    }
    rows.push(
      {
        figure: "keep-alive requests a second, HTTP transport over TCP",
        value: rpsRatio.value,
        runs: rpsRatio.runs,
        unit: "ratio",
        digits: 3,
        budget: { op: ">=", limit: 0.9 },
        key: "scale_out.keepalive_rps_ratio",
      },
      {
        figure: "gateway CPU per keep-alive request, HTTP transport over TCP",
        value: cpuRatio.value,
        runs: cpuRatio.runs,
        unit: "ratio",
        digits: 3,
        budget: { op: "<=", limit: 1.1 },
        key: "scale_out.keepalive_cpu_ratio",
      },
    );
    return rows;
  } finally {
    await Promise.all([gateways.tcp.stop(), gateways.http.stop()]);
  }
}

// ---------------------------------------------------------------------------------------------
// 2. Scale-out.

interface SizeFigures {
  size: number;
  idle: WindowRates[];
  steady: WindowRates[];
  editMs: number[];
}

/** Open-loop traffic through every gateway for `seconds`, `rate` requests a second each. */
function steadyTraffic(
  bed: Bed,
  gateways: readonly GatewayService[],
  seconds: number,
  rate: number,
) {
  return Promise.all(gateways.map((gateway) =>
    runLoad(
      keepAlive(bed, gateway, { durationMs: seconds * 1000, warmupMs: 0, concurrency: 2, rate }),
    )
  ));
}

/** The head's digest in Redis now (the one a gateway logs, shortened). */
async function headDigest(bed: Bed): Promise<string> {
  const read = readHead((await bed.bed.redis.get(bed.bed.keys.feedHead)) ?? "");
  if (read.kind !== "head") throw new Error("scale-out: no feed head after a publish");
  return read.head.digest;
}

/** When a gateway logged each feed applied, by the digest's start (as it logs it). */
function appliedTimes(gateway: GatewayService): Map<string, number> {
  const times = new Map<string, number>();
  for (const entry of gateway.lines()) {
    if (entry.msg === "Feed applied" && typeof entry.digest === "string") {
      times.set(entry.digest, Date.parse(String(entry.time)));
    }
  }
  return times;
}

/**
 * Publishes `edits` feeds half a second apart, then waits until every gateway applied the last.
 * An edit is served once a gateway applied it or a later one: a gateway that polls may skip one
 * superseded within its interval, and serves the later one instead. Answers every (edit,
 * gateway) delay from the edit's commit, in ms.
 */
async function editBurst(
  bed: Bed,
  gateways: readonly GatewayService[],
  edits: number,
): Promise<number[]> {
  const published: { digest: string; committedAt: number }[] = [];
  for (let i = 0; i < edits; i++) {
    await bed.publishEdit();
    const committedAt = Date.now();
    published.push({ digest: (await headDigest(bed)).slice(0, 16), committedAt });
    if (i < edits - 1) await sleep(500);
  }
  const last = published[published.length - 1].digest;
  try {
    await waitUntil(() => gateways.every((gateway) => appliedTimes(gateway).has(last)), {
      timeoutMs: 30_000,
      intervalMs: 20,
      message: "every gateway to apply the last edit",
    });
  } catch (error) {
    const behind = gateways.filter((gateway) => !appliedTimes(gateway).has(last));
    const tails = behind.map((gateway) => gateway.output().slice(-5).join("\n"));
    throw new Error(`${(error as Error).message}:\n${tails.join("\n--\n")}`);
  }
  const delays: number[] = [];
  for (const gateway of gateways) {
    const times = appliedTimes(gateway);
    for (const [index, edit] of published.entries()) {
      const served = published.slice(index).map((later) => times.get(later.digest))
        .filter((time): time is number => time !== undefined);
      delays.push(Math.min(...served) - edit.committedAt);
    }
  }
  return delays;
}

async function scaleOut(
  context: SuiteContext,
  bed: Bed,
  transport: Transport,
  sizes: readonly number[],
  baseline: WindowRates,
): Promise<SizeFigures[]> {
  const seconds = envPositive("BENCH_SCALE_OUT_SECONDS") ?? 30;
  const rate = envPositive("BENCH_SCALE_OUT_RATE") ?? 20;
  const edits = Math.round(envPositive("BENCH_SCALE_OUT_EDITS", true) ?? 10);
  const gateways: GatewayService[] = [];
  const figures: SizeFigures[] = [];
  const less = (rates: WindowRates[], n: number) =>
    rates.map((r) => ({
      commandsPerSecond: (r.commandsPerSecond - baseline.commandsPerSecond) / n,
      redisBytesPerSecond: (r.redisBytesPerSecond - baseline.redisBytesPerSecond) / n,
      httpBytesPerSecond: r.httpBytesPerSecond / n,
    }));
  try {
    for (const size of sizes) {
      const started = await Promise.all(
        Array.from({ length: size - gateways.length }, () => routedGateway(bed, transport)),
      );
      gateways.push(...started);
      // The new ones' first beats and reads settle before counting.
      await sleep(3_000);
      const idleRaw = await windows(bed, gateways, seconds, 3);
      const idle = less(idleRaw, size);
      const traffic = steadyTraffic(bed, gateways, seconds + 2, rate);
      await sleep(1_000);
      const steadyRaw = await windows(bed, gateways, seconds, 3);
      const steady = less(steadyRaw, size);
      const reports = await traffic;
      const failed = reports.reduce((sum, r) => sum + (r.requests - r.ok), 0);
      const editMs = await editBurst(bed, gateways, edits);
      figures.push({ size, idle, steady, editMs });
      context.log(`scale-out: ${transport} × ${size}, idle, by command: ${breakdown(idleRaw)}`);
      context.log(
        `scale-out: ${transport} × ${size}, steady, by command: ${breakdown(steadyRaw)}`,
      );
      context.log(
        `scale-out: ${transport} × ${size}: idle ${
          formatNumber(median(idle.map((r) => r.commandsPerSecond)), 2)
        } commands/s a gateway, steady ${
          formatNumber(median(steady.map((r) => r.commandsPerSecond)), 2)
        } (${failed} requests failed), edit to serve p50 ${
          formatNumber(percentile(editMs, 0.5), 0)
        } ms, p99 ${formatNumber(percentile(editMs, 0.99), 0)} ms`,
      );
    }
    return figures;
  } finally {
    await Promise.all(gateways.map((gateway) => gateway.stop()));
  }
}

/** The commands of a phase, a second over its windows, most first (the suite's own included). */
function breakdown(rates: readonly WindowRates[]): string {
  const sums = new Map<string, number>();
  for (const rate of rates) {
    for (const [name, perSecond] of rate.byCommand ?? []) {
      sums.set(name, (sums.get(name) ?? 0) + perSecond / rates.length);
    }
  }
  return [...sums].sort((a, b) => b[1] - a[1]).map(([name, perSecond]) =>
    `${name} ${formatNumber(perSecond, 2)}`
  ).join(", ");
}

function scaleRows(transport: Transport, figures: readonly SizeFigures[]): Row[] {
  const rows: Row[] = [];
  const name = transport.toUpperCase();
  const bytes = (r: WindowRates) =>
    transport === "tcp" ? r.redisBytesPerSecond : r.httpBytesPerSecond;
  for (const f of figures) {
    for (const phase of ["idle", "steady"] as const) {
      const rates = f[phase];
      rows.push({
        figure: `${name}, ${f.size} gateway${
          f.size === 1 ? "" : "s"
        }, ${phase}: Redis commands a second per gateway`,
        value: median(rates.map((r) => r.commandsPerSecond)),
        runs: rates.map((r) => r.commandsPerSecond),
        unit: "commands/s",
        digits: 2,
        key: `scale_out.${transport}.${phase}.commands.${f.size}`,
        detail: `${formatNumber(median(rates.map(bytes)), 0)} bytes/s a gateway (${
          transport === "tcp" ? "Redis's net in + out" : "HTTP bodies"
        })`,
      });
    }
    rows.push({
      figure: `${name}, ${f.size} gateway${
        f.size === 1 ? "" : "s"
      }: feed edit to every gateway serving it, p50`,
      value: percentile(f.editMs, 0.5),
      unit: "ms",
      digits: 0,
      key: `scale_out.${transport}.edit_p50.${f.size}`,
      detail: `p99 ${formatNumber(percentile(f.editMs, 0.99), 0)} ms over ${f.editMs.length}`,
      facts: { p99: percentile(f.editMs, 0.99) },
    });
  }
  const first = figures[0];
  const last = figures[figures.length - 1];
  if (first !== undefined && last !== undefined && last.size > first.size) {
    for (const phase of ["idle", "steady"] as const) {
      const ratios = first[phase].map((r, i) =>
        Math.abs(last[phase][i].commandsPerSecond / r.commandsPerSecond - 1)
      );
      rows.push({
        figure:
          `${name}, ${phase}: per-gateway commands a second, ${last.size} gateways against ${first.size}, off by`,
        value: Math.abs(
          median(last[phase].map((r) => r.commandsPerSecond)) /
              median(first[phase].map((r) => r.commandsPerSecond)) - 1,
        ),
        runs: ratios,
        unit: "share",
        digits: 3,
        budget: { op: "<=", limit: CONSTANT_BUDGET },
        key: `scale_out.${transport}.${phase}.commands_growth`,
      });
    }
  }
  return rows;
}

async function run(context: SuiteContext): Promise<Row[]> {
  const raw = process.env.BENCH_SCALE_OUT_SIZES;
  const sizes = raw ? raw.split(",").map(Number).sort((a, b) => a - b) : DEFAULT_SIZES;
  if (sizes.some((n) => !Number.isInteger(n) || n < 1)) {
    throw new Error("BENCH_SCALE_OUT_SIZES must be whole numbers of gateways, comma-separated");
  }
  const seconds = envPositive("BENCH_SCALE_OUT_SECONDS") ?? 30;
  const bed = await startBed();
  try {
    context.log("scale-out: the transports side by side");
    const rows = await sideBySide(context, bed);
    // What the suite's own lease and INFO cost Redis, with no gateway.
    await sleep(3_000);
    const alone = await windows(bed, [], seconds / 3, 1);
    const baseline = alone[0];
    context.log(`scale-out: baseline by command: ${breakdown(alone)}`);
    context.log(
      `scale-out: baseline without gateways ${
        formatNumber(baseline.commandsPerSecond, 2)
      } commands/s`,
    );
    for (const transport of TRANSPORTS) {
      rows.push(...scaleRows(transport, await scaleOut(context, bed, transport, sizes, baseline)));
    }
    return rows;
  } finally {
    await bed.stop();
  }
}

export const scaleOutSuite: Suite = {
  name: "scale-out",
  description:
    "Redis commands and bytes per gateway from 1 to 8 gateways, TCP and HTTP; feed edit to serve; HTTP against TCP on keep-alive traffic",
  run,
};
