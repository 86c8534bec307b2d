/**
 * RequestMetering: the socket layer's transfer hooks, counting into memory, and the batch
 * publisher that adds the counts to Redis every interval (5 s) in one script call.
 *
 * Counted per proxy, project, connector, destination host and tunnel device (for a client that
 * is one, `Client.deviceId`): requests, successes, failures, bytes sent (client to upstream),
 * bytes received (upstream to client) and summed latency, when a transfer finishes (bytes also
 * while it runs), and when an attempt through a proxy failed before any transfer began (one
 * request, one failure, its time until the failure as latency); per tunnel device also its
 * connections closed as encrypted DNS (no request: nothing was dialled); per project and
 * minute, the demand (transfers begun and rejections); per failure key (project, connector,
 * kind, the upstream's status), every failure: a refusal (no connector), a failed attempt, a
 * transfer that ended failed. Each failure is also described to the failure log
 * (failure-log.ts), once. A finished transfer through a rate-limited connector is also handed to
 * the rate limiter (rate-limiter.ts). The receivers touch only memory and never throw. In-flight
 * counts and the strategies' outcomes are dispatch's, not metering's.
 *
 * Runtime-neutral: the caller passes the Redis client and the script's source (gateway/metering/
 * lua.ts under Deno).
 */
import type { CaptureRecorder } from "./mitm-captures.ts";
import type { MitmCapture } from "../../shared/mitm-captures.ts";
import { normaliseHost } from "../../shared/net/host.ts";
import { SlotSet } from "../base/slot-set.ts";
import type { Client, Outcome, Refusal, Target } from "../../shared/routing/contract.ts";
import { AttemptFailureKind } from "../../shared/failure-kinds.ts";
import { formatAuthority } from "../../shared/proxy-protocol/address.ts";
import type {
  FailedAttempt,
  FailureNote,
  RequestProtocol,
  TransferHooks,
  TransferStart,
} from "../base/transfer-hooks.ts";
import { counterSample, gaugeSample, type MetricSample } from "../base/metrics.ts";
import {
  ConnectorWindows,
  demandMinute,
  DeviceWindows,
  FailureWindows,
  HostWindows,
  OTHER_HOST,
  ProjectWindows,
  ProxyWindows,
} from "../../shared/metric-windows.ts";
import { BoundedMap } from "../../shared/bounded-map.ts";
import { connectorSubject, projectSubject } from "../../shared/traffic-subjects.ts";
import type { FeedRateLimit } from "../../shared/feed/models.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { type ApplyLives, applyPart, cutParts, DEFAULT_LIVES, type MeteringPart } from "./apply.ts";
import {
  DEFAULT_CAPS,
  DemandField,
  DeviceField,
  FailureField,
  MAX_ASKS_PER_WINDOW,
  type MeteringCaps,
  MeteringWindow,
  type OverflowCounts,
  TransferField,
} from "./deltas.ts";
import type { FailureRecorder } from "./failure-log.ts";
import type { EvidenceRecorder } from "./pool-evidence.ts";
import { Meter, type MeterKeys, type MeterSink } from "./meter.ts";
import { BatchPublisher, type PublisherLogger, type PublisherStats } from "./publisher.ts";
import type { LuaScript, ScriptClient } from "../../shared/lua/loader.ts";

/** Production cadence; tests shorten it through the option. */
export const METERING_INTERVAL_MS = 5_000;
/** A running transfer reports its bytes at least this often (and at every cut). */
export const REPORT_BYTES = 1 << 20;
/** Hashes per script call: a window under this is one round trip. */
export const MAX_ROWS_PER_PART = 10_000;
/** A DNS name is at most 253 characters; longer targets are cut so a row stays small. */
const MAX_HOST_CHARS = 255;
/** Row keys kept per upstream row and project, one entry per destination host. */
const MAX_CACHED_HOSTS = 1024;
/** Projects whose demand key for the current minute is kept. */
const MAX_CACHED_PROJECTS = 4096;
/** Tunnel devices whose window key is kept. */
const MAX_CACHED_DEVICES = 4096;

