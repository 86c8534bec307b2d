/**
 * Helpers for the socket-layer tests: a real gateway process under Deno (the fixture entry),
 * curl, and a raw HTTP/1.1 client over a Node socket that keeps every byte it read.
 */
import { testCertificate } from "../../e2e/support/certs.ts";
import { type ChildProcess, execFile, spawn } from "node:child_process";
import net from "node:net";
import type { Readable } from "node:stream";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { waitFor } from "../../e2e/support/wait.ts";
import { denoEntry } from "../../scripts/deno-files.ts";
import { DENO_BIN } from "../../scripts/gateway-command.ts";
import { seriesValue } from "../support/promtool.ts";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export { DENO_BIN } from "../../scripts/gateway-command.ts";
/**
 * The fixture entry reads its FIXTURE_* variables too: all of the environment; and the hosts
 * files its guard may be pointed at (the system's, and the fixtures' own).
 */
const FIXTURE_PERMISSIONS = [
  "--allow-net",
  "--allow-env",
  "--allow-sys=hostname",
  `--allow-read=/etc/hosts,${join(ROOT, "tests", "gateway-net", "fixtures")}`,
];

export const CREDENTIALS = { username: "alice", password: "s3cret-pass" };
/** A Proxy-Authorization value for `user:password`. */
export const basicAuth = (login: string) => `Basic ${Buffer.from(login).toString("base64")}`;
export const PROXY_AUTH = basicAuth(`${CREDENTIALS.username}:${CREDENTIALS.password}`);

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
  const child = spawn(DENO_BIN, ["run", ...FIXTURE_PERMISSIONS, denoEntry(entry)], {
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
  const child = spawnDeno("tests/gateway-net/fixtures/serve.ts", env);
  const parsed: LogLine[] = [];
  let stderr = "";
  collectLogLines(child.stdout!, parsed);
  child.stderr!.setEncoding("utf8");
  child.stderr!.on("data", (text: string) => {
    stderr += text;
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));

  const waitForLine = (match: (line: LogLine) => boolean, timeoutMs = 15_000) =>
    waitFor(
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

export interface CurlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function curl(args: string[], timeoutMs = 20_000): Promise<CurlResult> {
  return new Promise((resolve) => {
    execFile(
      "curl",
      ["-sS", "--max-time", String(timeoutMs / 1000), ...args],
      { encoding: "utf8", maxBuffer: 64 * 1024 * 1024, env: { PATH: process.env.PATH ?? "" } },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

export interface RawResponse {
  status: number;
  /** Names lower case. */
  headers: Map<string, string[]>;
  head: string;
  /** The body as it came on the wire (chunk framing included). */
  body: Buffer;
}

/** A raw client connection: what it reads is kept in order, responses parsed on demand. */
export class RawConnection {
  readonly socket: net.Socket;
  #buffer = Buffer.alloc(0);
  #ended = false;
  #closed = false;
  #wake: (() => void) | undefined;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.on("data", (chunk: Buffer) => {
      this.#buffer = Buffer.concat([this.#buffer, chunk]);
      this.#notify();
    });
    socket.on("end", () => {
      this.#ended = true;
      this.#notify();
    });
    socket.on("close", () => {
      this.#closed = true;
      this.#ended = true;
      this.#notify();
    });
    socket.on("error", () => {});
  }

  /** Connects to `host:port`, from `localAddress` when given (another loopback address, say). */
  static open(port: number, host = "127.0.0.1", localAddress?: string): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host, port, allowHalfOpen: true, localAddress });
      socket.once("connect", () => resolve(new RawConnection(socket)));
      socket.once("error", reject);
    });
  }

  get ended(): boolean {
    return this.#ended;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Everything read and not yet taken. */
  get buffered(): Buffer {
    return this.#buffer;
  }

  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  /** Half-close: our end of stream, the other direction stays open. */
  end(): void {
    this.socket.end();
  }

  destroy(): void {
    this.socket.destroy();
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /** Waits until `condition` holds over what was read, or the deadline. */
  async waitUntil(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!condition()) {
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(
          `raw connection: timed out; read so far: ${
            this.#buffer.toString("latin1").slice(0, 500)
          }`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 200));
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  /** Takes `count` bytes once read. */
  async take(count: number, timeoutMs = 10_000): Promise<Buffer> {
    await this.waitUntil(() => this.#buffer.length >= count || this.#ended, timeoutMs);
    if (this.#buffer.length < count) throw new Error("connection ended early");
    const taken = this.#buffer.subarray(0, count);
    this.#buffer = this.#buffer.subarray(count);
    return taken;
  }

  /** Waits for the peer's end of stream; answers what came before it. */
  async readToEnd(timeoutMs = 10_000): Promise<Buffer> {
    await this.waitUntil(() => this.#ended, timeoutMs);
    const all = this.#buffer;
    this.#buffer = Buffer.alloc(0);
    return all;
  }

  /** Reads one response (the head, then the body as its framing says). */
  async readResponse(options: { method?: string; timeoutMs?: number } = {}): Promise<RawResponse> {
    const timeoutMs = options.timeoutMs ?? 10_000;
    await this.waitUntil(() => this.#buffer.includes("\r\n\r\n") || this.#ended, timeoutMs);
    const end = this.#buffer.indexOf("\r\n\r\n");
    if (end < 0) {
      throw new Error(`no response head; got ${JSON.stringify(this.#buffer.toString("latin1"))}`);
    }
    const head = this.#buffer.subarray(0, end).toString("latin1");
    this.#buffer = this.#buffer.subarray(end + 4);
    const [statusLine, ...lines] = head.split("\r\n");
    const status = Number(statusLine.split(" ")[1]);
    const headers = new Map<string, string[]>();
    for (const line of lines) {
      const colon = line.indexOf(":");
      const name = line.slice(0, colon).trim().toLowerCase();
      headers.set(name, [...(headers.get(name) ?? []), line.slice(colon + 1).trim()]);
    }
    let body: Buffer;
    const length = headers.get("content-length")?.[0];
    if (options.method === "HEAD" || status === 204 || status === 304 || status < 200) {
      body = Buffer.alloc(0);
    } else if (headers.get("transfer-encoding")?.[0]?.toLowerCase().includes("chunked")) {
      await this.waitUntil(() => chunkedEnd(this.#buffer) >= 0 || this.#ended, timeoutMs);
      const bodyEnd = chunkedEnd(this.#buffer);
      if (bodyEnd < 0) throw new Error("chunked body cut short");
      body = this.#buffer.subarray(0, bodyEnd);
      this.#buffer = this.#buffer.subarray(bodyEnd);
    } else if (length !== undefined) {
      body = await this.take(Number(length), timeoutMs);
    } else {
      body = await this.readToEnd(timeoutMs);
    }
    return { status, headers, head, body };
  }
}

/** Where a chunked body ends in `bytes` (-1 when not yet), trailers included. */
export function chunkedEnd(bytes: Buffer): number {
  let offset = 0;
  for (;;) {
    const lineEnd = bytes.indexOf("\r\n", offset);
    if (lineEnd < 0) return -1;
    const size = parseInt(bytes.subarray(offset, lineEnd).toString("latin1").split(";")[0], 16);
    if (Number.isNaN(size)) throw new Error("bad chunk size");
    offset = lineEnd + 2;
    if (size === 0) {
      // Trailer lines until an empty one.
      for (;;) {
        const trailerEnd = bytes.indexOf("\r\n", offset);
        if (trailerEnd < 0) return -1;
        if (trailerEnd === offset) return offset + 2;
        offset = trailerEnd + 2;
      }
    }
    if (bytes.length < offset + size + 2) return -1;
    offset += size + 2;
  }
}

/** Sends a CONNECT on a fresh connection; answers the connection and the response head. */
export async function openConnect(
  port: number,
  target: string,
  auth: string | null = PROXY_AUTH,
): Promise<{ connection: RawConnection; response: RawResponse }> {
  const connection = await RawConnection.open(port);
  connection.write(
    `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n` +
      (auth ? `Proxy-Authorization: ${auth}\r\n` : "") + "\r\n",
  );
  await connection.waitUntil(() => connection.buffered.includes("\r\n\r\n") || connection.ended);
  const end = connection.buffered.indexOf("\r\n\r\n");
  if (end < 0) throw new Error("no CONNECT answer");
  const headText = connection.buffered.subarray(0, end).toString("latin1");
  const status = Number(headText.split(" ")[1]);
  const headers = new Map<string, string[]>();
  for (const line of headText.split("\r\n").slice(1)) {
    const colon = line.indexOf(":");
    const name = line.slice(0, colon).trim().toLowerCase();
    headers.set(name, [...(headers.get(name) ?? []), line.slice(colon + 1).trim()]);
  }
  const response: RawResponse = { status, headers, head: headText, body: Buffer.alloc(0) };
  if (status === 200) {
    await connection.take(end + 4);
  } else {
    response.body = (await connection.readResponse()).body;
  }
  return { connection, response };
}

/** Reads /metrics from the status port and answers the value of one series. */
export async function metricValue(statusPort: number, series: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${statusPort}/metrics`)).text();
  return seriesValue(text, series) ?? 0;
}

export interface RawOrigin {
  readonly port: number;
  /** Every request as received (head and body bytes, exactly). */
  readonly requests: Buffer[];
  /** Connections accepted so far. */
  readonly connections: number;
  /** Closes every connection open now (the server keeps listening). */
  dropConnections(): void;
  close(): Promise<void>;
}

/** Where a request came: its connection's number (from 0) and its own on it (from 0). */
export interface RawRequestInfo {
  connection: number;
  index: number;
}

/**
 * An origin that records each request's exact bytes and answers what `respond` returns for it
 * (raw bytes; the connection closes after when `close` is set).
 */
export async function startRawOrigin(
  respond: (request: Buffer, info: RawRequestInfo) => { bytes: Buffer | string; close?: boolean },
): Promise<RawOrigin> {
  const requests: Buffer[] = [];
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((socket) => {
    const connection = connections++;
    let index = 0;
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    let buffer = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const headEnd = buffer.indexOf("\r\n\r\n");
        if (headEnd < 0) return;
        const head = buffer.subarray(0, headEnd).toString("latin1").toLowerCase();
        let total = headEnd + 4;
        if (/\r\ntransfer-encoding:[^\r]*chunked/.test(head)) {
          const end = chunkedEnd(buffer.subarray(total));
          if (end < 0) return;
          total += end;
        } else {
          const length = /\r\ncontent-length:\s*(\d+)/.exec(head);
          if (length) total += Number(length[1]);
          if (buffer.length < total) return;
        }
        const request = buffer.subarray(0, total);
        buffer = buffer.subarray(total);
        requests.push(request);
        const answer = respond(request, { connection, index: index++ });
        socket.write(answer.bytes);
        if (answer.close) {
          socket.end();
          return;
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    requests,
    get connections() {
      return connections;
    },
    dropConnections: () => {
      for (const socket of sockets) socket.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Parses the `Proxy-Status` value of one of our answers. */
export function proxyStatusError(response: RawResponse): string | undefined {
  const value = response.headers.get("proxy-status")?.[0];
  return value ? /error=([a-z_]+)/.exec(value)?.[1] : undefined;
}

export interface TlsFront {
  readonly port: number;
  /** The CA that signed the front's certificate (rustls refuses a self-signed leaf). */
  readonly caPem: string;
  close(): Promise<void>;
}

/**
 * TLS in front of a plain TCP port: an `https` proxy made of a plain one, with the test bed's
 * CA-signed localhost certificate (e2e/support/certs.ts).
 */
export async function startTlsFront(targetPort: number): Promise<TlsFront> {
  const tls = await import("node:tls");
  const { cert, key, ca: caPem } = await testCertificate();
  const sockets = new Set<net.Socket>();
  const server = tls.createServer({ cert, key }, (secure) => {
    const plain = net.connect({ host: "127.0.0.1", port: targetPort });
    for (const socket of [secure, plain]) {
      sockets.add(socket);
      socket.once("close", () => sockets.delete(socket));
      socket.on("error", () => {
        secure.destroy();
        plain.destroy();
      });
    }
    secure.pipe(plain).pipe(secure);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    caPem,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** One GET of `url` (absolute) through the proxy as `login`, on a connection of its own. */
export async function getVia(proxyPort: number, url: string, login: string): Promise<RawResponse> {
  const connection = await RawConnection.open(proxyPort);
  try {
    connection.write(
      `GET ${url} HTTP/1.1\r\nHost: ${new URL(url).host}\r\n` +
        `Proxy-Authorization: ${basicAuth(login)}\r\nConnection: close\r\n\r\n`,
    );
    return await connection.readResponse({ timeoutMs: 10_000 });
  } finally {
    connection.destroy();
  }
}
