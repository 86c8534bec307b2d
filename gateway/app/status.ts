/**
 * The gateway's status listener (OCTOPROX_GATEWAY_STATUS_PORT): /health and /live while the
 * process runs, /ready once the first feed is applied and the proxy port is bound (503 before, and
 * while stopping), /metrics in the Prometheus text format. It comes up first, so a balancer
 * and an operator see an unready gateway rather than nothing.
 */
import type { Logger } from "../base/log.ts";

export interface StatusServerOptions {
  hostname: string;
  port: number;
  instance: string;
  logger: Logger;
  /** Undefined when ready, else the reasons it is not. */
  unready(): string[] | undefined;
  /** The text, or a Promise of it (the other isolates of the process are asked for theirs). */
  metrics(): string | Promise<string>;
}

export interface StatusServer {
  readonly addr: Deno.NetAddr;
  /** Stops the listener; safe to call again. */
  close(): Promise<void>;
}

const JSON_TYPE = { "content-type": "application/json" };

export function startStatusServer(options: StatusServerOptions): StatusServer {
  const startedAt = new Date().toISOString();
  const metricsResponse = (text: string) =>
    new Response(text, { headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } });
  const handler = (request: Request): Response | Promise<Response> => {
    if (request.method !== "GET" && request.method !== "HEAD") {
      return new Response("Method not allowed\n", { status: 405, headers: { allow: "GET, HEAD" } });
    }
    const path = new URL(request.url).pathname;
    switch (path) {
      case "/health":
        return Response.json({
          status: "healthy",
          instance: options.instance,
          role: "gateway",
          startedAt,
        }, { headers: JSON_TYPE });
      // Liveness: the status listener answers, so the process and its main isolate run.
      case "/live":
        return Response.json({ status: "alive" });
      case "/ready": {
        const reasons = options.unready();
        return reasons === undefined
          ? Response.json({ status: "ready" })
          : Response.json({ status: "unready", reasons }, { status: 503 });
      }
      case "/metrics": {
        const text = options.metrics();
        return typeof text === "string" ? metricsResponse(text) : text.then(metricsResponse);
      }
      default:
        return Response.json({ error: "not found" }, { status: 404 });
    }
  };
  const server = Deno.serve({
    hostname: options.hostname,
    port: options.port,
    // Deno prints its own "Listening on" line otherwise; our lines are JSON only.
    onListen: () => {},
    onError: (error) => {
      options.logger.error("Status request failed", { error });
      return new Response("Internal error\n", { status: 500 });
    },
  }, handler);
  let closing: Promise<void> | undefined;
  return {
    addr: server.addr,
    close() {
      closing ??= server.shutdown().catch(() => {});
      return closing;
    },
  };
}