export interface RequestMeteringOptions {
  redis: ScriptClient;
  keys: RedisKeys;
  /** shared/lua/metering_apply.lua, registered. */
  script: LuaScript;
  /** This gateway's instance id; the writer id adds a random suffix per process. */
  instance: string;
  intervalMs?: number;
  /** A send without a reply by then leaves its part owed (default: the interval). */
  sendTimeoutMs?: number;
  /** The final attempt a close makes (default 5 s). */
  closeTimeoutMs?: number;
  reportBytes?: number;
  caps?: Partial<MeteringCaps>;
  maxRowsPerPart?: number;
  lives?: Partial<ApplyLives>;
  /** The clock demand minutes are read from. */
  now?: () => number;
  logger?: PublisherLogger;
  /** Told of every part Redis confirmed, in order (tests and diagnostics). */
  onConfirmed?: (part: MeteringPart) => void;
  /** Counts each finished transfer through a rate-limited connector (rate-limiter.ts). */
  rateLimiter?: RateCounter;
  /**
   * Which connectors and projects have a traffic limit in the snapshot in force (the router's
   * `trafficLimited`, `quotaLimited`): a window that carries bytes of one asks for its decision.
   */
  trafficLimits?: TrafficLimits;
  /**
   * Whether a connector is blocked by its traffic limit with the `interrupt` action, in the
   * snapshot in force (the router's `interrupts`): asked for each running transfer at each of
   * its reports (every 1 MiB, and every interval), which stops it.
   */
  interrupts?: (connectorId: string, projectId: string) => boolean;
  /** Where every failure is described, once (failure-log.ts). */
  failureLog?: FailureRecorder;
  /** Told each failed attempt: connect failures through pool proxies (pool-evidence.ts). */
  evidence?: EvidenceRecorder;
  /** Where intercepted exchanges are captured for the Inspector (mitm-captures.ts). */
  captures?: CaptureRecorder;
}

export interface TrafficLimits {
  connector(connectorId: string): boolean;
  project(projectId: string): boolean;
}

/** Where a finished transfer through a rate-limited connector is counted. */
export interface RateCounter {
  count(proxyId: string, limit: FeedRateLimit): void;
}

export interface MeteringStats extends PublisherStats, OverflowCounts {
  writer: string;
  metersOpen: number;
  pendingRows: number;
  finishedTwice: number;
  /** Refusals of a client not known yet (no project to count them under). */
  rejectionsWithoutProject: number;
  /** Running transfers stopped by the interrupt traffic action. */
  transfersInterrupted: number;
  /** Parts a close could not send. */
  partsAbandoned: number;
  /** Increments Redis refused inside an applied part (a foreign write of another type). */
  incrementsRefused: number;
  /** Attempts through a proxy that failed before a transfer began. */
  attemptsFailed: number;
}

/** Eight hex digits, drawn afresh per process: tells a restarted writer from its last life. */
export function randomSuffix(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(4));
  return [...bytes].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** What a failed transfer that did not say how is recorded as: a bug of ours, visibly. */
const UNDESCRIBED: Omit<FailureNote, "protocol"> = {
  kind: AttemptFailureKind.gatewayError,
  clientStatus: 0,
  proxyStatus: "",
  vendorStatus: null,
  message: "The transfer failed without saying how",
};

/** How metering counts a host: normalised (shared/net/host.ts), of bounded length, never empty. */
export function meteredHost(host: string): string {
  return normaliseHost(host).slice(0, MAX_HOST_CHARS) || "(none)";
}

