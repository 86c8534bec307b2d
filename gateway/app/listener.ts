/**
 * A client listener: the HTTP proxy listener, or (with `protocol: "socks5"`) the SOCKS5 one. It
 * is bound only when `start` is called (once the first feed is applied: until then the port
 * refuses connections, so a balancer sends clients to a gateway that can route them).
 * Connections over OCTOPROX_MAX_CLIENT_CONNECTIONS (one budget for every listener of the
 * process) are closed at once rather than queued; one sweep a second closes idle ones. `close`
 * stops accepting, cancels every session and waits, bounded, for their handlers (which release
 * their allocations), then closes the idle upstream connections of forwarded requests.
 */
import type { MitmCa } from "../../shared/tls/ca.ts";
import { Interceptor } from "../net/tls/interceptor.ts";
import { readUpstreamCas } from "./upstream-ca.ts";
import type { GatewaySettings } from "../../shared/settings.ts";
import { SlotSet, type Slotted } from "../base/slot-set.ts";
import type { DestinationGuard, Router } from "../../shared/routing/contract.ts";
import { ConnectionBudget } from "../net/io/budget.ts";
import { BufferPool, SMALL_BUFFER_BYTES, TUNNEL_START_BUFFER_BYTES } from "../net/io/buffers.ts";
import { KEEPALIVE_AFTER_MS } from "../net/io/leg.ts";
import { ProxyHeaderPolicy } from "../net/io/proxy-prelude.ts";
import { UpstreamPool } from "../net/io/upstream-pool.ts";
import { Admission } from "../net/session/admission-pipeline.ts";
import type { AdmissionStep } from "../base/admission.ts";
import { admissionSteps, destinationStep } from "../net/session/admission-steps.ts";
import { TransparentSession } from "../net/tunnel/transparent-session.ts";
import type { TransparentPlane } from "../net/tunnel/transparent-contract.ts";
import { ClientSession } from "../net/session/client-session.ts";
import type { NetContext } from "../net/session/contract.ts";
import type { TransferHooks } from "../base/transfer-hooks.ts";
import type { CooldownBook } from "../base/cooldown-book.ts";
import type { DomainTally } from "../base/domain-tally.ts";
import type { EscalationReports } from "../base/escalation-reports.ts";
import type { NetLimits } from "../net/session/limits.ts";
import { Socks5Session } from "../net/tunnel/socks5-session.ts";
import type { Logger } from "../base/log.ts";
import type { GatewayMetrics } from "../base/metrics.ts";

export const ListenerProtocol = {
  http: "http",
  socks5: "socks5",
  /** Tunnel devices' redirected connections (gateway/net/tunnel/transparent-session.ts). */
  transparent: "transparent",
} as const;
export type ListenerProtocol = (typeof ListenerProtocol)[keyof typeof ListenerProtocol];

export interface ProxyListenerOptions extends NetLimits {
  /** TLS interception, one for the isolate's listeners (buildListeners makes it from the CA). */
  interceptor?: Interceptor;
  hostname: string;
  port: number;
  maxClientConnections: number;
  router: Router;
  guard: DestinationGuard;
  /** The core's own admission steps (RoutingCore.admissionSteps). */
  admissionSteps?: readonly AdmissionStep[];
  /** Balancers whose PROXY protocol header names the client (OCTOPROX_TRUSTED_PROXIES). */
  trustedProxies?: readonly string[];
  logger: Logger;
  metrics: GatewayMetrics;
  hooks?: TransferHooks;
  /** Exits cooled down per site after block verdicts (the isolate's book). */
  cooldowns?: CooldownBook;
  /** What judging found per project and site (the isolate's counts). */
  domains?: DomainTally;
  /** Where judged answers of escalated projects are told (the isolate's book). */
  escalations?: EscalationReports;
  /** What clients speak on this port (default HTTP). */
  protocol?: ListenerProtocol;
  /** The process's connection budget, shared with its other listeners (default: its own). */
  budget?: ConnectionBudget;
  /** SO_REUSEPORT, so isolates of one process each accept on the same port (Linux). */
  reusePort?: boolean;
  /**
   * The transparent listener's: the tunnel plane its sessions ask, and the step that names the
   * client (the device) in place of the credentials.
   */
  transparent?: { plane: TransparentPlane; clientStep: AdmissionStep };
}

