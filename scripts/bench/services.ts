/**
 * The processes the gateway benchmarks run beside the gateway, each its own process so its CPU
 * is its own: the origin and the bare relays under Deno (origin.ts, bare-relay.ts), Debian's
 * Squid and tinyproxy chained to an upstream, and the real gateway (gateway/main.ts under Deno,
 * the command `npm start` uses) on a feed the real FeedPublisher writes into Redis, with no
 * control plane. Every process started here is killed when the bench process exits.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, portAccepts } from "../../testkit/ports.ts";
import { waitUntil } from "../../testkit/wait.ts";
import type { FeedProxy } from "../../shared/feed/models.ts";
import { SCHEMA_VERSION } from "../../shared/feed/models.ts";
import {
  type FeedBed,
  feedBed,
  feedProject,
  type FeedProjectSpec,
  publishFeedContent,
} from "../../testkit/feed.ts";
import { collectLogLines, type LogLine } from "../../testkit/gateway/fixture-gateway.ts";
import { connector as feedConnector } from "../../testkit/gateway/feed-fixtures.ts";
import { denoEntry } from "../deno-files.ts";
import {
  DENO_BIN,
  DENO_ENV,
  gatewayPermissions,
  gatewayRunArgs,
  ROOT,
} from "../gateway-command.ts";

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

function track(child: ChildProcess): ChildProcess {
  live.add(child);
  child.once("exit", () => live.delete(child));
  return child;
}

async function stopChild(child: ChildProcess, graceMs = 5_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await exited;
  clearTimeout(timer);
}

/**
 * Runs a Deno script of scripts/bench that prints `{"port": N}` as its first line (origin.ts,
 * bare-relay.ts) and answers once it listens. `env` goes on top (DENO_V8_FLAGS, say);
 * `denoFlags` go to `deno run` (an inspector port, say).
 */
export function startDenoService(
  name: string,
  script: string,
  args: string[] = [],
  env: Record<string, string> = {},
  denoFlags: readonly string[] = [],
): Promise<Service> {
  return startPortPrinter(name, DENO_BIN, [
    "run",
    "--allow-net",
    ...denoFlags,
    denoEntry(join(ROOT, "scripts", "bench", script)),
    ...args,
  ], { ...DENO_ENV, ...env });
}

/**
 * proxy-chain-peer.ts under Node: proxy-chain's Server asking for `login` (Basic auth) and
 * forwarding every request and tunnel through the upstream on 127.0.0.1:`upstreamPort`.
 */
export function startProxyChain(
  upstreamPort: number,
  login: { username: string; password: string },
): Promise<Service> {
  return startPortPrinter("proxy-chain", process.execPath, [
    "--import",
    "tsx",
    join(ROOT, "scripts", "bench", "proxy-chain-peer.ts"),
    "--upstream",
    `127.0.0.1:${upstreamPort}`,
    "--login",
    `${login.username}:${login.password}`,
  ]);
}

