/**
 * A real tinyproxy (Debian's) for tests: its own config in a temp dir, listening on 127.0.0.1
 * at a free port, its outgoing connections bound to `bindAddress` (127.0.0.N; all of 127/8 is
 * loopback on Linux), so an echo origin sees which instance a request left through.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { access, chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { constants } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { UpstreamProxy } from "../../shared/proxy-protocol/types.ts";
import { freePort, portAccepts } from "../ports.ts";
import { waitUntil } from "../wait.ts";
import { type Service, spawnListening, stopChild as stopDaemon } from "./daemon.ts";

export const TINYPROXY_BIN = process.env.OCTOPROX_TINYPROXY_BIN ?? "/usr/bin/tinyproxy";

export interface TinyproxyOptions {
  /** The address to listen on (default 127.0.0.1): a cloud emulator's instance has its own. */
  listenAddress?: string;
  /** Outgoing address (tinyproxy's `Bind`), e.g. 127.0.0.2. Default: the system's choice. */
  bindAddress?: string;
  /** Require these credentials (BasicAuth). No spaces. */
  auth?: { username: string; password: string };
  /** Connections served at once (default 512; tinyproxy runs a thread per client). */
  maxClients?: number;
  /** tinyproxy's LogLevel (default Info; Warning for benchmarks). */
  logLevel?: "Critical" | "Error" | "Warning" | "Notice" | "Connect" | "Info";
  /** How long to wait for tinyproxy to accept connections (default 10 s). */
  startTimeoutMs?: number;
  /**
   * The port to listen on: a restart on the port an earlier instance had, so the proxy's URL
   * stays the same. A free port otherwise.
   */
  port?: number;
  /**
   * A network namespace (testkit/netns.ts) to run in: it resolves names through the
   * namespace's own hosts file, and `listenAddress` and `bindAddress` are its addresses.
   */
  netns?: string;
  /** Clients allowed besides loopback (CIDR blocks), such as a gateway in another namespace. */
  allow?: readonly string[];
}

export interface Tinyproxy {
  readonly host: string;
  readonly port: number;
  readonly bindAddress: string | undefined;
  /** http://[user:pass@]127.0.0.1:port */
  readonly url: string;
  /** The proxy as the upstream code takes it (credentials included when set). */
  readonly proxy: UpstreamProxy;
  readonly pid: number | undefined;
  readonly logPath: string;
  /** The log so far (for failure messages). */
  log(): Promise<string>;
  close(): Promise<void>;
}

const SAFE_TOKEN = /^[A-Za-z0-9._~!$&'()*+,;=:@-]+$/;

async function ensureBinary(): Promise<void> {
  try {
    await access(TINYPROXY_BIN, constants.X_OK);
  } catch {
    throw new Error(
      `tinyproxy not found at ${TINYPROXY_BIN}: install it with \`apt-get install -y tinyproxy\` ` +
        "(.ci/run does), or set OCTOPROX_TINYPROXY_BIN",
    );
  }
}

function config(options: TinyproxyOptions, port: number, logPath: string): string {
  const lines = [
    `Listen ${options.listenAddress ?? "127.0.0.1"}`,
    `Port ${port}`,
    // Idle connections outlive the gateway's pooled ones (UPSTREAM_POOL_IDLE_MS, 30 s), as a
    // vendor's do: at 30 s both ends let go at once, and a POST sent into that moment is a 502.
    "Timeout 120",
    `MaxClients ${options.maxClients ?? 512}`,
    "Allow 127.0.0.0/8",
    ...(options.allow ?? []).map((cidr) => `Allow ${cidr}`),
    `LogFile "${logPath}"`,
    `LogLevel ${options.logLevel ?? "Info"}`,
    "DisableViaHeader Yes",
    // No ConnectPort line: CONNECT goes to any port.
  ];
  // As root tinyproxy drops privileges; nobody/nogroup by number, which every distro has.
  if (process.getuid?.() === 0) lines.push("User 65534", "Group 65534");
  if (options.bindAddress) lines.push(`Bind ${options.bindAddress}`);
  if (options.auth) lines.push(`BasicAuth ${options.auth.username} ${options.auth.password}`);
  return `${lines.join("\n")}\n`;
}

// Children still running when this process exits (a crashed test) are killed with it, rather
// than left listening.
const live = new Set<ChildProcess>();
let exitHook = false;

function track(child: ChildProcess): void {
  live.add(child);
  child.once("exit", () => live.delete(child));
  if (!exitHook) {
    exitHook = true;
    process.once("exit", () => {
      for (const running of live) running.kill("SIGKILL");
    });
  }
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 3_000);
  await exited(child);
  clearTimeout(timer);
}

