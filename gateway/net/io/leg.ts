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

/**
 * How old a leg is when its TCP keepalive goes on (Leg.keepAlive). Probes start only after a
 * minute of silence (infra/sysctl), so switching it on a few seconds in changes nothing a peer
 * sees, and spares the many short connections (most tunnels) a system call each.
 */
export const KEEPALIVE_AFTER_MS = 5_000;

/** Turns on no-delay where the connection is TCP (a TLS one is set before). */
export function tuneTcp(conn: Deno.Conn): void {
  try {
    (conn as Partial<Deno.TcpConn>).setNoDelay?.(true);
  } catch {
    // A connection that closed meanwhile: its next read says so.
  }
}

interface ParkedRead {
  count: number | null;
  failed?: boolean;
  error?: unknown;
}

/**
 * What a parked read may take: an answer's head (and a small body) arrives in one read, so the
 * exchange that takes the leg does not read again for it.
 */
const PARK_BUFFER_BYTES = 4096;

export class Leg {
  readonly conn: Deno.Conn;
  /** When the last read started or write ended (ms since the epoch), for idle checks. */
  lastActivityMs: number;
  #closed = false;
  #writing: Promise<void> | undefined;
  #writeNumber = 0;
  /** When the deadline passes (ms since the epoch), 0 when none is set. */
  #deadlineAtMs = 0;
  /** The timer enforcing it: it may fire early (a deadline moved later), and then re-arms. */
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerAtMs = 0;
  #timedOut = false;
  /** A read started while the leg waited idle in the upstream pool; the next `read` takes it. */
  #parked: Promise<ParkedRead> | undefined;
  #parkedDone = false;
  #parkBuffer: Uint8Array | undefined;
  #keptAlive = false;
  /** Parked bytes that did not fit the buffer of the read that took them. */
  #leftover: Uint8Array | undefined;

