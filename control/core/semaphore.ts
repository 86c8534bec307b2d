/**
 * A counting semaphore: at most `limit` holders at once, waiters served in order, urgent ones
 * first. The health job's probe bound is one of these, shared by every batch of a worker: a
 * first-lane check (a new proxy, a suspect) waits only for a slot to free, not behind the
 * periodic re-checks already waiting; and `urgentReserve` slots are for urgent holders alone,
 * so even periodic checks that all hang until their timeout leave room for a new proxy's.
 */
export class Semaphore {
  readonly limit: number;
  /** Slots only urgent holders take. */
  readonly urgentReserve: number;
  #held = 0;
  readonly #waiters: (() => void)[] = [];
  readonly #urgent: (() => void)[] = [];

  constructor(limit: number, options: { urgentReserve?: number } = {}) {
    if (!(limit >= 1)) throw new Error("A semaphore needs a limit of at least 1");
    this.limit = limit;
    this.urgentReserve = Math.max(0, Math.min(limit - 1, options.urgentReserve ?? 0));
  }

  get held(): number {
    return this.#held;
  }

  get waiting(): number {
    return this.#waiters.length + this.#urgent.length;
  }

  async acquire(urgent = false): Promise<void> {
    if (this.#held < (urgent ? this.limit : this.limit - this.urgentReserve)) {
      this.#held += 1;
      return;
    }
    await new Promise<void>((resolve) => (urgent ? this.#urgent : this.#waiters).push(resolve));
  }

  release(): void {
    // The slot passes straight to the next waiter: an urgent one, else an ordinary one while
    // the reserve stays free.
    const urgent = this.#urgent.shift();
    if (urgent) return urgent();
    if (this.#held - 1 < this.limit - this.urgentReserve) {
      const next = this.#waiters.shift();
      if (next) return next();
    }
    this.#held -= 1;
  }

  async run<T>(work: () => Promise<T>, urgent = false): Promise<T> {
    await this.acquire(urgent);
    try {
      return await work();
    } finally {
      this.release();
    }
  }
}
