/**
 * proxy-loadgen's engine: drives one scenario through an HTTP proxy over raw `node:net` sockets
 * and reports requests, throughput, latency percentiles, error classes and its own CPU.
 *
 * - `http`: `concurrency` persistent client connections, each sending one absolute-form request
 *   at a time and reading the whole answer; a connection the proxy closes (or that fails) is
 *   opened again for the next request, its connect time counted in that request's latency.
 * - `connect`: `concurrency` loops, each opening a new connection per request, sending CONNECT
 *   for the URL's host, then one GET through the tunnel (`Connection: close`), reading the whole
 *   answer and closing. The latency is the whole of it, connect to last byte.
 * - `socks5`: the same loops through a SOCKS5 proxy: a new connection, the SOCKS5 handshake
 *   (username/password when the proxy has a login), one GET, close. `direct`: the same loops
 *   straight to the URL's host (a new connection, one GET, close), the baseline of both.
 * - `extract`: `concurrency` persistent connections straight to the api, each POSTing to the
 *   extraction URL with the distribution key (X-API-Key) and reading the whole JSON answer:
 *   the proxies it returned are counted, and a call that returned fewer than it asked for is
 *   counted insufficient (still an answered request: the API did what it should).
 *
 * Counting: a request counts when it starts after the warm-up; the measured window runs from
 * the warm-up's end to the last counted request's end. With `rate`, request starts are spread
 * evenly from the run's start, and a request's latency runs from when it was due to start, so
 * falling behind the rate shows in the latency (no coordinated omission).
 */
import { sleep } from "../../shared/async/sleep.ts";
import net from "node:net";
import { Histogram } from "./histogram.ts";
import { createClientHandshake } from "../../shared/proxy-protocol/handshake.ts";
import { UpstreamHandshakeError } from "../../shared/proxy-protocol/errors.ts";
import type { TunnelTarget, UpstreamProxy } from "../../shared/proxy-protocol/types.ts";
import type { LoadOptions } from "./options.ts";
import { loginOf, Scenario } from "./options.ts";
import { ProtocolError, ResponseReader } from "./response.ts";

