/**
 * The live fuzzer: many connections at once to a running gateway, each sending one hostile case
 * (mutated, truncated, oversized or slow request heads, invalid CONNECT targets, SOCKS garbage
 * and truncated SOCKS5 handshakes, bodies whose Content-Length lies, pipelined requests) for a
 * fixed time. Each connection is recorded: answered (bytes came back) or closed by the gateway,
 * and how long that took. The checks, each a violation when it fails:
 *
 * - the gateway stays up: its process lives and its status listener's /live answers throughout;
 * - every connection is answered or closed within `closeBoundMs` of its last byte sent (of its
 *   start for a slow head, which never stops sending): the gateway's own idle and head timeouts
 *   plus its sweep period and some slack;
 * - its resident memory (VmRSS) stays under `rssBoundMb`;
 * - no stack trace or unhandled rejection reaches a client (answer bytes) or a log line.
 *
 * Mutations never carry a valid login: a mutated head could name any host, and a load test
 * sends traffic to loopback only. Only the cases that need routing (lying bodies, pipelining)
 * send the valid login, always to `origin` on loopback.
 */
import net from "node:net";
import { watchProcess } from "../bench/process-watch.ts";

/**
 * The gateway's idle sweep period (ProxyListener): an idle or slow connection is closed up to
 * this long after its timeout.
 */
export const SWEEP_MS = 1_000;

export interface Endpoint {
  host: string;
  port: number;
}

export const FUZZ_CASES = [
  "mutated-head",
  "truncated-head",
  "oversized-head",
  "slow-head",
  "bad-connect",
  "socks-garbage",
  "socks-truncated",
  "body-longer-than-sent",
  "body-shorter-than-sent",
  "bad-chunked-body",
  "pipelined",
] as const;
export type FuzzCase = (typeof FUZZ_CASES)[number];

export interface LiveFuzzOptions {
  /** The gateway's HTTP proxy listener. */
  proxy: Endpoint;
  /** Its SOCKS5 listener; the SOCKS cases are left out without it. */
  socks?: Endpoint;
  /** Its status listener, probed on /live every `probeIntervalMs` (with `pid`). */
  status?: Endpoint;
  /** The gateway's process id (resident memory, and whether it lives). */
  pid?: number;
  durationMs: number;
  /** Connections open at once. */
  connections: number;
  /** The seed of the cases' choices and mutations (a run is repeatable with it). */
  seed: number;
  /** A project's login routed to an upstream that reaches `origin`. */
  login?: { username: string; password: string };
  /** An HTTP origin on loopback (host:port) that routed requests ask for. */
  origin?: string;
  /** OCTOPROX_MAX_HEADER_BYTES of the gateway (the oversized heads go past it). */
  maxHeaderBytes: number;
  /** Each connection answered or closed within this long (see the module comment). */
  closeBoundMs: number;
  /** The gateway's resident memory at most (MB); unchecked without `pid`. */
  rssBoundMb?: number;
  /** The gateway's output lines so far (stdout and stderr), scanned after the run. */
  logLines?: () => readonly string[];
  probeIntervalMs?: number;
  probeTimeoutMs?: number;
  /** Progress lines (one every few seconds). */
  log?: (line: string) => void;
}

export interface CaseFigures {
  connections: number;
  answered: number;
  closed: number;
  /** Neither answered nor closed within the bound (each also a violation). */
  hung: number;
  /** The longest time to the answer or the close, ms. */
  maxMs: number;
  /** First answers by status (HTTP code, or `socks N` for a SOCKS reply's second byte). */
  statuses: Record<string, number>;
}

export interface LiveFuzzReport {
  seed: number;
  durationMs: number;
  connections: number;
  byCase: Record<string, CaseFigures>;
  /** Connections the gateway refused at the TCP level (ECONNREFUSED): counted, not a fault. */
  refused: number;
  maxTimeToCloseMs: number;
  probes: { sent: number; failed: number };
  rssMb: { start: number; peak: number; end: number; bound?: number };
  violations: string[];
}

// ---------------------------------------------------------------------------------------------
// Seeded choices.

