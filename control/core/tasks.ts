/**
 * A runtime's named loops. Every loop it starts is watched, so no failure vanishes unseen: a
 * loop whose task ends with an exception is logged as it ends and stays listed, as failed, until
 * the set stops. A stop stops every loop together, and one that fails to stop does not keep the
 * others running.
 */
import { errorText } from "../../shared/errors.ts";
import type { Loop, LoopSnapshot } from "../../shared/async/loop.ts";
import type { Logger } from "./logging.ts";

export class TaskSet {
  readonly #logger: Logger;
  readonly #loops = new Map<string, Loop>();
  #stopping: Promise<void> | undefined;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** Starts a loop under its name, which must be unique in the set. */
  start(loop: Loop): void {
    if (this.#stopping) throw new Error(`Cannot start loop ${loop.name}: its tasks are stopping`);
    if (this.#loops.has(loop.name)) throw new Error(`Loop ${loop.name} is already running`);
    this.#loops.set(loop.name, loop);
    loop.start().catch((error: unknown) => {
      this.#logger.error({ loop: loop.name, error: errorText(error) }, "Loop task ended");
    });
  }

  get loops(): readonly Loop[] {
    return [...this.#loops.values()];
  }

  snapshot(): LoopSnapshot[] {
    return this.loops.map((loop) => loop.snapshot());
  }

  /** Stops every loop together. Never raises; a second call waits for the same stop. */
  stop(): Promise<void> {
    this.#stopping ??= Promise.allSettled(this.loops.map((loop) => loop.stop())).then(() => {});
    return this.#stopping;
  }
}
