/**
 * The proxy listener. It is bound only when `start` is called (once the first feed is applied:
 * until then the port refuses connections, so a balancer sends clients to a gateway that can
 * route them). Connections over OCTOPROX_MAX_CLIENT_CONNECTIONS are closed at once rather than
 * queued; one sweep a second closes idle ones. `close` stops accepting, cancels every session
 * and waits, bounded, for their handlers (which release their allocations).
 */
import { BufferPool } from "./buffers.ts";
import type { TransferHooks } from "./hooks.ts";
import type { Logger } from "./log.ts";
import type { GatewayMetrics } from "./metrics.ts";
import { ClientSession, type NetContext, type NetLimits } from "./session.ts";
import type { DestinationGuard, Router } from "../core/contract.ts";

export interface ProxyListenerOptions extends NetLimits {
  hostname: string;
  port: number;
  maxClientConnections: number;
  router: Router;
  guard: DestinationGuard;
  logger: Logger;
  metrics: GatewayMetrics;
  hooks?: TransferHooks;
}

const SWEEP_INTERVAL_MS = 1_000;
/** How long `close` waits for cancelled handlers (they only run their cleanup by then). */
export const STOP_WAIT_MS = 5_000;

export class ProxyListener {
  readonly #options: ProxyListenerOptions;
  readonly #ctx: NetContext;
  readonly #sessions = new Map<ClientSession, Promise<void>>();
  #listener: Deno.Listener<Deno.TcpConn, Deno.NetAddr> | undefined;
  #accepting: Promise<void> | undefined;
  #sweeper: ReturnType<typeof setInterval> | undefined;
  #closing: Promise<void> | undefined;

  constructor(options: ProxyListenerOptions) {
    this.#options = options;
    this.#ctx = {
      router: options.router,
      guard: options.guard,
      logger: options.logger,
      metrics: options.metrics,
      hooks: options.hooks,
      pool: new BufferPool(),
      limits: {
        maxHeaderBytes: options.maxHeaderBytes,
        clientIdleTimeoutMs: options.clientIdleTimeoutMs,
        connectTimeoutMs: options.connectTimeoutMs,
      },
    };
  }

  get bound(): boolean {
    return this.#listener !== undefined && this.#closing === undefined;
  }

  /** The bound address (port 0 in the settings takes any free port). */
  get addr(): Deno.NetAddr | undefined {
    return this.#listener?.addr;
  }

  get sessions(): number {
    return this.#sessions.size;
  }

  /** Binds the proxy port and starts accepting. Throws when the port cannot be bound. */
  start(): Deno.NetAddr {
    if (this.#closing) throw new Error("The proxy listener is closed");
    if (this.#listener) return this.#listener.addr;
    const listener = Deno.listen({
      hostname: this.#options.hostname,
      port: this.#options.port,
      transport: "tcp",
    });
    this.#listener = listener;
    this.#accepting = this.#acceptLoop(listener);
    this.#sweeper = setInterval(() => this.#sweep(), SWEEP_INTERVAL_MS);
    Deno.unrefTimer(this.#sweeper);
    return listener.addr;
  }

  /** Stops accepting, cancels every session, waits for them (at most STOP_WAIT_MS). */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    if (this.#sweeper !== undefined) clearInterval(this.#sweeper);
    try {
      this.#listener?.close();
    } catch {
      // Closed already.
    }
    await this.#accepting;
    for (const session of this.#sessions.keys()) session.cancel();
    const handlers = Promise.allSettled([...this.#sessions.values()]);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const waited = await Promise.race([
      handlers.then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), STOP_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
    if (!waited) {
      this.#options.logger.warn("Connection handlers still running at stop", {
        sessions: this.#sessions.size,
      });
    }
  }

  async #acceptLoop(listener: Deno.Listener<Deno.TcpConn, Deno.NetAddr>): Promise<void> {
    const { metrics, logger } = this.#options;
    let backoffMs = 0;
    for (;;) {
      let conn: Deno.TcpConn;
      try {
        conn = await listener.accept();
        backoffMs = 0;
      } catch (error) {
        if (this.#closing || error instanceof Deno.errors.BadResource) return;
        // Out of descriptors and the like: wait a little rather than spin.
        backoffMs = Math.min(Math.max(backoffMs * 2, 10), 1_000);
        logger.warn("Accepting a connection failed", { error, retryInMs: backoffMs });
        await new Promise((resolve) => setTimeout(resolve, backoffMs));
        continue;
      }
      if (this.#closing || this.#sessions.size >= this.#options.maxClientConnections) {
        metrics.connectionsRejected++;
        try {
          conn.close();
        } catch {
          // Gone already.
        }
        continue;
      }
      metrics.connectionsAccepted++;
      metrics.connectionsOpen++;
      const session = new ClientSession(conn, this.#ctx);
      const handler = session.run().finally(() => {
        this.#sessions.delete(session);
        metrics.connectionsOpen--;
      });
      this.#sessions.set(session, handler);
    }
  }

  #sweep(): void {
    const now = Date.now();
    const idleMs = this.#options.clientIdleTimeoutMs;
    // A throw in a timer would end the process: one session's fault stays its own.
    for (const session of this.#sessions.keys()) {
      try {
        session.checkIdle(now, idleMs);
      } catch (error) {
        this.#options.logger.error("Idle check failed", { error });
      }
    }
  }
}
