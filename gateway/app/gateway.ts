/**
 * The gateway process around its socket layer, shared by gateway/main.ts and the tests'
 * entry: the status listener first, then the routing core (feed follower), the proxy listener
 * and the SOCKS5 listener (unless OCTOPROX_SOCKS_ENABLED is false) bound once the first feed is
 * applied; stopping closes both listeners (cancelling the connections in flight and waiting for
 * their handlers), then the core, then the status listener, then flushes the log.
 *
 * With worker isolates (gateway/app/isolates.ts) the main isolate binds first, with SO_REUSEPORT,
 * and the workers then bind the ports it got; they stop with its listeners, and /metrics sums
 * their counters with its own.
 *
 * When the core has an instance store, the heartbeat (heartbeat.ts) writes the process's snapshot
 * every interval from the start, so the System page lists the gateway; the stop withdraws it once
 * the listeners closed, before the core stops.
 */
import type { CooldownBook } from "../base/cooldown-book.ts";
import type { DomainTally } from "../base/domain-tally.ts";
import type { EscalationReports } from "../base/escalation-reports.ts";
import type {
  GatewayFeedSnapshot,
  GatewayIsolateSnapshot,
  GatewaySnapshot,
} from "../../shared/gateway-snapshot.ts";
import { LoopLagWindows } from "../../shared/loop-lag.ts";
import type { GatewaySettings } from "../../shared/settings.ts";
import { VERSION } from "./version.ts";
import type { DestinationGuard, Router } from "../../shared/routing/contract.ts";
import { startStatusServer, type StatusServer } from "./status.ts";
import type { AdmissionStep } from "../base/admission.ts";
import { GatewayHeartbeat, type InstanceStore } from "./heartbeat.ts";
import type { TransferHooks } from "../base/transfer-hooks.ts";
import { ConnectionBudget } from "../net/io/budget.ts";
import type { IsolatePool } from "./isolates.ts";
import { buildListeners, type ProxyListener, STOP_WAIT_MS } from "./listener.ts";
import { StartRefused } from "./start-refused.ts";
import type { MitmCa } from "../../shared/tls/ca.ts";
import type { TunnelPlane } from "../tunnel-plane/plane.ts";
import { CA_EXPIRY_METRIC, type MitmCaOverlap, watchCaExpiry } from "./mitm-ca.ts";
import type { Logger } from "../base/log.ts";
import {
  GatewayMetrics,
  type MetricSample,
  type MetricsSnapshot,
  withRole,
} from "../base/metrics.ts";

/** What the socket layer needs of the routing core and the feed follower behind it. */
export interface RoutingCore {
  router: Router;
  /**
   * The router the listeners ask, when it is not `router` itself: the core's behind preflight
   * (gateway/geo/preflight-router.ts).
   */
  serving?: Router;
  guard: DestinationGuard;
  /**
   * Admission steps of the core's own (who may use the gateway from where, project limits),
   * which every listener runs between the credentials and the destination guard, in this order
   * (gateway/net/session/admission-steps.ts).
   */
  admissionSteps?: readonly AdmissionStep[];
  /** The steps a tunnel device's connection runs between its device and the guard. */
  deviceAdmissionSteps?: readonly AdmissionStep[];
  /** The tunnel plane, when this gateway runs a tunnel endpoint (OCTOPROX_WIREGUARD_ENABLED). */
  tunnels?: TunnelPlane;
  /**
   * Resolves once the first feed is applied: the proxy port is bound then. Rejects with
   * `StartRefused` when that feed is one the gateway must not serve.
   */
  firstApplied: Promise<void>;
  /** Starts following the feed (returns once started, not once applied). */
  start(): void | Promise<void>;
  /**
   * Stops the follower and whatever else the core runs; never rejects, and settles within one
   * request deadline (OCTOPROX_REDIS_REQUEST_TIMEOUT) whatever Redis does.
   */
  stop(): Promise<void>;
  /** What the core's writers still owe Redis (counts only), for the stop's last word. */
  owed?(): Readonly<Record<string, number>>;
  /**
   * Lines of Prometheus text the core adds to /metrics (its own names), with the series the
   * process's other isolates reported for their parts of it.
   */
  metrics?(others?: readonly (readonly MetricSample[])[]): string;
  /** Reasons, besides a missing first feed, the gateway is unready (e.g. none). */
  unready?(): string[];
  hooks?: TransferHooks;
  /** Exits cooled down per site after block verdicts; none: verdicts cool nothing down. */
  cooldowns?: CooldownBook;
  /** What judging found per project and site; none: not counted. */
  domains?: DomainTally;
  /** Where judged answers of escalated projects are told; none: no escalation. */
  escalations?: EscalationReports;
  /** Where the heartbeat writes the process's keys; none: the gateway is not listed. */
  instances?: InstanceStore;
  /** The feed follower's state, for the heartbeat snapshot. */
  feedState?(): GatewayFeedSnapshot;
  /** The main isolate's own part of the heartbeat snapshot (its connections are the process's). */
  isolateState?(): Omit<GatewayIsolateSnapshot, "connections_open" | "tunnels_open">;
}

