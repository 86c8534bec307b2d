/**
 * A bare forward proxy for the throughput benchmark, on the gateway's runtime and socket style
 * (Deno.listen / Deno.connect, explicit read and write loops over reused buffers, no streams):
 *
 *   DENO_NO_UPDATE_CHECK=1 deno run --allow-net scripts/bench/bare-relay.ts \
 *     [--port 0] [--upstream 127.0.0.1:3128] [--dial-per-request] [--buffer-bytes 16384]
 *
 * It prints `{"port": N}` once listening. No authentication, no routing, no logs.
 *
 * - With `--upstream` it is the **bare relay**, the benchmark's ceiling for the gateway: every
 *   request goes to that one HTTP proxy. A forward request's head is passed on as it came
 *   (absolute form) over a pooled keep-alive connection to the upstream, and the answer is
 *   relayed by its framing (Content-Length, chunked, or until close), after which the upstream
 *   connection goes back to the pool. A CONNECT opens a new upstream connection, passes the
 *   CONNECT on, and from then on relays bytes both ways (the upstream's answer included).
 * - Without it it is the benchmark's **shared upstream proxy**: forward requests go to the
 *   origin named in their URL, rewritten to origin form, over pooled keep-alive connections;
 *   a CONNECT dials the target and answers 200 itself.
 * - `--dial-per-request` opens a new connection to the upstream (or origin) for every forward
 *   request and closes it after the answer, as the gateway does; the benchmark shows it beside
 *   the pooled relay, to tell how much of a gap that alone makes.
 *
 * - `--buffer-bytes` sets each connection's read buffer (16 KiB by default): the scaling suite
 *   holds idle tunnels through it with the gateway's own quiet-tunnel buffer size, as the
 *   runtime's floor for the memory an idle tunnel takes.
 *
 * Request bodies are passed on by Content-Length only (a chunked request body is refused with
 * 501): the benchmark sends none.
 *
 * Deno's API is reached through the small interface below rather than the `Deno` global's own
 * types, so this file also passes the Node type check of `scripts/` (`tsc` knows no `Deno`);
 * `deno check` checks it against the same interface.
 */

interface Conn {
  read(buffer: Uint8Array): Promise<number | null>;
  write(bytes: Uint8Array): Promise<number>;
  closeWrite(): Promise<void>;
  close(): void;
  setNoDelay(noDelay?: boolean): void;
}

interface Listener extends AsyncIterable<Conn> {
  readonly addr: { port: number };
}

interface DenoApi {
  args: string[];
  listen(options: { hostname: string; port: number }): Listener;
  connect(options: { hostname: string; port: number }): Promise<Conn>;
  exit(code: number): never;
}

const deno = (globalThis as unknown as { Deno: DenoApi }).Deno;

/** Each connection's read buffer: 16 KiB unless `--buffer-bytes` says (it grows for a big head). */
const DEFAULT_BUFFER_BYTES = 16 * 1024;
const MAX_HEAD_BYTES = 64 * 1024;
const CR = 13;
const LF = 10;

const encoder = new TextEncoder();
const decoder = new TextDecoder("latin1");

class ClosedError extends Error {
  override name = "ClosedError";
}

function closeQuietly(conn: Conn): void {
  try {
    conn.close();
  } catch {
    // Already closed.
  }
}

async function writeAll(conn: Conn, bytes: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < bytes.length) offset += await conn.write(bytes.subarray(offset));
}

/** Buffered reads from one connection: heads are found in place, bodies taken as they come. */
class Reader {
  buffer = new Uint8Array(BUFFER_BYTES);
  start = 0;
  end = 0;
  readonly conn: Conn;

  constructor(conn: Conn) {
    this.conn = conn;
  }

  get available(): number {
    return this.end - this.start;
  }

  /** Reads more; false at end of stream. */
  async fill(): Promise<boolean> {
    if (this.start === this.end) this.start = this.end = 0;
    if (this.end === this.buffer.length) {
      if (this.start > 0) {
        this.buffer.copyWithin(0, this.start, this.end);
        this.end -= this.start;
        this.start = 0;
      } else {
        if (this.buffer.length >= MAX_HEAD_BYTES) throw new Error("head too large");
        const grown = new Uint8Array(this.buffer.length * 2);
        grown.set(this.buffer);
        this.buffer = grown;
      }
    }
    const n = await this.conn.read(this.buffer.subarray(this.end));
    if (n === null) return false;
    this.end += n;
    return true;
  }

