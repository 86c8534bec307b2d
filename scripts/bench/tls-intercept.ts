/**
 * Suite `tls-intercept`: what a keep-alive HTTPS request inside an intercepted tunnel costs the
 * gateway (`plain` mode), against a bare TLS-terminating relay on the same runtime and against
 * mitmproxy, side by side in one run (issue 32's budgets: at most 1.3 times the relay's CPU per
 * request, at most a third of mitmproxy's), and beside them the browser-grade mode's cost
 * (`match_ua` through the impersonation engine: reported, no budget).
 *
 *   npm run bench -- tls-intercept
 *
 * One HTTPS origin (origin.ts under Deno with a certificate for localhost from the test CA of
 * testkit/certs.ts) and one upstream proxy (bare-relay.ts without --upstream, answering CONNECT)
 * serve three targets, each its own process:
 * - **the gateway** (gateway/main.ts under Deno on a published feed, as tunnel-ops runs it) with
 *   one project in `plain` interception whose one proxy is the upstream, trusting the origin's CA
 *   through OCTOPROX_UPSTREAM_CA_FILE; clients CONNECT to it with the project's login and trust
 *   the install's CA (testkit/mitm-ca.ts); the same gateway with a second project's login, in
 *   `match_ua` (the load's client is no browser: Chrome's fingerprint), is a target of its own;
 * - **the bare TLS relay** (bare-tls-relay.ts, Deno): Deno.listenTls with a certificate for
 *   localhost minted by the same install CA, per client connection a CONNECT through the upstream
 *   and Deno.startTls to the origin, bytes passed both ways by read and write loops, no HTTP
 *   parsed: the floor. Clients speak TLS to it at once;
 * - **mitmproxy** (Debian's mitmdump, `--mode upstream:` the same upstream, the origin's CA as
 *   `ssl_verify_upstream_trusted_ca`, a confdir of its own, quiet: no line per flow); clients
 *   CONNECT to it and trust the CA it made in that confdir.
 *
 * The load (tls-load.ts, a Node process of its own): BENCH_TLS_INTERCEPT_CONNECTIONS client
 * connections (16), each through to the origin's TLS once, then GETs one after the other on it
 * for BENCH_TLS_INTERCEPT_SECONDS (5 s a point) after a second's warm-up. Per target and run:
 * the CPU (user + system, /proc/<pid>/stat) of the target's process alone over the counted
 * window, divided by the requests answered in it, and the requests a second. Targets alternate
 * within a run (the order rotates between runs); the ratios are taken within each run, then the
 * median over --runs.
 *
 * BENCH_TLS_INTERCEPT_PROFILE_SECONDS (0: none) adds a `perf record -g` profile of each target
 * after the runs (JavaScript frames named: the Deno targets run with V8's --perf-basic-prof), its
 * samples by area and top frames in the log, its folded stacks in BENCH_TLS_INTERCEPT_OUT (a
 * temporary folder unless set).
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { SCHEMA_VERSION } from "../../shared/feed/models.ts";
import { loadCa } from "../../shared/tls/ca.ts";
import { testCertificate } from "../../testkit/certs.ts";
import { type FeedBed, feedBed, feedProject, publishFeedContent } from "../../testkit/feed.ts";
import { connector as feedConnector } from "../../testkit/gateway/feed-fixtures.ts";
import { testMitmCa } from "../../testkit/mitm-ca.ts";
import { freePort, portAccepts } from "../../testkit/ports.ts";
import { type Service, stopChild, track } from "../../testkit/upstreams/daemon.ts";
import { waitUntil } from "../../testkit/wait.ts";
import {
  BENCH_AUTHORIZATION,
  BENCH_LOGIN,
  httpProxyRow,
  startDenoService,
  startGateway,
} from "./services.ts";
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
import type { TlsLoadOptions, TlsLoadReport } from "./tls-load.ts";
import { runReportingChild } from "../loadgen/child.ts";
import { JS_FRAME_FLAGS, perfProfileOf } from "./cpu-profile.ts";

const LOAD_SCRIPT = fileURLToPath(new URL("./tls-load.ts", import.meta.url));
/** The origin's name: its certificate's, the CONNECT's authority, SNI and Host. */
const ORIGIN_HOST = "localhost";