/** What one isolate serves on: the HTTP proxy listener and, when enabled, the SOCKS5 one. */
export interface IsolateListeners {
  http: ProxyListener;
  socks: ProxyListener | undefined;
  /**
   * Makes a transparent listener for the tunnel plane (bound at once on `hostname:port`), with
   * the listeners' bounds, budget and interception: its admission is the device step, `steps`
   * (the project limits) and the destination guard.
   */
  transparent(
    hostname: string,
    port: number,
    transparent: { plane: TransparentPlane; clientStep: AdmissionStep },
    steps: readonly AdmissionStep[],
  ): ProxyListener;
}

export interface IsolateListenerParts {
  router: Router;
  guard: DestinationGuard;
  admissionSteps?: readonly AdmissionStep[];
  hooks?: TransferHooks;
  cooldowns?: CooldownBook;
  domains?: DomainTally;
  escalations?: EscalationReports;
  logger: Logger;
  metrics: GatewayMetrics;
  /** One OCTOPROX_MAX_CLIENT_CONNECTIONS for both listeners (and every isolate's). */
  budget: ConnectionBudget;
  reusePort: boolean;
  /** The install's interception CA (gateway/app/mitm-ca.ts), loaded before the listeners. */
  mitmCa?: MitmCa;
}

function buildInterceptor(
  settings: GatewaySettings,
  parts: IsolateListenerParts,
): Interceptor | undefined {
  if (parts.mitmCa === undefined) return undefined;
  const interceptor = new Interceptor(parts.mitmCa, {
    certCacheSize: settings.tlsMitmCertCacheSize,
    upstreamCaPem: readUpstreamCas(settings.upstreamCaFile),
    onEngineUnavailable: (error) =>
      parts.logger.error("The browser-grade TLS engine did not load", { error }),
  });
  parts.metrics.interceptionSeries = () => interceptor.series();
  return interceptor;
}

/** Builds an isolate's listeners from the settings: both share the bounds and the budget. */
export function buildListeners(
  settings: GatewaySettings,
  parts: IsolateListenerParts,
): IsolateListeners {
  const { mitmCa: _ca, ...listenerParts } = parts;
  const shared: ProxyListenerOptions = {
    hostname: settings.host,
    port: settings.proxyPort,
    maxClientConnections: settings.maxClientConnections,
    maxHeaderBytes: settings.maxHeaderBytes,
    clientIdleTimeoutMs: settings.clientIdleTimeoutMs,
    connectTimeoutMs: settings.connectTimeoutMs,
    trustedProxies: settings.trustedProxies,
    ...listenerParts,
    // One certificate cache for both listeners.
    interceptor: buildInterceptor(settings, parts),
  };
  return {
    http: new ProxyListener(shared),
    transparent(hostname, port, transparent, steps) {
      const listener = new ProxyListener({
        ...shared,
        hostname,
        port,
        protocol: ListenerProtocol.transparent,
        transparent,
        admissionSteps: steps,
        reusePort: false,
      });
      listener.start();
      return listener;
    },
    socks: settings.socksEnabled
      ? new ProxyListener({
        ...shared,
        port: settings.socksPort,
        protocol: ListenerProtocol.socks5,
      })
      : undefined,
  };
}

/** What the listener runs per connection (its slot: its place among the listener's). */
interface ServedConnection extends Slotted {
  /** When the connection was accepted (ms since the epoch). */
  readonly openedMs: number;
  /** Serves the connection until it ends; never rejects. */
  run(): Promise<void>;
  /** Ends it at once; safe to call again. */
  cancel(): void;
  checkIdle(nowMs: number, idleMs: number): void;
  /** Turns TCP keepalive on for its legs (those not on yet). */
  keepAlive(): void;
  /** A tunnel device's connection: the device's tunnel address. */
  readonly deviceAddress?: string;
}

const SWEEP_INTERVAL_MS = 1_000;
/** How long `close` waits for cancelled handlers (they only run their cleanup by then). */
export const STOP_WAIT_MS = 5_000;

export class ProxyListener {
  readonly #options: ProxyListenerOptions;
  readonly #ctx: NetContext;
  readonly #sessions = new SlotSet<ServedConnection>();
  /** Called once the last session ended, while `close` waits for them. */
  #drained: (() => void) | undefined;
  readonly #budget: ConnectionBudget;
  #listener: Deno.Listener<Deno.TcpConn, Deno.NetAddr> | undefined;
  #accepting: Promise<void> | undefined;
  #sweeper: ReturnType<typeof setInterval> | undefined;
  #closing: Promise<void> | undefined;

