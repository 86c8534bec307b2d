/**
 * A bare TLS-terminating relay for the `tls-intercept` benchmark, on the gateway's runtime: the
 * floor for what intercepting a tunnel costs. It parses no HTTP at all:
 *
 *   DENO_NO_UPDATE_CHECK=1 deno run --allow-net --allow-read scripts/bench/bare-tls-relay.ts \
 *     --upstream 127.0.0.1:3128 --target localhost:8443 --cert chain.pem --key key.pem \
 *     --target-ca origin-ca.pem [--port 0] [--engine node]
 *
 * It prints `{"port": N}` once listening. Clients speak TLS to it at once (no CONNECT first),
 * trusting the CA that signed `--cert` (a certificate for the target's name, signed by the
 * install's CA as the gateway's are). Per client connection (Deno.listenTls), once its handshake
 * is over, it opens one connection onward: a CONNECT to the target through the HTTP proxy
 * `--upstream`, then its own TLS to the target (Deno.startTls, the target's certificate checked
 * against `--target-ca`, ALPN http/1.1 as the gateway's `plain` mode offers), and from then on
 * passes the decrypted bytes both ways with explicit read and write loops over one reused buffer
 * per direction (no streams), until both directions ended.
 *
 * With `--engine node` the client's TLS is `node:tls` instead (a TLSSocket over a stream on a
 * plain TCP connection, as the gateway terminates an intercepted tunnel, since Deno cannot start
 * TLS as a server on a connection it holds nor pick a certificate per host on a listener it
 * exposes): the floor for any interceptor on this runtime that mints a certificate per host.
 *
 * Deno's API is reached through the small interface below rather than the `Deno` global's own
 * types, as in bare-relay.ts, so this file also passes the Node type check of `scripts/`.
 */

interface Conn {
  read(buffer: Uint8Array): Promise<number | null>;
  write(bytes: Uint8Array): Promise<number>;
  closeWrite(): Promise<void>;
  close(): void;
}

interface TcpConn extends Conn {
  setNoDelay(noDelay?: boolean): void;
}

interface TlsConn extends Conn {
  handshake(): Promise<unknown>;
}

interface TlsListener extends AsyncIterable<TlsConn> {
  readonly addr: { port: number };
}

interface DenoApi {
  args: string[];
  listen(options: { hostname: string; port: number }): AsyncIterable<TcpConn> & {
    readonly addr: { port: number };
  };
  readTextFileSync(path: string): string;
  listenTls(options: {
    hostname: string;
    port: number;
    cert: string;
    key: string;
    alpnProtocols?: string[];
  }): TlsListener;
  connect(options: { hostname: string; port: number }): Promise<TcpConn>;
  startTls(
    conn: TcpConn,
    options: { hostname: string; caCerts?: string[]; alpnProtocols?: string[] },
  ): Promise<TlsConn>;
}

import { once } from "node:events";
import { Duplex } from "node:stream";
import { createSecureContext, TLSSocket } from "node:tls";

const deno = (globalThis as unknown as { Deno: DenoApi }).Deno;

/** Each direction's read buffer: TLS records are at most 16 KiB of plaintext. */
const BUFFER_BYTES = 16 * 1024;
const MAX_HEAD_BYTES = 8 * 1024;

function argument(name: string): string {
  const index = deno.args.indexOf(name);
  const value = index >= 0 ? deno.args[index + 1] : undefined;
  if (value === undefined) throw new Error(`bare-tls-relay: ${name} is required`);
  return value;
}

function hostPort(text: string): { hostname: string; port: number } {
  const colon = text.lastIndexOf(":");
  return {
    hostname: text.slice(0, colon).replace(/^\[|\]$/g, ""),
    port: Number(text.slice(colon + 1)),
  };
}

const UPSTREAM = hostPort(argument("--upstream"));
const TARGET_TEXT = argument("--target");
const TARGET = hostPort(TARGET_TEXT);
const CERT = deno.readTextFileSync(argument("--cert"));
const KEY = deno.readTextFileSync(argument("--key"));
const TARGET_CA = deno.readTextFileSync(argument("--target-ca"));
const PORT = deno.args.includes("--port") ? Number(argument("--port")) : 0;
const ENGINE = deno.args.includes("--engine") ? argument("--engine") : "deno";
if (ENGINE !== "deno" && ENGINE !== "node") throw new Error("bare-tls-relay: --engine deno|node");
const NODE_CONTEXT = createSecureContext({ cert: CERT, key: KEY });

const CONNECT_HEAD = new TextEncoder().encode(
  `CONNECT ${TARGET_TEXT} HTTP/1.1\r\nHost: ${TARGET_TEXT}\r\n\r\n`,
);
const decoder = new TextDecoder("latin1");

function closeQuietly(conn: Conn | undefined): void {
  try {
    conn?.close();
  } catch {
    // Already closed.
  }
}

async function writeAll(conn: Conn, bytes: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < bytes.length) offset += await conn.write(bytes.subarray(offset));
}

/**
 * The upstream's answer to the CONNECT, read to its blank line; refused unless 200. The
 * upstream sends nothing after it before the target's first TLS bytes, which answer ours.
 */