const RELAY_BUDGET = 1.3;
const MITMPROXY_BUDGET = 0.33;

type TargetKey = "gateway" | "browser" | "relay" | "relay-node" | "mitmproxy";

/** The second project's login: `match_ua` interception. */
const BROWSER_LOGIN = { username: "bench-browser", password: "bench-browser-pass" };

interface Target {
  key: TargetKey;
  label: string;
  service: Service;
  /** What the load generator does to reach the origin through it. */
  connectTo: { host: string; port: number };
  proxy?: { authorization?: string };
  caFile: string;
}

interface Point {
  report: TlsLoadReport;
  /** The target's CPU over the window, and the upstream's and origin's. */
  cpuMs: number;
  sharedCpuMs: number;
}

/** Runs tls-load.ts in a child process; `onWindow` hears its counted window start and end. */
function runLoad(
  options: TlsLoadOptions,
  onWindow?: (phase: "start" | "end") => void,
): Promise<TlsLoadReport> {
  return runReportingChild<TlsLoadReport>(
    "tls-load",
    [LOAD_SCRIPT, JSON.stringify(options)],
    onWindow,
  );
}

async function measure(
  target: Target,
  shared: readonly number[],
  options: TlsLoadOptions,
): Promise<Point> {
  const sample = async () => ({
    cpuMs: await cpuMillisOf(target.service.pids),
    sharedCpuMs: await cpuMillisOf(shared),
  });
  let start: Promise<{ cpuMs: number; sharedCpuMs: number }> | undefined;
  let end: typeof start;
  const report = await runLoad(options, (phase) => {
    if (phase === "start") start = sample();
    else end = sample();
  });
  if (!start || !end) throw new Error("the load generator reported no window");
  const [a, b] = await Promise.all([start, end]);
  return { report, cpuMs: b.cpuMs - a.cpuMs, sharedCpuMs: b.sharedCpuMs - a.sharedCpuMs };
}

/**
 * The feed: one project (BENCH_LOGIN) in `plain` interception and one (BROWSER_LOGIN) in
 * `match_ua`, each with one proxy, the upstream.
 */
async function publishInterceptingFeed(bed: FeedBed, upstreamPort: number): Promise<void> {
  const project = {
    ...(await feedProject(bed, { id: "bench", ...BENCH_LOGIN })),
    tls_mitm: { mode: "plain", bypass: [] },
  };
  const browser = {
    ...(await feedProject(bed, { id: "bench-browser", ...BROWSER_LOGIN })),
    tls_mitm: { mode: "match_ua", browser: null, bypass: [] },
  };
  await publishFeedContent(
    bed,
    new Map<string, unknown>([
      ["global", {
        schema: SCHEMA_VERSION,
        default_strategy: "round_robin",
        projects: [project, browser],
      }],
      ["runtime", {
        schema: SCHEMA_VERSION,
        quarantines: [],
        traffic_blocks: [],
        project_blocks: [],
      }],
      ["connector:upstream", {
        schema: SCHEMA_VERSION,
        connector: feedConnector("upstream", { project_id: "bench" }),
        proxies: [httpProxyRow("shared-upstream", "127.0.0.1", upstreamPort)],
      }],
      ["connector:browser-upstream", {
        schema: SCHEMA_VERSION,
        connector: feedConnector("browser-upstream", { project_id: "bench-browser" }),
        proxies: [httpProxyRow("browser-upstream", "127.0.0.1", upstreamPort)],
      }],
    ]),
  );
}