  constructor(conn: Deno.Conn) {
    this.conn = conn;
    this.lastActivityMs = Date.now();
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Turns TCP keepalive on, once (a TLS leg's TCP beneath it is not reached: Deno does not
   * expose it). Deno sets it on or off only: probe timing is the kernel's (docs/gateway.md).
   */
  keepAlive(): void {
    if (this.#keptAlive || this.#closed) return;
    this.#keptAlive = true;
    try {
      (this.conn as Partial<Deno.TcpConn>).setKeepAlive?.(true);
    } catch {
      // Closed meanwhile.
    }
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
   * Starts a read while the leg waits idle (gateway/net/io/upstream-pool.ts), so the peer closing
   * it is seen at once; resolves when that read ended, never rejects. The next `read` gets its
   * result (bytes, end of stream or failure) as if it had made it.
   */
  park(): Promise<void> {
    // One buffer per leg: a leg parks again only after the read that took the last one.
    const bytes = this.#parkBuffer ??= new Uint8Array(PARK_BUFFER_BYTES);
    this.#parkedDone = false;
    const parked = this.conn.read(bytes).then(
      (count): ParkedRead => ({ count }),
      (error): ParkedRead => ({ count: null, failed: true, error }),
    );
    this.#parked = parked;
    return parked.then(() => {
      if (this.#parked === parked) this.#parkedDone = true;
    });
  }

  /** Reads into `buffer`: the count read, or null at the peer's end of stream. Throws on failure. */
  read(buffer: Uint8Array): Promise<number | null> {
    if (this.#leftover !== undefined || this.#parked !== undefined) return this.#readKept(buffer);
    // Stamped as the read starts rather than when it ends (which would take an async step per
    // read): every loop reads again as soon as its last read or write ended.
    this.lastActivityMs = Date.now();
    return this.conn.read(buffer);
  }

  /** A read served from what the parked read took. */
  async #readKept(buffer: Uint8Array): Promise<number | null> {
    const leftover = this.#leftover;
    if (leftover !== undefined) {
      const count = Math.min(buffer.length, leftover.length);
      buffer.set(leftover.subarray(0, count));
      this.#leftover = count < leftover.length ? leftover.subarray(count) : undefined;
      return count;
    }
    const parked = this.#parked;
    if (parked !== undefined) {
      this.#parked = undefined;
      this.#parkedDone = false;
      const result = await parked;
      this.lastActivityMs = Date.now();
      if (result.failed) throw result.error;
      const count = result.count;
      if (count === null || count === 0) return count;
      const parkBuffer = this.#parkBuffer!;
      if (count <= buffer.length) {
        buffer.set(count === parkBuffer.length ? parkBuffer : parkBuffer.subarray(0, count));
        return count;
      }
      // A caller's buffer smaller than what was parked: what does not fit is read first next.
      buffer.set(parkBuffer.subarray(0, buffer.length));
      this.#leftover = parkBuffer.slice(buffer.length, count);
      return buffer.length;
    }
    return this.read(buffer);
  }

  /**
   * Writes all of `bytes` (Deno may take a part per call). Throws on failure. Nearly every write
   * goes out whole in one call: that path is two callbacks on the runtime's promise rather than
   * an async function's frame (fewer objects per write, on the path of every tunnel).
   */
  write(bytes: Uint8Array): Promise<void> {
    if (bytes.length === 0) return Promise.resolve();
    const number = ++this.#writeNumber;
    const writing = this.conn.write(bytes).then(
      (written) => this.#wrote(bytes, written, number),
      (error) => this.#writeFailed(error, number),
    );
    this.#writing = writing;
    return writing;
  }

  /** The first call took `written` bytes: done, or the rest by the slow path. */
  #wrote(bytes: Uint8Array, written: number, number: number): Promise<void> | undefined {
    // Progress, for the idle check: a slow reader still taking bytes is not idle.
    this.lastActivityMs = Date.now();
    if (written < bytes.length) return this.#writeRest(bytes.subarray(written), number);
    // Runs after `write` stored its promise: a runtime promise's callbacks never run at once.
    if (this.#writeNumber === number) this.#writing = undefined;
    return undefined;
  }

  #writeFailed(error: unknown, number: number): never {
    if (this.#writeNumber === number) this.#writing = undefined;
    throw error;
  }

  async #writeRest(bytes: Uint8Array, number: number): Promise<void> {
    try {
      let view = bytes;
      for (;;) {
        const written = await this.conn.write(view);
        this.lastActivityMs = Date.now();
        if (written === view.length) return;
        view = view.subarray(written);
      }
    } finally {
      if (this.#writeNumber === number) this.#writing = undefined;
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
    this.#deadlineAtMs = 0;
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

  /**
   * Closes the leg when `ms` pass before `clearDeadline`; `timedOut` then says so. Setting and
   * clearing is cheap (a leg on the request path does both per request): the timer is only
   * replaced when the deadline comes sooner than it fires, and one firing early re-arms.
   */
  setDeadline(ms: number): void {
    if (this.#closed) return;
    const now = Date.now();
    const atMs = now + ms;
    this.#deadlineAtMs = atMs;
    if (this.#timer !== undefined) {
      if (this.#timerAtMs <= atMs) return;
      clearTimeout(this.#timer);
    }
    this.#arm(now, atMs);
  }

  clearDeadline(): void {
    this.#deadlineAtMs = 0;
  }

  #arm(nowMs: number, atMs: number): void {
    this.#timerAtMs = atMs;
    this.#timer = setTimeout(this.#fire ??= () => this.#fired(), atMs - nowMs);
  }

  /** Made when a deadline is first set: most legs (a tunnel's) never have one. */
  #fire: (() => void) | undefined;

  #fired(): void {
    this.#timer = undefined;
    const atMs = this.#deadlineAtMs;
    if (this.#closed || atMs === 0) return;
    const now = Date.now();
    if (atMs > now) {
      this.#arm(now, atMs);
      return;
    }
    this.#timedOut = true;
    this.close();
  }
}
