/**
 * Health verdicts, written in groups as checks end: a batch's live proxies are not held behind
 * its hanging checks (a check that hangs runs to the timeout, seconds after the rest). Every
 * verdict of the worker's health batches goes into the group in hand; a group is written when
 * the first verdict after a quiet spell comes, then at most once every `groupMs` (1 s): each
 * soft health in one pipeline, then the status changes in one transaction with one change entry
 * (the writer the job is given), as one batch's were. So the live proxies turn healthy at the
 * rate the checks end, whatever hangs beside them, and a vendor outage that fails thousands of
 * checks still appends about one change entry a second per worker.
 *
 * A verdict's promise settles when its group is written (or its write failed: the batch then
 * fails and runs again, which health checks allow). One group is written at a time.
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { ProxyStatus } from "../../shared/roles.ts";
import type { Logger } from "../core/logging.ts";
import type { StatusChange } from "../services/proxy-status.ts";

/** Soft health lives a day: long enough to outlast any interval, short enough to clean itself. */
export const SOFT_HEALTH_TTL_SECONDS = 86_400;
/** Verdicts of one group at most this long apart. */
export const VERDICT_GROUP_MS = 1000;

/** Writes status changes as compare-and-set in one transaction; answers those that applied. */
export type StatusWriter = (changes: readonly StatusChange[]) => Promise<readonly StatusChange[]>;

/** One check's verdict: the proxy's soft health, and its status change when it has one. */
export interface Verdict {
  proxyId: string;
  health: { failures: number; latency_ms: number | ""; checked_at: number; error: string };
  change?: StatusChange;
}

interface Waiting {
  verdict: Verdict;
  resolve: () => void;
  reject: (error: unknown) => void;
}

export interface VerdictWriterOptions {
  redis: Redis;
  keys: RedisKeys;
  logger: Logger;
  writeStatuses: StatusWriter;
  groupMs?: number;
  now?: () => number;
}

export class VerdictWriter {
  readonly #o: VerdictWriterOptions;
  readonly #groupMs: number;
  readonly #now: () => number;
  #waiting: Waiting[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;
  #writing = false;
  #lastWriteAt = Number.NEGATIVE_INFINITY;
  #groups = 0;

  constructor(options: VerdictWriterOptions) {
    this.#o = options;
    this.#groupMs = options.groupMs ?? VERDICT_GROUP_MS;
    this.#now = options.now ?? Date.now;
  }

  /** Groups written so far (each one pipeline and at most one transaction). */
  get groups(): number {
    return this.#groups;
  }

  /** Settles once the verdict's group is written. */
  submit(verdict: Verdict): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#waiting.push({ verdict, resolve, reject });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#writing || this.#waiting.length === 0) return;
    const delayMs = Math.max(0, this.#lastWriteAt + this.#groupMs - this.#now());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#write();
    }, delayMs);
  }

  async #write(): Promise<void> {
    const group = this.#waiting;
    this.#waiting = [];
    this.#writing = true;
    this.#lastWriteAt = this.#now();
    try {
      await this.#writeGroup(group.map((w) => w.verdict));
      this.#groups++;
      for (const waiting of group) waiting.resolve();
    } catch (error) {
      for (const waiting of group) waiting.reject(error);
    } finally {
      this.#writing = false;
      this.#schedule();
    }
  }

  async #writeGroup(verdicts: readonly Verdict[]): Promise<void> {
    // Soft health first: a group whose status write fails keeps what its checks learned.
    const pipeline = this.#o.redis.pipeline();
    for (const verdict of verdicts) {
      const key = this.#o.keys.proxyHealth(verdict.proxyId);
      pipeline.hset(key, verdict.health);
      pipeline.expire(key, SOFT_HEALTH_TTL_SECONDS);
    }
    const replies = await pipeline.exec();
    const failed = replies?.find(([error]) => error !== null);
    if (failed) throw failed[0];
    const changes = verdicts.flatMap((v) => v.change === undefined ? [] : [v.change]);
    if (changes.length === 0) return;
    const applied = await this.#o.writeStatuses(changes);
    // Only the moves these checks made: one another worker's check made first (a reclaimed
    // entry, two checks of one proxy at once) is that worker's to tell.
    for (const change of applied.filter((c) => c.to === ProxyStatus.unhealthy)) {
      this.#o.logger.warn(
        { proxy: change.id, connector: change.connectorId },
        "Proxy marked unhealthy",
      );
    }
    if (applied.length < changes.length) {
      this.#o.logger.debug(
        { changes: changes.length, applied: applied.length },
        "Some status changes lost their compare-and-set to a write that landed meanwhile",
      );
    }
  }
}
