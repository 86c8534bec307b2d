/**
 * A Hono app served by Node's http server. A start that cannot listen (the port taken) raises;
 * a stop stops accepting, lets requests in flight finish for a grace period, then cuts the
 * connections still open. Safe to stop twice.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { getRequestListener } from "@hono/node-server";
import type { Hono } from "hono";
import { sleep } from "../../shared/async/sleep.ts";

export const DEFAULT_STOP_GRACE_MS = 5000;

export interface HttpServerOptions {
  app: Hono;
  host: string;
  port: number;
  /**
   * JSON answers to GETs of exact paths (whatever the query), made before the app: for a route asked hundreds of
   * times a second (the echo), where the app's request frame would cost more than the answer.
   */
  fastGets?: Readonly<Record<string, (request: IncomingMessage) => unknown>>;
}

export class HttpServer {
  readonly #server: Server;
  readonly #host: string;
  readonly #port: number;
  #listening = false;
  #stopping: Promise<void> | undefined;

  constructor(options: HttpServerOptions) {
    const listener = getRequestListener(options.app.fetch);
    const fastGets = new Map(Object.entries(options.fastGets ?? {}));
    this.#server = createServer((request, response) => {
      const url = request.url ?? "";
      const query = url.indexOf("?");
      const fast = request.method === "GET"
        ? fastGets.get(query < 0 ? url : url.slice(0, query))
        : undefined;
      if (fast === undefined) return listener(request, response);
      const body = JSON.stringify(fast(request));
      response.writeHead(200, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
      });
      response.end(body);
    });
    this.#host = options.host;
    this.#port = options.port;
  }

  /** The port listened on (the one the OS chose when 0 was asked). */
  get port(): number {
    const address = this.#server.address() as AddressInfo | null;
    return address?.port ?? this.#port;
  }

  /** A URL a local client can use: a wildcard host is reached on the loopback. */
  get url(): string {
    const host = this.#host === "0.0.0.0" || this.#host === "::" ? "127.0.0.1" : this.#host;
    return `http://${host.includes(":") ? `[${host}]` : host}:${this.port}/`;
  }

  start(): Promise<void> {
    return new Promise((resolve, reject) => {
      const onError = (error: Error) => reject(error);
      this.#server.once("error", onError);
      this.#server.listen(this.#port, this.#host, () => {
        this.#server.off("error", onError);
        this.#listening = true;
        resolve();
      });
    });
  }

  stop(graceMs = DEFAULT_STOP_GRACE_MS): Promise<void> {
    this.#stopping ??= this.#stop(graceMs);
    return this.#stopping;
  }

  async #stop(graceMs: number): Promise<void> {
    if (!this.#listening) return;
    // close() stops accepting and ends idle keep-alive connections; it resolves once every
    // request in flight has been answered.
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    const grace = new AbortController();
    await Promise.race([closed, sleep(graceMs, grace.signal).catch(() => {})]);
    grace.abort();
    this.#server.closeAllConnections();
    await closed;
  }
}
