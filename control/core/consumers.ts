/**
 * Stream consumers, the two ways a loop reads Redis streams.
 *
 * - GroupConsumer takes a work stream through the group `workers`: reads batches while it has
 *   room, runs them side by side, completes each once its handler returns, keeps running entries
 *   alive and reclaims what dead consumers left, giving up at the delivery after the last allowed.
 * - BroadcastFollower follows an event stream from a position of its own, kept in memory, and
 *   reads in full at the start, after a gap, after a failed read and every reconcile interval.
 */
import type { Redis } from "ioredis";
import type { EventStreamName, WorkStreamName } from "../../shared/redis-keys.ts";
import { errorText } from "../../shared/errors.ts";
import {
  type CycleResult,
  Loop,
  type LoopOptions,
  type LoopSnapshot,
  UNCOUNTED,
} from "../../shared/async/loop.ts";
import { sleep } from "../../shared/async/sleep.ts";
import type { Logger } from "./logging.ts";
import {
  type ClaimedEntry,
  compareIds,
  complete,
  ensureGroup,
  isMissingGroup,
  keepAlive,
  readNew,
  reclaimPage,
  type StreamEntry,
} from "./work-streams.ts";

// ---------------------------------------------------------------------------------------------
// Work streams

/** What a handler gets: every entry's id, and each key once, in order. */
export interface WorkBatch {
  ids: string[];
  keys: string[];
  /** The highest delivery count among the batch's entries (1 for a first delivery). */
  deliveries: number;
  /** Read from its kind's first lane: urgent work, ahead of the periodic runs. */
  first?: boolean;
}

export interface GroupConsumerOptions extends LoopOptions<Logger> {
  logger: Logger;
  /** The process's client: completions, reclaims and keep-alives. */
  redis: Redis;
  /** A connection of the consumer's own for its blocking read, which a stop disconnects. */
  reader: Redis;
  stream: string;
  /** The name the System page and the logs know the stream by (`jobs.health`). */
  streamName: WorkStreamName;
  /** This process's consumer name, fresh for each process life. */
  consumer: string;
  /** The field an entry's key is in. */
  keyField?: string;
  batchSize: number;
  concurrency: number;
  claimTimeoutMs: number;
  reclaimIntervalMs: number;
  maxDeliveries: number;
  stopGraceMs: number;
  /** The longest a read blocks before the loop looks round again. */
  blockMs?: number;
  /** The stream is a kind's first lane: its batches say so (`WorkBatch.first`). */
  first?: boolean;
}

interface Running {
  batch: WorkBatch;
  done: Promise<void>;
}

/** A group consumer's row in the snapshot: its loop's job stats and its batches'. */
export interface GroupConsumerSnapshot extends LoopSnapshot {
  stream: WorkStreamName;
  running_batches: number;
  in_flight: number;
  /** Batches given up after their last delivery. */
  batches_given_up: number;
  /** Entries given up (completed without being run) after their last delivery. */
  dropped: number;
  reclaimed: number;
  /** Keys in the batches that ran to their end (each key once per batch). */
  keys_done: number;
}

export abstract class GroupConsumer extends Loop<Logger> {
  protected readonly options:
    & GroupConsumerOptions
    & Required<Pick<GroupConsumerOptions, "keyField" | "blockMs">>;
  readonly #running = new Set<Running>();
  readonly #inFlight = new Set<string>();
  readonly #cancel = new AbortController();
  /** Gives up a read that the stop found queued on a reader waiting to reconnect (see stop). */
  readonly #readGivenUp = new AbortController();
  #groupChecked = false;
  #reclaimCursor = "0-0";
  #reclaimTimer: ReturnType<typeof setInterval> | undefined;
  #reclaiming: Promise<void> | undefined;
  #batchFailures = 0;
  #readPausedUntil = 0;
  #roomFreed: (() => void) | undefined;
  #dropped = 0;
  #batchesGivenUp = 0;
  #reclaimed = 0;
  #keysDone = 0;

  constructor(options: GroupConsumerOptions) {
    super(options);
    this.options = { keyField: "key", blockMs: 2000, ...options };
  }

  /** Does the work of one batch. Raising leaves the batch pending for a later delivery. */
  protected abstract handle(batch: WorkBatch, signal: AbortSignal): Promise<void>;

