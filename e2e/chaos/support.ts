/**
 * What the chaos suite shares: steady client traffic of CONNECT tunnels with known bytes through
 * a balancer (HAProxy) to a sink, and the figures each case reports.
 *
 * Each tunnel: CONNECT to the sink, its greeting (the address the tunnel reached it from: the
 * exit of the upstream proxy that carried it), then a few payloads, each answered with twice its
 * bytes, a short pause after each so a tunnel stays open for a while (a gateway killed under
 * traffic then has some in flight). The bytes of a tunnel that went through are exactly what
 * the gateway meters for it: `bytes_sent` the payloads, `bytes_received` the greeting and the
 * answers.
 */
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openConnect } from "../../testkit/clients/raw-http.ts";
import { basicAuth, type Credentials } from "../../testkit/clients/proxy-client.ts";

export const GREETING_BYTES = 16;

export interface TrafficProject {
  name: string;
  credentials: Credentials;
  /** The exits a tunnel of this project may leave from (its routable proxies'). */
  exits: readonly string[];
}

export interface Tunnel {
  project: string;
  /** performance.now() at the start and end. */
  startedAt: number;
  endedAt?: number;
  ok?: boolean;
  exit?: string;
  error?: string;
  /** Bytes moved so far: payloads written and answered, greeting and answers read. */
  sent: number;
  received: number;
}

export interface TrafficOptions {
  /** The balancer's HTTP proxy port on 127.0.0.1. */
  port: number;
  /** The sink, as `host:port`. */
  target: string;
  projects: readonly TrafficProject[];
  /** Tunnels begun a second, whatever the answers (an open loop). */
  ratePerSecond: number;
  /** Payload sizes of one tunnel, in order; each answered with twice as many bytes. */
  payloads?: readonly number[];
  /** The pause after each answered payload. */
  holdMs?: number;
  /** A tunnel's own deadline. */
  timeoutMs?: number;
  /** At most this many tunnels open at once; past it a beat begins none (counted). */
  maxInFlight?: number;
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Tunnels begun at a fixed rate, round robin over the projects, until `stop()`. Every tunnel is
 * kept with its outcome, so a case reads what happened in any span of time.
 */
export class Traffic {
  readonly tunnels: Tunnel[] = [];
  /** Beats that began no tunnel because `maxInFlight` were open. */
  skipped = 0;
  readonly #options: Required<TrafficOptions>;
  readonly #running = new Set<Promise<void>>();
  readonly #timer: ReturnType<typeof setInterval>;
  #beats = 0;

  constructor(options: TrafficOptions) {
    this.#options = {
      payloads: [700, 900, 1_100],
      holdMs: 100,
      timeoutMs: 10_000,
      maxInFlight: 200,
      ...options,
    };
    this.#timer = setInterval(() => this.#beat(), 1_000 / this.#options.ratePerSecond);
  }

  #beat(): void {
    if (this.#running.size >= this.#options.maxInFlight) {
      this.skipped++;
      return;
    }
    const project = this.#options.projects[this.#beats++ % this.#options.projects.length];
    const tunnel: Tunnel = {
      project: project.name,
      startedAt: performance.now(),
      sent: 0,
      received: 0,
    };
    this.tunnels.push(tunnel);
    const run = this.#run(project, tunnel).then(
      (exit) => {
        tunnel.ok = true;
        tunnel.exit = exit;
      },
      (error: Error) => {
        tunnel.ok = false;
        tunnel.error = error.message;
      },
    ).finally(() => {
      tunnel.endedAt = performance.now();
      this.#running.delete(run);
    });
    this.#running.add(run);
  }

  async #run(project: TrafficProject, tunnel: Tunnel): Promise<string> {
    const { port, target, payloads, holdMs, timeoutMs } = this.#options;
    const deadline = tunnel.startedAt + timeoutMs;
    const left = () => Math.max(1, deadline - performance.now());
    const { connection, response } = await openConnect(
      port,
      target,
      basicAuth(project.credentials),
    );
    try {
      if (response.status !== 200) {
        throw new Error(`CONNECT answered ${response.status} ${response.body.toString().trim()}`);
      }
      const greeting = await connection.take(GREETING_BYTES, left());
      tunnel.received += GREETING_BYTES;
      for (const size of payloads) {
        connection.write(Buffer.alloc(size, 0x61));
        await connection.take(size * 2, left());
        tunnel.sent += size;
        tunnel.received += size * 2;
        // The tunnel is held open this long between payloads: the pace is the behaviour.
        await delay(holdMs);
      }
      connection.end();
      await connection.waitUntil(() => connection.ended, left());
      return greeting.toString("latin1").trim();
    } finally {
      connection.destroy();
    }
  }

  /** Tunnels open now. */
  get inFlight(): number {
    return this.#running.size;
  }

  /** Tunnels begun at or after `from` (performance.now()) that went through. */
  okSince(from: number): number {
    return this.tunnels.filter((t) => t.ok === true && t.startedAt >= from).length;
  }

  /** Stops beginning tunnels and waits for the open ones to end. Safe twice. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    while (this.#running.size > 0) await Promise.allSettled([...this.#running]);
  }

  /** What the tunnels so far add up to (call after `stop()`). */
  summary(): TrafficSummary {
    const ok = this.tunnels.filter((t) => t.ok === true);
    const failed = this.tunnels.filter((t) => t.ok === false);
    const exits = new Map(this.#options.projects.map((p) => [p.name, new Set(p.exits)]));
    const wrongRoutes = ok.filter((t) => !exits.get(t.project)!.has(t.exit!));
    const sum = (tunnels: Tunnel[], field: "sent" | "received") =>
      tunnels.reduce((total, t) => total + t[field], 0);
    return {
      sent: this.tunnels.length,
      ok: ok.length,
      failed: failed.length,
      skipped: this.skipped,
      bytesSent: sum(ok, "sent"),
      bytesReceived: sum(ok, "received"),
      failedBytes: sum(failed, "sent") + sum(failed, "received"),
      wrongRoutes: wrongRoutes.map((t) => `${t.project} via ${t.exit}`),
      errors: [...new Set(failed.map((t) => t.error ?? "?"))].slice(0, 10),
    };
  }
}

