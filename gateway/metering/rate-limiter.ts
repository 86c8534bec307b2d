/**
 * The rate limiter: every completed request through a connector with a rate limit is counted in
 * its proxy's sliding window in Redis (shared/lua/rate_window.lua), shared by every gateway; the
 * request that fills the window trips the proxy into quarantine there, and this gateway excludes
 * it at once (`tripped`, the router's local quarantine) until the feed carries it.
 *
 * The request never waits: `count` only adds to memory, and the windows are written by one held
 * task at a time, which sends every proxy's requests of the turn together (one script call per
 * proxy) under the request deadline. A call that fails or times out drops what it carried: a rate
 * limit is a courtesy to the vendor, never a reason to refuse traffic. So an outage holds at most
 * one turn's counts in memory, bounded by `maxPendingProxies`.
 *
 * Runtime-neutral: the caller passes the Redis client and the script (gateway/metering/lua.ts).
 */
import type { FeedRateLimit } from "../../shared/feed/models.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { STREAM_CAPS } from "../../shared/redis-keys.ts";
import { withDeadline } from "../../shared/async/deadline.ts";
import { counterSample, type MetricSample } from "../base/metrics.ts";
import type { PublisherLogger } from "./publisher.ts";
import { type LuaScript, runScript, type ScriptClient } from "../../shared/lua/loader.ts";

/** Proxies with counts waiting for the next write; a request beyond them is not counted. */
export const MAX_PENDING_PROXIES = 100_000;

export interface RateLimiterOptions {
  redis: ScriptClient;
  keys: RedisKeys;
  /** shared/lua/rate_window.lua, registered. */
  script: LuaScript;
  /** Makes this limiter's window members unique among every gateway's (the metering writer). */
  writer: string;
  /** Each write's deadline (OCTOPROX_REDIS_REQUEST_TIMEOUT, 2 s). */
  requestTimeoutMs: number;
  /** Told of each trip: the proxy rests until `untilMs` (the router's local quarantine). */
  tripped(proxyId: string, untilMs: number): void;
  random?: () => number;
  nowMs?: () => number;
  maxPendingProxies?: number;
  logger?: PublisherLogger;
}

export interface RateLimiterStats {
  /** Requests whose window write Redis confirmed. */
  counted: number;
  /** Requests dropped: their write failed, or too many proxies were waiting. */
  dropped: number;
  trips: number;
  writeFailures: number;
  pendingProxies: number;
  /** Requests counted in memory and not written yet. */
  pendingRequests: number;
}

interface Pending {
  limit: FeedRateLimit;
  requests: number;
}

/** The rest a trip asks for: a whole number of seconds from min to max, drawn at random. */
export function quarantineMs(limit: FeedRateLimit, random: () => number): number {
  const min = Math.max(1, limit.quarantine_seconds_min);
  const max = Math.max(min, limit.quarantine_seconds_max);
  return (min + Math.floor(random() * (max - min + 1))) * 1000;
}

export class RateLimiter {
  readonly #o: RateLimiterOptions;
  readonly #random: () => number;
  readonly #nowMs: () => number;
  readonly #maxPending: number;
  #pending = new Map<string, Pending>();
  /** The write under way, if any: one at a time. */
  #writing: Promise<void> | undefined;
  #calls = 0;
  #closed = false;
  #failing = false;
  readonly #stats = { counted: 0, dropped: 0, trips: 0, writeFailures: 0 };

  constructor(options: RateLimiterOptions) {
    this.#o = options;
    this.#random = options.random ?? Math.random;
    this.#nowMs = options.nowMs ?? Date.now;
    this.#maxPending = options.maxPendingProxies ?? MAX_PENDING_PROXIES;
  }