export interface GatewayProcessOptions {
  settings: GatewaySettings;
  instance: string;
  logger: Logger;
  core: RoutingCore;
  /** Worker isolates serving beside this one (started by `start`); none: one isolate. */
  isolates?: IsolatePool;
  /** The process's connection budget, when worker isolates share it. */
  budget?: ConnectionBudget;
  /** The isolates the process was configured for (OCTOPROX_GATEWAY_ISOLATES, resolved). */
  isolatesConfigured?: number;
  /**
   * The interception CA the listeners sign with, loaded before the process was built
   * (gateway/app/mitm-ca.ts); gateway/main.ts never starts without one. The start logs it and
   * watches its expiry; /metrics carries its end.
   */
  mitmCa?: MitmCa;
  /** After a rotation: its overlap, which the start logs (and says when it ends). */
  mitmCaOverlap?: MitmCaOverlap;
}

export class GatewayProcess {
  readonly metrics = new GatewayMetrics();
  readonly #options: GatewayProcessOptions;
  readonly #listener: ProxyListener;
  /** The SOCKS5 listener; undefined when OCTOPROX_SOCKS_ENABLED is false. */
  readonly #socks: ProxyListener | undefined;
  #status: StatusServer | undefined;
  #heartbeat: GatewayHeartbeat | undefined;
  #stopExpiryWatch: (() => void) | undefined;
  readonly #startedAt = new Date().toISOString();
  #stopping: Promise<void> | undefined;
  /** Resolves with the exit code once the process stopped (or failed to bind). */
  readonly finished: Promise<number>;
  #finish: (code: number) => void = () => {};

  constructor(options: GatewayProcessOptions) {
    this.#options = options;
    const { settings, logger, core } = options;
    const listeners = buildListeners(settings, {
      router: core.serving ?? core.router,
      guard: core.guard,
      admissionSteps: core.admissionSteps,
      hooks: core.hooks,
      cooldowns: core.cooldowns,
      domains: core.domains,
      escalations: core.escalations,
      logger,
      metrics: this.metrics,
      budget: options.budget ?? new ConnectionBudget(settings.maxClientConnections),
      reusePort: options.isolates !== undefined,
      mitmCa: options.mitmCa,
    });
    this.#listener = listeners.http;
    this.#socks = listeners.socks;
    const tunnels = core.tunnels;
    tunnels?.useListeners((hostname, port, plane) =>
      listeners.transparent(
        hostname,
        port,
        { plane, clientStep: tunnels.deviceStep() },
        core.deviceAdmissionSteps ?? [],
      )
    );
    this.metrics.addGauge("octoprox_gateway_ready", () => (this.unready() ? 0 : 1));
    this.metrics.addGauge("octoprox_gateway_log_lines_dropped", () => logger.droppedLines);
    const mitmCa = options.mitmCa;
    if (mitmCa !== undefined) {
      const expiry = Math.floor(mitmCa.notAfter.getTime() / 1000);
      this.metrics.addGauge(CA_EXPIRY_METRIC, () => expiry);
    }
    this.finished = new Promise((resolve) => {
      this.#finish = resolve;
    });
  }

  get proxyAddr(): Deno.NetAddr | undefined {
    return this.#listener.addr;
  }

  get socksAddr(): Deno.NetAddr | undefined {
    return this.#socks?.addr;
  }

  get statusAddr(): Deno.NetAddr | undefined {
    return this.#status?.addr;
  }

