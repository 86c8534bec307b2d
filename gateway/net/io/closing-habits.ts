/**
 * What the upstream keep-alive pool (upstream-pool.ts) learns of each upstream's closing: one
 * that closes every connection as soon as it answered, without saying so (tinyproxy answers
 * HTTP/1.1 and closes), is found by UPSTREAM_POOL_CLOSED_AT_ONCE_TIMES idle connections in a row
 * closed within UPSTREAM_POOL_CLOSED_AT_ONCE_MS of their answers, none of them used for a second
 * request, and its connections are then not kept for UPSTREAM_POOL_UNKEPT_MS. Runtime-neutral.
 */
import { BoundedMap } from "../../../shared/bounded-map.ts";
import {
  UPSTREAM_POOL_CLOSED_AT_ONCE_MS,
  UPSTREAM_POOL_CLOSED_AT_ONCE_TIMES,
  UPSTREAM_POOL_UNKEPT_MS,
} from "./pool-bounds.ts";

/** Upstreams remembered (started afresh when full). */
const REMEMBERED_UPSTREAMS = 4_096;

export class ClosingHabits {
  /** Idle connections each upstream closed at once in a row, none reused meanwhile. */
  readonly #closedAtOnce = new BoundedMap<string, number>(REMEMBERED_UPSTREAMS);
  /** Upstreams that close after every answer: until when their connections are not kept. */
  readonly #unkeptUntil = new BoundedMap<string, number>(REMEMBERED_UPSTREAMS);
  readonly #nowMs: () => number;

  constructor(nowMs: () => number = Date.now) {
    this.#nowMs = nowMs;
  }

  /** Whether `key`'s connections may be kept now. */
  keeps(key: string): boolean {
    return (this.#unkeptUntil.get(key) ?? 0) <= this.#nowMs();
  }

  /** A connection of `key` carried a second request: it keeps its connections. */
  reused(key: string): void {
    this.#closedAtOnce.set(key, 0);
  }

  /**
   * The upstream closed an idle connection kept since `keptSinceMs`; `wasReused`: it had carried
   * a second request.
   */
  closedIdle(key: string, keptSinceMs: number, wasReused: boolean): void {
    const now = this.#nowMs();
    if (wasReused || now - keptSinceMs >= UPSTREAM_POOL_CLOSED_AT_ONCE_MS) {
      this.#closedAtOnce.set(key, 0);
      return;
    }
    const times = (this.#closedAtOnce.get(key) ?? 0) + 1;
    if (times < UPSTREAM_POOL_CLOSED_AT_ONCE_TIMES) {
      this.#closedAtOnce.set(key, times);
      return;
    }
    this.#closedAtOnce.set(key, 0);
    this.#unkeptUntil.set(key, now + UPSTREAM_POOL_UNKEPT_MS);
  }
}
