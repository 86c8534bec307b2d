/**
 * Pool evidence: this isolate's connect failures through provider-API (pool) proxies, counted in
 * memory by connector and entry and added to the pool's evidence hash in Redis every second
 * (`pool:<connector>:evidence`, HINCRBY, with a short TTL). The pool job takes the hash at its
 * next run and makes each named entry suspect, so every gateway stops choosing it at the next
 * feed publish, before the entry's own re-check comes round.
 *
 * Only failures that say the proxy itself is away count: unreachable (refused, reset), a connect
 * or handshake past its deadline, a close before any answer. A refusal, a wrong status or a
 * broken transfer may be the target's doing, and the pool's checks judge those.
 *
 * One held write at a time under the request deadline; a request never waits on it. A write
 * that fails drops its counts (counted): evidence is a hint, and the pool's checks still come.
 * Runtime-neutral: the caller passes the Redis client (ioredis) and a logger.
 */
import type { GatewayRedis } from "../../shared/redis/contract.ts";
import { AttemptFailureKind, type FailureKind } from "../../shared/failure-kinds.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { withDeadline } from "../../shared/async/deadline.ts";
import { HeldWriteLoop } from "./held-write-loop.ts";
import type { CycleResult } from "../../shared/async/loop.ts";
import { errorText } from "../../shared/errors.ts";
import { counterSample, type MetricSample } from "../base/metrics.ts";
import type { PublisherLogger } from "./publisher.ts";

export const POOL_EVIDENCE_INTERVAL_MS = 1_000;
/** How long a gateway's report waits for the pool job in Redis at most. */
export const POOL_EVIDENCE_TTL_MS = 60_000;
/** Entries counted between two writes at most; failures through others are dropped (counted). */
export const MAX_PENDING_ENTRIES = 10_000;

/** The failures that count as evidence against a proxy. */
const EVIDENCE_KINDS: ReadonlySet<FailureKind> = new Set([
  AttemptFailureKind.upstreamUnreachable,
  AttemptFailureKind.upstreamTimeout,
  AttemptFailureKind.upstreamClosed,
]);

/** Where a failed attempt is told (request metering calls it; memory only, never throws). */
export interface EvidenceRecorder {
  attemptFailed(upstream: { connectorId: string; proxyId: string }, kind: FailureKind): void;
}

export interface PoolEvidenceOptions {
  redis: Pick<GatewayRedis, "pipeline">;
  keys: Pick<RedisKeys, "poolEvidence">;
  /** Whether a connector is a provider-API one (the snapshot in force says). */
  isPool: (connectorId: string) => boolean;
  /** Each write's deadline (OCTOPROX_REDIS_REQUEST_TIMEOUT). */
  writeTimeoutMs: number;
  intervalMs?: number;
  logger?: PublisherLogger;
}

export interface PoolEvidenceStats {
  /** Failures written to Redis, and failures dropped (a failed write, too many entries). */
  written: number;
  dropped: number;
  writeFailures: number;
}

export class PoolEvidence extends HeldWriteLoop implements EvidenceRecorder {
  readonly #o: PoolEvidenceOptions;
  /** Failures by connector, then entry id. */
  #pending = new Map<string, Map<string, number>>();
  #pendingEntries = 0;
  #pendingFailures = 0;
  #written = 0;
  #dropped = 0;
  #writeFailures = 0;
  #failing = false;

  constructor(options: PoolEvidenceOptions) {
    super({ name: "pool_evidence", intervalMs: options.intervalMs ?? POOL_EVIDENCE_INTERVAL_MS });
    this.#o = options;
  }

  attemptFailed(upstream: { connectorId: string; proxyId: string }, kind: FailureKind): void {
    try {
      if (!EVIDENCE_KINDS.has(kind) || this.closing) return;
      if (!this.#o.isPool(upstream.connectorId)) return;
      let entries = this.#pending.get(upstream.connectorId);
      const seen = entries?.get(upstream.proxyId);
      if (seen === undefined && this.#pendingEntries >= MAX_PENDING_ENTRIES) {
        this.#dropped++;
        return;
      }
      if (entries === undefined) this.#pending.set(upstream.connectorId, entries = new Map());
      if (seen === undefined) this.#pendingEntries++;
      entries.set(upstream.proxyId, (seen ?? 0) + 1);
      this.#pendingFailures++;
    } catch {
      // Never raise on the request path.
    }
  }

  /** Counted as idle when nothing was pending. */
  protected override async cycle(): Promise<CycleResult> {
    const had = this.#pendingFailures > 0;
    await this.publishNow();
    return had;
  }

  /** One pipeline: HINCRBY per entry and a PEXPIRE per connector; never rejects. */
  protected override async writePending(): Promise<void> {
    const batch = this.#pending;
    const failures = this.#pendingFailures;
    if (failures === 0) return;
    this.#pending = new Map();
    this.#pendingEntries = 0;
    this.#pendingFailures = 0;
    try {
      const replies = await withDeadline("pool evidence write", this.#o.writeTimeoutMs, () => {
        const pipeline = this.#o.redis.pipeline();
        for (const [connectorId, entries] of batch) {
          const key = this.#o.keys.poolEvidence(connectorId);
          for (const [entryId, count] of entries) pipeline.hincrby(key, entryId, count);
          pipeline.pexpire(key, POOL_EVIDENCE_TTL_MS);
        }
        return pipeline.exec();
      });
      const refused = replies?.find(([error]) => error !== null);
      if (replies === null || refused !== undefined) {
        throw refused?.[0] ?? new Error("Pipeline discarded");
      }
      this.#written += failures;
      if (this.#failing) {
        this.#failing = false;
        this.#o.logger?.info("Pool evidence written again", {});
      }
    } catch (error) {
      this.#dropped += failures;
      this.#writeFailures++;
      // One line per failure streak: a lasting outage must not flood the log.
      if (!this.#failing) {
        this.#failing = true;
        this.#o.logger?.error("Pool evidence not written; dropped", {
          error: errorText(error),
          failures,
        });
      }
    }
  }

  stats(): PoolEvidenceStats {
    return { written: this.#written, dropped: this.#dropped, writeFailures: this.#writeFailures };
  }

  /** This isolate's series for the gateway's /metrics (summed over the process's isolates). */
  samples(): MetricSample[] {
    const name = "octoprox_gateway_pool_evidence_total";
    return [
      counterSample(name, this.#written, 'result="written"'),
      counterSample(name, this.#dropped, 'result="dropped"'),
    ];
  }
}
