/**
 * A local HTTP(S) origin for tests behind proxies. Routes:
 *   GET /ip, /echo      {"ip": "<the address the request came from>"} (a proxy's exit)
 *   GET /headers        {"headers": {...}} as received
 *   GET /bytes/<n>      n bytes ("x"), with Content-Length (any method; a request body is
 *                       read whole before the answer)
 *   GET /status/<code>  that status, a short body
 *   GET /chunked        a chunked body in several writes
 *   GET /slow           a head at once, then `?chunks=` (5) chunks every `?delayMs=` (100)
 *   GET /close          a body delimited by the connection's close (no length, not chunked)
 *   GET /linger         {"ip": ...} with a length, then keeps the connection open whatever
 *                       the request's Connection says (a client must close it)
 *   GET /hang           never answers (until the client or close() ends it)
 */
import http from "node:http";
import https from "node:https";
import type net from "node:net";
import { testCertificate } from "../certs.ts";

export interface OriginOptions {
  /** Serve HTTPS with the test certificate (trust `ca`). */
  tls?: boolean;
  host?: string;
}

export interface Origin {
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** The PEM to trust, for a TLS origin. */
  readonly ca: string | undefined;
  /** Requests served so far. */
  readonly requests: number;
  /** Connections open now. */
  readonly connectionsOpen: number;
  close(): Promise<void>;
}

const MAX_BYTES = 64 * 1024 * 1024;

/** The client's address as a plain IPv4 when it is IPv4-mapped. */
export function plainAddress(address: string | undefined): string {
  if (!address) return "";
  return address.startsWith("::ffff:") ? address.slice(7) : address;
}

export async function startOrigin(options: OriginOptions = {}): Promise<Origin> {
  const host = options.host ?? "127.0.0.1";
  const certificate = options.tls ? await testCertificate() : undefined;
  const timers = new Set<ReturnType<typeof setTimeout>>();
  const sockets = new Set<net.Socket>();
  let requests = 0;

  const later = (ms: number, fn: () => void) => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      fn();
    }, ms);
    timers.add(timer);
    return timer;
  };

  const json = (response: http.ServerResponse, status: number, value: unknown) => {
    const body = JSON.stringify(value);
    response.writeHead(status, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
    });
    response.end(body);
  };

  const handler = (request: http.IncomingMessage, response: http.ServerResponse) => {
    requests++;
    const url = new URL(request.url ?? "/", "http://origin");
    const parts = url.pathname.split("/").filter(Boolean);
    switch (parts[0]) {
      case "ip":
      case "echo":
        return json(response, 200, { ip: plainAddress(request.socket.remoteAddress) });
      case "headers":
        return json(response, 200, { headers: request.headers });
      case "bytes": {
        const size = Math.min(Number(parts[1] ?? 0) || 0, MAX_BYTES);
        // A request's body (a POST's) is read whole first: answering and closing with body
        // bytes unread would reset the connection under the proxy still sending them.
        request.resume();
        request.once("end", () => {
          response.writeHead(200, {
            "content-type": "application/octet-stream",
            "content-length": size,
          });
          response.end(Buffer.alloc(size, "x"));
        });
        return;
      }
      case "status": {
        const status = Number(parts[1]);
        if (!Number.isInteger(status) || status < 200 || status > 599) {
          return json(response, 400, { error: "bad status" });
        }
        return json(response, status, { status });
      }
      case "chunked": {
        response.writeHead(200, { "content-type": "text/plain" });
        response.write("hello ");
        response.write("chunked ");
        return response.end("world");
      }
      case "slow": {
        const chunks = Math.min(Number(url.searchParams.get("chunks") ?? 5) || 5, 1000);
        const delayMs = Math.min(Number(url.searchParams.get("delayMs") ?? 100) || 0, 60_000);
        response.writeHead(200, { "content-type": "text/plain" });
        response.flushHeaders();
        let sent = 0;
        const next = () => {
          if (response.destroyed) return;
          sent++;
          if (sent >= chunks) response.end(`chunk ${sent}\n`);
          else {
            response.write(`chunk ${sent}\n`);
            later(delayMs, next);
          }
        };
        later(delayMs, next);
        return;
      }
      case "close":
        // Written raw: Node's server would frame it with a length or chunks.
        request.socket.end(
          "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n" +
            "until close",
        );
        return;
      case "linger": {
        const body = JSON.stringify({ ip: plainAddress(request.socket.remoteAddress) });
        request.socket.write(
          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" +
            `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        );
        return;
      }
      case "hang":
        return; // never answered; close() destroys the connection
      default:
        return json(response, 404, { error: "not found" });
    }
  };

  const server = certificate
    ? https.createServer({ cert: certificate.cert, key: certificate.key }, handler)
    : http.createServer(handler);
  server.keepAliveTimeout = 5_000;
  server.on("connection", (socket: net.Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as net.AddressInfo).port;

  let closing: Promise<void> | undefined;
  return {
    url: `${certificate ? "https" : "http"}://${host.includes(":") ? `[${host}]` : host}:${port}`,
    host,
    port,
    ca: certificate?.ca,
    get requests() {
      return requests;
    },
    get connectionsOpen() {
      return sockets.size;
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        for (const timer of timers) clearTimeout(timer);
        timers.clear();
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