  /** What to do with a batch given up after its last delivery; logs its keys by default. */
  protected giveUp(batch: WorkBatch, _signal: AbortSignal): Promise<void> {
    this.logger.warn(
      { stream: this.options.streamName, keys: batch.keys, deliveries: batch.deliveries },
      "Giving up a batch after its last delivery",
    );
    return Promise.resolve();
  }

  get freeBatches(): number {
    return this.options.concurrency - this.#running.size;
  }

  override start(): Promise<void> {
    this.#reclaimTimer ??= setInterval(() => {
      this.#reclaiming ??= this.#reclaimTick().finally(() => {
        this.#reclaiming = undefined;
      });
    }, this.options.reclaimIntervalMs);
    return super.start();
  }

  override snapshot(): GroupConsumerSnapshot {
    return {
      ...super.snapshot(),
      stream: this.options.streamName,
      running_batches: this.#running.size,
      in_flight: this.#inFlight.size,
      batches_given_up: this.#batchesGivenUp,
      dropped: this.#dropped,
      reclaimed: this.#reclaimed,
      keys_done: this.#keysDone,
    };
  }

  /**
   * Stops reading, gives running batches the stop grace, then leaves: what stays pending is
   * reclaimed by another worker after the claim timeout. Nothing is handed back.
   */
  override async stop(): Promise<void> {
    clearInterval(this.#reclaimTimer);
    this.#roomFreed?.();
    const reader = this.options.reader;
    // A read queued while the reader waits to reconnect (Redis gone) was never sent, and
    // disconnecting then neither reconnects nor settles it (ioredis): the cycle gives it up
    // rather than wait for ever. A read on a live connection is not given up: it ends with the
    // connection, so nothing is read for this consumer once the stop returned.
    if (reader.status === "reconnecting") this.#readGivenUp.abort();
    // A blocked read cannot be cancelled on its connection; closing the connection ends it.
    reader.disconnect();
    await super.stop();
    await this.#reclaiming;
    const running = [...this.#running].map((r) => r.done);
    if (running.length > 0) {
      const finished = await Promise.race([
        Promise.allSettled(running).then(() => true),
        sleep(this.options.stopGraceMs).then(() => false),
      ]);
      if (!finished) {
        this.logger.warn(
          { stream: this.options.streamName, batches: this.#running.size },
          "Stop grace over; leaving running batches to be reclaimed",
        );
        this.#cancel.abort();
      }
    }
  }

  protected override async nextDuty(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const pausedMs = this.#readPausedUntil - Date.now();
      if (pausedMs > 0) {
        await this.waitFor(pausedMs, signal);
        continue;
      }
      if (this.freeBatches > 0) return;
      // The listener goes when the wait ends: the loop's signal lives as long as the process,
      // and a consumer waits for room after every batch that fills it.
      let onAbort: (() => void) | undefined;
      await new Promise<void>((resolve) => {
        this.#roomFreed = resolve;
        onAbort = resolve;
        signal.addEventListener("abort", onAbort, { once: true });
      });
      signal.removeEventListener("abort", onAbort!);
      this.#roomFreed = undefined;
    }
  }

  protected override async cycle(signal: AbortSignal): Promise<CycleResult> {
    const { reader, stream, consumer, batchSize, blockMs } = this.options;
    if (!this.#groupChecked) {
      await this.#ensureGroup();
      this.#groupChecked = true;
    }
    let entries: StreamEntry[] | typeof ABORTED;
    try {
      entries = await raceAbort(
        readNew(reader, stream, consumer, this.freeBatches * batchSize, blockMs),
        this.#readGivenUp.signal,
      );
    } catch (error) {
      if (signal.aborted) return UNCOUNTED;
      if (isMissingGroup(error)) {
        await this.#ensureGroup();
        return UNCOUNTED;
      }
      throw error;
    }
    if (entries === ABORTED) return UNCOUNTED;
    if (entries.length > 0) this.#dispatch(entries.map((e) => ({ ...e, deliveries: 1 })));
    return UNCOUNTED;
  }

  async #ensureGroup(): Promise<void> {
    const created = await ensureGroup(this.options.redis, this.options.stream);
    if (created && this.#groupChecked) {
      this.logger.warn(
        { stream: this.options.streamName },
        "Stream consumer group was missing; created again",
      );
    }
  }

  /** Splits entries into batches of each key once, and starts them. */
  #dispatch(entries: readonly ClaimedEntry[]): void {
    const { batchSize, keyField, maxDeliveries } = this.options;
    const fresh = entries.filter((e) => e.deliveries <= maxDeliveries);
    const spent = entries.filter((e) => e.deliveries > maxDeliveries);
    for (const [group, givingUp] of [[fresh, false], [spent, true]] as const) {
      for (let start = 0; start < group.length; start += batchSize) {
        const slice = group.slice(start, start + batchSize);
        const keys: string[] = [];
        const seen = new Set<string>();
        for (const entry of slice) {
          const key = entry.fields[keyField];
          if (key === undefined) {
            this.logger.warn(
              { stream: this.options.streamName, id: entry.id },
              "Entry without a key; completed",
            );
            continue;
          }
          if (!seen.has(key)) {
            seen.add(key);
            keys.push(key);
          }
        }
        const batch: WorkBatch = {
          ids: slice.map((e) => e.id),
          keys,
          deliveries: Math.max(...slice.map((e) => e.deliveries)),
          ...(this.options.first === true ? { first: true } : {}),
        };
        this.#run(batch, givingUp);
      }
    }
  }

  #run(batch: WorkBatch, givingUp: boolean): void {
    for (const id of batch.ids) this.#inFlight.add(id);
    const running: Running = { batch, done: Promise.resolve() };
    running.done = (async () => {
      const startedAt = Date.now();
      try {
        if (batch.keys.length > 0) {
          if (givingUp) await this.giveUp(batch, this.#cancel.signal);
          else await this.handle(batch, this.#cancel.signal);
        }
        await complete(this.options.redis, this.options.stream, batch.ids).catch((error) => {
          // Sent once: the entry runs again after the claim timeout, which handlers allow.
          this.logger.warn(
            { stream: this.options.streamName, error: errorText(error) },
            "Completion not taken by Redis; the batch may run again",
          );
        });
        if (givingUp) {
          this.#batchesGivenUp += 1;
          this.#dropped += batch.ids.length;
        } else {
          this.#keysDone += batch.keys.length;
        }
        this.#batchFailures = 0;
        this.#readPausedUntil = 0;
        this.recordRun(startedAt);
      } catch (error) {
        this.#batchFailures += 1;
        this.recordFailure(startedAt, error);
        // A lasting cause must not pull the whole stream into pending: reads back off too.
        this.#readPausedUntil = Date.now() + this.backoffDelayMs(this.#batchFailures, startedAt);
      } finally {
        for (const id of batch.ids) this.#inFlight.delete(id);
        this.#running.delete(running);
        this.#roomFreed?.();
      }
    })();
    this.#running.add(running);
  }

  /** Keeps running entries alive, then reclaims idle ones in pages while there is room. */
  async #reclaimTick(): Promise<void> {
    const { redis, stream, consumer, claimTimeoutMs, batchSize } = this.options;
    try {
      await keepAlive(redis, stream, consumer, [...this.#inFlight]);
    } catch (error) {
      if (!isMissingGroup(error)) {
        this.logger.warn({ error: errorText(error) }, "Keep-alive failed; tried at the next tick");
      }
    }
    try {
      // One XAUTOCLAIM scans ten pending entries for each it may take, so follow the cursor
      // and repeat while pages come back full.
      for (let pages = 0; pages < 100 && this.freeBatches > 0; pages++) {
        const count = this.freeBatches * batchSize;
        const page = await reclaimPage(
          redis,
          stream,
          consumer,
          claimTimeoutMs,
          this.#reclaimCursor,
          count,
        );
        this.#reclaimCursor = page.cursor;
        if (page.entries.length > 0) {
          this.#reclaimed += page.entries.length;
          this.#dispatch(page.entries);
        }
        if (page.entries.length < count || page.cursor === "0-0") break;
      }
    } catch (error) {
      if (isMissingGroup(error)) {
        this.#reclaimCursor = "0-0";
        return;
      }
      this.logger.warn({ error: errorText(error) }, "Reclaim check failed; tried at the next tick");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Event streams

export interface FollowedStream {
  name: EventStreamName;
  key: string;
}

/** How far a follower has read one stream. */
export interface FollowedStreamSnapshot {
  stream: EventStreamName;
  /** The last id read, `0-0` before any. */
  position: string;
  /** Entries read as they came (a full read reads state, not entries). */
  entries_read: number;
  /** Gaps found: the stream trimmed past the position, wiped or recreated. */
  gaps: number;
}

/** A follower's row in the snapshot: its loop's job stats and how far it read each stream. */
export interface FollowerSnapshot extends LoopSnapshot {
  streams: FollowedStreamSnapshot[];
  full_reads: number;
}

export interface BroadcastFollowerOptions extends LoopOptions<Logger> {
  logger: Logger;
  /** A connection of the follower's own for its blocking read, which a stop disconnects. */
  reader: Redis;
  streams: readonly FollowedStream[];
  reconcileIntervalMs: number;
  blockMs?: number;
}

interface StreamInfo {
  exists: boolean;
  lastGeneratedId: string | undefined;
  /** Redis 7: the highest id ever trimmed or deleted from the stream. */
  maxDeletedId: string | undefined;
}

/**
 * Follows event streams. A subclass reads everything it keeps in `readAll` and acts on new
 * entries in `onEntries`. Positions are taken before each full read, so an entry published
 * while it runs is read again rather than missed.
 */
export abstract class BroadcastFollower extends Loop<Logger> {
  protected readonly followOptions:
    & BroadcastFollowerOptions
    & Required<Pick<BroadcastFollowerOptions, "blockMs">>;
  /** By stream key: how far each stream has been read. */
  readonly #progress = new Map<string, FollowedStreamSnapshot>();
  #needsFullRead = true;
  #fullReadReason = "start";
  #nextReconcileAt = 0;
  #fullReads = 0;

  constructor(options: BroadcastFollowerOptions) {
    super(options);
    this.followOptions = { blockMs: 5000, ...options };
    for (const { name, key } of options.streams) {
      this.#progress.set(key, { stream: name, position: "0-0", entries_read: 0, gaps: 0 });
    }
  }

  /** Reads in full everything the follower keeps. */
  protected abstract readAll(signal: AbortSignal, reason: string): Promise<void>;

  /** New entries on a followed stream; they only say what to read again. */
  protected abstract onEntries(
    stream: string,
    entries: readonly StreamEntry[],
    signal: AbortSignal,
  ): Promise<void>;

  /** Asks for a full read before the next entries (a new lead, for a leased follower). */
  protected requestFullRead(reason: string): void {
    this.#needsFullRead = true;
    this.#fullReadReason = reason;
    this.wake();
  }

  /** How long the next read may block; a subclass with a deadline of its own shortens it. */
  protected blockMsNow(): number {
    return this.followOptions.blockMs;
  }

  /** What cuts a read short besides the stop (a leased follower adds the end of its lead). */
  protected readSignal(signal: AbortSignal): AbortSignal {
    return signal;
  }

  override snapshot(): FollowerSnapshot {
    return {
      ...super.snapshot(),
      streams: [...this.#progress.values()].map((progress) => ({ ...progress })),
      full_reads: this.#fullReads,
    };
  }

  override async stop(): Promise<void> {
    this.followOptions.reader.disconnect();
    await super.stop();
  }

  protected override nextDuty(_signal: AbortSignal): Promise<void> {
    return Promise.resolve();
  }

  protected override async cycle(signal: AbortSignal): Promise<CycleResult> {
    if (this.#needsFullRead || Date.now() >= this.#nextReconcileAt) {
      const reason = this.#needsFullRead ? this.#fullReadReason : "reconcile";
      await this.#fullRead(signal, reason);
      return true;
    }
    return await this.#follow(signal);
  }

  async #fullRead(signal: AbortSignal, reason: string): Promise<void> {
    const { reader } = this.followOptions;
    const streams = this.#keys();
    // Positions first: whatever is published during the read is read again after it.
    const pipeline = reader.pipeline();
    for (const stream of streams) pipeline.xinfo("STREAM", stream);
    const replies = (await pipeline.exec()) ?? [];
    streams.forEach((stream, index) => {
      const [error, info] = replies[index] ?? [];
      this.#at(stream).position = error ? "0-0" : parseInfo(info).lastGeneratedId ?? "0-0";
    });
    try {
      await this.readAll(signal, reason);
    } catch (error) {
      this.#needsFullRead = true;
      this.#fullReadReason = "failed full read";
      throw error;
    }
    this.#needsFullRead = false;
    this.#fullReads += 1;
    // A full read for any reason puts the next reconcile off an interval.
    this.#nextReconcileAt = Date.now() + this.followOptions.reconcileIntervalMs;
  }

  async #follow(signal: AbortSignal): Promise<CycleResult> {
    const { reader } = this.followOptions;
    const streams = this.#keys();
    const untilReconcileMs = Math.max(1, this.#nextReconcileAt - Date.now());
    const blockMs = Math.max(1, this.blockMsNow());
    const pipeline = reader.pipeline();
    for (const stream of streams) pipeline.xinfo("STREAM", stream);
    pipeline.xread(
      "COUNT",
      1000,
      "BLOCK",
      Math.min(blockMs, untilReconcileMs),
      "STREAMS",
      ...streams,
      ...streams.map((s) => this.#at(s).position),
    );
    const cut = this.readSignal(signal);
    let replies: [Error | null, unknown][] | null | typeof ABORTED;
    try {
      // A read cut short is left to finish on its own connection; its reply is not used.
      replies = await raceAbort(pipeline.exec(), cut);
    } catch (error) {
      if (cut.aborted) return UNCOUNTED;
      this.requestFullRead("failed read");
      throw error;
    }
    if (cut.aborted || replies === ABORTED) {
      // A blocked read would hold the connection for its whole block time, and the next lead's
      // full read would queue behind it: drop the connection (ioredis reconnects at once).
      if (!signal.aborted) reader.disconnect(true);
      return UNCOUNTED;
    }
    if (!replies) throw new Error("Pipeline returned nothing");
    const [readError, read] = replies[streams.length];
    if (readError) {
      this.requestFullRead("failed read");
      throw readError;
    }
    // A gap (trimmed past our position, wiped, recreated) means entries may be lost: read all.
    let gap = false;
    for (let i = 0; i < streams.length; i++) {
      const progress = this.#at(streams[i]);
      const [infoError, info] = replies[i];
      if (hasGap(progress.position, infoError ? MISSING : parseInfo(info))) {
        progress.gaps += 1;
        gap = true;
      }
    }
    if (gap) {
      this.requestFullRead("gap");
      return UNCOUNTED;
    }
    const results = (read ?? []) as [string, [string, string[]][]][];
    if (results.length === 0) return false;
    for (const [stream, raw] of results) {
      const entries = raw.map(([id, fields]) => {
        const record: Record<string, string> = {};
        for (let j = 0; j + 1 < fields.length; j += 2) record[fields[j]] = fields[j + 1];
        return { id, fields: record };
      });
      if (entries.length === 0) continue;
      await this.onEntries(stream, entries, signal);
      const progress = this.#at(stream);
      progress.position = entries[entries.length - 1].id;
      progress.entries_read += entries.length;
    }
    return true;
  }

  #keys(): string[] {
    return this.followOptions.streams.map((stream) => stream.key);
  }

  #at(key: string): FollowedStreamSnapshot {
    const progress = this.#progress.get(key);
    if (progress === undefined) throw new Error(`Stream ${key} is not followed`);
    return progress;
  }
}

const ABORTED = Symbol("aborted");

function raceAbort<T>(pending: Promise<T>, signal: AbortSignal): Promise<T | typeof ABORTED> {
  if (signal.aborted) {
    pending.catch(() => {});
    return Promise.resolve(ABORTED);
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      pending.catch(() => {});
      resolve(ABORTED);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    pending.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

function parseInfo(info: unknown): StreamInfo {
  const fields = new Map<string, unknown>();
  const list = info as unknown[];
  for (let i = 0; i + 1 < list.length; i += 2) fields.set(String(list[i]), list[i + 1]);
  return {
    exists: true,
    lastGeneratedId: fields.get("last-generated-id") as string | undefined,
    maxDeletedId: fields.get("max-deleted-entry-id") as string | undefined,
  };
}

const MISSING: StreamInfo = { exists: false, lastGeneratedId: undefined, maxDeletedId: undefined };

function hasGap(position: string, info: StreamInfo): boolean {
  if (position === "0-0") return false;
  // Wiped: the stream we had read from is gone.
  if (!info.exists) return true;
  // Recreated: its ids restarted below where we were.
  if (info.lastGeneratedId !== undefined && compareIds(info.lastGeneratedId, position) < 0) {
    return true;
  }
  // Trimmed or deleted past our position: entries we never read may be gone.
  return info.maxDeletedId !== undefined && compareIds(info.maxDeletedId, position) > 0;
}
