/**
 * A project's request-rate limit, held across every gateway: one token bucket per project in
 * Redis (shared/lua/project_rate_lease.lua), refilled at the project's rate up to its burst by
 * Redis's own clock. A gateway never asks Redis per request: it leases tokens a chunk at a time
 * (the rate times `leaseMs`, 100 ms by default) and spends them from memory, asking for the next
 * chunk in the background while some are left, so a request under the limit costs a map lookup
 * and a decrement. A request finding no token waits for the lease under way (under the request
 * deadline); once the bucket answers empty, requests are refused locally until it holds a token
 * again (and a random share of a token's time more, so gateways do not all ask at once), so a
 * project over its limit costs Redis nothing per refusal.
 *
 * What holds: every gateway together spends at most what the bucket handed out, the rate times
 * the time plus the burst. Tokens a gateway leased and did not spend within `leaseLifeMs` are
 * dropped, so the project can be held below its rate by at most one chunk per gateway (and
 * isolate) a lease life. When Redis does not answer, each gateway (isolate) falls back to a
 * bucket of its own at the project's rate and burst, and asks Redis again in the background
 * every `fallbackMs` until a lease answers, so no request waits on a Redis that is away twice:
 * a rate limit fails open, bounded per gateway (isolate) by the project's own rate.
 *
 * Runtime-neutral: the caller passes the Redis client and the script.
 */
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { withDeadline } from "../../shared/async/deadline.ts";
import { type LuaScript, runScript, type ScriptClient } from "../../shared/lua/loader.ts";
import { counterSample, type MetricSample } from "../base/metrics.ts";

export interface RequestRate {
  requests_per_second: number;
  burst: number;
}

export interface RequestRateOptions {
  redis: ScriptClient;
  keys: RedisKeys;
  /** shared/lua/project_rate_lease.lua, registered. */
  script: LuaScript;
  /** A lease's deadline (OCTOPROX_REDIS_REQUEST_TIMEOUT). */
  requestTimeoutMs: number;
  /** The time one chunk of tokens covers at the project's rate. */
  leaseMs?: number;
  /** Unspent leased tokens are dropped after this. */
  leaseLifeMs?: number;
  /** After Redis failed a lease, the local bucket serves at least this long before Redis is asked again. */
  fallbackMs?: number;
  /** Projects tracked at most (the first tracked go first). */
  maxProjects?: number;
  nowMs?: () => number;
  /** In [0, 1): the random share of an empty bucket's wait (tests pass their own). */
  random?: () => number;
}

/**
 * How long a gateway refuses locally after the bucket answered empty: `waitMs` until it holds a
 * token, plus a random share of one token's refill at `rate` a second. The share is of a whole
 * token's time, not of `waitMs`, so a gateway that asked late (a short wait) is not favoured.
 */
export function emptyWaitMs(waitMs: number, rate: number, random: number): number {
  return Math.max(1, waitMs) + Math.floor(random * (1000 / rate));
}

export interface RequestRateStats {
  admitted: number;
  refused: number;
  /** Lease calls, and those Redis did not answer. */
  leases: number;
  leaseFailures: number;
  /** Requests admitted by a local bucket while Redis was away. */
  admittedLocally: number;
}

interface Bucket {
  rate: RequestRate;
  /** Leased tokens not spent yet. */
  allowance: number;
  leasedAtMs: number;
  lease: Promise<void> | undefined;
  /** Requests waiting for the lease under way. */
  waiting: number;
  /** The shared bucket answered empty: refuse locally until it holds a token again. */
  emptyUntilMs: number;
  /**
   * Redis failed a lease: the local bucket serves until a lease answers, which is asked again
   * in the background from this time on (0: Redis answers).
   */
  fallbackUntilMs: number;
  localTokens: number;
  localAtMs: number;
}