export async function startTinyproxy(options: TinyproxyOptions = {}): Promise<Tinyproxy> {
  await ensureBinary();
  const { auth } = options;
  if (auth && (!SAFE_TOKEN.test(auth.username) || !SAFE_TOKEN.test(auth.password))) {
    throw new Error("tinyproxy credentials must be non-empty and free of spaces and quotes");
  }
  const dir = await mkdtemp(join(tmpdir(), "ox-tinyproxy-"));
  // tinyproxy opens its log after dropping to nobody: the dir and log must let it.
  await chmod(dir, 0o755);
  const logPath = join(dir, "tinyproxy.log");
  await writeFile(logPath, "");
  await chmod(logPath, 0o666);
  const configPath = join(dir, "tinyproxy.conf");
  const host = options.listenAddress ?? "127.0.0.1";
  const startTimeoutMs = options.startTimeoutMs ?? 10_000;

  let child: ChildProcess | undefined;
  let port = 0;
  let output = "";
  try {
    // A free port can be taken between the check and tinyproxy's bind: try a few.
    for (let attempt = 1;; attempt++) {
      port = options.port ?? await freePort();
      await writeFile(configPath, config(options, port, logPath));
      output = "";
      const command = ["-d", "-c", configPath];
      const started = options.netns === undefined
        ? spawn(TINYPROXY_BIN, command, { stdio: ["ignore", "pipe", "pipe"] })
        : spawn("ip", ["netns", "exec", options.netns, TINYPROXY_BIN, ...command], {
          stdio: ["ignore", "pipe", "pipe"],
        });
      child = started;
      track(started);
      const collect = (chunk: Buffer) => {
        if (output.length < 8192) output += chunk.toString();
      };
      started.stdout?.on("data", collect);
      started.stderr?.on("data", collect);
      let spawnFailure: Error | undefined;
      started.once("error", (error) => {
        spawnFailure = error;
      });
      const up = await waitUntil(
        async () => {
          if (spawnFailure || started.exitCode !== null || started.signalCode !== null) {
            return "exited";
          }
          return (await portAccepts(host, port, 500)) ? "up" : false;
        },
        { timeoutMs: startTimeoutMs, intervalMs: 20, message: `tinyproxy on port ${port}` },
      );
      if (up === "up") break;
      const log = await readFile(logPath, "utf8").catch(() => "");
      if (spawnFailure || attempt >= 3) {
        throw new Error(`tinyproxy exited at start: ${output.trim()} ${log.trim()}`.trim(), {
          cause: spawnFailure,
        });
      }
    }
  } catch (error) {
    if (child) await stopChild(child);
    await rm(dir, { recursive: true, force: true });
    throw error;
  }

  const running = child;
  const credentials = auth
    ? `${encodeURIComponent(auth.username)}:${encodeURIComponent(auth.password)}@`
    : "";
  let closing: Promise<void> | undefined;
  return {
    host,
    port,
    bindAddress: options.bindAddress,
    url: `http://${credentials}${host}:${port}`,
    proxy: {
      scheme: "http",
      host,
      port,
      ...(auth ? { username: auth.username, password: auth.password } : {}),
    },
    pid: running.pid,
    logPath,
    log: () => readFile(logPath, "utf8").catch(() => ""),
    close() {
      closing ??= (async () => {
        try {
          await stopChild(running);
        } finally {
          await rm(dir, { recursive: true, force: true });
        }
      })();
      return closing;
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
    // Idle connections outlive the gateway's pooled ones (UPSTREAM_POOL_IDLE_MS, 30 s), as a
    // vendor's do: at 30 s both ends let go at once, and a POST sent into that moment is a 502.
    "Timeout 120",
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
      await stopDaemon(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
