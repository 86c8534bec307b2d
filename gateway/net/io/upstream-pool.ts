/**
 * Idle keep-alive connections to HTTP(S) upstream proxies, for forwarded requests: a leg whose
 * answer ended cleanly (known framing, HTTP/1.1, no `Connection: close`) waits here for the
 * next request to the same upstream (proxy id, scheme, host, port and credential). Bounded per
 * upstream (UPSTREAM_POOL_MAX_IDLE) and in time (UPSTREAM_POOL_IDLE_MS, below common upstream
 * idle timeouts). An idle leg keeps one read pending: the upstream closing it (or sending
 * anything unasked) takes it out of the pool at once, so a taken leg was open a moment ago.
 * The upstream may still close it as we send: GET and HEAD are then retried once on a fresh
 * connection (gateway/net/http/forward.ts), other methods are not. So a request that cannot be
 * sent again takes only a leg used within UPSTREAM_POOL_UNRETRIED_IDLE_MS, well inside the
 * shortest common upstream idle timeout (Node's 5 s), where that race does not fall. An upstream
 * that closes every leg as soon as it answered (tinyproxy) is learned and its legs not kept for
 * a while (pool-bounds.ts): there the race would fall on every request.
 */
import { ClosingHabits } from "./closing-habits.ts";
import type { Leg } from "./leg.ts";

export { upstreamPoolKey } from "./upstream-key.ts";

import {
  UPSTREAM_POOL_IDLE_MS,
  UPSTREAM_POOL_MAX_IDLE,
  UPSTREAM_POOL_UNRETRIED_IDLE_MS,
} from "./pool-bounds.ts";

export { UPSTREAM_POOL_IDLE_MS, UPSTREAM_POOL_MAX_IDLE, UPSTREAM_POOL_UNRETRIED_IDLE_MS };
const SWEEP_INTERVAL_MS = 5_000;

export interface UpstreamPoolOptions {
  maxIdlePerUpstream?: number;
  idleTimeoutMs?: number;
}

interface IdleEntry {
  leg: Leg;
  sinceMs: number;
  /** Set once taken out (for use, or closed): the parked read's end no longer concerns us. */
  gone: boolean;
}

export class UpstreamPool {
  readonly #maxIdle: number;
  readonly #idleMs: number;
  readonly #idle = new Map<string, IdleEntry[]>();
  readonly #habits = new ClosingHabits();
  /** Legs taken from the pool: one given back again carried a second request. */
  readonly #reused = new WeakSet<Leg>();
  #sweeper: ReturnType<typeof setInterval> | undefined;
  #closed = false;

  constructor(options: UpstreamPoolOptions = {}) {
    this.#maxIdle = options.maxIdlePerUpstream ?? UPSTREAM_POOL_MAX_IDLE;
    this.#idleMs = options.idleTimeoutMs ?? UPSTREAM_POOL_IDLE_MS;
  }

  /** Idle legs held, every upstream together. */
  get size(): number {
    let count = 0;
    for (const entries of this.#idle.values()) count += entries.length;
    return count;
  }

  /**
   * The most recently used open idle leg for `key`, or undefined; with `maxIdleMs`, only one idle
   * for less than that (an older one is left for a request that may be sent again).
   */
  take(key: string, maxIdleMs = this.#idleMs): Leg | undefined {
    const entries = this.#idle.get(key);
    if (!entries) return undefined;
    const now = Date.now();
    let found: Leg | undefined;
    while (entries.length > 0) {
      const entry = entries[entries.length - 1];
      const idleMs = now - entry.sinceMs;
      const usable = !entry.leg.closed && !entry.leg.parkedDone && idleMs < this.#idleMs;
      if (usable && idleMs >= maxIdleMs) break;
      entries.pop();
      entry.gone = true;
      if (usable) {
        found = entry.leg;
        this.#reused.add(found);
        break;
      }
      entry.leg.close();
    }
    if (entries.length === 0) this.#idle.delete(key);
    return found;
  }

  /** Keeps `leg` for the next request to `key`, or closes it (pool full, closed, leg closed). */
  give(key: string, leg: Leg): void {
    if (this.#closed || leg.closed) {
      leg.close();
      return;
    }
    // It answered a request after being kept: this upstream keeps its connections.
    if (this.#reused.has(leg)) this.#habits.reused(key);
    if (!this.#habits.keeps(key)) {
      leg.close();
      return;
    }
    let entries = this.#idle.get(key);
    if (!entries) {
      entries = [];
      this.#idle.set(key, entries);
    }
    if (entries.length >= this.#maxIdle) {
      leg.close();
      return;
    }
    const entry: IdleEntry = { leg, sinceMs: Date.now(), gone: false };
    entries.push(entry);
    // A pooled connection lives long: keepalive finds a peer that vanished while it waits.
    leg.keepAlive();
    leg.park().then(() => {
      // Closed by the upstream, failed, or bytes nobody asked for: not reusable.
      if (entry.gone) return;
      this.#remove(key, entry);
      leg.close();
      this.#habits.closedIdle(key, entry.sinceMs, this.#reused.has(leg));
    });
    this.#startSweeper();
  }

  /** Closes every idle leg; later gives close theirs. Safe to call again. */
  close(): void {
    this.#closed = true;
    if (this.#sweeper !== undefined) {
      clearInterval(this.#sweeper);
      this.#sweeper = undefined;
    }
    for (const entries of this.#idle.values()) {
      for (const entry of entries) {
        entry.gone = true;
        entry.leg.close();
      }
    }
    this.#idle.clear();
  }

  #remove(key: string, entry: IdleEntry): void {
    entry.gone = true;
    const entries = this.#idle.get(key);
    if (!entries) return;
    const index = entries.indexOf(entry);
    if (index >= 0) entries.splice(index, 1);
    if (entries.length === 0) this.#idle.delete(key);
  }

  #startSweeper(): void {
    if (this.#sweeper !== undefined || this.#closed) return;
    this.#sweeper = setInterval(() => this.#sweep(), SWEEP_INTERVAL_MS);
    Deno.unrefTimer(this.#sweeper);
  }

  #sweep(): void {
    const now = Date.now();
    for (const [key, entries] of [...this.#idle]) {
      for (const entry of [...entries]) {
        if (now - entry.sinceMs >= this.#idleMs) {
          this.#remove(key, entry);
          entry.leg.close();
        }
      }
    }
    if (this.#idle.size === 0 && this.#sweeper !== undefined) {
      clearInterval(this.#sweeper);
      this.#sweeper = undefined;
    }
  }
}
