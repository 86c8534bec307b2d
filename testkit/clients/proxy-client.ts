/**
 * Node clients of a forward proxy (the gateway), for the e2e tests beside curl: a request in
 * absolute form on a fresh connection, a CONNECT tunnel on a raw socket, and an HTTP(S) GET
 * inside such a tunnel (TLS verified against the origin's CA).
 */
import http from "node:http";
import net from "node:net";
import tls from "node:tls";

export interface Credentials {
  username: string;
  password: string;
}

export interface ProxyAnswer {
  status: number;
  /** Names lower case. */
  headers: http.IncomingHttpHeaders;
  body: string;
}

export function basicAuth(credentials: Credentials): string {
  return `Basic ${
    Buffer.from(`${credentials.username}:${credentials.password}`).toString("base64")
  }`;
}

/** The `ip` of an origin's /ip or /echo answer. */
export function exitOf(answer: ProxyAnswer): string {
  if (answer.status !== 200) {
    throw new Error(`Expected 200 from the origin, got ${answer.status}: ${answer.body}`);
  }
  return (JSON.parse(answer.body) as { ip: string }).ip;
}

export interface RequestOptions {
  method?: string;
  body?: string;
  timeoutMs?: number;
  /**
   * A keep-alive client connection (see `ClientConnection`) to send the request on; a
   * connection of its own otherwise.
   */
  connection?: ClientConnection;
  /** Request header fields besides Host and Proxy-Authorization (options, say). */
  headers?: Record<string, string>;
  /** The client's own address (another loopback one, say); the system's choice otherwise. */
  localAddress?: string;
}

/**
 * One keep-alive connection to the proxy for a run of sequential requests. A gateway serving
 * from several isolates spreads connections over them, each with its own round_robin cursor:
 * requests that must see one rotation go on one connection.
 */
export class ClientConnection {
  readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  readonly #sockets = new Set<net.Socket>();

  /** Records the socket an answer came on. */
  seen(socket: net.Socket): void {
    this.#sockets.add(socket);
  }

  /** How many connections the requests so far used (1 when the proxy kept it alive). */
  get connections(): number {
    return this.#sockets.size;
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Reads an answer whole. */
function collect(response: http.IncomingMessage): Promise<ProxyAnswer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    response.on("data", (chunk: Buffer) => chunks.push(chunk));
    response.once("error", reject);
    response.once("end", () =>
      resolve({
        status: response.statusCode ?? 0,
        headers: response.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      }));
  });
}

/**
 * One request for `url` (absolute form) through the proxy at 127.0.0.1:`proxyPort`, on a
 * connection of its own unless `options.connection` is given; `credentials` null sends none.
 */
export function viaProxy(
  proxyPort: number,
  credentials: Credentials | null,
  url: string,
  options: RequestOptions = {},
): Promise<ProxyAnswer> {
  const target = new URL(url);
  const headers: Record<string, string> = { host: target.host, ...options.headers };
  if (credentials) headers["proxy-authorization"] = basicAuth(credentials);
  if (options.body !== undefined) {
    headers["content-type"] = "text/plain";
    headers["content-length"] = String(Buffer.byteLength(options.body));
  }
  return new Promise((resolve, reject) => {
    const request = http.request({
      host: "127.0.0.1",
      port: proxyPort,
      method: options.method ?? "GET",
      path: target.href,
      headers,
      ...(options.localAddress === undefined ? {} : { localAddress: options.localAddress }),
      agent: options.connection?.agent ?? false,
      signal: AbortSignal.timeout(options.timeoutMs ?? 10_000),
    }, (response) => {
      options.connection?.seen(response.socket);
      collect(response).then(resolve, reject);
    });
    request.once("error", reject);
    request.end(options.body);
  });
}