  /**
   * The next head, as [from, to) in `buffer` (valid until the next fill), with `start` moved
   * past it; undefined at a clean end of stream.
   */
  async head(): Promise<[number, number] | undefined> {
    let scan = this.start;
    for (;;) {
      const window = this.buffer.subarray(0, this.end);
      let lf = window.indexOf(LF, scan);
      while (lf !== -1) {
        if (
          lf - 3 >= this.start && window[lf - 1] === CR && window[lf - 2] === LF &&
          window[lf - 3] === CR
        ) {
          const from = this.start;
          this.start = lf + 1;
          return [from, lf + 1];
        }
        lf = window.indexOf(LF, lf + 1);
      }
      const before = this.start;
      scan = Math.max(this.start, this.end - 3);
      if (!(await this.fill())) {
        if (this.available === 0) return undefined;
        throw new ClosedError("closed inside a head");
      }
      // A compaction moved the bytes: scan from the head's new start.
      if (this.start !== before) scan = this.start;
    }
  }
}

interface Head {
  /** The first line's method and target (requests) or status (responses). */
  method: string;
  target: string;
  status: number;
  http10: boolean;
  /** Content-Length, or -1. */
  length: number;
  chunked: boolean;
  close: boolean;
  keepAlive: boolean;
  /** Where the first line ends within the head bytes (its CRLF). */
  firstLineEnd: number;
}

function parseHead(bytes: Uint8Array, response: boolean): Head {
  const text = decoder.decode(bytes);
  const firstLineEnd = text.indexOf("\r\n");
  const first = text.slice(0, firstLineEnd).split(" ");
  const head: Head = {
    method: "",
    target: "",
    status: 0,
    http10: false,
    length: -1,
    chunked: false,
    close: false,
    keepAlive: false,
    firstLineEnd,
  };
  if (response) {
    head.http10 = first[0] === "HTTP/1.0";
    head.status = Number(first[1]);
  } else {
    head.method = first[0];
    head.target = first[1] ?? "";
    head.http10 = first[2] === "HTTP/1.0";
  }
  const lower = text.toLowerCase();
  let at = lower.indexOf("\r\ncontent-length:");
  if (at >= 0) head.length = parseInt(lower.slice(at + 17, lower.indexOf("\r\n", at + 2)), 10);
  at = lower.indexOf("\r\ntransfer-encoding:");
  if (at >= 0) head.chunked = lower.slice(at, lower.indexOf("\r\n", at + 2)).includes("chunked");
  for (const name of ["\r\nconnection:", "\r\nproxy-connection:"]) {
    at = lower.indexOf(name);
    if (at < 0) continue;
    const value = lower.slice(at + name.length, lower.indexOf("\r\n", at + 2));
    if (value.includes("close")) head.close = true;
    if (value.includes("keep-alive")) head.keepAlive = true;
  }
  return head;
}

/** Whether the connection carries another message after this one. */
function persists(head: Head): boolean {
  return head.http10 ? head.keepAlive && !head.close : !head.close;
}

// ---------------------------------------------------------------------------------------------
// Settings.

function argument(name: string): string | undefined {
  const index = deno.args.indexOf(name);
  return index >= 0 ? deno.args[index + 1] : undefined;
}

function hostPort(text: string): { hostname: string; port: number } {
  const colon = text.lastIndexOf(":");
  return {
    hostname: text.slice(0, colon).replace(/^\[|\]$/g, ""),
    port: Number(text.slice(colon + 1)),
  };
}

const upstreamArg = argument("--upstream");
const UPSTREAM = upstreamArg === undefined ? undefined : hostPort(upstreamArg);
const POOLED = !deno.args.includes("--dial-per-request");
const PORT = Number(argument("--port") ?? "0");
const BUFFER_BYTES = Number(argument("--buffer-bytes") ?? DEFAULT_BUFFER_BYTES);

// ---------------------------------------------------------------------------------------------
// Connections onward: pooled per host:port when they may carry another request.

interface Onward {
  conn: Conn;
  reader: Reader;
  key: string;
}