/** A program that prints `{"port": N}` as its first line once it listens. */
async function startPortPrinter(
  name: string,
  command: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<Service> {
  const child = track(
    spawn(command, args, {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  let output = "";
  // The port line is standard output's first (an inspector announces itself on standard error).
  let printed = "";
  child.stdout!.setEncoding("utf8").on("data", (text: string) => {
    output += text;
    printed += text;
  });
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (output += text));
  const port = await waitUntil(() => {
    if (child.exitCode !== null) throw new Error(`${name} exited: ${output}`);
    if (!printed.includes("\n")) return undefined;
    return (JSON.parse(printed.split("\n")[0]) as { port: number }).port;
  }, { timeoutMs: 20_000, message: `${name} to listen` });
  return {
    name,
    port,
    pids: [child.pid!],
    output: () => output.split("\n"),
    stop: () => stopChild(child),
  };
}

/**
 * Starts a daemon configured in `dir` (kept in the foreground) and answers once it accepts on
 * 127.0.0.1:`port`; if it exits or never listens, it is stopped, `dir` removed, and the error
 * holds its output (and `log`, where it writes more).
 */
async function spawnListening(
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

/**
 * Debian's Squid as a forward proxy on a free loopback port, chained to `upstreamPort` on
 * 127.0.0.1: a `cache_peer` parent with `never_direct`, so forward requests and CONNECT
 * tunnels alike go through it (Squid keeps its connections to the peer alive and reuses them).
 * No caching (`cache deny all`, no cache_dir, no cache memory), no access log, one worker
 * (`-N`: one process, no daemon), clients from 127/8 only.
 */
export async function startSquid(upstreamPort: number): Promise<Service> {
  const dir = await mkdtemp(join(tmpdir(), "ox-bench-squid-"));
  // Squid drops to its own user (proxy) as root: it must write its log and pid here.
  await chmod(dir, 0o777);
  const port = await freePort();
  const config = [
    `http_port 127.0.0.1:${port}`,
    `pid_filename ${join(dir, "squid.pid")}`,
    `cache_log ${join(dir, "cache.log")}`,
    "access_log none",
    "cache_store_log none",
    "logfile_rotate 0",
    `coredump_dir ${dir}`,
    "cache deny all",
    "cache_mem 0 MB",
    "workers 1",
    "pinger_enable off",
    "acl bench_clients src 127.0.0.0/8",
    "http_access allow bench_clients",
    "http_access deny all",
    `cache_peer 127.0.0.1 parent ${upstreamPort} 0 no-query no-digest default name=shared_upstream`,
    "never_direct allow all",
    "visible_hostname octoprox-bench-squid",
    "max_filedescriptors 16384",
    "shutdown_lifetime 0 seconds",
  ].join("\n");
  const configPath = join(dir, "squid.conf");
  await writeFile(configPath, `${config}\n`);
  const child = await spawnListening("squid", "/usr/sbin/squid", ["-N", "-f", configPath], {
    dir,
    port,
    log: () => readFile(join(dir, "cache.log"), "utf8").then((log) => log.slice(-2000)),
  });
  return {
    name: "squid",
    port,
    pids: [child.pid!],
    async stop() {
      await stopChild(child, 10_000);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Debian's tinyproxy on a free loopback port with `Upstream http 127.0.0.1:<upstreamPort>`,
 * so forward requests and CONNECT tunnels go through the shared upstream. tinyproxy answers
 * each client connection once and closes it (no keep-alive), and opens a new upstream
 * connection per request.
 */
export async function startChainedTinyproxy(upstreamPort: number): Promise<Service> {
  const dir = await mkdtemp(join(tmpdir(), "ox-bench-tinyproxy-"));
  await chmod(dir, 0o755);
  const logPath = join(dir, "tinyproxy.log");
  await writeFile(logPath, "");
  await chmod(logPath, 0o666);
  const port = await freePort();
  const lines = [
    "Listen 127.0.0.1",
    `Port ${port}`,
    "Timeout 30",
    "MaxClients 1024",
    "Allow 127.0.0.1",
    `LogFile "${logPath}"`,
    "LogLevel Warning",
    "DisableViaHeader Yes",
    `Upstream http 127.0.0.1:${upstreamPort}`,
  ];
  if (process.getuid?.() === 0) lines.push("User 65534", "Group 65534");
  const configPath = join(dir, "tinyproxy.conf");
  await writeFile(configPath, `${lines.join("\n")}\n`);
  const child = await spawnListening("tinyproxy", "/usr/bin/tinyproxy", ["-d", "-c", configPath], {
    dir,
    port,
  });
  return {
    name: "tinyproxy",
    port,
    pids: [child.pid!],
    async stop() {
      await stopChild(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Debian's Dante (danted) as a SOCKS5 server on a free loopback port, connecting to
 * destinations itself, as it is usually run (no `route` to an upstream). It asks
 * for no login (`socksmethod: none`): Dante's username method checks the machine's own
 * password database, so giving it a login means adding a system account. No logging beyond
 * errors. Dante works in several processes (a mother and the children it forks to negotiate,
 * resolve and relay); the service's pids are all of them, read afresh each time.
 */
export async function startDante(): Promise<Service> {
  const dir = await mkdtemp(join(tmpdir(), "ox-bench-dante-"));
  await chmod(dir, 0o755);
  const port = await freePort();
  const user = process.getuid?.() === 0
    ? ["user.privileged: root", "user.unprivileged: nobody"]
    : [];
  const config = [
    `logoutput: ${join(dir, "danted.log")}`,
    "errorlog: stderr",
    `internal: 127.0.0.1 port = ${port}`,
    "external: 127.0.0.1",
    "clientmethod: none",
    "socksmethod: none",
    ...user,
    "client pass {\n  from: 127.0.0.0/8 to: 0.0.0.0/0\n  log: error\n}",
    "socks pass {\n  from: 127.0.0.0/8 to: 127.0.0.0/8\n  command: connect\n  log: error\n}",
    "socks block {\n  from: 0.0.0.0/0 to: 0.0.0.0/0\n  log: error\n}",
  ].join("\n");
  const configPath = join(dir, "danted.conf");
  await writeFile(configPath, `${config}\n`);
  const child = await spawnListening(
    "danted",
    "/usr/sbin/danted",
    ["-f", configPath, "-p", join(dir, "danted.pid")],
    { dir, port },
  );
  const mother = child.pid!;
  return {
    name: "dante",
    port,
    get pids() {
      return [mother, ...descendants(mother)];
    },
    async stop() {
      await stopChild(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Every process below `pid` now, from /proc's children lists (none once it is gone). */
function descendants(pid: number): number[] {
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

// ---------------------------------------------------------------------------------------------
// The gateway on a published feed.

export const BENCH_LOGIN = { username: "bench", password: "bench-pass" };

export interface FeedConnectorSpec {
  id: string;
  projectId: string;
  proxies: FeedProxy[];
}

/** A feed proxy row for an HTTP proxy at host:port, no login, healthy. */
export function httpProxyRow(id: string, host: string, port: number): FeedProxy {
  return {
    id,
    scheme: "http",
    host,
    port,
    username: null,
    password: null,
    country: null,
    status: "healthy",
    max_concurrency: null,
  };
}

/** Publishes these projects and connectors as the controller would (fenced by the bed's lease). */
export async function publishFeed(
  bed: FeedBed,
  spec: { projects: FeedProjectSpec[]; connectors: FeedConnectorSpec[] },
): Promise<void> {
  const projects = await Promise.all(spec.projects.map((project) => feedProject(bed, project)));
  const content = new Map<string, unknown>([
    ["global", { schema: SCHEMA_VERSION, default_strategy: "round_robin", projects }],
    ["runtime", {
      schema: SCHEMA_VERSION,
      quarantines: [],
      traffic_blocks: [],
      project_blocks: [],
    }],
  ]);
  for (const connector of spec.connectors) {
    content.set(`connector:${connector.id}`, {
      schema: SCHEMA_VERSION,
      connector: feedConnector(connector.id, { project_id: connector.projectId }),
      proxies: connector.proxies,
    });
  }
  await publishFeedContent(bed, content);
}

export interface GatewayService extends Service {
  /** Log lines (JSON objects) so far. */
  lines(): Record<string, unknown>[];
  /** Waits for a log line with this message. */
  line(msg: string, timeoutMs?: number): Promise<Record<string, unknown>>;
  readonly statusPort: number;
  /** Its output so far (stdout's first 64 MB, all of stderr), line by line. */
  output(): string[];
}

/** How much of a gateway's standard output the bench keeps. */
const MAX_OUTPUT_CHARS = 64 * 1024 * 1024;

/**
 * gateway/main.ts under Deno with the permissions `npm start` uses, on the bed's Redis prefix,
 * its proxy port free and its status port free; every other setting at its default (one
 * isolate unless `env` says otherwise), destinations on loopback allowed. Answers once the
 * status listener is up; the proxy port opens with the first feed (`waitForProxy`). `root`: a
 * checkout other than this one to run the gateway of (an earlier revision, side by side);
 * `denoFlags` go to `deno run` (an inspector port, say).
 */
export async function startGateway(
  bed: FeedBed,
  env: Record<string, string> = {},
  options: { root?: string; denoFlags?: readonly string[] } = {},
): Promise<GatewayService & { waitForProxy(timeoutMs?: number): Promise<void> }> {
  const { root = ROOT, denoFlags = [] } = options;
  const [proxyPort, statusPort] = [await freePort(), await freePort()];
  const [run, ...rest] = root === ROOT ? gatewayRunArgs() : [
    "run",
    ...gatewayPermissions(["gateway", "shared", "node_modules"].map((f) => join(root, f))),
    join(root, "gateway", "main.ts"),
  ];
  const child = track(spawn(DENO_BIN, [run, ...denoFlags, ...rest], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "/tmp",
      ...DENO_ENV,
      OCTOPROX_REDIS_URL: process.env.OCTOPROX_TEST_REDIS_URL ?? "redis://127.0.0.1:6379",
      OCTOPROX_REDIS_PREFIX: bed.prefix,
      OCTOPROX_INTERNAL_SECRET: bed.secret,
      OCTOPROX_GATEWAY_HOST: "127.0.0.1",
      OCTOPROX_PROXY_PORT: String(proxyPort),
      OCTOPROX_GATEWAY_STATUS_PORT: String(statusPort),
      OCTOPROX_SOCKS_PORT: "0",
      OCTOPROX_DESTINATION_ALLOW_CIDRS: "127.0.0.0/8",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  }));
  let output = "";
  const parsed: LogLine[] = [];
  collectLogLines(child.stdout!, parsed, (text) => {
    // Bounded against a flood of log lines; V8's GC records (about 2.5 KB a collection with
    // --trace-gc-nvp, a few a second under load) fit for many minutes.
    if (output.length < MAX_OUTPUT_CHARS) output += text;
  });
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (output += text));
  const line = (msg: string, timeoutMs = 30_000) =>
    waitUntil(() => {
      if (child.exitCode !== null) throw new Error(`gateway exited: ${output.slice(-2000)}`);
      return parsed.find((entry) => entry.msg === msg);
    }, { timeoutMs, intervalMs: 10, message: `the gateway's "${msg}"` });
  await line("Status listener bound");
  return {
    name: "gateway",
    port: proxyPort,
    statusPort,
    pids: [child.pid!],
    lines: () => parsed,
    output: () => output.split("\n").filter((text) => text !== ""),
    line,
    async waitForProxy(timeoutMs = 60_000) {
      await line("Proxy listener bound", timeoutMs);
    },
    stop: () => stopChild(child, 15_000),
  };
}

export interface RoutedGateway {
  gateway: GatewayService;
  /** Its SOCKS5 listener's port. */
  socksPort: number;
  origin: Service;
  /** The bare relay every request leaves through (the one proxy of the feed). */
  upstream: Service;
  bed: FeedBed;
  /** BENCH_LOGIN's Proxy-Authorization. */
  authorization: string;
  stop(): Promise<void>;
}

/**
 * A gateway that routes, without a control plane: the origin and the shared upstream (Deno
 * services), a feed with one project (BENCH_LOGIN) whose one proxy is that upstream, and the
 * gateway on it with `env` over the defaults, its proxy and SOCKS5 ports open.
 */
export async function startRoutedGateway(
  env: Record<string, string> = {},
  options: { denoFlags?: readonly string[] } = {},
): Promise<RoutedGateway> {
  const origin = await startDenoService("origin", "origin.ts");
  const upstream = await startDenoService("upstream", "bare-relay.ts");
  const bed = await feedBed();
  await bed.lead();
  const gateway = await startGateway(bed, env, options);
  const stop = async () => {
    await gateway.stop();
    await Promise.all([origin.stop(), upstream.stop(), bed.close()]);
  };
  try {
    await publishFeed(bed, {
      projects: [{ id: "bench", ...BENCH_LOGIN }],
      connectors: [{
        id: "upstream",
        projectId: "bench",
        proxies: [httpProxyRow("shared-upstream", "127.0.0.1", upstream.port)],
      }],
    });
    await gateway.waitForProxy();
    const socks = await gateway.line("SOCKS5 listener bound");
    return {
      gateway,
      socksPort: Number(socks.port),
      origin,
      upstream,
      bed,
      authorization: `Basic ${btoa(`${BENCH_LOGIN.username}:${BENCH_LOGIN.password}`)}`,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