/** mulberry32: small, fast and repeatable; fuzzing needs no more. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Random = () => number;
const pick = <T>(random: Random, items: readonly T[]): T =>
  items[Math.floor(random() * items.length)];
const between = (random: Random, low: number, high: number): number =>
  low + Math.floor(random() * (high - low + 1));

const encoder = new TextEncoder();
const bytes = (text: string): Uint8Array => encoder.encode(text);

function basic(login: { username: string; password: string }): string {
  return `Basic ${btoa(`${login.username}:${login.password}`)}`;
}

/** Stack frames of V8 (Node and Deno alike) and the runtimes' uncaught error banners. */
const STACK_SHAPES = [
  /\n\s+at \S+ \(\S+:\d+:\d+\)/,
  /\n\s+at (file|ext|node):/,
  /^\s+at \S+ \(\S+:\d+:\d+\)/m,
  /^\s+at (file|ext|node):/m,
  /Uncaught/,
  /unhandled/i,
  /\w*Error: .*\n\s+at /,
];

/** Whether text carries a stack trace or an unhandled rejection's report. */
export function showsStack(text: string): boolean {
  return STACK_SHAPES.some((shape) => shape.test(text));
}

/** A log line that reports a fault of the gateway itself (a bug's last stop), not a client's. */
export function faultLine(line: string): string | undefined {
  if (showsStack(line)) return "a stack trace or unhandled rejection";
  if (!line.startsWith("{")) return undefined;
  try {
    const entry = JSON.parse(line) as { level?: unknown };
    if (entry.level === "error" || entry.level === "fatal") return `an ${entry.level} line`;
  } catch {
    // Not JSON: the shapes above are all that is checked.
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// The cases: what each connection sends, and when it stops sending.

interface Plan {
  /** Written in order, `gapMs` apart (0: in one go). */
  chunks: Uint8Array[];
  gapMs: number;
  /** Sends one byte at a time forever (until closed): the bound runs from the start. */
  trickle?: Uint8Array;
  /** SOCKS cases go to the SOCKS listener. */
  socks?: boolean;
  /** Answers expected (pipelining): fewer before the close is a violation. */
  answers?: number;
}

function baseHeads(options: LiveFuzzOptions, authorization: string): string[] {
  const origin = options.origin ?? "127.0.0.1:9";
  return [
    `GET http://${origin}/ip HTTP/1.1\r\nHost: ${origin}\r\nProxy-Authorization: ${authorization}\r\n\r\n`,
    `CONNECT ${origin} HTTP/1.1\r\nHost: ${origin}\r\nProxy-Authorization: ${authorization}\r\n\r\n`,
    `POST http://${origin}/bytes/4 HTTP/1.1\r\nHost: ${origin}\r\nContent-Length: 4\r\n` +
    `Proxy-Authorization: ${authorization}\r\nConnection: keep-alive\r\n\r\nabcd`,
    `GET http://${origin}/ HTTP/1.1\r\nHost: ${origin}\r\nTransfer-Encoding: chunked\r\n` +
    `Content-Length: 3\r\nProxy-Authorization: ${authorization}\r\n\r\n0\r\n\r\n`,
    `GET /relative HTTP/1.0\r\nProxy-Authorization: ${authorization}\r\n\r\n`,
    `PROXY TCP4 127.0.0.9 127.0.0.1 5555 80\r\nGET http://${origin}/ HTTP/1.1\r\n` +
    `Proxy-Authorization: ${authorization}\r\n\r\n`,
    `PUT http://${origin}/bytes/1 HTTP/1.1\r\nHost: ${origin}\r\nExpect: 100-continue\r\n` +
    `Content-Length: 5\r\nProxy-Authorization: ${authorization}\r\n\r\n`,
  ];
}

const NASTY = [
  "\r\n",
  "\n",
  "\r",
  "\0",
  " ",
  "\t",
  ":",
  "\r\n ",
  "%00",
  "\u00ff",
  "\u0085",
  "HTTP/9.9",
  "Content-Length: -1\r\n",
  "Content-Length: 1, 2\r\n",
  "Transfer-Encoding: chunked, identity\r\n",
  "\r\n\r\n",
  "x".repeat(300),
];

/** One to four edits of a head: bytes changed, dropped, repeated, or nasty bits put in. */
function mutate(random: Random, head: string): Uint8Array {
  let data = Array.from(bytes(head));
  const edits = between(random, 1, 4);
  for (let i = 0; i < edits; i++) {
    const at = Math.floor(random() * (data.length + 1));
    switch (between(random, 0, 4)) {
      case 0:
        if (data.length > 0) data[Math.min(at, data.length - 1)] = between(random, 0, 255);
        break;
      case 1:
        data.splice(at, between(random, 1, 8));
        break;
      case 2: {
        const start = Math.floor(random() * data.length);
        data.splice(at, 0, ...data.slice(start, start + between(random, 1, 40)));
        break;
      }
      case 3:
        data.splice(at, 0, ...bytes(pick(random, NASTY)));
        break;
      default:
        data = data.slice(0, at);
        break;
    }
  }
  // Most mutated heads still end as heads do, so the parser sees them whole.
  const tail = random() < 0.7 ? bytes("\r\n\r\n") : new Uint8Array(0);
  return Uint8Array.from([...data, ...tail]);
}

/**
 * Each malformed, or on loopback: a target that parses as a name or a short-form address could
 * be resolved or dialled off this machine by the upstream, and a load test stays on loopback.
 */
const BAD_CONNECT_TARGETS = [
  "",
  ":",
  ":443",
  "127.0.0.1",
  "127.0.0.1:",
  "127.0.0.1:0",
  "127.0.0.1:65536",
  "127.0.0.1:99999999999999999999",
  "127.0.0.1:-1",
  "127.0.0.1:80:80",
  "127.0.0.1:8a",
  "127.0.0.1:0080",
  "127.0.0.1:+80",
  `127.0.0.1:${"9".repeat(300)}`,
  "[::1]:99999",
  "[::ffff:127.0.0.1:80",
  "127.0.0.1\t:80",
  "[::1",
  "[::1]",
  "::1:80",
  "[::1]:",
  "[zz::1]:80",
  "[::1]:80]",
  "http://127.0.0.1:80",
  "127.0.0.1:80/path",
  "127.0.0.1%00:80",
  "127.0.0.1 :80",
  "@127.0.0.1:80",
  "user@127.0.0.1:80",
  "/",
  "0x7f.1:80",
];

function socksGarbage(random: Random): Uint8Array[] {
  const shapes: Uint8Array[][] = [
    [Uint8Array.from({ length: between(random, 1, 64) }, () => between(random, 0, 255))],
    [Uint8Array.of(5, 0)],
    [Uint8Array.of(5, 255, ...Array.from({ length: 255 }, (_, i) => i))],
    [Uint8Array.of(4, 1, 0, 80, 127, 0, 0, 1, 0)],
    [Uint8Array.of(5, 1, 0), Uint8Array.of(5, 1, 0, 9, 127, 0, 0, 1, 0, 80)],
    [Uint8Array.of(5, 1, 0), Uint8Array.of(5, 9, 0, 1, 127, 0, 0, 1, 0, 80)],
    [Uint8Array.of(5, 1, 0), Uint8Array.of(5, 1, 0, 3, 0, 0, 80)],
    [Uint8Array.of(5, 1, 2), Uint8Array.of(1, 0, 0)],
    [Uint8Array.of(5, 1, 2), Uint8Array.of(9, 3, 97, 98, 99, 3, 97, 98, 99)],
    [Uint8Array.of(5, 1, 2), Uint8Array.of(1, 3, 97, 98, 99, 3, 120, 121, 122)],
    [bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n")],
  ];
  return pick(random, shapes);
}

function socksTruncated(random: Random, options: LiveFuzzOptions): Uint8Array[] {
  const user = bytes(options.login?.username ?? "nobody");
  const pass = bytes(options.login?.password ?? "nothing");
  const full = [
    Uint8Array.of(5, 1, 2),
    Uint8Array.of(1, user.length, ...user, pass.length, ...pass),
    Uint8Array.of(5, 1, 0, 1, 127, 0, 0, 1, 0, 9),
  ];
  // Cut somewhere inside one of the three messages: the gateway waits for the rest, then closes.
  const step = between(random, 0, full.length - 1);
  const cut = full[step].subarray(0, between(random, 0, full[step].length - 1));
  return [...full.slice(0, step), cut].filter((chunk) => chunk.length > 0);
}

function plan(random: Random, kind: FuzzCase, options: LiveFuzzOptions): Plan {
  // Mutations carry a login that fails (see the module comment), but a real user name.
  const wrong = basic({ username: options.login?.username ?? "fuzz", password: "not-the-one" });
  const good = options.login ? basic(options.login) : wrong;
  const origin = options.origin ?? "127.0.0.1:9";
  switch (kind) {
    case "mutated-head":
      return { chunks: [mutate(random, pick(random, baseHeads(options, wrong)))], gapMs: 0 };
    case "truncated-head": {
      const head = bytes(pick(random, baseHeads(options, wrong)));
      const cut = head.subarray(0, between(random, 0, head.length - 3));
      // Sometimes in several small writes, as a slow network splits it.
      const pieces: Uint8Array[] = [];
      for (let at = 0; at < cut.length;) {
        const size = random() < 0.5 ? cut.length : between(random, 1, 16);
        pieces.push(cut.subarray(at, at + size));
        at += size;
      }
      return { chunks: pieces, gapMs: pieces.length > 1 ? 5 : 0 };
    }
    case "oversized-head": {
      const over = options.maxHeaderBytes + between(random, 1, options.maxHeaderBytes);
      const shape = between(random, 0, 2);
      const head = shape === 0
        ? `GET http://${origin}/${"a".repeat(over)} HTTP/1.1\r\nHost: x\r\n\r\n`
        : shape === 1
        ? `GET http://${origin}/ HTTP/1.1\r\nX-Big: ${"b".repeat(over)}\r\n\r\n`
        : `GET http://${origin}/ HTTP/1.1\r\n${
          Array.from({ length: Math.ceil(over / 8) }, (_, i) => `X${i}: y\r\n`).join("")
        }\r\n`;
      return { chunks: [bytes(head)], gapMs: 0 };
    }
    case "slow-head":
      return {
        chunks: [],
        gapMs: between(random, 50, 300),
        trickle: bytes(
          `GET http://${origin}/ HTTP/1.1\r\nHost: ${origin}\r\nX-Pad: ${"z".repeat(100_000)}`,
        ),
      };
    case "bad-connect": {
      const target = pick(random, BAD_CONNECT_TARGETS);
      return {
        chunks: [bytes(`CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: ${good}\r\n\r\n`)],
        gapMs: 0,
      };
    }
    case "socks-garbage":
      return { chunks: socksGarbage(random), gapMs: 5, socks: true };
    case "socks-truncated":
      return { chunks: socksTruncated(random, options), gapMs: 5, socks: true };
    case "body-longer-than-sent": {
      const said = between(random, 10, 100_000);
      const sent = between(random, 0, Math.min(said - 1, 4096));
      return {
        chunks: [
          bytes(
            `POST http://${origin}/bytes/8 HTTP/1.1\r\nHost: ${origin}\r\nContent-Length: ${said}` +
              `\r\nProxy-Authorization: ${good}\r\n\r\n${"q".repeat(sent)}`,
          ),
        ],
        gapMs: 0,
      };
    }
    case "body-shorter-than-sent": {
      const said = between(random, 0, 20);
      const sent = said + between(random, 1, 200);
      return {
        chunks: [
          bytes(
            `POST http://${origin}/bytes/8 HTTP/1.1\r\nHost: ${origin}\r\nContent-Length: ${said}` +
              `\r\nProxy-Authorization: ${good}\r\n\r\n${"r".repeat(sent)}`,
          ),
        ],
        gapMs: 0,
      };
    }
    case "bad-chunked-body": {
      // A routed request whose chunked body goes wrong: the gateway's chunked decoder reads it.
      const bodies = [
        "fffffffffffffffffff\r\nx\r\n0\r\n\r\n",
        "-1\r\nx\r\n0\r\n\r\n",
        "1;a=\u0000\r\nx\r\n0\r\n\r\n",
        "3\r\nabcdef\r\n0\r\n\r\n",
        "3\nabc\n0\n\n",
        "zz\r\n\r\n",
        `${"0".repeat(5000)}1\r\nx\r\n0\r\n\r\n`,
        "1\r\nx\r\n0\r\nTrailer: " + "t".repeat(70_000) + "\r\n\r\n",
        "5\r\nab",
      ];
      return {
        chunks: [
          bytes(
            `POST http://${origin}/bytes/8 HTTP/1.1\r\nHost: ${origin}\r\n` +
              `Transfer-Encoding: chunked\r\nProxy-Authorization: ${good}\r\n\r\n` +
              pick(random, bodies),
          ),
        ],
        gapMs: 0,
      };
    }
    case "pipelined": {
      const count = between(random, 2, 8);
      const request = `GET http://${origin}/ip HTTP/1.1\r\nHost: ${origin}\r\n` +
        `Proxy-Authorization: ${good}\r\n\r\n`;
      const all = bytes(request.repeat(count));
      // Split at a random byte: the gateway must read the same requests either way.
      const at = between(random, 1, all.length - 1);
      return {
        chunks: [all.subarray(0, at), all.subarray(at)],
        gapMs: between(random, 0, 20),
        answers: options.login ? count : undefined,
      };
    }
  }
}

// ---------------------------------------------------------------------------------------------
// One connection.

interface Outcome {
  kind: FuzzCase;
  /** ECONNREFUSED: the listener turned it away before any byte. */
  refused: boolean;
  /** The first answer's status code, when one came. */
  status?: string;
  answered: boolean;
  closed: boolean;
  /** From the reference point (last byte sent; start of a trickle) to the answer or close. */
  elapsedMs: number;
  violation?: string;
}

const MAX_KEPT_BYTES = 64 * 1024;

function statusLines(text: string): number {
  return text.match(/HTTP\/1\.[01] \d{3} /g)?.length ?? 0;
}

function runConnection(
  kind: FuzzCase,
  steps: Plan,
  endpoint: Endpoint,
  closeBoundMs: number,
): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: endpoint.host, port: endpoint.port });
    socket.setNoDelay(true);
    const startedMs = performance.now();
    let referenceMs = startedMs;
    let received = "";
    let answeredMs: number | undefined;
    let done = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let trickle: ReturnType<typeof setInterval> | undefined;

    const finish = (outcome: Omit<Outcome, "kind">) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearInterval(trickle);
      socket.destroy();
      let violation = outcome.violation;
      if (violation === undefined && showsStack(received)) {
        violation = `${kind}: a stack trace in the answer: ${
          JSON.stringify(received.slice(0, 300))
        }`;
      }
      if (violation === undefined && steps.answers !== undefined && outcome.closed) {
        const answers = statusLines(received);
        if (answers < steps.answers && !/ 5\d\d /.test(received)) {
          violation = `${kind}: ${answers} of ${steps.answers} pipelined requests answered`;
        }
      }
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(received)?.[1] ??
        (received.length > 0 && steps.socks ? `socks ${received.charCodeAt(1)}` : undefined);
      if (violation === undefined && status === "500") {
        violation = `${kind}: answered 500 (a fault of the gateway's own): ${
          JSON.stringify(received.slice(0, 200))
        }`;
      }
      resolve({ kind, ...outcome, status, violation });
    };

    const arm = () => {
      clearTimeout(timer);
      const remaining = referenceMs + closeBoundMs - performance.now();
      timer = setTimeout(() => {
        if (answeredMs !== undefined) {
          // Answered in time; a keep-alive connection left open after is the client's to end.
          finish({
            refused: false,
            answered: true,
            closed: false,
            elapsedMs: answeredMs - referenceMs,
          });
          return;
        }
        finish({
          refused: false,
          answered: false,
          closed: false,
          elapsedMs: performance.now() - referenceMs,
          violation: `${kind}: neither answered nor closed within ${closeBoundMs} ms`,
        });
      }, Math.max(0, remaining));
    };

    socket.on("data", (chunk: Buffer) => {
      if (received.length < MAX_KEPT_BYTES) received += chunk.toString("latin1");
      answeredMs ??= performance.now();
      // Every pipelined answer in: done, whatever the connection does next.
      if (steps.answers !== undefined && statusLines(received) >= steps.answers) {
        finish({
          refused: false,
          answered: true,
          closed: false,
          elapsedMs: answeredMs - referenceMs,
        });
      }
    });
    const closed = (error?: NodeJS.ErrnoException) => {
      if (error?.code === "ECONNREFUSED") {
        finish({ refused: true, answered: false, closed: true, elapsedMs: 0 });
        return;
      }
      const at = answeredMs ?? performance.now();
      finish({
        refused: false,
        answered: answeredMs !== undefined,
        closed: true,
        elapsedMs: Math.max(0, at - referenceMs),
      });
    };
    socket.once("error", closed);
    socket.once("close", () => closed());
    socket.once("connect", async () => {
      referenceMs = performance.now();
      arm();
      if (steps.trickle) {
        let at = 0;
        trickle = setInterval(() => {
          if (done || at >= steps.trickle!.length) return;
          socket.write(steps.trickle!.subarray(at, at + 1));
          at++;
        }, steps.gapMs);
        return;
      }
      for (const [index, chunk] of steps.chunks.entries()) {
        if (done) return;
        if (index > 0 && steps.gapMs > 0) {
          await new Promise((resolve) => setTimeout(resolve, steps.gapMs));
        }
        if (done) return;
        socket.write(chunk);
        // The bound runs from the last byte sent.
        if (answeredMs === undefined) {
          referenceMs = performance.now();
          arm();
        }
      }
    });
  });
}

