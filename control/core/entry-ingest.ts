/**
 * A worker's ingest of a stream whose entries are the work, each one JSON document under one
 * field (the observations, the sightings): a group consumer (consumers.ts: reclaim, keep-alive,
 * the deliveries allowed, the stop grace) taking one batch at a time, since a batch is one
 * ordered write. A batch is decoded first: an entry this release cannot read (an older or newer
 * release's, during a roll) is counted, logged once a batch with the reasons, and completed with
 * its batch, never retried; the rest goes to `ingest`. A batch given up after its last delivery
 * is logged by count, never by its entries.
 */
import type { Redis } from "ioredis";
import type { WorkStreamName } from "../../shared/redis-keys.ts";
import type { ControlSettings } from "../../shared/settings.ts";
import { GroupConsumer, type WorkBatch } from "./consumers.ts";
import type { Logger } from "./logging.ts";

/** An entry read: its item, or why this release cannot read it. */
export type Decoded<T> = { ok: true; item: T } | { ok: false; reason: string };

export interface EntryIngestOptions {
  /** The loop's name (its job stats key, what the System page shows). */
  name: string;
  /** The stream as the System page names it, and the items in log lines (`observations`). */
  streamName: WorkStreamName;
  stream: string;
  /** The entry's one field. */
  field: string;
  batchSize: number;
  /** The process's client: completions, reclaims. */
  redis: Redis;
  settings: Pick<
    ControlSettings,
    "claimTimeoutMs" | "reclaimIntervalMs" | "maxDeliveries" | "stopGraceMs"
  >;
  logger: Logger;
  /** This process's consumer name (the worker's). */
  consumer: string;
}

export abstract class EntryIngest<T> extends GroupConsumer {
  readonly #streamName: string;
  #malformed = 0;

  constructor(options: EntryIngestOptions) {
    const { settings } = options;
    super({
      name: options.name,
      logger: options.logger,
      redis: options.redis,
      // A connection of its own for the blocking read, which a stop disconnects.
      reader: options.redis.duplicate({ enableOfflineQueue: true }),
      stream: options.stream,
      streamName: options.streamName,
      consumer: options.consumer,
      keyField: options.field,
      batchSize: options.batchSize,
      concurrency: 1,
      claimTimeoutMs: settings.claimTimeoutMs,
      reclaimIntervalMs: settings.reclaimIntervalMs,
      maxDeliveries: settings.maxDeliveries,
      stopGraceMs: settings.stopGraceMs,
    });
    this.#streamName = options.streamName;
  }

  /** Entries completed unread since start. */
  get malformed(): number {
    return this.#malformed;
  }

  protected abstract decode(entry: string): Decoded<T>;

  /** Ingests a batch's readable items; a throw leaves the batch pending for a later delivery. */
  protected abstract ingest(items: T[]): Promise<void>;

  protected override async handle(batch: WorkBatch): Promise<void> {
    const items: T[] = [];
    const reasons = new Map<string, number>();
    for (const key of batch.keys) {
      const decoded = this.decode(key);
      if (decoded.ok) items.push(decoded.item);
      else reasons.set(decoded.reason, (reasons.get(decoded.reason) ?? 0) + 1);
    }
    if (reasons.size > 0) {
      const malformed = batch.keys.length - items.length;
      this.#malformed += malformed;
      // One line a batch, whatever the number: a roll can bring thousands.
      this.logger.warn(
        { stream: this.#streamName, malformed, reasons: Object.fromEntries(reasons) },
        `${capitalised(this.#streamName)} this release cannot read; completed unwritten`,
      );
    }
    if (items.length > 0) await this.ingest(items);
  }

  /** Logs the count, not the entries: a batch's are up to thousands of documents. */
  protected override giveUp(batch: WorkBatch): Promise<void> {
    this.logger.warn(
      {
        stream: this.#streamName,
        [this.#streamName]: batch.keys.length,
        deliveries: batch.deliveries,
      },
      `Giving up a batch of ${this.#streamName} after its last delivery; they are lost`,
    );
    return Promise.resolve();
  }
}

const capitalised = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);