export interface LatencySummary {
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

export interface LoadReport {
  scenario: Scenario;
  /** host:port of the proxy. */
  proxy: string;
  url: string;
  concurrency: number;
  rate?: number;
  /** Counted requests that ended (answered or failed). */
  requests: number;
  /** Of which answered with a status below 400 (CONNECT: 200, then below 400 inside). */
  ok: number;
  /** Failures by class: `connect refused`, `timeout`, `reset`, `closed early`, `protocol error`, `status 502`, `CONNECT status 407`, ... */
  errors: Record<string, number>;
  /** The measured window, in ms. */
  elapsedMs: number;
  /** Answered requests a second over the window. */
  throughput: number;
  /** Latency of the answered requests, in ms (bucket upper bounds, within 1.6%). */
  latencyMs: LatencySummary;
  /**
   * With a target rate: latency from when each answered request was sent rather than due, and
   * how late the generator itself ran behind its schedule at most (a generator short of CPU
   * lags; then `latencyMs` holds its own delay too, and this tells the server's part).
   */
  sentLatencyMs?: LatencySummary;
  maxLagMs?: number;
  /** Client connections opened during the window. */
  connections: number;
  /** Requests sent again on a new connection after a reused one turned out closed. */
  retries: number;
  /** `extract`: proxies asked for and returned over the window, and calls that came back short. */
  extraction?: { requested: number; returned: number; insufficient: number };
  /** This process's CPU over the window. */
  cpu: {
    userMs: number;
    systemMs: number; /** CPU time over wall time: cores busy. */
    cores: number;
  };
}

class TimeoutError extends Error {
  override name = "TimeoutError";
}

class ClosedEarlyError extends Error {
  override name = "ClosedEarlyError";
}

/** The class a failure counts under. */
export function errorClass(error: unknown): string {
  if (error instanceof TimeoutError) return "timeout";
  if (error instanceof ClosedEarlyError) return "closed early";
  if (error instanceof ProtocolError) return "protocol error";
  const code = (error as { code?: string } | null)?.code;
  switch (code) {
    case "ECONNREFUSED":
      return "connect refused";
    case "ECONNRESET":
    case "EPIPE":
      return "reset";
    case "ETIMEDOUT":
      return "timeout";
    case "EADDRNOTAVAIL":
      return "no local port";
    case undefined:
      return "other";
    default:
      return code.toLowerCase();
  }
}

/** A status the exchange completed with that still counts as a failure. */
class StatusFailure extends Error {
  readonly label: string;
  constructor(label: string) {
    super(label);
    this.label = label;
  }
}

interface Tracker {
  /** When the current exchange started (for the timeout sweep); 0 when idle. */
  since: number;
  socket: net.Socket | undefined;
}

/**
 * `absolute`: a forward request to a proxy; `origin`: one request through a tunnel, then close;
 * `direct`: a keep-alive request to the server itself (extract).
 */
function requestBytes(options: LoadOptions, form: "absolute" | "origin" | "direct"): Buffer {
  const url = options.url;
  const target = form === "absolute" ? url.href : `${url.pathname}${url.search}`;
  let head = `${options.method} ${target} HTTP/1.1\r\nHost: ${url.host}\r\n`;
  if (form === "absolute" && options.proxy.authorization) {
    head += `Proxy-Authorization: ${options.proxy.authorization}\r\n`;
  }
  if (form === "origin") head += "Connection: close\r\n";
  let text = options.body;
  if (options.extract) {
    head += `X-API-Key: ${options.extract.key}\r\nContent-Type: application/json\r\n`;
    text ??= JSON.stringify({ count: options.extract.count });
  }
  for (const [name, value] of options.headers) head += `${name}: ${value}\r\n`;
  const body = text === undefined ? undefined : Buffer.from(text);
  if (body) head += `Content-Length: ${body.length}\r\n`;
  head += "\r\n";
  return body ? Buffer.concat([Buffer.from(head, "latin1"), body]) : Buffer.from(head, "latin1");
}

function connectBytes(options: LoadOptions): Buffer {
  const port = options.url.port || "80";
  const authority = `${options.url.hostname}:${port}`;
  let head = `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n`;
  if (options.proxy.authorization) {
    head += `Proxy-Authorization: ${options.proxy.authorization}\r\n`;
  }
  return Buffer.from(`${head}\r\n`, "latin1");
}

/** One persistent client connection for the `http` scenario. */
class KeepAliveConnection {
  #socket: net.Socket | undefined;
  #reader: ResponseReader | undefined;
  #settle: ((error?: unknown) => void) | undefined;
  /** Some byte of the current answer came. */
  #answered = false;
  readonly #options: LoadOptions;
  readonly #tracker: Tracker;
  readonly #onOpen: () => void;
  readonly #keepBody: boolean;

  constructor(options: LoadOptions, tracker: Tracker, onOpen: () => void, keepBody = false) {
    this.#options = options;
    this.#tracker = tracker;
    this.#onOpen = onOpen;
    this.#keepBody = keepBody;
  }

