/**
 * The `tls-intercept` benchmark's load generator (Node, a process of its own so its CPU is its
 * own): keep-alive HTTPS requests over a fixed number of client connections.
 *
 *   node --import tsx scripts/bench/tls-load.ts '<TlsLoadOptions as JSON>'
 *
 * Each connection reaches `connectTo`; when `proxy` is set it first sends a CONNECT for the
 * target there (an HTTP proxy: the gateway, mitmproxy), else it speaks TLS at once (the bare TLS
 * relay). Then TLS (ALPN http/1.1, the certificate checked against `caFile` for the target's
 * name), then GETs one after the other on that connection, each answer read whole (by its
 * Content-Length or its chunks) before the next goes. A connection that fails is counted by
 * what failed and opened again.
 *
 * Requests answered during the warm-up are not counted. Standard output: `{"window":"start"}`
 * when counting starts, `{"window":"end"}` when it stops (the bench reads /proc at each), then
 * the report (TlsLoadReport) as the last line.
 */
import { readFileSync } from "node:fs";
import net from "node:net";
import tls from "node:tls";
import { pathToFileURL } from "node:url";

export interface TlsLoadOptions {
  /** Where each client connection goes (the proxy, or the relay itself). */
  connectTo: { host: string; port: number };
  /** A CONNECT first, with this Proxy-Authorization when set. */
  proxy?: { authorization?: string };
  /** The HTTPS origin: the CONNECT's authority, SNI (a name) and the Host field. */
  target: { host: string; port: number };
  /** The CA the client trusts (PEM file). */
  caFile: string;
  connections: number;
  warmupMs: number;
  durationMs: number;
  /** An answer not whole this long fails its connection. */
  timeoutMs: number;
  path: string;
}

export interface TlsLoadReport {
  /** Answers with status 200 inside the window. */
  requests: number;
  /** Answers of another status inside the window. */
  failedAnswers: number;
  /** Connection failures by kind, over the whole run (warm-up included). */
  errors: Record<string, number>;
  /** Client connections opened over the whole run. */
  connections: number;
  windowMs: number;
  /** `requests` a second of the window. */
  throughput: number;
  cpu: { userMs: number; systemMs: number };
}

const CRLF2 = Buffer.from("\r\n\r\n");

function errorKind(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code ?? error.message.slice(0, 80);
  }
  return String(error);
}

/** Bytes of one socket, handed out as whole HTTP heads and answers. */
class Incoming {
  #buffer: Buffer = Buffer.alloc(0);
  #waiter: (() => void) | undefined;
  #failure: Error | undefined;