const pool = new Map<string, Onward[]>();

async function dial(address: { hostname: string; port: number }, key: string): Promise<Onward> {
  const conn = await deno.connect(address);
  conn.setNoDelay(true);
  return { conn, reader: new Reader(conn), key };
}

function release(onward: Onward, reusable: boolean): void {
  if (!reusable || !POOLED) {
    closeQuietly(onward.conn);
    return;
  }
  let idle = pool.get(onward.key);
  if (!idle) pool.set(onward.key, idle = []);
  idle.push(onward);
}

// ---------------------------------------------------------------------------------------------
// Relaying bodies.

/** Passes `length` body bytes from `from` (its buffered bytes first) to `to`. */
async function relayLength(from: Reader, to: Conn, length: number): Promise<void> {
  let remaining = length;
  while (remaining > 0) {
    if (from.available === 0 && !(await from.fill())) throw new ClosedError("body cut short");
    const take = Math.min(remaining, from.available);
    await writeAll(to, from.buffer.subarray(from.start, from.start + take));
    from.start += take;
    remaining -= take;
  }
}

/** Passes a chunked body through unchanged, scanning its framing to find its end. */
async function relayChunked(from: Reader, to: Conn): Promise<void> {
  // States: 0 size digits, 1 size line rest, 2 data, 3 data CRLF, 4 trailer line start,
  // 5 trailer line rest.
  let state = 0;
  let size = 0;
  let remaining = 0;
  for (;;) {
    if (from.available === 0 && !(await from.fill())) throw new ClosedError("body cut short");
    const bytes = from.buffer;
    let i = from.start;
    let done = false;
    while (i < from.end && !done) {
      const byte = bytes[i];
      switch (state) {
        case 0: {
          const digit = byte >= 48 && byte <= 57
            ? byte - 48
            : byte >= 97 && byte <= 102
            ? byte - 87
            : byte >= 65 && byte <= 70
            ? byte - 55
            : -1;
          if (digit >= 0) size = size * 16 + digit;
          else state = byte === LF ? (size === 0 ? 4 : 2) : 1;
          if (state === 2) remaining = size;
          i++;
          break;
        }
        case 1:
          if (byte === LF) {
            state = size === 0 ? 4 : 2;
            remaining = size;
          }
          i++;
          break;
        case 2: {
          const take = Math.min(remaining, from.end - i);
          i += take;
          remaining -= take;
          if (remaining === 0) state = 3;
          break;
        }
        case 3:
          if (byte === LF) {
            state = 0;
            size = 0;
          }
          i++;
          break;
        case 4:
          if (byte === LF) done = true;
          else if (byte !== CR) state = 5;
          i++;
          break;
        case 5:
          if (byte === LF) state = 4;
          i++;
          break;
      }
    }
    await writeAll(to, bytes.subarray(from.start, i));
    from.start = i;
    if (done) return;
  }
}

/** Passes everything until `from` ends. */
async function relayUntilEnd(from: Reader, to: Conn): Promise<void> {
  for (;;) {
    if (from.available > 0) {
      await writeAll(to, from.buffer.subarray(from.start, from.end));
      from.start = from.end;
    }
    if (!(await from.fill())) return;
  }
}

/** Both directions byte for byte until both ended (a tunnel). */
async function pipe(a: Reader, b: Reader): Promise<void> {
  const one = async (from: Reader, to: Reader) => {
    try {
      await relayUntilEnd(from, to.conn);
      await to.conn.closeWrite().catch(() => {});
    } catch {
      closeQuietly(from.conn);
      closeQuietly(to.conn);
    }
  };
  await Promise.all([one(a, b), one(b, a)]);
}

// ---------------------------------------------------------------------------------------------
// Requests.

function badRequest(status: number, reason: string): Uint8Array {
  return encoder.encode(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
  );
}