  #open(): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({
        host: this.#options.proxy.host,
        port: this.#options.proxy.port,
        noDelay: true,
      });
      this.#tracker.socket = socket;
      this.#onOpen();
      const failed = (error: Error) => reject(error);
      socket.once("error", failed);
      socket.once("connect", () => {
        socket.off("error", failed);
        socket.on("error", (error) => this.#finish(error));
        socket.on("data", (chunk: Buffer) => this.#data(chunk));
        socket.on("end", () => {
          const reader = this.#reader;
          if (reader && reader.end()) this.#finish();
          else this.#finish(new ClosedEarlyError("closed before the whole answer"));
        });
        socket.on("close", () => {
          if (this.#socket === socket) this.#socket = undefined;
          this.#finish(new ClosedEarlyError("closed before the whole answer"));
        });
        resolve(socket);
      });
    });
  }

  #data(chunk: Buffer): void {
    const reader = this.#reader;
    if (!reader) return; // bytes nobody asked for: ignored
    this.#answered = true;
    try {
      reader.feed(chunk);
    } catch (error) {
      this.#finish(error);
      return;
    }
    if (reader.done) this.#finish();
  }

  #finish(error?: unknown): void {
    const settle = this.#settle;
    if (!settle) return;
    this.#settle = undefined;
    settle(error);
  }

  /**
   * One request and its whole answer; rejects on failure (the connection is dropped). A reused
   * connection that the proxy closed while idle (tinyproxy closes after every answer without
   * saying so) fails before any answer byte: then the request goes once more on a new
   * connection, as HTTP clients do, and `onRetry` is told.
   */
  async exchange(request: Buffer, onRetry: () => void): Promise<Buffer> {
    for (let attempt = 0;; attempt++) {
      const reused = this.#socket !== undefined;
      this.#answered = false;
      try {
        const socket = this.#socket ?? (this.#socket = await this.#open());
        const reader = new ResponseReader({
          head: this.#options.method === "HEAD",
          keepBody: this.#keepBody,
        });
        this.#reader = reader;
        await new Promise<void>((resolve, reject) => {
          this.#settle = (error) => (error === undefined ? resolve() : reject(error));
          socket.write(request);
        });
        this.#reader = undefined;
        if (!reader.keepAlive) this.drop();
        if (reader.status >= 400) throw new StatusFailure(`status ${reader.status}`);
        return reader.body;
      } catch (error) {
        this.#reader = undefined;
        if (error instanceof StatusFailure) throw error;
        this.drop();
        const stale = reused && !this.#answered && attempt === 0 &&
          (error instanceof ClosedEarlyError || errorClass(error) === "reset");
        if (!stale) throw error;
        onRetry();
      }
    }
  }

  drop(): void {
    const socket = this.#socket;
    this.#socket = undefined;
    this.#settle = undefined;
    socket?.destroy();
  }
}

/**
 * How a tunnel's connection is made ready for its one request: CONNECT (these bytes), the
 * SOCKS5 handshake (the shared client driver the gateway dials its upstreams with), or nothing
 * (the connection goes straight to the server).
 */
type Opening =
  | { kind: "connect"; bytes: Buffer }
  | { kind: "socks5"; proxy: UpstreamProxy; target: TunnelTarget }
  | { kind: "direct" };

function openingOf(options: LoadOptions): Opening {
  if (options.scenario === Scenario.direct) return { kind: "direct" };
  if (options.scenario !== Scenario.socks5) {
    return { kind: "connect", bytes: connectBytes(options) };
  }
  const login = options.proxy.authorization ? loginOf(options.proxy.authorization) : undefined;
  return {
    kind: "socks5",
    proxy: { scheme: "socks5", host: options.proxy.host, port: options.proxy.port, ...login },
    target: { host: options.url.hostname, port: Number(options.url.port || "80") },
  };
}