/** mitmdump in upstream mode; answers once it accepts and has written its CA. */
async function startMitmproxy(
  upstreamPort: number,
  originCaFile: string,
  confdir: string,
): Promise<Service & { caFile: string }> {
  const port = await freePort();
  const child = track(
    spawn("mitmdump", [
      "--mode",
      `upstream:http://127.0.0.1:${upstreamPort}`,
      "--listen-host",
      "127.0.0.1",
      "--listen-port",
      String(port),
      "--set",
      `confdir=${confdir}`,
      "--set",
      `ssl_verify_upstream_trusted_ca=${originCaFile}`,
      // No line per flow: the gateway writes none per request either.
      "--set",
      "flow_detail=0",
      "--set",
      "termlog_verbosity=warn",
    ], { stdio: ["ignore", "pipe", "pipe"] }),
  );
  let output = "";
  child.stdout!.setEncoding("utf8").on("data", (text: string) => (output += text));
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (output += text));
  const caFile = join(confdir, "mitmproxy-ca-cert.pem");
  try {
    await waitUntil(async () => {
      if (child.exitCode !== null) throw new Error(`mitmdump exited: ${output}`);
      return existsSync(caFile) && (await portAccepts("127.0.0.1", port));
    }, { timeoutMs: 30_000, intervalMs: 100, message: "mitmdump to listen" });
  } catch (error) {
    await stopChild(child);
    throw error;
  }
  return {
    name: "mitmproxy",
    port,
    pids: [child.pid!],
    caFile,
    output: () => output.split("\n"),
    stop: () => stopChild(child),
  };
}

async function mitmdumpVersion(): Promise<string> {
  const child = spawn("mitmdump", ["--version"], { stdio: ["ignore", "pipe", "ignore"] });
  let text = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
  await new Promise((resolve) => child.once("exit", resolve));
  return /Mitmproxy:\s*(\S+)/.exec(text)?.[1] ?? "?";
}

