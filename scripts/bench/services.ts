/**
 * The processes the gateway benchmarks run beside the gateway, each its own process so its CPU
 * is its own: the origin and the bare relays under Deno (origin.ts, bare-relay.ts), proxy-chain,
 * and the real gateway (gateway/main.ts under Deno,
 * the command `npm start` uses) on a feed the real FeedPublisher writes into Redis, with no
 * control plane (Squid, Dante and a chained tinyproxy are the test kit's:
 * testkit/upstreams). Every process started here is killed when the bench process exits.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { freePort } from "../../testkit/ports.ts";
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
import { type Service, stopChild, track } from "../../testkit/upstreams/daemon.ts";
import {
  DENO_BIN,
  DENO_ENV,
  gatewayPermissions,
  gatewayReadableFiles,
  gatewayRunArgs,
  ROOT,
} from "../gateway-command.ts";
import { testMitmCaEnv } from "../../testkit/mitm-ca.ts";

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

// ---------------------------------------------------------------------------------------------
// The gateway on a published feed.

export const BENCH_LOGIN = { username: "bench", password: "bench-pass" };
/** BENCH_LOGIN's Proxy-Authorization. */
export const BENCH_AUTHORIZATION = `Basic ${
  btoa(`${BENCH_LOGIN.username}:${BENCH_LOGIN.password}`)
}`;

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
  const childEnv: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "/tmp",
    ...DENO_ENV,
    OCTOPROX_REDIS_URL: process.env.OCTOPROX_TEST_REDIS_URL ?? "redis://127.0.0.1:6379",
    OCTOPROX_REDIS_PREFIX: bed.prefix,
    OCTOPROX_INTERNAL_SECRET: bed.secret,
    // The bench process's own CA (testkit/mitm-ca.ts): a gateway does not start without one.
    ...testMitmCaEnv(),
    OCTOPROX_GATEWAY_HOST: "127.0.0.1",
    OCTOPROX_PROXY_PORT: String(proxyPort),
    OCTOPROX_GATEWAY_STATUS_PORT: String(statusPort),
    OCTOPROX_SOCKS_PORT: "0",
    OCTOPROX_DESTINATION_ALLOW_CIDRS: "127.0.0.0/8",
    ...env,
  };
  const [run, ...rest] = root === ROOT ? gatewayRunArgs(childEnv) : [
    "run",
    ...gatewayPermissions([
      ...["gateway", "shared", "node_modules"].map((f) => join(root, f)),
      ...gatewayReadableFiles(childEnv),
    ]),
    join(root, "gateway", "main.ts"),
  ];
  const child = track(spawn(DENO_BIN, [run, ...denoFlags, ...rest], {
    cwd: root,
    env: childEnv,
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
      authorization: BENCH_AUTHORIZATION,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