/** One tunnel (CONNECT, SOCKS5 or none) with one exchange through it, then closed. */
function tunnelOnce(
  options: LoadOptions,
  opening: Opening,
  inner: Buffer,
  tracker: Tracker,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const socket = net.connect({
      host: options.proxy.host,
      port: options.proxy.port,
      noDelay: true,
    });
    tracker.socket = socket;
    const handshake = opening.kind === "socks5"
      ? createClientHandshake(opening.proxy, opening.target)
      : undefined;
    const innerReader = () => new ResponseReader({ head: options.method === "HEAD" });
    let reader = opening.kind === "connect" ? new ResponseReader({ connect: true }) : innerReader();
    let tunnelled = opening.kind === "direct";
    let settled = false;
    const done = (error?: unknown) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      if (error === undefined) resolve();
      else reject(error);
    };
    socket.once("connect", () => {
      if (opening.kind === "connect") socket.write(opening.bytes);
      else if (handshake) socket.write(handshake.start());
      else socket.write(inner);
    });
    socket.on("error", (error) => done(error));
    socket.on("end", () => {
      if (tunnelled && reader.end()) finishInner();
      else done(new ClosedEarlyError("closed before the whole answer"));
    });
    socket.on("close", () => done(new ClosedEarlyError("closed before the whole answer")));
    const finishInner = () => {
      if (reader.status >= 400) done(new StatusFailure(`status ${reader.status}`));
      else done();
    };
    socket.on("data", (chunk: Buffer) => {
      try {
        if (handshake && !tunnelled) {
          let step;
          try {
            step = handshake.push(chunk);
          } catch (error) {
            done(
              error instanceof UpstreamHandshakeError
                ? new StatusFailure(`SOCKS5 ${error.reason}`)
                : error,
            );
            return;
          }
          if (step.write) socket.write(step.write);
          if (!step.done) return;
          tunnelled = true;
          socket.write(inner);
          if (step.leftover.length === 0) return;
          chunk = Buffer.from(step.leftover);
        }
        let used = reader.feed(chunk);
        if (!tunnelled) {
          if (!reader.done) return;
          if (reader.status !== 200) {
            done(new StatusFailure(`CONNECT status ${reader.status}`));
            return;
          }
          tunnelled = true;
          reader = innerReader();
          socket.write(inner);
          if (used < chunk.length) used += reader.feed(chunk.subarray(used));
        }
        if (reader.done) finishInner();
      } catch (error) {
        done(error);
      }
    });
  });
}

export interface LoadHooks {
  /** The measured window starts (after the warm-up) or ends (every counted request ended). */
  onWindow?(phase: "start" | "end"): void;
}