export interface TrafficSummary {
  /** Tunnels begun. */
  sent: number;
  ok: number;
  failed: number;
  skipped: number;
  /** Bytes the tunnels that went through moved, each way. */
  bytesSent: number;
  bytesReceived: number;
  /** Bytes failed tunnels moved before they failed (both ways). */
  failedBytes: number;
  /** Tunnels that left from an exit their project may not use. */
  wrongRoutes: string[];
  /** A few distinct errors of failed tunnels. */
  errors: string[];
}

/** The figures of one case, as the report prints and stores them. */
export interface CaseFigures {
  case: string;
  requestsSent: number;
  requestsFailed: number;
  /** Bytes the clients moved through tunnels that went through (both ways). */
  bytesMoved: number;
  /** What usage recorded for the case, after a flush (both ways). */
  bytesMetered: number;
  /** bytesMoved - bytesMetered: negative when failed tunnels' partial bytes were metered. */
  bytesLost: number;
  /** The most the documented window lets be lost in this case. */
  bytesLossAllowed: number;
  wrongStatusMoves: number;
  wrongRoutes: number;
  timeToHealMs: number;
  /** Case-specific figures (bounds, intermediate times). */
  notes: Record<string, number | string>;
}

/**
 * The report: printed as a table and written as JSON to `$OCTOPROX_CHAOS_REPORT` (a file in the
 * temp folder unless set) after every case, so a run cut short still leaves its figures.
 */
export class ChaosReport {
  readonly cases: CaseFigures[] = [];
  readonly path = process.env.OCTOPROX_CHAOS_REPORT ??
    join(tmpdir(), "octoprox-chaos-report.json");

  add(figures: CaseFigures): void {
    this.cases.push(figures);
    writeFileSync(
      this.path,
      `${JSON.stringify({ at: new Date().toISOString(), cases: this.cases }, null, 2)}\n`,
    );
  }

  table(): string {
    const columns: [string, (f: CaseFigures) => string | number][] = [
      ["case", (f) => f.case],
      ["sent", (f) => f.requestsSent],
      ["failed", (f) => f.requestsFailed],
      ["bytes moved", (f) => f.bytesMoved],
      ["bytes metered", (f) => f.bytesMetered],
      ["lost", (f) => f.bytesLost],
      ["loss allowed", (f) => f.bytesLossAllowed],
      ["status moves", (f) => f.wrongStatusMoves],
      ["wrong routes", (f) => f.wrongRoutes],
      ["heal ms", (f) => Math.round(f.timeToHealMs)],
    ];
    const rows = [
      columns.map(([name]) => name),
      ...this.cases.map((f) => columns.map(([, value]) => String(value(f)))),
    ];
    const widths = columns.map((_, i) => Math.max(...rows.map((row) => row[i].length)));
    const lines = rows.map((row) => row.map((cell, i) => cell.padEnd(widths[i])).join(" | "));
    lines.splice(1, 0, widths.map((w) => "-".repeat(w)).join("-|-"));
    const notes = this.cases.map((f) => `${f.case}: ${JSON.stringify(f.notes)}`);
    return [...lines, "", ...notes, `(JSON: ${this.path})`].join("\n");
  }
}
