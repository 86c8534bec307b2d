/**
 * A batch publisher: every interval it sends what accumulated in memory, one send at a time.
 * A cut window becomes numbered parts, which are owed until the store confirms each one; owed
 * parts go again unchanged, in order and each alone, before anything newer is cut, and their
 * numbers make the store apply each once. Meanwhile new deltas keep merging into the next
 * window, so an outage costs memory per entity, not per request.
 *
 * The loop never throws: a failed send is counted and logged once per failure streak, and the
 * next try comes at the next interval (measured from the end of a cycle; the `Loop` base's
 * schedule, shared/async/loop.ts). Runtime-neutral (timers and promises only).
 */
import { errorText } from "../../shared/errors.ts";
import { withDeadline } from "../../shared/async/deadline.ts";
import { Loop } from "../../shared/async/loop.ts";

export interface PublisherLogger {
  info(message: string, fields?: Readonly<Record<string, unknown>>): void;
  error(message: string, fields?: Readonly<Record<string, unknown>>): void;
}

export interface BatchPublisherOptions<Part> {
  /** Names the publisher in its log lines. */
  name: string;
  intervalMs: number;
  /** How long one send may take before its part counts as unconfirmed (still owed). */
  sendTimeoutMs: number;
  /** The whole of the final attempt a close makes. */
  closeTimeoutMs: number;
  /** Takes what accumulated as numbered parts (none when nothing did). */
  cut(): Part[];
  /** Resolves once the store has the part (applied now, or before: a resend). */
  send(part: Part): Promise<void>;
  /** Told of each part the store confirmed, in order. */
  confirmed?(part: Part): void;
  /** Told of what a close could not send: the parts still owed. */
  abandoned?(parts: readonly Part[]): void;
  logger?: PublisherLogger;
}

export interface PublisherStats {
  sends: number;
  confirmed: number;
  failures: number;
  consecutiveFailures: number;
  owedParts: number;
  lastError: string | null;
}

export class BatchPublisher<Part> extends Loop {
  readonly #o: BatchPublisherOptions<Part>;
  #owed: Part[] = [];
  /** The cycle in hand: cycles never overlap. */
  #turn: Promise<boolean> = Promise.resolve(true);
  #closing: Promise<void> | undefined;
  readonly #stats: PublisherStats = {
    sends: 0,
    confirmed: 0,
    failures: 0,
    consecutiveFailures: 0,
    owedParts: 0,
    lastError: null,
  };

  constructor(options: BatchPublisherOptions<Part>) {
    // The loop's own lines stay silent: a cycle never throws, its failures are logged below.
    super({ name: options.name });
    this.#o = options;
  }

  /** The parts still owed, oldest first. */
  get owed(): readonly Part[] {
    return this.#owed;
  }

  stats(): PublisherStats {
    return { ...this.#stats, owedParts: this.#owed.length };
  }

  /** Starts the periodic loop; a second start does nothing, nor a start after a close. */
  override start(): Promise<void> {
    if (this.#closing) return Promise.resolve();
    return super.start();
  }

  /**
   * Runs one cycle now (after the one in hand): true when nothing is owed afterwards. Used by
   * tests and by a close; never rejects.
   */
  publishNow(deadlineMs = this.#o.sendTimeoutMs): Promise<boolean> {
    const next = this.#turn.then(() => this.#cycle(Date.now() + deadlineMs));
    this.#turn = next;
    return next;
  }

  /** Stops the loop, then makes one final attempt at what is owed and pending. Safe twice. */
  override close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    await this.stop();
    const done = await this.publishNow(this.#o.closeTimeoutMs);
    if (!done && this.#owed.length > 0) {
      this.#o.logger?.error("Metering batches not sent before the stop", {
        publisher: this.#o.name,
        parts: this.#owed.length,
        error: this.#stats.lastError,
      });
      try {
        this.#o.abandoned?.(this.#owed);
      } catch {
        // An observer's failure must not fail the stop.
      }
    }
  }

  /** One interval after the last cycle ended (or the start); a close cuts it. */
  protected override nextDuty(signal: AbortSignal): Promise<void> {
    return this.waitFor(this.#o.intervalMs, signal);
  }

  /** Never throws: a failed send is counted and logged below, and owed. */
  protected override async cycle(): Promise<void> {
    await this.publishNow();
  }

  /** Sends the owed parts in order, then cuts and sends what is new; stops at the first failure. */
  async #cycle(deadlineAtMs: number): Promise<boolean> {
    try {
      if (!(await this.#sendOwed(deadlineAtMs))) return false;
      this.#owed = this.#o.cut();
      return await this.#sendOwed(deadlineAtMs);
    } catch (error) {
      // cut() threw: a bug, but the loop must go on.
      this.#failed(error);
      return false;
    }
  }

  async #sendOwed(deadlineAtMs: number): Promise<boolean> {
    while (this.#owed.length > 0) {
      const part = this.#owed[0];
      const remainingMs = Math.min(this.#o.sendTimeoutMs, deadlineAtMs - Date.now());
      // The cycle's time is up (a large window): the rest goes next cycle, nothing failed.
      if (remainingMs <= 0) return false;
      this.#stats.sends++;
      try {
        // A late reply or failure after the deadline is dropped: the part is still owed and a
        // resend is applied at most once.
        await withDeadline("metering send", remainingMs, () => this.#o.send(part));
      } catch (error) {
        this.#failed(error);
        return false;
      }
      this.#owed.shift();
      this.#stats.confirmed++;
      this.#recovered();
      try {
        this.#o.confirmed?.(part);
      } catch {
        // An observer's failure is not the store's: the part stays confirmed.
      }
    }
    return true;
  }

  #failed(error: unknown): void {
    const text = errorText(error);
    this.#stats.failures++;
    this.#stats.consecutiveFailures++;
    if (this.#stats.consecutiveFailures === 1 || text !== this.#stats.lastError) {
      this.#o.logger?.error("Metering publish failed; the batch is owed", {
        publisher: this.#o.name,
        error: text,
        owed: this.#owed.length,
      });
    }
    this.#stats.lastError = text;
  }

  #recovered(): void {
    if (this.#stats.consecutiveFailures === 0) return;
    this.#o.logger?.info("Metering publish recovered", {
      publisher: this.#o.name,
      failures: this.#stats.consecutiveFailures,
    });
    this.#stats.consecutiveFailures = 0;
  }
}