  constructor(socket: net.Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
      this.#wake();
    });
    socket.on("error", (error) => this.#fail(error));
    socket.on("close", () => this.#fail(new Error("closed")));
  }

  #fail(error: Error): void {
    this.#failure ??= error;
    this.#wake();
  }

  #wake(): void {
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.();
  }

  /** Waits until `complete` finds a whole message; answers it and keeps what follows. */
  async take(complete: (buffer: Buffer) => number): Promise<Buffer> {
    for (;;) {
      const end = complete(this.#buffer);
      if (end > 0) {
        const message = this.#buffer.subarray(0, end);
        this.#buffer = this.#buffer.subarray(end);
        return message;
      }
      if (this.#failure) throw this.#failure;
      await new Promise<void>((resolve) => (this.#waiter = resolve));
    }
  }
}

/** Where a head (to its blank line) ends in `buffer`, or 0. */
function headEnd(buffer: Buffer): number {
  const at = buffer.indexOf(CRLF2);
  return at < 0 ? 0 : at + 4;
}

/** Where a whole answer (head and body) ends in `buffer`, or 0. */
function answerEnd(buffer: Buffer): number {
  const head = headEnd(buffer);
  if (head === 0) return 0;
  const text = buffer.toString("latin1", 0, head).toLowerCase();
  const length = /\r\ncontent-length:\s*(\d+)/.exec(text);
  if (length) {
    const end = head + Number(length[1]);
    return buffer.length >= end ? end : 0;
  }
  if (!/\r\ntransfer-encoding:[^\r]*chunked/.test(text)) {
    throw new Error("an answer with neither a length nor chunks");
  }
  let at = head;
  for (;;) {
    const line = buffer.indexOf("\r\n", at);
    if (line < 0) return 0;
    const size = parseInt(buffer.toString("latin1", at, line), 16);
    if (size === 0) {
      // No trailers: the last chunk's line, then the blank line.
      return buffer.length >= line + 4 ? line + 4 : 0;
    }
    at = line + 2 + size + 2;
    if (at > buffer.length) return 0;
  }
}

function statusOf(answer: Buffer): number {
  return Number(answer.toString("latin1", 9, 12));
}

async function run(options: TlsLoadOptions): Promise<TlsLoadReport> {
  const ca = readFileSync(options.caFile, "utf8");
  const authority = `${options.target.host}:${options.target.port}`;
  const request = Buffer.from(
    `GET ${options.path} HTTP/1.1\r\nHost: ${authority}\r\nUser-Agent: octoprox-bench\r\n` +
      "Accept: */*\r\n\r\n",
  );
  const connectHead = Buffer.from(
    `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n` +
      (options.proxy?.authorization
        ? `Proxy-Authorization: ${options.proxy.authorization}\r\n`
        : "") +
      "\r\n",
  );
  const servername = net.isIP(options.target.host) === 0 ? options.target.host : undefined;
  const state = { counting: false, stopped: false, requests: 0, failedAnswers: 0, opened: 0 };
  const errors: Record<string, number> = {};
  const open = new Set<net.Socket>();

  const dial = (): Promise<net.Socket> =>
    new Promise((resolve, reject) => {
      const socket = net.connect(options.connectTo);
      socket.setNoDelay(true);
      socket.once("connect", () => resolve(socket));
      socket.once("error", reject);
    });

  /** A client connection through to the target's TLS, ready for requests. */
  const connect = async (): Promise<tls.TLSSocket> => {
    const raw = await dial();
    open.add(raw);
    raw.once("close", () => open.delete(raw));
    if (options.proxy) {
      raw.write(connectHead);
      const head = await new Promise<Buffer>((resolve, reject) => {
        let buffer = Buffer.alloc(0);
        const onData = (chunk: Buffer) => {
          buffer = Buffer.concat([buffer, chunk]);
          const end = headEnd(buffer);
          if (end === 0) return;
          raw.off("data", onData);
          raw.off("error", reject);
          raw.pause();
          if (end < buffer.length) raw.unshift(buffer.subarray(end));
          resolve(buffer.subarray(0, end));
        };
        raw.on("data", onData);
        raw.once("error", reject);
      });
      const status = statusOf(head);
      if (status !== 200) throw new Error(`CONNECT answered ${status}`);
    }
    const secure = tls.connect({
      socket: raw,
      host: options.target.host,
      ...(servername ? { servername } : {}),
      ca,
      ALPNProtocols: ["http/1.1"],
    });
    await new Promise<void>((resolve, reject) => {
      secure.once("secureConnect", resolve);
      secure.once("error", reject);
    });
    return secure;
  };

  const worker = async () => {
    while (!state.stopped) {
      let socket: tls.TLSSocket | undefined;
      try {
        socket = await connect();
        state.opened++;
        const incoming = new Incoming(socket);
        while (!state.stopped) {
          socket.write(request);
          let timer: ReturnType<typeof setTimeout> | undefined;
          const answer = await Promise.race([
            incoming.take(answerEnd),
            new Promise<never>((_, reject) => {
              timer = setTimeout(() => reject(new Error("timeout")), options.timeoutMs);
            }),
          ]).finally(() => clearTimeout(timer));
          if (!state.counting) continue;
          if (statusOf(answer) === 200) state.requests++;
          else state.failedAnswers++;
        }
      } catch (error) {
        if (state.stopped) break;
        const kind = errorKind(error);
        errors[kind] = (errors[kind] ?? 0) + 1;
        await new Promise((resolve) => setTimeout(resolve, 50));
      } finally {
        socket?.destroy();
      }
    }
  };

  const workers = Array.from({ length: options.connections }, () => worker());
  await new Promise((resolve) => setTimeout(resolve, options.warmupMs));
  const cpuStart = process.cpuUsage();
  const started = performance.now();
  state.counting = true;
  process.stdout.write(`${JSON.stringify({ window: "start" })}\n`);
  await new Promise((resolve) => setTimeout(resolve, options.durationMs));
  state.counting = false;
  const windowMs = performance.now() - started;
  process.stdout.write(`${JSON.stringify({ window: "end" })}\n`);
  const cpu = process.cpuUsage(cpuStart);
  state.stopped = true;
  for (const socket of open) socket.destroy();
  await Promise.all(workers);
  return {
    requests: state.requests,
    failedAnswers: state.failedAnswers,
    errors,
    connections: state.opened,
    windowMs,
    throughput: (state.requests * 1000) / windowMs,
    cpu: { userMs: cpu.user / 1000, systemMs: cpu.system / 1000 },
  };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const options = JSON.parse(process.argv[2] ?? "{}") as TlsLoadOptions;
  const report = await run(options);
  process.stdout.write(`${JSON.stringify(report)}\n`);
  process.exit(0);
}
