/**
 * How long ago the gateway last read the routing feed, and whether that is past
 * OCTOPROX_FEED_MAX_STALE. The main isolate's feed follower marks each good read; every isolate
 * of the process asks before it routes a new request. The time is one shared word, so worker
 * isolates see the main isolate's reads without a message. Runtime-neutral.
 */

export class FeedFreshness {
  /** 0: off (never stale). */
  readonly maxStaleMs: number;
  readonly buffer: SharedArrayBuffer;
  /** Epoch ms of the last good read; 0 before the first. Aligned doubles do not tear on x64. */
  readonly #lastReadMs: Float64Array;

  /** `buffer` (8 bytes) shares the main isolate's time of the last read. */
  constructor(maxStaleMs: number, buffer: SharedArrayBuffer = new SharedArrayBuffer(8)) {
    this.maxStaleMs = maxStaleMs;
    this.buffer = buffer;
    this.#lastReadMs = new Float64Array(buffer, 0, 1);
  }

  /** A read of the feed verified its head (a new feed applied or the applied one current). */
  read(nowMs: number): void {
    this.#lastReadMs[0] = nowMs;
  }

  /** Milliseconds since the last good read; undefined before the first. */
  ageMs(nowMs: number): number | undefined {
    const last = this.#lastReadMs[0];
    return last === 0 ? undefined : Math.max(0, nowMs - last);
  }

  /** The age when it is past the bound; undefined when fresh, off or before the first read. */
  staleForMs(nowMs: number): number | undefined {
    if (this.maxStaleMs === 0) return undefined;
    const age = this.ageMs(nowMs);
    return age !== undefined && age > this.maxStaleMs ? age : undefined;
  }

  /**
   * How often the follower must read the feed's head, at most, so that a gateway whose reads
   * succeed is never taken for stale: a quarter of the bound, within `defaultMs`.
   */
  recheckIntervalMs(defaultMs: number): number {
    return this.maxStaleMs === 0 ? defaultMs : Math.min(defaultMs, this.maxStaleMs / 4);
  }
}