  /** One completed request through `proxyId`, whose connector has `limit`. Memory only. */
  count(proxyId: string, limit: FeedRateLimit): void {
    try {
      const pending = this.#pending.get(proxyId);
      if (pending !== undefined) {
        pending.requests++;
        pending.limit = limit;
      } else if (this.#pending.size >= this.#maxPending) {
        this.#stats.dropped++;
        return;
      } else {
        this.#pending.set(proxyId, { limit, requests: 1 });
      }
      if (this.#writing === undefined && !this.#closed) this.#schedule();
    } catch {
      // Never raise on the request path.
    }
  }

  /** A write soon, after the requests finishing in this turn have been counted too. */
  #schedule(): void {
    this.#writing = new Promise<void>((resolve) => setTimeout(resolve, 0))
      .then(() => this.#writeAll())
      .finally(() => {
        this.#writing = undefined;
        if (this.#pending.size !== 0 && !this.#closed) this.#schedule();
      });
  }

  /** Writes every waiting proxy's requests; never rejects. */
  async #writeAll(): Promise<void> {
    const batch = this.#pending;
    if (batch.size === 0) return;
    this.#pending = new Map();
    const nowMs = this.#nowMs();
    const writes: Promise<void>[] = [];
    for (const [proxyId, pending] of batch) writes.push(this.#write(proxyId, pending, nowMs));
    await Promise.all(writes);
  }

  async #write(proxyId: string, pending: Pending, nowMs: number): Promise<void> {
    const { limit, requests } = pending;
    const keys = this.#o.keys;
    // More than fill the window would add nothing: the window trips and starts over.
    const n = Math.min(requests, Math.max(1, limit.max_requests));
    try {
      const reply = await withDeadline(
        "rate window write",
        this.#o.requestTimeoutMs,
        () =>
          runScript(this.#o.redis, this.#o.script, [
            keys.proxyRequests(proxyId),
            keys.proxyQuarantined,
            keys.runtimeStream,
          ], [
            String(nowMs),
            String(limit.window_seconds * 1000),
            String(limit.max_requests),
            String(n),
            `${this.#o.writer}:${++this.#calls}`,
            String(nowMs + quarantineMs(limit, this.#random)),
            proxyId,
            String(STREAM_CAPS.runtime),
          ]),
      );
      this.#stats.counted += requests;
      this.#recovered();
      const untilMs = Number(reply);
      if (untilMs > 0) {
        this.#stats.trips++;
        this.#o.tripped(proxyId, untilMs);
      }
    } catch (error) {
      this.#stats.dropped += requests;
      this.#stats.writeFailures++;
      if (!this.#failing) {
        this.#failing = true;
        this.#o.logger?.error("Rate-limit windows not written; requests go through uncounted", {
          error: error instanceof Error ? error.message : String(error),
        });
      }
    }
  }

  #recovered(): void {
    if (!this.#failing) return;
    this.#failing = false;
    this.#o.logger?.info("Rate-limit windows written again");
  }

  /** Resolves once every request counted so far has had its write (confirmed or dropped). */
  async flush(): Promise<void> {
    while (this.#writing !== undefined) await this.#writing;
    await this.#writeAll();
  }

  /**
   * Writes what is waiting and stops counting into Redis. Safe twice; never rejects. Call it once
   * the listeners closed, before metering's own close.
   */
  close(): Promise<void> {
    this.#closed = true;
    return this.flush();
  }

  stats(): RateLimiterStats {
    let pendingRequests = 0;
    for (const pending of this.#pending.values()) pendingRequests += pending.requests;
    return { ...this.#stats, pendingProxies: this.#pending.size, pendingRequests };
  }

  /** This isolate's series for the gateway's /metrics (summed over the process's isolates). */
  samples(): MetricSample[] {
    const s = this.stats();
    return [
      counterSample("octoprox_gateway_rate_limit_requests_total", s.counted, 'result="counted"'),
      counterSample("octoprox_gateway_rate_limit_requests_total", s.dropped, 'result="dropped"'),
      counterSample("octoprox_gateway_rate_limit_trips_total", s.trips),
      counterSample("octoprox_gateway_rate_limit_write_failures_total", s.writeFailures),
    ];
  }
}
