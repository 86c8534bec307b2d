/**
 * A counting semaphore: at most `limit` holders at once, waiters served in order. The health
 * job's probe bound is one of these, shared by every batch of a worker.
 */
export class Semaphore {
  readonly limit: number;
  #held = 0;
  readonly #waiters: (() => void)[] = [];

  constructor(limit: number) {
    if (!(limit >= 1)) throw new Error("A semaphore needs a limit of at least 1");
    this.limit = limit;
  }

  get held(): number {
    return this.#held;
  }

  get waiting(): number {
    return this.#waiters.length;
  }

  async acquire(): Promise<void> {
    if (this.#held < this.limit) {
      this.#held += 1;
      return;
    }
    await new Promise<void>((resolve) => this.#waiters.push(resolve));
  }

  release(): void {
    const next = this.#waiters.shift();
    if (next) next(); // the slot passes straight to the next waiter
    else this.#held -= 1;
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    await this.acquire();
    try {
      return await work();
    } finally {
      this.release();
    }
  }
}
