/**
 * A writer of what the request path counted in memory: one held write to Redis every interval,
 * measured from the end of the last, one at a time, and a last one at close. The failure log and
 * the pool evidence are such writers; each says how it writes (`writePending`, which never
 * rejects: a failed write is the subclass's to count and log).
 */
import { type CycleResult, Loop } from "../../shared/async/loop.ts";

export abstract class HeldWriteLoop extends Loop {
  readonly #intervalMs: number;
  /** The write under way: one at a time. */
  #writing: Promise<void> | undefined;
  #closing: Promise<void> | undefined;

  constructor(options: { name: string; intervalMs: number }) {
    super({ name: options.name });
    this.#intervalMs = options.intervalMs;
  }

  /** Writes what is pending; never rejects. */
  protected abstract writePending(): Promise<void>;

  /** A close began: what the request path counts from now on is not written. */
  protected get closing(): boolean {
    return this.#closing !== undefined;
  }

  /** Starts writing every interval; a second start does nothing, nor a start after a close. */
  override start(): Promise<void> {
    if (this.#closing !== undefined) return Promise.resolve();
    return super.start();
  }

  /** Writes what is pending now (after the write under way); never rejects. */
  async publishNow(): Promise<void> {
    while (this.#writing !== undefined) await this.#writing;
    this.#writing = this.writePending().finally(() => {
      this.#writing = undefined;
    });
    await this.#writing;
  }

  /** Stops the loop and writes what is pending once more. Safe twice; never rejects. */
  override close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.stop();
      await this.publishNow();
    })();
    return this.#closing;
  }

  /** One interval after the last write ended (or the start); a close cuts it. */
  protected override nextDuty(signal: AbortSignal): Promise<void> {
    return this.waitFor(this.#intervalMs, signal);
  }

  /** Never throws: a failed write is counted and logged by the subclass. */
  protected override async cycle(): Promise<CycleResult> {
    await this.publishNow();
  }
}