async function readConnectAnswer(conn: Conn): Promise<void> {
  const buffer = new Uint8Array(MAX_HEAD_BYTES);
  let end = 0;
  for (;;) {
    const n = await conn.read(buffer.subarray(end));
    if (n === null) throw new Error("the upstream closed before answering the CONNECT");
    end += n;
    const text = decoder.decode(buffer.subarray(0, end));
    const blank = text.indexOf("\r\n\r\n");
    if (blank >= 0) {
      if (blank + 4 !== end) throw new Error("bytes after the CONNECT answer");
      const status = Number(text.slice(0, text.indexOf("\r\n")).split(" ")[1]);
      if (status !== 200) throw new Error(`the upstream answered the CONNECT with ${status}`);
      return;
    }
    if (end === buffer.length) throw new Error("the CONNECT answer's head is too large");
  }
}

/** One direction: what `from` sends goes to `to` until `from` ends, then `to`'s writing side. */
async function pump(from: Conn, to: Conn): Promise<void> {
  const buffer = new Uint8Array(BUFFER_BYTES);
  for (;;) {
    const n = await from.read(buffer);
    if (n === null) break;
    await writeAll(to, buffer.subarray(0, n));
  }
  await to.closeWrite().catch(() => {});
}

/** The CONNECT through the upstream and this relay's own TLS to the target. */
async function openTarget(): Promise<{ tcp: TcpConn; target?: TlsConn }> {
  const tcp = await deno.connect(UPSTREAM);
  try {
    tcp.setNoDelay(true);
    await writeAll(tcp, CONNECT_HEAD);
    await readConnectAnswer(tcp);
    const target = await deno.startTls(tcp, {
      hostname: TARGET.hostname,
      caCerts: [TARGET_CA],
      alpnProtocols: ["http/1.1"],
    });
    return { tcp, target };
  } catch (error) {
    closeQuietly(tcp);
    throw error;
  }
}

async function serve(client: TlsConn): Promise<void> {
  let tcp: TcpConn | undefined;
  let target: TlsConn | undefined;
  try {
    await client.handshake();
    ({ tcp, target } = await openTarget());
    const onward = target!;
    const both = [pump(client, onward), pump(onward, client)].map((direction) =>
      direction.catch(() => {
        // One side failed: end both.
        closeQuietly(client);
        closeQuietly(onward);
      })
    );
    await Promise.all(both);
  } catch {
    // The client or the other side went away, or the CONNECT was refused: nobody to tell.
  } finally {
    closeQuietly(target ?? tcp);
    closeQuietly(client);
  }
}

/**
 * `--engine node`: the client's TLS by `node:tls` over the TCP connection, the decrypted bytes
 * passed on as they come (the socket paused while a write to the target is under way).
 */
async function serveNode(client: TcpConn): Promise<void> {
  let target: TlsConn | undefined;
  let tcp: TcpConn | undefined;
  let reading = false;
  const buffer = new Uint8Array(BUFFER_BYTES + 1024);
  const duplex: Duplex = new Duplex({
    read() {
      if (reading) return;
      reading = true;
      client.read(buffer).then((n) => {
        reading = false;
        duplex.push(n === null ? null : buffer.slice(0, n));
      }, (error) => duplex.destroy(error));
    },
    write(chunk: Uint8Array, _encoding, done) {
      writeAll(client, chunk).then(() => done(), done);
    },
    final(done) {
      client.closeWrite().then(() => done(), () => done());
    },
  });
  const socket = new TLSSocket(duplex, {
    isServer: true,
    secureContext: NODE_CONTEXT,
    ALPNProtocols: ["http/1.1"],
  });
  socket.on("error", () => {});
  try {
    await once(socket, "secure");
    ({ tcp, target } = await openTarget());
    const onward = target!;
    const upward = new Promise<void>((resolve) => {
      socket.on("data", (chunk: Uint8Array) => {
        socket.pause();
        writeAll(onward, chunk).then(() => socket.resume(), () => socket.destroy());
      });
      socket.once("end", () => onward.closeWrite().catch(() => {}).then(resolve));
      socket.once("close", () => resolve());
    });
    const downward = (async () => {
      const bytes = new Uint8Array(BUFFER_BYTES);
      for (;;) {
        const n = await onward.read(bytes);
        if (n === null) break;
        if (!socket.write(bytes.slice(0, n))) await once(socket, "drain");
      }
      socket.end();
    })().catch(() => socket.destroy());
    await Promise.all([upward, downward]);
  } catch {
    // As serve's.
  } finally {
    closeQuietly(target ?? tcp);
    socket.destroy();
    closeQuietly(client);
  }
}

if (ENGINE === "node") {
  const listener = deno.listen({ hostname: "127.0.0.1", port: PORT });
  console.log(JSON.stringify({ port: listener.addr.port, target: TARGET_TEXT }));
  for await (const conn of listener) void serveNode(conn);
} else {
  const listener = deno.listenTls({
    hostname: "127.0.0.1",
    port: PORT,
    cert: CERT,
    key: KEY,
    alpnProtocols: ["http/1.1"],
  });
  console.log(JSON.stringify({ port: listener.addr.port, target: TARGET_TEXT }));
  for await (const conn of listener) void serve(conn);
}