// ---------------------------------------------------------------------------------------------
// The run.

async function probe(status: Endpoint, timeoutMs: number): Promise<boolean> {
  try {
    const response = await fetch(`http://${status.host}:${status.port}/live`, {
      signal: AbortSignal.timeout(timeoutMs),
    });
    await response.body?.cancel();
    return response.status === 200;
  } catch {
    return false;
  }
}

function emptyFigures(): CaseFigures {
  return { connections: 0, answered: 0, closed: 0, hung: 0, maxMs: 0, statuses: {} };
}

export async function runLiveFuzz(options: LiveFuzzOptions): Promise<LiveFuzzReport> {
  const random = seededRandom(options.seed);
  const cases = FUZZ_CASES.filter((kind) =>
    options.socks !== undefined || !kind.startsWith("socks")
  );
  const byCase: Record<string, CaseFigures> = {};
  for (const kind of cases) byCase[kind] = emptyFigures();
  const violations: string[] = [];
  const violationCounts = new Map<string, number>();
  const note = (violation: string) => {
    // One line per distinct fault, with its count, so a flood stays readable.
    const key = violation.slice(0, 200);
    const seen = violationCounts.get(key) ?? 0;
    violationCounts.set(key, seen + 1);
    if (seen === 0) violations.push(key);
  };
  let refused = 0;
  let total = 0;
  const startedMs = performance.now();
  const deadlineMs = startedMs + options.durationMs;

  // Resident memory and liveness, sampled while the connections run.
  const watch = options.pid === undefined ? undefined : await watchProcess(options.pid, {
    liveUrl: options.status && `http://${options.status.host}:${options.status.port}/live`,
    probeIntervalMs: options.probeIntervalMs ?? 500,
    probeTimeoutMs: options.probeTimeoutMs ?? 5_000,
  });

  let lastProgressMs = startedMs;
  const worker = async () => {
    while (performance.now() < deadlineMs) {
      const kind = pick(random, cases);
      const steps = plan(random, kind, options);
      const endpoint = steps.socks ? options.socks! : options.proxy;
      const outcome = await runConnection(kind, steps, endpoint, options.closeBoundMs);
      total++;
      const figures = byCase[kind];
      if (outcome.refused) {
        refused++;
        continue;
      }
      figures.connections++;
      if (outcome.status !== undefined) {
        figures.statuses[outcome.status] = (figures.statuses[outcome.status] ?? 0) + 1;
      }
      if (outcome.answered) figures.answered++;
      else if (outcome.closed) figures.closed++;
      else figures.hung++;
      if (outcome.elapsedMs > figures.maxMs) figures.maxMs = outcome.elapsedMs;
      if (outcome.violation) note(outcome.violation);
      if (options.log && performance.now() - lastProgressMs > 5_000) {
        lastProgressMs = performance.now();
        const leftS = Math.round((deadlineMs - lastProgressMs) / 1000);
        options.log(
          `live fuzz: ${total} connections, ${
            leftS > 0 ? `${leftS} s to go` : "the last ones finishing"
          }`,
        );
      }
    }
  };
  await Promise.all(Array.from({ length: options.connections }, worker));
  await watch?.stop();
  if (watch?.died) note("the gateway process exited");
  if (watch && watch.probes.failed > 0) {
    note(`/live did not answer 200 to ${watch.probes.failed} of ${watch.probes.sent} probes`);
  }
  if (options.status && !await probe(options.status, options.probeTimeoutMs ?? 5_000)) {
    note("/live did not answer after the run");
  }
  const rss = watch?.rssMb ?? { start: Number.NaN, peak: Number.NaN, last: Number.NaN };
  if (options.rssBoundMb !== undefined && rss.peak > options.rssBoundMb) {
    note(`resident memory peaked at ${rss.peak.toFixed(0)} MB, over ${options.rssBoundMb} MB`);
  }
  for (const line of options.logLines?.() ?? []) {
    const fault = faultLine(line);
    if (fault) note(`the gateway logged ${fault}: ${line.slice(0, 300)}`);
  }
  for (const [index, violation] of violations.entries()) {
    const count = violationCounts.get(violation) ?? 1;
    if (count > 1) violations[index] = `${violation} (x${count})`;
  }
  return {
    seed: options.seed,
    durationMs: Math.round(performance.now() - startedMs),
    connections: total,
    byCase,
    refused,
    maxTimeToCloseMs: Math.round(Math.max(0, ...Object.values(byCase).map((f) => f.maxMs))),
    probes: watch?.probes ?? { sent: 0, failed: 0 },
    rssMb: {
      start: Math.round(rss.start),
      peak: Math.round(rss.peak),
      end: Math.round(rss.last),
      bound: options.rssBoundMb,
    },
    violations,
  };
}

