/**
 * OCTOPROX_MAX_CLIENT_CONNECTIONS for the whole process: one count every listener takes from
 * (HTTP and SOCKS5, in every isolate), kept in a SharedArrayBuffer word so isolates serving the
 * same process share it exactly. Runtime-neutral.
 */

export class ConnectionBudget {
  readonly limit: number;
  readonly buffer: SharedArrayBuffer;
  readonly #count: Int32Array;

  /** `buffer` (4 bytes) shares the count of another isolate's budget. */
  constructor(limit: number, buffer: SharedArrayBuffer = new SharedArrayBuffer(4)) {
    this.limit = limit;
    this.buffer = buffer;
    this.#count = new Int32Array(buffer, 0, 1);
  }

  /** Connections open now, across the process. */
  get open(): number {
    return Atomics.load(this.#count, 0);
  }

  /** Takes one connection; false when the process is at its limit. */
  take(): boolean {
    // A compare-and-swap, so two isolates at the limit never both get the last one.
    for (;;) {
      const open = Atomics.load(this.#count, 0);
      if (open >= this.limit) return false;
      if (Atomics.compareExchange(this.#count, 0, open, open + 1) === open) return true;
    }
  }

  /** Gives back what `take` gave (once per successful take). */
  give(): void {
    Atomics.sub(this.#count, 0, 1);
  }
}
