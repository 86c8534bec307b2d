/**
 * A real gateway process under Deno on the fixture entry (testkit/gateway/fixture/serve.ts): the
 * real socket layer over a fixed list of upstreams, its ports and JSON log lines read back.
 */
import { type ChildProcess, spawn } from "node:child_process";
import type { Readable } from "node:stream";
import { join } from "node:path";
import { waitUntil } from "../wait.ts";
import { denoEntry } from "../../scripts/deno-files.ts";
import { DENO_BIN, gatewayReadableFiles } from "../../scripts/gateway-command.ts";
import { seriesValue } from "../promtool.ts";
import { ROOT } from "../processes.ts";
import { testMitmCaEnv } from "../mitm-ca.ts";

/**
 * The fixture entry reads its FIXTURE_* variables too: all of the environment; the hosts files
 * its guard may be pointed at (the system's, and the fixtures' own); and the TLS interception
 * CA's files `env` names, as the gateway reads them (scripts/gateway-command.ts).
 */
function fixturePermissions(env: Readonly<Record<string, string | undefined>>): string[] {
  return [
    "--allow-net",
    "--allow-env",
    "--allow-sys=hostname",
    `--allow-read=${
      ["/etc/hosts", join(ROOT, "testkit", "gateway", "fixture"), ...gatewayReadableFiles(env)]
        .join(",")
    }`,
    // As the gateway runs: SO_REUSEPORT, and UDP sockets (the tunnel plane's resolver).
    "--unstable-net",
  ];
}

export const CREDENTIALS = { username: "alice", password: "s3cret-pass" };
/** The Proxy-Authorization value of CREDENTIALS (clients/raw-http.ts's basicAuth of them). */
export const PROXY_AUTH = `Basic ${
  Buffer.from(`${CREDENTIALS.username}:${CREDENTIALS.password}`).toString("base64")
}`;

export interface FixtureUpstream {
  id: string;
  scheme: "http" | "https" | "socks4" | "socks5";
  host: string;
  port: number;
  username?: string;
  password?: string;
}

export interface LogLine {
  msg: string;
  level: string;
  [field: string]: unknown;
}

/**
 * Reads a child's stdout as JSON log lines into `into` (a line that is not JSON comes as a raw
 * one); `onText` also gets the text as it arrives. V8's own traces (`--trace-gc-nvp`, say) reach
 * the same stdout through a buffer of their own, flushed in blocks that may end inside a line:
 * a log line written then follows that part on the same line, and is still read.
 */
export function collectLogLines(
  stdout: Readable,
  into: LogLine[],
  onText?: (text: string) => void,
): void {
  let partial = "";
  stdout.setEncoding("utf8").on("data", (text: string) => {
    onText?.(text);
    partial += text;
    const lines = partial.split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) {
      if (line.trim() === "") continue;
      into.push(parseLogLine(line));
    }
  });
}

function parseLogLine(line: string): LogLine {
  try {
    return JSON.parse(line) as LogLine;
  } catch {
    // A log line after part of a V8 trace line: the process's log lines start `{"time":`.
    const at = line.lastIndexOf('{"time":');
    if (at > 0) {
      try {
        return JSON.parse(line.slice(at)) as LogLine;
      } catch {
        // Not a log line after all.
      }
    }
    return { msg: `unparsed: ${line}`, level: "raw" };
  }
}

export interface GatewayOptions {
  upstreams: FixtureUpstream[];
  env?: Record<string, string>;
  /** "stdin": unready until `markReady`. */
  ready?: "now" | "stdin";
  blocked?: string[];
}

export interface TestGateway {
  readonly process: ChildProcess;
  readonly proxyPort: number;
  readonly statusPort: number;
  /** http://alice:…@127.0.0.1:port */
  readonly proxyUrl: string;
  lines(): LogLine[];
  waitForLine(match: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  markReady(): Promise<number>;
  /** SIGTERM; resolves the exit code. */
  stop(): Promise<number | null>;
  stderr(): string;
}

const live = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

export function gatewayEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "/tmp",
    DENO_NO_UPDATE_CHECK: "1",
    NO_COLOR: "1",
    OCTOPROX_REDIS_URL: "redis://127.0.0.1:1",
    OCTOPROX_INTERNAL_SECRET: "test-secret-test-secret-test-secret-0123",
    // The test process's CA: a gateway does not start without one.
    ...testMitmCaEnv(),
    OCTOPROX_GATEWAY_HOST: "127.0.0.1",
    OCTOPROX_PROXY_PORT: "0",
    OCTOPROX_SOCKS_PORT: "0",
    OCTOPROX_GATEWAY_STATUS_PORT: "0",
    OCTOPROX_LOG_LEVEL: "info",
    ...extra,
  };
}

/** Spawns Deno on `entry` with the gateway's permissions. */
export function spawnDeno(entry: string, env: Record<string, string>): ChildProcess {
  const child = spawn(DENO_BIN, ["run", ...fixturePermissions(env), denoEntry(entry)], {
    cwd: ROOT,
    env,
    stdio: ["pipe", "pipe", "pipe"],
  });
  live.add(child);
  child.once("exit", () => live.delete(child));
  return child;
}

export async function startGateway(options: GatewayOptions): Promise<TestGateway> {
  const env = gatewayEnv({
    FIXTURE_UPSTREAMS: JSON.stringify(options.upstreams),
    FIXTURE_CREDENTIALS: `${CREDENTIALS.username}:${CREDENTIALS.password}`,
    FIXTURE_READY: options.ready ?? "now",
    FIXTURE_BLOCKED: (options.blocked ?? []).join(","),
    ...options.env,
  });
  const child = spawnDeno("testkit/gateway/fixture/serve.ts", env);
  const parsed: LogLine[] = [];
  let stderr = "";
  collectLogLines(child.stdout!, parsed);
  child.stderr!.setEncoding("utf8");
  child.stderr!.on("data", (text: string) => {
    stderr += text;
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));

  const waitForLine = (match: (line: LogLine) => boolean, timeoutMs = 15_000) =>
    waitUntil(
      () => {
        if (child.exitCode !== null) throw new Error(`gateway exited: ${stderr}`);
        return parsed.find(match);
      },
      { timeoutMs, intervalMs: 10, message: "a gateway log line" },
    );

  const status = await waitForLine((line) => line.msg === "Status listener bound");
  const bound = async () =>
    Number((await waitForLine((line) => line.msg === "Proxy listener bound")).port);
  const proxyPort = options.ready === "stdin" ? 0 : await bound();
  return {
    process: child,
    proxyPort,
    statusPort: Number(status.port),
    proxyUrl: `http://${CREDENTIALS.username}:${CREDENTIALS.password}@127.0.0.1:${proxyPort}`,
    lines: () => parsed,
    waitForLine,
    async markReady() {
      child.stdin!.write("ready\n");
      return await bound();
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
    stderr: () => stderr,
  };
}
/** Reads /metrics from the status port and answers the value of one series. */
export async function metricValue(statusPort: number, series: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${statusPort}/metrics`)).text();
  return seriesValue(text, series) ?? 0;
}