export class RequestMetering implements TransferHooks {
  readonly writer: string;
  readonly #keys: RedisKeys;
  readonly #caps: MeteringCaps;
  readonly #now: () => number;
  readonly #open = new SlotSet<Meter>();
  readonly #keyCache = new WeakMap<object, Map<string, BoundedMap<string, MeterKeys>>>();
  readonly #demandKeys = new BoundedMap<string, { minute: number; key: string }>(
    MAX_CACHED_PROJECTS,
  );
  readonly #deviceKeys = new BoundedMap<string, string>(MAX_CACHED_DEVICES);
  readonly #overflow: OverflowCounts = { hostsFolded: 0, rowsDropped: 0 };
  readonly #publisher: BatchPublisher<MeteringPart>;
  readonly #sink: MeterSink;
  readonly #rateLimiter: RateCounter | undefined;
  readonly #interrupts: ((connectorId: string, projectId: string) => boolean) | undefined;
  readonly #trafficLimits: TrafficLimits | undefined;
  readonly #failureLog: FailureRecorder | undefined;
  readonly #captures: CaptureRecorder | undefined;
  readonly #evidence: EvidenceRecorder | undefined;
  #interrupted = 0;
  #attemptsFailed = 0;
  #window: MeteringWindow;
  #nextNumber = 1;
  #finishedTwice = 0;
  #rejectionsWithoutProject = 0;
  #partsAbandoned = 0;
  #incrementsRefused = 0;

  constructor(options: RequestMeteringOptions) {
    const intervalMs = options.intervalMs ?? METERING_INTERVAL_MS;
    const maxRowsPerPart = options.maxRowsPerPart ?? MAX_ROWS_PER_PART;
    const lives: ApplyLives = { ...DEFAULT_LIVES, ...options.lives };
    this.writer = `${options.instance}:${randomSuffix()}`;
    this.#keys = options.keys;
    this.#caps = { ...DEFAULT_CAPS, ...options.caps };
    this.#now = options.now ?? Date.now;
    this.#rateLimiter = options.rateLimiter;
    this.#interrupts = options.interrupts;
    this.#trafficLimits = options.trafficLimits;
    this.#failureLog = options.failureLog;
    this.#evidence = options.evidence;
    this.#captures = options.captures;
    this.#window = new MeteringWindow(this.#caps, this.#overflow);
    const appliedKey = options.keys.applied(this.writer);
    this.#sink = {
      reportBytes: options.reportBytes ?? REPORT_BYTES,
      report: (meter) => {
        this.#interruptIfBlocked(meter);
        this.#report(meter);
      },
      finish: (meter, outcome, failure) => this.#finish(meter, outcome, failure),
      finishedTwice: () => {
        this.#finishedTwice++;
      },
    };
    this.#publisher = new BatchPublisher<MeteringPart>({
      name: "request_metering",
      intervalMs,
      sendTimeoutMs: options.sendTimeoutMs ?? intervalMs,
      closeTimeoutMs: options.closeTimeoutMs ?? 5_000,
      cut: () => this.#cut(maxRowsPerPart),
      send: async (part) => {
        const result = await applyPart(
          options.redis,
          options.script,
          options.keys,
          appliedKey,
          part,
          lives,
        );
        if (result.refused > 0) {
          this.#incrementsRefused += result.refused;
          options.logger?.error("Redis refused metering increments; those counts are lost", {
            refused: result.refused,
            batch: part.number,
          });
        }
      },
      confirmed: options.onConfirmed,
      abandoned: (parts) => {
        this.#partsAbandoned += parts.length;
      },
      logger: options.logger,
    });
  }

  // -------------------------------------------------------------------------------------------
  // Receivers: memory only, never throwing.

  begin(start: TransferStart): Meter | undefined {
    try {
      const projectId = start.client.projectId;
      const latencyMs = Number.isFinite(start.latencyMs) ? Math.max(0, start.latencyMs) : 0;
      const meter = new Meter(
        this.#sink,
        this.#keysFor(start),
        this.#deviceKey(start.client),
        latencyMs,
        start,
      );
      this.#demand(projectId, DemandField.requests);
      this.#open.add(meter);
      return meter;
    } catch {
      return undefined;
    }
  }

  /**
   * A transfer's row keys, built once per upstream row, project and host: the same few keys
   * come back request after request, and building five strings each time is most of begin's
   * cost. Kept per snapshot row object, so a feed that replaces the row drops them.
   */
  #keysFor(start: Pick<TransferStart, "client" | "target" | "upstream">): MeterKeys {
    const { projectId } = start.client;
    const upstream = start.upstream;
    let byProject = this.#keyCache.get(upstream);
    if (byProject === undefined) {
      byProject = new Map();
      this.#keyCache.set(upstream, byProject);
    }
    let byHost = byProject.get(projectId);
    if (byHost === undefined) {
      // Bounded: a client walking many hosts through one proxy starts it afresh.
      byHost = new BoundedMap(MAX_CACHED_HOSTS);
      byProject.set(projectId, byHost);
    }
    const rawHost = start.target.host;
    const cached = byHost.get(rawHost);
    if (cached !== undefined) return cached;
    const { proxyId, connectorId } = upstream;
    const keys = this.#keys;
    const host = meteredHost(rawHost);
    const meterKeys: MeterKeys = {
      proxy: keys.metricWindow(ProxyWindows.name, ProxyWindows.formatKey(proxyId)),
      project: keys.metricWindow(ProjectWindows.name, ProjectWindows.formatKey(projectId)),
      connector: keys.metricWindow(
        ConnectorWindows.name,
        ConnectorWindows.formatKey(connectorId),
      ),
      host: keys.metricWindow(
        HostWindows.name,
        HostWindows.formatKey({ projectId, connectorId, host }),
      ),
      otherHost: keys.metricWindow(
        HostWindows.name,
        HostWindows.formatKey({ projectId, connectorId, host: OTHER_HOST }),
      ),
    };
    byHost.set(rawHost, meterKeys);
    return meterKeys;
  }

  /**
   * A device's window key, kept apart from the row keys: those are shared by every client of a
   * project, a device's belongs to its own transfers.
   */
  #deviceKey(client: Client): string | undefined {
    const id = client.deviceId;
    if (id === undefined) return undefined;
    return this.#deviceKeys.getOrBuild(
      id,
      () => this.#keys.metricWindow(DeviceWindows.name, DeviceWindows.formatKey(id)),
    );
  }

  /** A device's connection closed as encrypted DNS: one in its window, no request. */
  encryptedDnsClosed(client: Client): void {
    try {
      const deviceKey = this.#deviceKey(client);
      if (deviceKey === undefined) return;
      const row = this.#window.kinds.device.row(deviceKey);
      if (row) row[DeviceField.encrypted_dns_closed] += 1;
    } catch {
      // Never raise on the request path.
    }
  }

  rejected(
    refusal: Refusal,
    client: Client | undefined,
    target: Target | undefined,
    protocol: RequestProtocol = "http",
  ): void {
    try {
      // A refusal without a reason is no routing decision (a malformed request): not demand.
      const reason = refusal.rejection;
      if (reason === undefined) return;
      this.#failureLog?.record(client?.projectId ?? null, {
        atMs: this.#now(),
        kind: reason,
        protocol,
        clientStatus: refusal.status,
        proxyStatus: refusal.proxyStatus,
        vendorStatus: null,
        connectorId: null,
        proxyId: null,
        target: target === undefined ? "" : formatAuthority(target.host, target.port),
        message: refusal.reason,
      });
      if (!client) {
        this.#rejectionsWithoutProject++;
        return;
      }
      const { projectId } = client;
      this.#demand(projectId, DemandField.rejections);
      this.#countFailure(projectId, null, reason, null);
    } catch {
      // Never raise on the request path.
    }
  }

  /**
   * An attempt through a proxy that failed before any transfer began: one request and one
   * failure for the proxy, its project, connector and host (its time until the failure as its
   * latency), one under its failure key, and one failure described.
   */
  capturing(projectId: string): boolean {
    return this.#captures?.wants(projectId) ?? false;
  }

  captured(projectId: string, capture: MitmCapture): void {
    this.#captures?.capture(projectId, capture);
  }

  attemptFailed(attempt: FailedAttempt): void {
    try {
      this.#attemptsFailed++;
      const keys = this.#keysFor(attempt);
      const deviceKey = this.#deviceKey(attempt.client);
      const kinds = this.#window.kinds;
      const elapsedMs = Number.isFinite(attempt.elapsedMs) ? Math.max(0, attempt.elapsedMs) : 0;
      for (
        const row of [
          kinds.proxy.row(keys.proxy),
          kinds.project.row(keys.project),
          kinds.connector.row(keys.connector),
          kinds.host.row(keys.host, keys.otherHost),
          deviceKey === undefined ? undefined : kinds.device.row(deviceKey),
        ]
      ) {
        if (!row) continue;
        row[TransferField.requests] += 1;
        row[TransferField.failures] += 1;
        row[TransferField.latency_sum_ms] += elapsedMs;
      }
      this.#failed(attempt.client.projectId, attempt.upstream, attempt.target, attempt.note);
      this.#evidence?.attemptFailed(attempt.upstream, attempt.note.kind);
    } catch {
      // Never raise on the request path.
    }
  }

  /** One under the failure key, and the failure described to the failure log. */
  #failed(
    projectId: string,
    upstream: { proxyId: string; connectorId: string },
    target: Target,
    note: FailureNote,
  ): void {
    this.#countFailure(projectId, upstream.connectorId, note.kind, note.vendorStatus);
    this.#failureLog?.record(projectId, {
      atMs: this.#now(),
      kind: note.kind,
      protocol: note.protocol,
      clientStatus: note.clientStatus,
      proxyStatus: note.proxyStatus,
      vendorStatus: note.vendorStatus,
      connectorId: upstream.connectorId,
      proxyId: upstream.proxyId,
      target: formatAuthority(target.host, target.port),
      message: note.message,
    });
  }

  #countFailure(
    projectId: string,
    connectorId: string | null,
    kind: string,
    vendorStatus: number | null,
  ): void {
    const key = this.#keys.metricWindow(
      FailureWindows.name,
      FailureWindows.formatKey({ projectId, connectorId, kind, vendorStatus }),
    );
    const row = this.#window.kinds.failure.row(key);
    if (row) row[FailureField.count] += 1;
  }

  #demand(projectId: string, field: number): void {
    const minute = demandMinute(this.#now());
    let demand = this.#demandKeys.get(projectId);
    if (demand === undefined || demand.minute !== minute) {
      demand = { minute, key: this.#keys.demand(projectId, minute) };
      this.#demandKeys.set(projectId, demand);
    }
    const row = this.#window.kinds.demand.row(demand.key);
    if (row) row[field] += 1;
  }

  /** Adds a meter's unreported bytes to the window's rows. */
  #report(meter: Meter): void {
    const sent = meter.unreportedSentBytes;
    const received = meter.unreportedReceivedBytes;
    if (sent === 0 && received === 0) return;
    meter.unreportedSentBytes = 0;
    meter.unreportedReceivedBytes = 0;
    for (const row of this.#rows(meter)) {
      if (!row) continue;
      row[TransferField.bytes_sent] += sent;
      row[TransferField.bytes_received] += received;
    }
    this.#askIfLimited(meter);
  }

  /** Bytes of a limited connector or project: its decision is asked for with this window. */
  #askIfLimited(meter: Meter): void {
    const limits = this.#trafficLimits;
    if (limits === undefined) return;
    const asks = this.#window.asks;
    if (asks.size >= MAX_ASKS_PER_WINDOW) return;
    const connectorId = meter.upstream.connectorId;
    if (limits.connector(connectorId)) asks.add(connectorSubject(connectorId));
    if (limits.project(meter.projectId)) asks.add(projectSubject(meter.projectId));
  }

  #finish(meter: Meter, outcome: Outcome, failure: FailureNote | undefined): void {
    this.#open.delete(meter);
    this.#report(meter);
    const upstream = meter.upstream;
    if (upstream.rateLimit) this.#rateLimiter?.count(upstream.proxyId, upstream.rateLimit);
    const latencyMs = outcome.latencyMs !== undefined && Number.isFinite(outcome.latencyMs)
      ? Math.max(0, outcome.latencyMs)
      : meter.latencyMs;
    const result = outcome.ok ? TransferField.successes : TransferField.failures;
    for (const row of this.#rows(meter)) {
      if (!row) continue;
      row[TransferField.requests] += 1;
      row[result] += 1;
      row[TransferField.latency_sum_ms] += latencyMs;
    }
    if (!outcome.ok) {
      const note = failure ?? { ...UNDESCRIBED, protocol: meter.protocol };
      this.#failed(meter.projectId, upstream, meter.target, note);
    }
  }

  /**
   * A running transfer through a connector blocked with the interrupt action stops at its next
   * report: blocks come through the feed, so a connector overshoots by at most what one report
   * carries (1 MiB or one interval). The meter still finishes through the transfer's own path.
   */
  #interruptIfBlocked(meter: Meter): void {
    const interrupts = this.#interrupts;
    if (interrupts === undefined || meter.interrupt === undefined || meter.interrupted) return;
    if (!interrupts(meter.upstream.connectorId, meter.projectId)) return;
    meter.interrupted = true;
    this.#interrupted++;
    try {
      meter.interrupt();
    } catch {
      // The transfer ends its own way; metering never raises.
    }
  }

  /** The meter's rows in the current window (looked up once per window, not per report). */
  #rows(meter: Meter): (number[] | undefined)[] {
    const window = this.#window;
    if (meter.rowsWindow === window && meter.rows !== undefined) return meter.rows;
    const kinds = window.kinds;
    const rows = [
      kinds.proxy.row(meter.keys.proxy),
      kinds.project.row(meter.keys.project),
      kinds.connector.row(meter.keys.connector),
      kinds.host.row(meter.keys.host, meter.keys.otherHost),
      meter.deviceKey === undefined ? undefined : kinds.device.row(meter.deviceKey),
    ];
    meter.rows = rows;
    meter.rowsWindow = window;
    return rows;
  }

  /** Running transfers report first, so each window carries their bytes so far. */
  #cut(maxRowsPerPart: number): MeteringPart[] {
    for (const meter of this.#open.values()) {
      this.#interruptIfBlocked(meter);
      this.#report(meter);
    }
    const window = this.#window;
    if (window.rows === 0) return [];
    this.#window = new MeteringWindow(this.#caps, this.#overflow);
    return cutParts(window, maxRowsPerPart, () => this.#nextNumber++);
  }

  // -------------------------------------------------------------------------------------------
  // Lifecycle.

  /** Starts publishing every interval. */
  start(): void {
    this.#publisher.start();
  }

  /** Sends what is owed and pending now (tests); true when nothing is owed afterwards. */
  publishNow(): Promise<boolean> {
    return this.#publisher.publishNow();
  }

  /**
   * Stops the loop and makes one final attempt, under the close deadline, at what is owed and
   * pending. Safe twice; never rejects. Call it after the listeners closed, so every transfer's
   * meter has finished.
   */
  close(): Promise<void> {
    return this.#publisher.close();
  }

  /**
   * What Redis has not taken: the parts owed and their rows, plus the rows counted since the
   * last cut (a close that failed on an owed part never cut them).
   */
  owed(): { parts: number; rows: number } {
    const owed = this.#publisher.owed;
    let rows = this.#window.rows;
    for (const part of owed) rows += part.rows.length;
    return { parts: owed.length, rows };
  }

  stats(): MeteringStats {
    return {
      ...this.#publisher.stats(),
      ...this.#overflow,
      writer: this.writer,
      metersOpen: this.#open.size,
      pendingRows: this.#window.rows,
      finishedTwice: this.#finishedTwice,
      rejectionsWithoutProject: this.#rejectionsWithoutProject,
      transfersInterrupted: this.#interrupted,
      partsAbandoned: this.#partsAbandoned,
      incrementsRefused: this.#incrementsRefused,
      attemptsFailed: this.#attemptsFailed,
    };
  }

  /** This isolate's series for the gateway's /metrics (summed over the process's isolates). */
  samples(): MetricSample[] {
    const s = this.stats();
    return [
      counterSample("octoprox_gateway_metering_sends_total", s.confirmed, 'result="confirmed"'),
      counterSample("octoprox_gateway_metering_sends_total", s.failures, 'result="failed"'),
      gaugeSample("octoprox_gateway_metering_consecutive_failures", s.consecutiveFailures, "max"),
      gaugeSample("octoprox_gateway_metering_owed_parts", s.owedParts),
      gaugeSample("octoprox_gateway_metering_pending_rows", s.pendingRows),
      gaugeSample("octoprox_gateway_metering_meters_open", s.metersOpen),
      counterSample("octoprox_gateway_metering_hosts_folded_total", s.hostsFolded),
      counterSample("octoprox_gateway_metering_rows_dropped_total", s.rowsDropped),
      counterSample("octoprox_gateway_metering_parts_abandoned_total", s.partsAbandoned),
      counterSample("octoprox_gateway_metering_increments_refused_total", s.incrementsRefused),
      counterSample("octoprox_gateway_transfers_interrupted_total", s.transfersInterrupted),
    ];
  }
}