export async function runLoad(options: LoadOptions, hooks: LoadHooks = {}): Promise<LoadReport> {
  if (options.requests === undefined && options.durationMs === undefined) {
    throw new Error("runLoad: set requests or durationMs");
  }
  const histogram = new Histogram();
  const sentHistogram = new Histogram();
  let maxLag = 0;
  const errors = new Map<string, number>();
  const trackers: Tracker[] = [];
  const startedAt = performance.now();
  const windowStart = startedAt + options.warmupMs;
  const windowEnd = options.durationMs === undefined
    ? Number.POSITIVE_INFINITY
    : windowStart + options.durationMs;
  let countedIssued = 0;
  let requests = 0;
  let ok = 0;
  let lastEnd = windowStart;
  let connections = 0;
  let retries = 0;
  let ticket = 0;
  let cpuStart: NodeJS.CpuUsage | undefined;
  let cpuStartAt = 0;
  const interval = options.rate === undefined ? 0 : 1000 / options.rate;

  const onOpen = () => {
    if (performance.now() >= windowStart) connections++;
  };

  // The CPU reading at the window's start, taken as close to it as a timer allows.
  const cpuTimer = setTimeout(() => {
    cpuStart = process.cpuUsage();
    cpuStartAt = performance.now();
    hooks.onWindow?.("start");
  }, Math.max(0, options.warmupMs));

  // Timeouts: one sweep for every tracker, rather than a timer per request.
  const sweep = setInterval(() => {
    const now = performance.now();
    for (const tracker of trackers) {
      if (tracker.since !== 0 && now - tracker.since > options.timeoutMs) {
        tracker.since = 0;
        tracker.socket?.destroy(new TimeoutError("no whole answer in time"));
      }
    }
  }, Math.min(100, Math.max(10, options.timeoutMs / 10)));

  /** Waits for this request's turn; answers when it starts, or undefined to stop. */
  const nextStart = async (): Promise<number | undefined> => {
    let due = performance.now();
    if (interval > 0) {
      due = startedAt + ticket++ * interval;
      const wait = due - performance.now();
      if (wait > 1) await sleep(wait);
    }
    if (due >= windowStart) {
      if (due >= windowEnd) return undefined;
      if (options.requests !== undefined && countedIssued >= options.requests) return undefined;
      countedIssued++;
    }
    // Late: the latency runs from when it was due. Early (a wait under a timer's grain is not
    // slept): from now.
    return Math.min(due, performance.now());
  };

  const settle = (start: number, error?: unknown, sent = start) => {
    const end = performance.now();
    if (start < windowStart) return;
    requests++;
    if (end > lastEnd) lastEnd = end;
    if (sent - start > maxLag) maxLag = sent - start;
    if (error === undefined) {
      ok++;
      histogram.record((end - start) * 1000);
      sentHistogram.record((end - sent) * 1000);
      return;
    }
    const label = error instanceof StatusFailure ? error.label : errorClass(error);
    errors.set(label, (errors.get(label) ?? 0) + 1);
  };

  const httpWorker = async (): Promise<void> => {
    const tracker: Tracker = { since: 0, socket: undefined };
    trackers.push(tracker);
    const connection = new KeepAliveConnection(options, tracker, onOpen);
    const request = requestBytes(options, "absolute");
    try {
      for (;;) {
        const start = await nextStart();
        if (start === undefined) return;
        const sent = tracker.since = performance.now();
        try {
          await connection.exchange(request, () => {
            if (start >= windowStart) retries++;
          });
          settle(start, undefined, sent);
        } catch (error) {
          settle(start, error, sent);
        } finally {
          tracker.since = 0;
        }
      }
    } finally {
      connection.drop();
    }
  };

  const connectWorker = async (): Promise<void> => {
    const tracker: Tracker = { since: 0, socket: undefined };
    trackers.push(tracker);
    const opening = openingOf(options);
    const inner = requestBytes(options, "origin");
    for (;;) {
      const start = await nextStart();
      if (start === undefined) return;
      const sent = tracker.since = performance.now();
      onOpen();
      try {
        await tunnelOnce(options, opening, inner, tracker);
        settle(start, undefined, sent);
      } catch (error) {
        settle(start, error, sent);
      } finally {
        tracker.since = 0;
        tracker.socket = undefined;
      }
    }
  };

  const extraction = { requested: 0, returned: 0, insufficient: 0 };

  const extractWorker = async (): Promise<void> => {
    const tracker: Tracker = { since: 0, socket: undefined };
    trackers.push(tracker);
    const connection = new KeepAliveConnection(options, tracker, onOpen, true);
    const request = requestBytes(options, "direct");
    try {
      for (;;) {
        const start = await nextStart();
        if (start === undefined) return;
        tracker.since = performance.now();
        try {
          const body = await connection.exchange(request, () => {
            if (start >= windowStart) retries++;
          });
          const answer = JSON.parse(body.toString("utf8")) as {
            requested?: unknown;
            returned?: unknown;
          };
          if (typeof answer.returned !== "number" || typeof answer.requested !== "number") {
            throw new ProtocolError("not an extraction answer");
          }
          if (start >= windowStart) {
            extraction.requested += answer.requested;
            extraction.returned += answer.returned;
            if (answer.returned < answer.requested) extraction.insufficient++;
          }
          settle(start);
        } catch (error) {
          settle(start, error instanceof SyntaxError ? new ProtocolError(error.message) : error);
        } finally {
          tracker.since = 0;
        }
      }
    } finally {
      connection.drop();
    }
  };

  const worker = options.scenario === Scenario.connect ||
      options.scenario === Scenario.socks5 || options.scenario === Scenario.direct
    ? connectWorker
    : options.scenario === Scenario.extract
    ? extractWorker
    : httpWorker;
  try {
    await Promise.all(Array.from({ length: options.concurrency }, () => worker()));
  } finally {
    clearInterval(sweep);
    clearTimeout(cpuTimer);
  }
  const cpuEnd = process.cpuUsage(cpuStart);
  hooks.onWindow?.("end");
  const elapsedMs = Math.max(0, lastEnd - windowStart);
  // A run shorter than its warm-up never started the CPU window: count all of it then.
  const cpuWallMs = cpuStart === undefined
    ? performance.now() - startedAt
    : performance.now() - cpuStartAt;
  const cpuMs = (cpuEnd.user + cpuEnd.system) / 1000;
  const ms = (micros: number) => micros / 1000;
  return {
    scenario: options.scenario,
    proxy: `${options.proxy.host}:${options.proxy.port}`,
    url: options.url.href,
    concurrency: options.concurrency,
    ...(options.rate === undefined ? {} : { rate: options.rate }),
    requests,
    ok,
    errors: Object.fromEntries([...errors].sort((a, b) => b[1] - a[1])),
    elapsedMs,
    throughput: elapsedMs > 0 ? ok / (elapsedMs / 1000) : 0,
    latencyMs: {
      p50: ms(histogram.percentile(0.5)),
      p90: ms(histogram.percentile(0.9)),
      p99: ms(histogram.percentile(0.99)),
      max: ms(histogram.max),
      mean: ms(histogram.mean),
    },
    ...(options.rate === undefined ? {} : {
      sentLatencyMs: {
        p50: ms(sentHistogram.percentile(0.5)),
        p90: ms(sentHistogram.percentile(0.9)),
        p99: ms(sentHistogram.percentile(0.99)),
        max: ms(sentHistogram.max),
        mean: ms(sentHistogram.mean),
      },
      maxLagMs: maxLag,
    }),
    connections,
    retries,
    ...(options.scenario === Scenario.extract ? { extraction } : {}),
    cpu: {
      userMs: cpuEnd.user / 1000,
      systemMs: cpuEnd.system / 1000,
      cores: cpuWallMs > 0 ? cpuMs / cpuWallMs : 0,
    },
  };
}