  /** Undefined when ready; else why not. */
  unready(): string[] | undefined {
    if (this.#stopping) return ["stopping"];
    const reasons: string[] = [];
    if (!this.#options.core.router.ready) reasons.push("no routing feed applied yet");
    else if (!this.#listener.bound) reasons.push("proxy listener not bound");
    else if (this.#socks !== undefined && !this.#socks.bound) {
      reasons.push("SOCKS5 listener not bound");
    }
    const extra = this.#options.core.unready?.() ?? [];
    reasons.push(...extra);
    return reasons.length === 0 ? undefined : reasons;
  }

  /** Starts the status listener and the core; the proxy port follows the first feed. */
  async start(): Promise<void> {
    const { settings, logger, core, instance, mitmCa } = this.#options;
    if (mitmCa !== undefined) {
      this.#stopExpiryWatch = watchCaExpiry(mitmCa, logger, {
        certPath: this.#options.mitmCaOverlap?.running
          ? settings.tlsMitmCaPreviousCertPath
          : settings.tlsMitmCaCertPath,
        overlap: this.#options.mitmCaOverlap,
      });
    }
    this.#status = startStatusServer({
      hostname: settings.host,
      port: settings.statusPort,
      instance,
      logger,
      unready: () => this.unready(),
      metrics: () => this.#renderMetrics(),
    });
    logger.info("Status listener bound", {
      host: this.#status.addr.hostname,
      port: this.#status.addr.port,
    });
    // Which resolution is in force decides what the guard can promise: say so at every start.
    const resolution = core.guard.resolution ?? "upstream";
    logger.info(
      resolution === "gateway"
        ? "Destinations resolved by the gateway: the upstream is sent the address the guard checked"
        : "Destinations resolved by the upstream: names go on unresolved, and the guard cannot " +
          "see what the upstream resolves them to",
      { destination_resolution: resolution },
    );
    // The workers build their cores before the first feed, which they get with the main's.
    await this.#options.isolates?.start();
    await core.start();
    if (core.instances !== undefined) {
      this.#heartbeat = new GatewayHeartbeat({
        store: core.instances,
        logger,
        intervalMs: settings.heartbeatIntervalMs,
        registration: { role: "gateway", version: VERSION, started_at: this.#startedAt },
        report: () => this.snapshot(),
        stopWaitMs: settings.redisRequestTimeoutMs,
      });
      this.#heartbeat.start();
    }
    core.firstApplied.then(
      () => this.#bind(),
      (error) =>
        error instanceof StartRefused
          ? this.#fail(error.message, error.fields)
          : this.#fail("The routing core failed before its first feed", { error }),
    );
  }

  #renderMetrics(): string | Promise<string> {
    const { core, isolates } = this.#options;
    const coreLines = (others: readonly MetricsSnapshot[]) => {
      try {
        return core.metrics?.(others.map((other) => other.core ?? [])) ?? "";
      } catch {
        return "";
      }
    };
    if (isolates === undefined) return withRole(this.metrics.render() + coreLines([]));
    return isolates.snapshots().then((others) =>
      withRole(this.metrics.render(others) + coreLines(others))
    );
  }

  /** What the process reports (the heartbeat's snapshot), as of now. */
  async snapshot(): Promise<GatewaySnapshot> {
    const { core, isolates, instance } = this.#options;
    const others = isolates === undefined ? [] : await isolates.snapshots();
    const emptyLag = new LoopLagWindows().snapshot();
    const main: GatewayIsolateSnapshot | undefined = core.isolateState === undefined ? undefined : {
      ...core.isolateState(),
      connections_open: this.metrics.connectionsOpen,
      tunnels_open: this.metrics.tunnelsOpen,
    };
    const list: GatewayIsolateSnapshot[] = main === undefined ? [] : [main];
    for (const other of others) {
      if (other.state === undefined) continue;
      list.push({
        ...other.state,
        connections_open: other.connectionsOpen,
        tunnels_open: other.tunnelsOpen,
      });
    }
    const reasons = this.unready();
    let hostname = "";
    try {
      hostname = Deno.hostname();
    } catch {
      // No sys permission for the host name: the instance id still names the process.
    }
    return {
      instance,
      role: "gateway",
      version: VERSION,
      pid: Deno.pid,
      hostname,
      started_at: this.#startedAt,
      beat_at: new Date().toISOString(),
      ready: reasons === undefined,
      reasons: reasons ?? [],
      feed: core.feedState?.() ?? {
        applied_digest: null,
        applied_at: null,
        compiled_at: null,
        apply_age_ms: null,
        applies: 0,
        failures: 0,
        consecutive_failures: 0,
        last_error: null,
        holding: null,
      },
      connections_open: others.reduce(
        (sum, m) => sum + m.connectionsOpen,
        this.metrics.connectionsOpen,
      ),
      tunnels_open: others.reduce((sum, m) => sum + m.tunnelsOpen, this.metrics.tunnelsOpen),
      isolates_configured: this.#options.isolatesConfigured ?? 1,
      isolates: list,
      loop_lag: main?.loop_lag ?? emptyLag,
    };
  }

  #bind(): void {
    if (this.#stopping) return;
    const { logger } = this.#options;
    try {
      const addr = this.#listener.start();
      logger.info("Proxy listener bound", { host: addr.hostname, port: addr.port });
    } catch (error) {
      this.#fail("Could not bind the proxy listener", { error });
      return;
    }
    let socksPort: number | null = null;
    if (this.#socks !== undefined) {
      try {
        const addr = this.#socks.start();
        socksPort = addr.port;
        logger.info("SOCKS5 listener bound", { host: addr.hostname, port: addr.port });
      } catch (error) {
        this.#fail("Could not bind the SOCKS5 listener", { error });
        return;
      }
    }
    const isolates = this.#options.isolates;
    const proxyPort = this.#listener.addr?.port;
    if (isolates === undefined || proxyPort === undefined) return;
    void isolates.bind(proxyPort, socksPort).then((bound) => {
      logger.info("Worker isolates bound", { isolates: bound + 1 });
    });
  }

  #fail(message: string, fields: Record<string, unknown>): void {
    this.#options.logger.fatal(message, fields);
    void this.stop(1);
  }

  /** Stops everything in order; every step runs even if one fails. Safe to call again. */
  stop(code = 0): Promise<void> {
    this.#stopping ??= this.#stop(code);
    return this.#stopping;
  }

  async #stop(code: number): Promise<void> {
    const { logger, core } = this.#options;
    this.#stopExpiryWatch?.();
    logger.info("Stopping", {
      sessions: this.#listener.sessions + (this.#socks?.sessions ?? 0),
    });
    const step = async (name: string, run: () => Promise<void>) => {
      try {
        await run();
      } catch (error) {
        logger.error(`Stop step failed: ${name}`, { error });
      }
    };
    // Both at once: each waits up to STOP_WAIT_MS for its handlers.
    await Promise.all([
      step("proxy listener", () => this.#listener.close()),
      step("SOCKS5 listener", () => this.#socks?.close() ?? Promise.resolve()),
      step("tunnel listeners", () => core.tunnels?.closeListeners() ?? Promise.resolve()),
      step("worker isolates", () => this.#options.isolates?.stop() ?? Promise.resolve()),
    ]);
    // Withdrawn before the core closes its Redis client, so peers see the process leave at once.
    await step("heartbeat", () => this.#heartbeat?.stop() ?? Promise.resolve());
    await step("routing core", () => core.stop());
    // A status request under way (a scrape) gets a moment; the process does not wait on it.
    await step("status listener", () => within(this.#status?.close(), STATUS_CLOSE_WAIT_MS));
    logger.info("Stopped");
    await logger.flush();
    this.#finish(code);
  }
}

/** How long the stop waits for the status listener's requests under way. */
const STATUS_CLOSE_WAIT_MS = 1_000;

/** `pending` (undefined: nothing to wait for), or nothing after `ms`. */
async function within(pending: Promise<void> | undefined, ms: number): Promise<void> {
  if (pending === undefined) return;
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([pending, new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The longest a stop takes, whatever Redis does: the connections' grace (STOP_WAIT_MS), one
 * request deadline for the heartbeat's withdrawal, one for the core's last sends (they go
 * together), and a second of room. 10 s with the defaults (docs/operations.md).
 */
export function stopBoundMs(settings: Pick<GatewaySettings, "redisRequestTimeoutMs">): number {
  return STOP_WAIT_MS + 2 * settings.redisRequestTimeoutMs + 1_000;
}

/**
 * Stops on SIGTERM or SIGINT and exits with the stop's code; a second signal exits at once
 * with 1. A stop that has not finished within `boundMs` (stopBoundMs) logs what the core still
 * owes Redis and exits with 1 too, so no outage holds a rollout. Resolves never: the process
 * exits.
 */
export async function runUntilSignal(
  gateway: GatewayProcess,
  logger: Logger,
  options: { boundMs: number; owed?: () => Readonly<Record<string, number>> },
): Promise<never> {
  let signalled = false;
  const onSignal = (signal: Deno.Signal) => {
    if (signalled) {
      console.error(`octoprox-gateway: ${signal} again; exiting without finishing the stop`);
      Deno.exit(1);
    }
    signalled = true;
    logger.info("Stop requested", { signal, bound_ms: options.boundMs });
    void gateway.stop(0);
    const timer = setTimeout(async () => {
      let owed: Readonly<Record<string, number>> = {};
      try {
        owed = options.owed?.() ?? {};
      } catch {
        // The counts are a courtesy; the exit is not.
      }
      logger.error("Stop not finished within its bound; exiting", {
        bound_ms: options.boundMs,
        ...owed,
      });
      await within(logger.flush(), 500);
      Deno.exit(1);
    }, options.boundMs);
    // The timer alone must not keep a stopped process alive.
    Deno.unrefTimer(timer);
  };
  Deno.addSignalListener("SIGTERM", () => onSignal("SIGTERM"));
  Deno.addSignalListener("SIGINT", () => onSignal("SIGINT"));
  const code = await gateway.finished;
  Deno.exit(code);
}
