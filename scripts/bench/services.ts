/**
 * The processes the gateway benchmarks run beside the gateway, each its own process so its CPU
 * is its own: the origin and the bare relays under Deno (origin.ts, bare-relay.ts), Debian's
 * Squid and tinyproxy chained to an upstream, and the real gateway (gateway/main.ts under Deno,
 * the command `npm start` uses) on a feed the real FeedPublisher writes into Redis, with no
 * control plane. Every process started here is killed when the bench process exits.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, portAccepts, waitFor } from "../../e2e/support/wait.ts";
import type { FeedProxy } from "../../shared/feed/models.ts";
import { SCHEMA_VERSION } from "../../shared/feed/models.ts";
import {
  type FeedBed,
  feedBed,
  feedProject,
  type FeedProjectSpec,
  publishFeedContent,
} from "../../tests/feed/support.ts";
import { collectLogLines, type LogLine } from "../../tests/gateway-net/support.ts";
import { connector as feedConnector } from "../../tests/gateway/fixtures.ts";
import { denoEntry } from "../deno-files.ts";
import { DENO_BIN, DENO_ENV, gatewayRunArgs, ROOT } from "../gateway-command.ts";

export interface Service {
  readonly name: string;
  readonly port: number;
  /** The processes whose CPU is the service's. */
  readonly pids: number[];
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
 * bare-relay.ts) and answers once it listens.
 */
export async function startDenoService(
  name: string,
  script: string,
  args: string[] = [],
): Promise<Service> {
  const child = track(
    spawn(DENO_BIN, [
      "run",
      "--allow-net",
      denoEntry(join(ROOT, "scripts", "bench", script)),
      ...args,
    ], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...DENO_ENV },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  let output = "";
  child.stdout!.setEncoding("utf8").on("data", (text: string) => (output += text));
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (output += text));
  const port = await waitFor(() => {
    if (child.exitCode !== null) throw new Error(`${name} exited: ${output}`);
    const line = output.split("\n")[0];
    if (!output.includes("\n")) return undefined;
    return (JSON.parse(line) as { port: number }).port;
  }, { timeoutMs: 20_000, message: `${name} to listen` });
  return { name, port, pids: [child.pid!], stop: () => stopChild(child) };
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
  const child = track(
    spawn("/usr/sbin/squid", ["-N", "-f", configPath], { stdio: ["ignore", "pipe", "pipe"] }),
  );
  let output = "";
  child.stdout!.setEncoding("utf8").on("data", (text: string) => (output += text));
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (output += text));
  try {
    await waitFor(async () => {
      if (child.exitCode !== null) {
        const log = await readFile(join(dir, "cache.log"), "utf8").catch(() => "");
        throw new Error(`squid exited: ${output} ${log.slice(-2000)}`);
      }
      return await portAccepts("127.0.0.1", port, 500);
    }, { timeoutMs: 20_000, intervalMs: 50, message: "squid to listen" });
  } catch (error) {
    await stopChild(child);
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
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
  const child = track(
    spawn("/usr/bin/tinyproxy", ["-d", "-c", configPath], { stdio: ["ignore", "pipe", "pipe"] }),
  );
  let output = "";
  child.stdout!.setEncoding("utf8").on("data", (text: string) => (output += text));
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (output += text));
  try {
    await waitFor(async () => {
      if (child.exitCode !== null) throw new Error(`tinyproxy exited: ${output}`);
      return await portAccepts("127.0.0.1", port, 500);
    }, { timeoutMs: 20_000, intervalMs: 50, message: "tinyproxy to listen" });
  } catch (error) {
    await stopChild(child);
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
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
  /** Its output so far (stdout's first MB, all of stderr), line by line. */
  output(): string[];
}

/**
 * gateway/main.ts under Deno with the permissions `npm start` uses, on the bed's Redis prefix,
 * its proxy port free and its status port free; every other setting at its default (one
 * isolate unless `env` says otherwise), destinations on loopback allowed; `denoFlags` go to
 * `deno run` (an inspector port, say). Answers once the
 * status listener is up; the proxy port opens with the first feed (`waitForProxy`).
 */
export async function startGateway(
  bed: FeedBed,
  env: Record<string, string> = {},
  denoFlags: readonly string[] = [],
): Promise<GatewayService & { waitForProxy(timeoutMs?: number): Promise<void> }> {
  const [proxyPort, statusPort] = [await freePort(), await freePort()];
  const [run, ...rest] = gatewayRunArgs();
  const child = track(spawn(DENO_BIN, [run, ...denoFlags, ...rest], {
    cwd: ROOT,
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
    if (output.length < 1_000_000) output += text;
  });
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (output += text));
  const line = (msg: string, timeoutMs = 30_000) =>
    waitFor(() => {
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
export async function startRoutedGateway(env: Record<string, string> = {}): Promise<RoutedGateway> {
  const origin = await startDenoService("origin", "origin.ts");
  const upstream = await startDenoService("upstream", "bare-relay.ts");
  const bed = await feedBed();
  await bed.lead();
  const gateway = await startGateway(bed, env);
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