export interface ConnectAnswer {
  status: number;
  /** The answer's head, status line included. */
  head: string;
  /** Names lower case. */
  headers: Map<string, string>;
  /** The gateway's own answer's body (not 200); empty for a tunnel. */
  body: string;
  /** The tunnel, when the answer was 200; the caller ends it. */
  socket?: net.Socket;
}

/** `CONNECT target` through the proxy; a tunnel's socket is handed over, any other answer read. */
export function connectVia(
  proxyPort: number,
  credentials: Credentials | null,
  target: string,
  timeoutMs = 10_000,
): Promise<ConnectAnswer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: "127.0.0.1", port: proxyPort });
    let buffer = Buffer.alloc(0);
    let answer: ConnectAnswer | undefined;
    const timer = setTimeout(
      () => fail(new Error(`CONNECT ${target}: no answer in time`)),
      timeoutMs,
    );
    const fail = (error: Error) => {
      clearTimeout(timer);
      socket.destroy();
      reject(error);
    };
    const finish = () => {
      clearTimeout(timer);
      socket.off("data", onData);
      socket.off("error", fail);
      socket.off("end", onEnd);
      resolve(answer!);
    };
    const onEnd = () => {
      if (answer) {
        answer.body = buffer.toString("utf8");
        finish();
      } else fail(new Error(`CONNECT ${target}: closed before an answer`));
    };
    const onData = (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      if (!answer) {
        const end = buffer.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buffer.subarray(0, end).toString("latin1");
        buffer = buffer.subarray(end + 4);
        const [statusLine, ...lines] = head.split("\r\n");
        const headers = new Map<string, string>();
        for (const line of lines) {
          const colon = line.indexOf(":");
          headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
        }
        answer = { status: Number(statusLine.split(" ")[1]), head, headers, body: "" };
        if (answer.status === 200) {
          if (buffer.length > 0) socket.unshift(buffer);
          answer.socket = socket;
          return finish();
        }
      }
      const length = Number(answer.headers.get("content-length") ?? NaN);
      if (Number.isFinite(length) && buffer.length >= length) {
        answer.body = buffer.subarray(0, length).toString("utf8");
        socket.destroy();
        finish();
      }
    };
    socket.on("data", onData);
    socket.once("error", fail);
    socket.once("end", onEnd);
    socket.once("connect", () => {
      socket.write(
        `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n` +
          (credentials ? `Proxy-Authorization: ${basicAuth(credentials)}\r\n` : "") + "\r\n",
      );
    });
  });
}

/**
 * GET `url` inside a CONNECT tunnel: TLS (verified against `ca`) for https, plain otherwise.
 * Rejects when the tunnel is refused.
 */
export async function getThroughTunnel(
  proxyPort: number,
  credentials: Credentials,
  url: string,
  options: { ca?: string; timeoutMs?: number } = {},
): Promise<ProxyAnswer> {
  const target = new URL(url);
  const port = target.port || (target.protocol === "https:" ? "443" : "80");
  const tunnel = await connectVia(proxyPort, credentials, `${target.hostname}:${port}`);
  if (!tunnel.socket) throw new Error(`CONNECT refused: ${tunnel.head} ${tunnel.body}`);
  const raw = tunnel.socket;
  let socket: net.Socket = raw;
  if (target.protocol === "https:") {
    const secure = tls.connect({ socket: raw, ca: options.ca });
    await new Promise<void>((resolve, reject) => {
      secure.once("secureConnect", () => resolve());
      secure.once("error", reject);
    });
    socket = secure;
  }
  try {
    return await new Promise<ProxyAnswer>((resolve, reject) => {
      const request = http.request({
        createConnection: () => socket,
        host: target.hostname,
        port: Number(port),
        path: `${target.pathname}${target.search}`,
        headers: { host: target.host, connection: "close" },
        signal: AbortSignal.timeout(options.timeoutMs ?? 10_000),
      }, (response) => collect(response).then(resolve, reject));
      request.once("error", reject);
      request.end();
    });
  } finally {
    socket.destroy();
    raw.destroy();
  }
}