async function run(context: SuiteContext): Promise<Row[]> {
  const seconds = envPositive("BENCH_TLS_INTERCEPT_SECONDS") ?? 5;
  const connections = envPositive("BENCH_TLS_INTERCEPT_CONNECTIONS", true) ?? 16;
  const profileSeconds = Number(process.env.BENCH_TLS_INTERCEPT_PROFILE_SECONDS ?? 0);
  const profiled: number[] = [];
  const stops: (() => Promise<void>)[] = [];
  const dir = await mkdtemp(join(tmpdir(), "ox-tls-intercept-bench-"));
  stops.push(() => rm(dir, { recursive: true, force: true }));
  try {
    context.log(`tls-intercept: load average ${loadavg().map((l) => l.toFixed(2)).join(" / ")}`);
    const file = async (name: string, text: string) => {
      const path = join(dir, name);
      await writeFile(path, text, { mode: 0o600 });
      return path;
    };
    // The origin's certificate (localhost, from the test CA every target trusts for the origin).
    const originCert = await testCertificate();
    const originCaFile = await file("origin-ca.pem", originCert.ca);
    const readable = [`--allow-read=${dir}`];
    const origin = await startDenoService(
      "origin",
      "origin.ts",
      [
        "--cert",
        await file("origin.pem", originCert.cert),
        "--key",
        await file("origin-key.pem", originCert.key),
      ],
      {},
      readable,
    );
    stops.push(() => origin.stop());
    const upstream = await startDenoService("upstream", "bare-relay.ts");
    stops.push(() => upstream.stop());
    const shared = [...origin.pids, ...upstream.pids];

    // The gateway, on a feed with one intercepting project.
    const bed = await feedBed();
    stops.push(() => bed.close());
    await bed.lead();
    const v8: Record<string, string> = profileSeconds > 0 ? { DENO_V8_FLAGS: JS_FRAME_FLAGS } : {};
    const gateway = await startGateway(bed, { OCTOPROX_UPSTREAM_CA_FILE: originCaFile, ...v8 });
    stops.push(() => gateway.stop());
    profiled.push(...gateway.pids);
    await publishInterceptingFeed(bed, upstream.port);
    await gateway.waitForProxy();

    // The bare relay, with a certificate for the origin's name from the same install CA.
    const installCa = testMitmCa();
    const leaf = await (await loadCa(installCa)).mint(ORIGIN_HOST);
    const relayArgs = [
      "--upstream",
      `127.0.0.1:${upstream.port}`,
      "--target",
      `${ORIGIN_HOST}:${origin.port}`,
      "--cert",
      await file("relay-chain.pem", leaf.chainPem),
      "--key",
      await file("relay-key.pem", leaf.keyPem),
      "--target-ca",
      originCaFile,
    ];
    const relay = await startDenoService("tls-relay", "bare-tls-relay.ts", relayArgs, v8, readable);
    stops.push(() => relay.stop());
    profiled.push(...relay.pids);
    // The same relay with node:tls towards clients: the floor of a per-host certificate here.
    const nodeRelay = await startDenoService(
      "tls-relay-node",
      "bare-tls-relay.ts",
      [...relayArgs, "--engine", "node"],
      v8,
      readable,
    );
    stops.push(() => nodeRelay.stop());
    profiled.push(...nodeRelay.pids);

    const version = await mitmdumpVersion();
    const mitm = await startMitmproxy(upstream.port, originCaFile, join(dir, "mitmproxy"));
    stops.push(() => mitm.stop());

    const targets: Target[] = [
      {
        key: "gateway",
        label: "gateway (plain interception)",
        service: gateway,
        connectTo: { host: "127.0.0.1", port: gateway.port },
        proxy: {
          authorization: BENCH_AUTHORIZATION,
        },
        caFile: installCa.certPath,
      },
      {
        key: "browser",
        label: "gateway (match_ua, browser-grade)",
        service: gateway,
        connectTo: { host: "127.0.0.1", port: gateway.port },
        proxy: {
          authorization: `Basic ${btoa(`${BROWSER_LOGIN.username}:${BROWSER_LOGIN.password}`)}`,
        },
        caFile: installCa.certPath,
      },
      {
        key: "relay",
        label: "bare TLS relay (Deno)",
        service: relay,
        connectTo: { host: "127.0.0.1", port: relay.port },
        caFile: installCa.certPath,
      },
      {
        key: "relay-node",
        label: "bare TLS relay, node:tls to clients (Deno)",
        service: nodeRelay,
        connectTo: { host: "127.0.0.1", port: nodeRelay.port },
        caFile: installCa.certPath,
      },
      {
        key: "mitmproxy",
        label: `mitmproxy ${version} (upstream mode)`,
        service: mitm,
        connectTo: { host: "127.0.0.1", port: mitm.port },
        proxy: {},
        caFile: mitm.caFile,
      },
    ];
    const options = (target: Target, measured: number, warm: number): TlsLoadOptions => ({
      connectTo: target.connectTo,
      ...(target.proxy ? { proxy: target.proxy } : {}),
      target: { host: ORIGIN_HOST, port: origin.port },
      caFile: target.caFile,
      connections,
      warmupMs: warm * 1000,
      durationMs: measured * 1000,
      timeoutMs: 10_000,
      path: "/",
    });

    context.log("tls-intercept: a warm-up pass through every target");
    for (const target of targets) {
      const point = await measure(target, shared, options(target, 1.5, 0.5));
      if (point.report.requests === 0) {
        throw new Error(
          `${target.label} answered nothing: ${JSON.stringify(point.report.errors)}, ` +
            `${point.report.failedAnswers} failed answers`,
        );
      }
    }

    const points = new Map<TargetKey, Point[]>();
    for (let r = 0; r < context.runs; r++) {
      for (const target of rotate(targets, r)) {
        const point = await measure(target, shared, options(target, seconds, 1));
        points.set(target.key, [...(points.get(target.key) ?? []), point]);
        const rep = point.report;
        context.log(
          `tls-intercept run ${r + 1} ${target.key.padEnd(9)} ${
            rep.throughput.toFixed(0).padStart(6)
          }/s, CPU ${((point.cpuMs * 1000) / rep.requests).toFixed(1)} µs/req` +
            (rep.failedAnswers > 0 || Object.keys(rep.errors).length > 0
              ? `, failed answers ${rep.failedAnswers}, errors ${JSON.stringify(rep.errors)}`
              : ""),
        );
      }
    }
    if (profileSeconds > 0) {
      const out = process.env.BENCH_TLS_INTERCEPT_OUT ??
        await mkdtemp(join(tmpdir(), "ox-tls-intercept-"));
      await mkdir(out, { recursive: true });
      // mitmproxy is Python: perf sees its interpreter, not its code.
      for (const target of targets.filter((t) => t.key !== "mitmproxy")) {
        const profile = await perfProfileOf(
          target.service.pids[0],
          (durationMs) => runLoad({ ...options(target, durationMs / 1000, 0.5) }),
          profileSeconds,
        );
        const path = join(out, `tls-intercept-${target.key}.folded`);
        await writeFile(path, `${profile.folded}\n`);
        const perRequest = median((points.get(target.key) ?? []).map(cpuPerRequest));
        const share = (n: number) => n / profile.samples;
        context.log(
          `tls-intercept profile, ${target.label} (${profile.samples} samples, ${path}): ${
            [...profile.areas].sort((a, b) => b[1] - a[1]).map(([area, n]) =>
              `${area} ${(100 * share(n)).toFixed(1)}% ≈ ${(share(n) * perRequest).toFixed(0)} µs`
            ).join(", ")
          }\n${
            profile.selfTop.map(([name, n]) =>
              `      ${(100 * share(n)).toFixed(1).padStart(5)}%  ${name}`
            ).join("\n")
          }`,
        );
      }
    }
    return rows(targets, points, { seconds, connections });
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    for (const pid of profiled) await rm(`/tmp/perf-${pid}.map`, { force: true });
  }
}