/** The report as lines for a person: figures by case, then every violation. */
export function formatLiveFuzzReport(report: LiveFuzzReport): string {
  const rows = Object.entries(report.byCase).map(([kind, f]) =>
    `  ${kind.padEnd(24)} ${String(f.connections).padStart(7)} ${String(f.answered).padStart(9)} ${
      String(f.closed).padStart(7)
    } ${String(f.hung).padStart(5)} ${String(Math.round(f.maxMs)).padStart(9)}  ${
      Object.entries(f.statuses).sort().map(([status, n]) => `${status}: ${n}`).join(", ")
    }`
  );
  return [
    `live fuzz, seed ${report.seed}: ${report.connections} connections in ${
      (report.durationMs / 1000).toFixed(1)
    } s (${report.refused} refused at connect)`,
    `  ${"case".padEnd(24)} ${"conns".padStart(7)} ${"answered".padStart(9)} ${
      "closed".padStart(7)
    } ${"hung".padStart(5)} ${"max ms".padStart(9)}  answers by status`,
    ...rows,
    `  max time to answer or close: ${report.maxTimeToCloseMs} ms`,
    `  /live probes: ${report.probes.sent} sent, ${report.probes.failed} failed`,
    `  resident memory: ${report.rssMb.start} MB at the start, peak ${report.rssMb.peak} MB, ` +
    `${report.rssMb.end} MB at the end${
      report.rssMb.bound === undefined ? "" : ` (bound ${report.rssMb.bound} MB)`
    }`,
    report.violations.length === 0
      ? "  violations: none"
      : `  violations (${report.violations.length}):\n${
        report.violations.map((v) => `    - ${v}`).join("\n")
      }`,
  ].join("\n");
}