/** The report as a few lines of text. */
export function formatReport(report: LoadReport): string {
  const f = (n: number, digits = 2) =>
    n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
  const errorCount = report.requests - report.ok;
  const lines = [
    `scenario   ${report.scenario} ${
      report.scenario === Scenario.extract || report.scenario === Scenario.direct
        ? "at"
        : `via ${report.proxy} to`
    } ${report.url}` +
    `, concurrency ${report.concurrency}${report.rate ? `, rate ${report.rate}/s` : ""}`,
    `requests   ${report.requests} in ${
      f(report.elapsedMs / 1000)
    } s: ${report.ok} ok, ${errorCount} failed`,
    `throughput ${f(report.throughput, 0)} /s`,
    `latency    p50 ${f(report.latencyMs.p50, 3)} ms, p90 ${f(report.latencyMs.p90, 3)} ms, ` +
    `p99 ${f(report.latencyMs.p99, 3)} ms, max ${f(report.latencyMs.max, 3)} ms`,
    ...(report.sentLatencyMs
      ? [
        `from sent  p50 ${f(report.sentLatencyMs.p50, 3)} ms, p99 ${
          f(report.sentLatencyMs.p99, 3)
        } ms (the generator ran up to ${f(report.maxLagMs ?? 0, 0)} ms behind its schedule)`,
      ]
      : []),
    `connections opened ${report.connections}, requests resent on a new connection ${report.retries}`,
    ...(report.extraction
      ? [
        `extraction proxies asked ${report.extraction.requested}, returned ` +
        `${report.extraction.returned}; calls short of stock ${report.extraction.insufficient}`,
      ]
      : []),
    `loadgen CPU ${f(report.cpu.cores * 100, 0)}% of a core ` +
    `(user ${f(report.cpu.userMs, 0)} ms, system ${f(report.cpu.systemMs, 0)} ms)`,
  ];
  if (errorCount > 0) {
    lines.push(
      `errors     ${Object.entries(report.errors).map(([k, v]) => `${k}: ${v}`).join(", ")}`,
    );
  }
  return lines.join("\n");
}
