/**
 * Preflight's verdicts in Redis, one key per project and proxy (`preflightVerdict`), shared by
 * every gateway and isolate: what an echo through the proxy saw, for the requirement it was
 * judged against. A read runs under the request deadline and fails open (a miss: one echo); a
 * write is never waited for. What a verdict is worth on a later request is the checker's call
 * (preflight-check.ts): the cache only keeps it.
 */
import type { GatewayRedis } from "../../shared/redis/contract.ts";
import { withDeadline } from "../../shared/async/deadline.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";

/** How long an echo that failed keeps traffic going unchecked before the next try. */
export const FAILED_ECHO_TTL_SECONDS = 30;

export interface CachedVerdict {
  /** The country the request that made it required. */
  requirement: string;
  /** Where the exit was placed; null when nothing could place it or the echo failed. */
  country: string | null;
  /** The exit's address; null when the echo failed. */
  ip: string | null;
  /** The echo failed: traffic goes on unchecked until the verdict expires. */
  failed: boolean;
}

export function encodeVerdict(v: CachedVerdict): string {
  return JSON.stringify({ r: v.requirement, c: v.country, ip: v.ip, f: v.failed ? 1 : 0 });
}

/** Undefined for anything that is not one of ours (another release's, a damaged value). */
export function decodeVerdict(text: string | null): CachedVerdict | undefined {
  if (text === null) return undefined;
  try {
    const raw = JSON.parse(text) as Record<string, unknown>;
    if (typeof raw.r !== "string") return undefined;
    return {
      requirement: raw.r,
      country: typeof raw.c === "string" ? raw.c : null,
      ip: typeof raw.ip === "string" ? raw.ip : null,
      failed: raw.f === 1,
    };
  } catch {
    return undefined;
  }
}

export interface VerdictCacheStats {
  /** Reads that failed or ran past the deadline (each treated as a miss). */
  readFailures: number;
  writeFailures: number;
}

export class VerdictCache {
  readonly #redis: Pick<GatewayRedis, "get" | "set">;
  readonly #keys: Pick<RedisKeys, "preflightVerdict">;
  readonly #timeoutMs: number;
  #readFailures = 0;
  #writeFailures = 0;

  constructor(options: {
    redis: Pick<GatewayRedis, "get" | "set">;
    keys: Pick<RedisKeys, "preflightVerdict">;
    /** The request deadline (OCTOPROX_REDIS_REQUEST_TIMEOUT). */
    timeoutMs: number;
  }) {
    this.#redis = options.redis;
    this.#keys = options.keys;
    this.#timeoutMs = options.timeoutMs;
  }

  /** The verdict kept for the pair; undefined for none, and for a read that failed. */
  async read(projectId: string, proxyId: string): Promise<CachedVerdict | undefined> {
    const key = this.#keys.preflightVerdict(projectId, proxyId);
    try {
      const text = await withDeadline(
        "preflight verdict read",
        this.#timeoutMs,
        () => this.#redis.get(key),
      );
      return decodeVerdict(text);
    } catch {
      // Failing open: the request pays one echo rather than waiting on Redis.
      this.#readFailures++;
      return undefined;
    }
  }

  /** Keeps a verdict for `ttlSeconds`; never waited for by a request, never rejects. */
  write(projectId: string, proxyId: string, verdict: CachedVerdict, ttlSeconds: number): void {
    const key = this.#keys.preflightVerdict(projectId, proxyId);
    const ttl = Math.max(1, Math.round(ttlSeconds));
    withDeadline(
      "preflight verdict write",
      this.#timeoutMs,
      () => this.#redis.set(key, encodeVerdict(verdict), "EX", ttl),
    ).catch(() => {
      // The next request on another gateway echoes again: a cost, not a fault.
      this.#writeFailures++;
    });
  }

  stats(): VerdictCacheStats {
    return { readFailures: this.#readFailures, writeFailures: this.#writeFailures };
  }
}
