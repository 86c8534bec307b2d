/**
 * One side of what the gateway relays (the client's connection, or the one to an upstream),
 * around a Deno.Conn: explicit reads into the caller's buffer, whole writes, a half-close, a
 * deadline that aborts it, and a close that is safe to call any number of times.
 */

/** How long closing a leg waits for a write still under way (a peer that stopped reading). */
export const CLOSE_DRAIN_MS = 5_000;

/** Resolves true when `promise` settles within `ms`, false otherwise; never rejects. */
export function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    promise.then(
      () => {
        clearTimeout(timer);
        resolve(true);
      },
      () => {
        clearTimeout(timer);
        resolve(true);
      },
    );
  });
}

/** Turns on TCP keepalive and no-delay where the connection is TCP (a TLS one is set before). */
export function tuneTcp(conn: Deno.Conn): void {
  const tcp = conn as Partial<Deno.TcpConn>;
  try {
    // Deno sets keepalive on or off only: the probe timing is the kernel's (docs/gateway.md).
    tcp.setKeepAlive?.(true);
    tcp.setNoDelay?.(true);
  } catch {
    // A connection that closed meanwhile: its next read says so.
  }
}

interface ParkedRead {
  count: number | null;
  bytes: Uint8Array;
  failed?: boolean;
  error?: unknown;
}

export class Leg {
  readonly conn: Deno.Conn;
  /** When the last read or write finished (ms since the epoch), for idle checks. */
  lastActivityMs: number;
  #closed = false;
  #writing: Promise<void> | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timedOut = false;
  /** A read started while the leg waited idle in the upstream pool; the next `read` takes it. */
  #parked: Promise<ParkedRead> | undefined;
  #parkedDone = false;

  constructor(conn: Deno.Conn) {
    this.conn = conn;
    this.lastActivityMs = Date.now();
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** The deadline passed and closed the leg (as opposed to the peer, or our own cancel). */
  get timedOut(): boolean {
    return this.#timedOut;
  }

  /** A write is under way (bytes the peer has not taken yet). */
  get writing(): boolean {
    return this.#writing !== undefined;
  }

  /** The parked read ended (the peer closed, failed, or sent bytes) and nobody took it yet. */
  get parkedDone(): boolean {
    return this.#parked !== undefined && this.#parkedDone;
  }

  /**
   * Starts a read while the leg waits idle (gateway/net/upstream-pool.ts), so the peer closing
   * it is seen at once; resolves when that read ended, never rejects. The next `read` gets its
   * result (bytes, end of stream or failure) as if it had made it.
   */
  park(): Promise<void> {
    const bytes = new Uint8Array(1);
    this.#parkedDone = false;
    const parked = this.conn.read(bytes).then(
      (count): ParkedRead => ({ count, bytes }),
      (error): ParkedRead => ({ count: null, bytes, failed: true, error }),
    );
    this.#parked = parked;
    return parked.then(() => {
      if (this.#parked === parked) this.#parkedDone = true;
    });
  }

  /** Reads into `buffer`: the count read, or null at the peer's end of stream. Throws on failure. */
  async read(buffer: Uint8Array): Promise<number | null> {
    const parked = this.#parked;
    if (parked !== undefined) {
      this.#parked = undefined;
      this.#parkedDone = false;
      const result = await parked;
      this.lastActivityMs = Date.now();
      if (result.failed) throw result.error;
      if (result.count === null || result.count === 0) return result.count;
      buffer.set(result.bytes.subarray(0, result.count));
      return result.count;
    }
    const count = await this.conn.read(buffer);
    this.lastActivityMs = Date.now();
    return count;
  }

  /** Writes all of `bytes` (Deno may take a part per call). Throws on failure. */
  async write(bytes: Uint8Array): Promise<void> {
    const writing = this.#writeAll(bytes);
    this.#writing = writing;
    try {
      await writing;
    } finally {
      this.#writing = undefined;
      this.lastActivityMs = Date.now();
    }
  }

  async #writeAll(bytes: Uint8Array): Promise<void> {
    let view = bytes;
    while (view.length > 0) {
      const written = await this.conn.write(view);
      view = view.subarray(written);
      // Progress, for the idle check: a slow reader still taking bytes is not idle.
      this.lastActivityMs = Date.now();
    }
  }

  /** Sends our end of stream (half-close); the peer may still send. Never throws. */
  async closeWrite(): Promise<void> {
    if (this.#closed) return;
    try {
      await this.conn.closeWrite();
    } catch {
      // Already shut, or reset: the other direction finds out on its own.
    }
  }

  /** Closes at once, aborting pending reads and writes. Safe to call again. */
  close(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.conn.close();
    } catch {
      // Closed by the runtime already (a consumed or failed resource).
    }
  }

  /**
   * Closes once the write under way finished, waiting at most `maxWaitMs`: a peer that
   * stopped reading never takes those bytes, and must not hold the leg.
   */
  async closeAfterWrites(maxWaitMs: number = CLOSE_DRAIN_MS): Promise<void> {
    const writing = this.#writing;
    if (writing && !this.#closed) await settlesWithin(writing, maxWaitMs);
    this.close();
  }

  /**
   * Closes after an answer sent without reading the whole request: half-close first, then
   * read and drop what the client still sends for a moment. Closing with unread bytes makes
   * the kernel send a reset, which can destroy the answer before the client reads it.
   */
  async lingerClose(buffer: Uint8Array, maxWaitMs = 2_000, maxBytes = 256 * 1024): Promise<void> {
    if (this.#closed) return;
    await this.closeWrite();
    this.setDeadline(maxWaitMs);
    try {
      let dropped = 0;
      while (dropped < maxBytes) {
        const count = await this.conn.read(buffer);
        if (count === null) break;
        dropped += count;
      }
    } catch {
      // Reset, or the deadline closed it: either way we are done.
    } finally {
      this.close();
    }
  }

  /** Closes the leg when `ms` pass before `clearDeadline`; `timedOut` then says so. */
  setDeadline(ms: number): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#closed) return;
      this.#timedOut = true;
      this.close();
    }, ms);
  }

  clearDeadline(): void {
    if (this.#timer === undefined) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
