/**
 * The change log: after a write commits, one entry on the change stream names what changed, so
 * every follower reads it again. An entry Redis does not take is kept and sent again by one
 * background retry at a time until Redis takes it; the write that asked never fails for it.
 *
 * Kept entries are coalesced by what they name (an entry only says what to read again, so two
 * alike ask for nothing more) and bounded: past the cap they collapse into one `all` entry.
 */
import type { Redis } from "ioredis";
import { ChangeKind } from "../../shared/roles.ts";
import { type RedisKeys, STREAM_CAPS } from "../../shared/redis-keys.ts";
import { errorText } from "../../shared/errors.ts";
import type { Logger } from "./logging.ts";
import { redisDeadline } from "./redis.ts";

export interface ChangeEntry {
  kind: ChangeKind;
  /** The id of what changed (a comma-separated list for a batch write); `*` for a kind as a whole. */
  ref: string;
}

export interface ChangeLogOptions {
  redis: Redis;
  keys: RedisKeys;
  logger: Logger;
  /** Each Redis step waits at most this long (the request deadline). */
  deadlineMs: number;
  /** First wait between retries; doubles to `maxRetryDelayMs`. */
  retryDelayMs?: number;
  maxRetryDelayMs?: number;
  /** Past this many kept entries, they collapse into one `all` entry. */
  maxKept?: number;
}

const entryKey = (entry: ChangeEntry) => `${entry.kind}\u0000${entry.ref}`;

/**
 * Appends entries to the change stream in their order, in one pipeline under the deadline;
 * raises when Redis did not take every one. The change log's and the outbox relay's one way.
 */
export async function appendChanges(
  redis: Redis,
  keys: RedisKeys,
  deadlineMs: number,
  entries: readonly { kind: string; ref: string }[],
): Promise<void> {
  await redisDeadline(deadlineMs, async () => {
    const pipeline = redis.pipeline();
    for (const entry of entries) {
      pipeline.xadd(
        keys.changesStream,
        "MAXLEN",
        "~",
        STREAM_CAPS.changes,
        "*",
        "kind",
        entry.kind,
        "ref",
        entry.ref,
      );
    }
    const replies = await pipeline.exec();
    const failed = replies?.find(([error]) => error !== null);
    if (!replies || failed) throw failed?.[0] ?? new Error("Pipeline returned nothing");
  });
}

export class ChangeLog {
  readonly #options: Required<ChangeLogOptions>;
  readonly #kept = new Map<string, ChangeEntry>();
  #retry: Promise<void> | undefined;
  #closed = false;
  #wake: (() => void) | undefined;
  #failing = false;
  #appended = 0;

  constructor(options: ChangeLogOptions) {
    this.#options = {
      retryDelayMs: 500,
      maxRetryDelayMs: 10_000,
      maxKept: 10_000,
      ...options,
    };
  }

  /** Entries kept for a retry. */
  get pending(): number {
    return this.#kept.size;
  }

  /** Entries Redis has taken since the process started. */
  get appended(): number {
    return this.#appended;
  }

  /**
   * Announces committed changes. Waits at most one deadline; never throws. With entries already
   * kept, the new ones join them rather than overtaking, and the retry sends them all. True when
   * Redis took them now (false: kept for the retry).
   */
  async append(...entries: ChangeEntry[]): Promise<boolean> {
    if (entries.length === 0) return true;
    if (this.#kept.size > 0 || this.#closed) {
      this.#keep(entries);
      return false;
    }
    try {
      await this.#send(entries);
      return true;
    } catch (error) {
      this.#keep(entries);
      this.#noteFailure(error);
      return false;
    }
  }

  /** Sends once more what is kept (one deadline), then stops retrying. Safe to call twice. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#wake?.();
    await this.#retry;
    if (this.#kept.size === 0) return;
    const entries = [...this.#kept.values()];
    try {
      await this.#send(entries);
      this.#kept.clear();
    } catch (error) {
      this.#options.logger.warn(
        { kept: entries.length, error: errorText(error) },
        "Change entries not delivered at stop; the next reconcile covers them",
      );
    }
  }

  async #send(entries: readonly ChangeEntry[]): Promise<void> {
    const { redis, keys, deadlineMs } = this.#options;
    await appendChanges(redis, keys, deadlineMs, entries);
    this.#appended += entries.length;
  }

  #keep(entries: readonly ChangeEntry[]): void {
    for (const entry of entries) this.#kept.set(entryKey(entry), entry);
    if (this.#kept.size > this.#options.maxKept) {
      this.#kept.clear();
      const all: ChangeEntry = { kind: ChangeKind.all, ref: "*" };
      this.#kept.set(entryKey(all), all);
    }
    if (!this.#closed) this.#retry ??= this.#retryUntilTaken();
  }

  #noteFailure(error: unknown): void {
    if (this.#failing) return;
    this.#failing = true;
    this.#options.logger.warn(
      { error: errorText(error) },
      "Change entry not taken by Redis; kept and sent again in the background",
    );
  }

  async #retryUntilTaken(): Promise<void> {
    let delayMs = this.#options.retryDelayMs;
    try {
      while (this.#kept.size > 0 && !this.#closed) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delayMs);
          this.#wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.#wake = undefined;
        if (this.#closed) break;
        const batch = [...this.#kept.entries()];
        try {
          await this.#send(batch.map(([, entry]) => entry));
          // Only what was sent leaves; entries kept meanwhile stay for the next round.
          for (const [key, entry] of batch) {
            if (this.#kept.get(key) === entry) this.#kept.delete(key);
          }
          delayMs = this.#options.retryDelayMs;
          if (this.#failing) {
            this.#failing = false;
            this.#options.logger.info({ sent: batch.length }, "Kept change entries delivered");
          }
        } catch {
          delayMs = Math.min(delayMs * 2, this.#options.maxRetryDelayMs);
        }
      }
    } finally {
      // A retry counts as gone once it has ended: an entry kept in this moment starts the next.
      this.#retry = undefined;
      if (this.#kept.size > 0 && !this.#closed) this.#retry = this.#retryUntilTaken();
    }
  }
}