const cpuPerRequest = (p: Point) => (p.cpuMs * 1000) / p.report.requests;

function rows(
  targets: readonly Target[],
  points: Map<TargetKey, Point[]>,
  setup: { seconds: number; connections: number },
): Row[] {
  const out: Row[] = [];
  for (const target of targets) {
    const list = points.get(target.key) ?? [];
    const rate = median(list.map((p) => p.report.throughput));
    const errors = list.reduce((sum, p) =>
      sum + p.report.failedAnswers +
      Object.values(p.report.errors).reduce((a, b) => a + b, 0), 0);
    out.push({
      figure: `keep-alive HTTPS request: CPU per request via ${target.label}`,
      key: `tls-intercept-${target.key}-cpu-us`,
      value: median(list.map(cpuPerRequest)),
      runs: list.map(cpuPerRequest),
      unit: "µs",
      digits: 1,
      facts: { requestsPerSecond: rate },
      detail: `${formatNumber(rate, 0)} requests/s; upstream+origin ${
        formatNumber(median(list.map((p) => (p.sharedCpuMs * 1000) / p.report.requests)), 0)
      } µs/req; load generator ${
        formatNumber(
          median(list.map((p) =>
            ((p.report.cpu.userMs + p.report.cpu.systemMs) * 1000) / p.report.requests
          )),
          0,
        )
      } µs/req; ${errors} failed`,
    });
  }
  const ratio = (mine: TargetKey, other: TargetKey, limit?: number) => {
    const ours = points.get(mine) ?? [];
    const theirs = points.get(other) ?? [];
    const label = (key: TargetKey) => targets.find((t) => t.key === key)!.label;
    const cpu = pairedMedian(ours, theirs, (a, b) => cpuPerRequest(a) / cpuPerRequest(b));
    const rate = pairedMedian(ours, theirs, (a, b) => a.report.throughput / b.report.throughput);
    out.push({
      figure: `keep-alive HTTPS request: ${label(mine)} ÷ ${label(other)}, CPU per request`,
      key: `tls-intercept-${mine}-vs-${other}-cpu`,
      value: cpu.value,
      runs: cpu.runs,
      unit: "×",
      digits: 2,
      ...(limit === undefined ? {} : { budget: { op: "<=" as const, limit } }),
      detail: `the same run's figures divided, then the median; requests/s ${
        formatNumber(rate.value, 2)
      }×`,
    });
  };
  ratio("gateway", "relay", RELAY_BUDGET);
  ratio("gateway", "mitmproxy", MITMPROXY_BUDGET);
  // No budget: what the gateway costs over the floor its per-host certificates impose.
  ratio("gateway", "relay-node");
  ratio("relay-node", "relay");
  // The browser-grade mode beside them: reported, no budget.
  ratio("browser", "gateway");
  ratio("browser", "mitmproxy");
  out.push({
    figure: "tls-intercept: seconds measured per point, client connections",
    value: setup.seconds,
    unit: `s, ${setup.connections} keep-alive connections`,
    digits: 0,
  });
  return out;
}

export const tlsInterceptSuite: Suite = {
  name: "tls-intercept",
  description:
    "keep-alive HTTPS requests: gateway with plain interception vs a bare TLS relay (Deno) " +
    "and mitmproxy, CPU per request",
  run,
};
