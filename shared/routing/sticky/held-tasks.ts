/**
 * Background work a request starts but never waits for (sticky binding writes; later, MITM
 * captures), held so the gateway's stop can wait for it: `drain` resolves once every task started
 * before or during the drain has settled. A task's failure is its own to handle; here it is only
 * swallowed, so a drain never rejects.
 */
export class HeldTasks {
  private readonly running = new Set<Promise<void>>();

  /** Tasks still running. */
  get size(): number {
    return this.running.size;
  }

  /** Starts `task` now, in the background. */
  run(task: () => Promise<unknown>): void {
    let started: Promise<unknown>;
    try {
      started = task();
    } catch {
      return;
    }
    const held: Promise<void> = started.then(ignore, ignore).then(() => {
      this.running.delete(held);
    });
    this.running.add(held);
  }

  /** Resolves once nothing is running (tasks started meanwhile included). */
  async drain(): Promise<void> {
    while (this.running.size !== 0) await Promise.all(this.running);
  }
}

const ignore = (): void => {};