  constructor(options: ProxyListenerOptions) {
    this.#options = options;
    this.#budget = options.budget ?? new ConnectionBudget(options.maxClientConnections);
    this.#ctx = {
      router: options.router,
      // Every listener runs the same steps (HTTP forwarding, CONNECT, SOCKS5); the transparent
      // one names the client by its device rather than its credentials.
      admission: new Admission(
        options.transparent === undefined
          ? admissionSteps({
            router: options.router,
            guard: options.guard,
            core: options.admissionSteps,
          })
          : [
            options.transparent.clientStep,
            ...(options.admissionSteps ?? []),
            destinationStep(options.guard),
          ],
      ),
      proxyHeaders: new ProxyHeaderPolicy(options.trustedProxies ?? [], options.logger),
      logger: options.logger,
      metrics: options.metrics,
      hooks: options.hooks,
      pool: new BufferPool(),
      small: new BufferPool(SMALL_BUFFER_BYTES),
      tunnelStart: new BufferPool(TUNNEL_START_BUFFER_BYTES),
      upstreams: new UpstreamPool(),
      mitm: options.interceptor,
      cooldowns: options.cooldowns,
      domains: options.domains,
      escalations: options.escalations,
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

  /**
   * Binds the port and starts accepting. Throws when the port cannot be bound. `port` replaces
   * the configured one (an isolate binding the port the first one got for port 0).
   */
  start(port: number = this.#options.port): Deno.NetAddr {
    if (this.#closing) throw new Error("The proxy listener is closed");
    if (this.#listener) return this.#listener.addr;
    const listener = Deno.listen({
      hostname: this.#options.hostname,
      port,
      transport: "tcp",
      ...(this.#options.reusePort === true ? { reusePort: true } : {}),
    });
    this.#listener = listener;
    this.#accepting = this.#acceptLoop(listener);
    this.#sweeper = setInterval(() => this.#sweep(), SWEEP_INTERVAL_MS);
    Deno.unrefTimer(this.#sweeper);
    return listener.addr;
  }

  /** Cancels the device sessions whose device `gone` names (removed or disabled by a feed). */
  cancelWhere(gone: (deviceAddress: string) => boolean): void {
    for (const session of this.#sessions.values()) {
      const device = session.deviceAddress;
      if (device !== undefined && gone(device)) session.cancel();
    }
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
    for (const session of this.#sessions.values()) session.cancel();
    const drained = new Promise<void>((resolve) => {
      if (this.#sessions.size === 0) resolve();
      else this.#drained = resolve;
    });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const waited = await Promise.race([
      drained.then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), STOP_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
    // Handlers done (or given up on): a leg given back later is closed by the closed pool.
    this.#ctx.upstreams.close();
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
      if (this.#closing || !this.#budget.take()) {
        metrics.connectionsRejected++;
        try {
          conn.close();
        } catch {
          // Gone already.
        }
        continue;
      }
      let session: ServedConnection;
      try {
        const transparent = this.#options.transparent;
        session = transparent !== undefined
          ? new TransparentSession(conn, this.#ctx, transparent.plane)
          : this.#options.protocol === ListenerProtocol.socks5
          ? new Socks5Session(conn, this.#ctx)
          : new ClientSession(conn, this.#ctx);
      } catch (error) {
        // A bug, not the client's doing: the budget's share goes back, the loop goes on.
        this.#budget.give();
        logger.error("Could not start a client session", { error });
        try {
          conn.close();
        } catch {
          // Gone already.
        }
        continue;
      }
      metrics.connectionsAccepted++;
      metrics.connectionsOpen++;
      // run() never rejects; were it to, the session's accounting must still end.
      const ended = () => {
        this.#sessions.delete(session);
        this.#budget.give();
        metrics.connectionsOpen--;
        if (this.#sessions.size === 0) this.#drained?.();
      };
      this.#sessions.add(session);
      session.run().then(ended, ended);
    }
  }

  #sweep(): void {
    const now = Date.now();
    const idleMs = this.#options.clientIdleTimeoutMs;
    // A throw in a timer would end the process: one session's fault stays its own.
    for (const session of this.#sessions.values()) {
      try {
        if (now - session.openedMs >= KEEPALIVE_AFTER_MS) session.keepAlive();
        session.checkIdle(now, idleMs);
      } catch (error) {
        this.#options.logger.error("Idle check failed", { error });
      }
    }
  }
}
