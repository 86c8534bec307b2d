/**
 * `Serial`: tasks run one at a time, in the order given. Each starts once the one before it
 * settled, and a task's failure reaches only its own caller, never the tasks after it.
 *
 * Web-standard: promises only, so Deno and Node both run it.
 */
export class Serial {
  #tail: Promise<void> = Promise.resolve();

  /** Runs `task` after every task given before it; answers what `task` answers. */
  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(task);
    this.#tail = result.then(() => {}, () => {});
    return result;
  }

  /** Resolves once every task given so far settled; never rejects. */
  settled(): Promise<void> {
    return this.#tail;
  }
}