export class RequestRateLimiter {
  readonly #o: RequestRateOptions;
  readonly #now: () => number;
  readonly #random: () => number;
  readonly #leaseMs: number;
  readonly #leaseLifeMs: number;
  readonly #fallbackMs: number;
  readonly #maxProjects: number;
  readonly #buckets = new Map<string, Bucket>();
  readonly #stats: RequestRateStats = {
    admitted: 0,
    refused: 0,
    leases: 0,
    leaseFailures: 0,
    admittedLocally: 0,
  };

  constructor(options: RequestRateOptions) {
    this.#o = options;
    this.#now = options.nowMs ?? Date.now;
    this.#random = options.random ?? Math.random;
    this.#leaseMs = options.leaseMs ?? 100;
    this.#leaseLifeMs = options.leaseLifeMs ?? 1_000;
    this.#fallbackMs = options.fallbackMs ?? 1_000;
    this.#maxProjects = options.maxProjects ?? 100_000;
  }

  /**
   * Whether one request of the project may go: at once from the tokens in hand (the usual
   * case), else once the lease under way answered. Never rejects.
   */
  admit(projectId: string, rate: RequestRate): boolean | Promise<boolean> {
    const bucket = this.#bucket(projectId, rate);
    const nowMs = this.#now();
    if (bucket.fallbackUntilMs !== 0) {
      // Redis away: ask it again in the background, never making a request wait for it.
      if (nowMs >= bucket.fallbackUntilMs) void this.#lease(projectId, bucket);
      return this.#takeLocally(bucket, nowMs);
    }
    if (bucket.allowance > 0 && nowMs - bucket.leasedAtMs < this.#leaseLifeMs) {
      bucket.allowance -= 1;
      this.#stats.admitted += 1;
      if (bucket.allowance <= this.#chunk(bucket) / 2) void this.#lease(projectId, bucket);
      return true;
    }
    if (nowMs < bucket.emptyUntilMs) return this.#refuse();
    return this.#admitAfterLease(projectId, bucket);
  }

  async #admitAfterLease(projectId: string, bucket: Bucket): Promise<boolean> {
    bucket.waiting += 1;
    try {
      // A lease answering in full may leave more in the bucket: one more round, at most two.
      for (let round = 0; round < 2; round++) {
        await this.#lease(projectId, bucket);
        const nowMs = this.#now();
        if (bucket.fallbackUntilMs !== 0) return this.#takeLocally(bucket, nowMs);
        if (bucket.allowance > 0) {
          bucket.allowance -= 1;
          this.#stats.admitted += 1;
          return true;
        }
        if (nowMs < bucket.emptyUntilMs) break;
      }
      return this.#refuse();
    } finally {
      bucket.waiting -= 1;
    }
  }

  #refuse(): false {
    this.#stats.refused += 1;
    return false;
  }

  /** Tokens a lease asks for: the rate over one lease, at least one. */
  #chunk(bucket: Bucket): number {
    return Math.max(1, Math.ceil((bucket.rate.requests_per_second * this.#leaseMs) / 1000));
  }

  /** The lease under way, or a new one; never rejects. */
  #lease(projectId: string, bucket: Bucket): Promise<void> {
    if (bucket.lease) return bucket.lease;
    const asked = this.#chunk(bucket) + bucket.waiting;
    const { redis, keys, script, requestTimeoutMs } = this.#o;
    this.#stats.leases += 1;
    const lease = withDeadline(
      "request-rate lease",
      requestTimeoutMs,
      () =>
        runScript(redis, script, [keys.projectRate(projectId)], [
          String(bucket.rate.requests_per_second),
          String(bucket.rate.burst),
          String(asked),
        ]),
    ).then((reply) => {
      const [granted, waitMs] = Array.isArray(reply) ? reply.map(Number) : [Number.NaN, 0];
      if (!Number.isFinite(granted)) throw new Error(`Unexpected lease reply ${String(reply)}`);
      const nowMs = this.#now();
      // Tokens past their life are dropped with the new lease.
      const kept = nowMs - bucket.leasedAtMs < this.#leaseLifeMs ? bucket.allowance : 0;
      bucket.allowance = kept + granted;
      bucket.leasedAtMs = nowMs;
      // Empty: wait until it holds a token, plus a random share of that, so gateways told the
      // same do not all ask at one moment, where the first to ask would win every token.
      bucket.emptyUntilMs = granted === 0
        ? nowMs + emptyWaitMs(waitMs, bucket.rate.requests_per_second, this.#random())
        : 0;
      bucket.fallbackUntilMs = 0;
    }).catch(() => {
      this.#stats.leaseFailures += 1;
      const nowMs = this.#now();
      if (bucket.fallbackUntilMs === 0) {
        // Starting afresh: a local bucket as full as a new project's.
        bucket.localTokens = bucket.rate.burst;
        bucket.localAtMs = nowMs;
      }
      bucket.fallbackUntilMs = nowMs + this.#fallbackMs;
    }).finally(() => {
      bucket.lease = undefined;
    });
    bucket.lease = lease;
    return lease;
  }

  /** Redis away: this gateway's own bucket at the project's rate and burst. */
  #takeLocally(bucket: Bucket, nowMs: number): boolean {
    const { requests_per_second: rate, burst } = bucket.rate;
    bucket.localTokens = Math.min(
      burst,
      bucket.localTokens + ((nowMs - bucket.localAtMs) * rate) / 1000,
    );
    bucket.localAtMs = nowMs;
    if (bucket.localTokens >= 1) {
      bucket.localTokens -= 1;
      this.#stats.admitted += 1;
      this.#stats.admittedLocally += 1;
      return true;
    }
    return this.#refuse();
  }

  #bucket(projectId: string, rate: RequestRate): Bucket {
    let bucket = this.#buckets.get(projectId);
    if (
      bucket === undefined || bucket.rate.requests_per_second !== rate.requests_per_second ||
      bucket.rate.burst !== rate.burst
    ) {
      if (bucket === undefined && this.#buckets.size >= this.#maxProjects) {
        const oldest = this.#buckets.keys().next();
        if (oldest.done !== true) this.#buckets.delete(oldest.value);
      }
      bucket = {
        rate: { requests_per_second: rate.requests_per_second, burst: rate.burst },
        allowance: 0,
        leasedAtMs: 0,
        lease: undefined,
        waiting: 0,
        emptyUntilMs: 0,
        fallbackUntilMs: 0,
        localTokens: rate.burst,
        localAtMs: this.#now(),
      };
      this.#buckets.set(projectId, bucket);
    }
    return bucket;
  }

  stats(): RequestRateStats {
    return { ...this.#stats };
  }

  /** This isolate's series for the gateway's /metrics (summed over the process's isolates). */
  samples(): MetricSample[] {
    const s = this.#stats;
    return [
      counterSample(
        "octoprox_gateway_project_rate_requests_total",
        s.admitted - s.admittedLocally,
        'result="admitted"',
      ),
      counterSample(
        "octoprox_gateway_project_rate_requests_total",
        s.admittedLocally,
        'result="admitted_locally"',
      ),
      counterSample("octoprox_gateway_project_rate_requests_total", s.refused, 'result="refused"'),
      counterSample(
        "octoprox_gateway_project_rate_leases_total",
        s.leases - s.leaseFailures,
        'result="leased"',
      ),
      counterSample(
        "octoprox_gateway_project_rate_leases_total",
        s.leaseFailures,
        'result="failed"',
      ),
    ];
  }
}
