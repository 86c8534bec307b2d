/**
 * A raw HTTP/1.1 client over a Node socket that keeps every byte it read: requests and CONNECTs
 * written by hand, responses parsed as their framing says.
 */
import net from "node:net";
import { PROXY_AUTH } from "../gateway/fixture-gateway.ts";

/** A Proxy-Authorization value for `user:password`. */
export const basicAuth = (login: string) => `Basic ${Buffer.from(login).toString("base64")}`;

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

/** Parses the `Proxy-Status` value of one of our answers. */
export function proxyStatusError(response: RawResponse): string | undefined {
  const value = response.headers.get("proxy-status")?.[0];
  return value ? /error=([a-z_]+)/.exec(value)?.[1] : undefined;
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