/** One forward request; answers whether the client's connection carries another. */
async function forward(client: Reader, headRange: [number, number]): Promise<boolean> {
  const headBytes = client.buffer.subarray(headRange[0], headRange[1]);
  const head = parseHead(headBytes, false);
  if (head.chunked) {
    await writeAll(client.conn, badRequest(501, "Not Implemented"));
    return false;
  }
  let out: Uint8Array;
  let address: { hostname: string; port: number };
  if (UPSTREAM) {
    address = UPSTREAM;
    out = headBytes;
  } else {
    let url: URL;
    try {
      url = new URL(head.target);
    } catch {
      await writeAll(client.conn, badRequest(400, "Bad Request"));
      return false;
    }
    address = { hostname: url.hostname.replace(/^\[|\]$/g, ""), port: Number(url.port || "80") };
    const line = encoder.encode(`${head.method} ${url.pathname}${url.search} HTTP/1.1`);
    out = new Uint8Array(line.length + headBytes.length - head.firstLineEnd);
    out.set(line);
    out.set(headBytes.subarray(head.firstLineEnd), line.length);
  }
  const key = `${address.hostname}:${address.port}`;
  const clientPersists = persists(head);
  // A pooled connection the other side closed meanwhile fails before any answer: then once
  // more on a new one (the request had no body, or it was not read yet).
  for (let attempt = 0;; attempt++) {
    const idle = attempt === 0 ? pool.get(key)?.pop() : undefined;
    const onward = idle ?? await dial(address, key);
    let answered = false;
    try {
      await writeAll(onward.conn, out);
      if (head.length > 0) await relayLength(client, onward.conn, head.length);
      const range = await onward.reader.head();
      if (range === undefined) throw new ClosedError("closed before an answer");
      answered = true;
      const response = parseHead(onward.reader.buffer.subarray(range[0], range[1]), true);
      const noBody = head.method === "HEAD" || response.status === 204 ||
        response.status === 304 || (response.status >= 100 && response.status < 200);
      const reader = onward.reader;
      if (noBody || response.length >= 0) {
        // Head and as much of the body as is in: one write.
        const length = noBody ? 0 : response.length;
        const now = Math.min(length, reader.available);
        await writeAll(client.conn, reader.buffer.subarray(range[0], reader.start + now));
        reader.start += now;
        if (length > now) await relayLength(reader, client.conn, length - now);
        release(onward, persists(response));
        return clientPersists;
      }
      await writeAll(client.conn, reader.buffer.subarray(range[0], range[1]));
      if (response.chunked) {
        await relayChunked(reader, client.conn);
        release(onward, persists(response));
        return clientPersists;
      }
      await relayUntilEnd(reader, client.conn);
      closeQuietly(onward.conn);
      return false;
    } catch (error) {
      closeQuietly(onward.conn);
      if (!answered && idle && head.length <= 0) continue;
      if (!answered) await writeAll(client.conn, badRequest(502, "Bad Gateway")).catch(() => {});
      throw error;
    }
  }
}

async function tunnel(client: Reader, headRange: [number, number]): Promise<void> {
  const head = parseHead(client.buffer.subarray(headRange[0], headRange[1]), false);
  let onward: Onward;
  try {
    if (UPSTREAM) {
      onward = await dial(UPSTREAM, "");
      // The CONNECT goes on as it came; the upstream's answer reaches the client by the pipe.
      await writeAll(onward.conn, client.buffer.subarray(headRange[0], headRange[1]));
    } else {
      onward = await dial(hostPort(head.target), "");
      await writeAll(client.conn, encoder.encode("HTTP/1.1 200 Connection established\r\n\r\n"));
    }
  } catch {
    await writeAll(client.conn, badRequest(502, "Bad Gateway")).catch(() => {});
    return;
  }
  await pipe(client, onward.reader);
  closeQuietly(onward.conn);
}

async function serve(conn: Conn): Promise<void> {
  conn.setNoDelay(true);
  const client = new Reader(conn);
  try {
    for (;;) {
      const range = await client.head();
      if (range === undefined) return;
      // The method is the head's first bytes: "CONNECT ".
      if (client.buffer[range[0]] === 67 && client.buffer[range[0] + 1] === 79) {
        await tunnel(client, range);
        return;
      }
      if (!(await forward(client, range))) return;
    }
  } catch {
    // The client or the other side went away: nothing to tell anyone.
  } finally {
    closeQuietly(conn);
  }
}

const listener = deno.listen({ hostname: "127.0.0.1", port: PORT });
console.log(
  JSON.stringify({ port: listener.addr.port, pooled: POOLED, upstream: upstreamArg ?? null }),
);
for await (const conn of listener) void serve(conn);
