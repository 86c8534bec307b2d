/**
 * The observation ingest: one per worker process, a consumer of the observations stream in the
 * group `workers` (control/core/entry-ingest.ts: reclaim, keep-alive, five deliveries, the stop
 * grace, entries it cannot read). Each read takes up to 5,000 entries, one batch at a time, and a
 * batch is:
 *
 * 1. decoded (shared/geo/observation-wire.ts): an entry this release cannot read (an older or
 *    newer release's, during a roll) is logged and completed with its batch, never retried;
 * 2. judged for hand-outs, oldest first, by one script (hand-outs.ts);
 * 3. written in one transaction (observation-writes.ts): the log rows and the exit table, every
 *    write moving forward only, so batches go to any worker in any order.
 *
 * A batch that fails stays pending and comes again after the claim timeout; after its last
 * delivery it is given up and its observations are lost (the next sightings of those exits say
 * the same again). The entry's one field is its key for the consumer base, so an entry repeated
 * whole within a batch (same exit, proxy, source and millisecond) is ingested once.
 */
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import { type RedisKeys } from "../../shared/redis-keys.ts";
import type { ControlSettings } from "../../shared/settings.ts";
import {
  decodeObservation,
  type Observation,
  OBSERVATION_FIELD,
} from "../../shared/geo/observation-wire.ts";
import type { GroupConsumerSnapshot } from "../core/consumers.ts";
import { type Decoded, EntryIngest } from "../core/entry-ingest.ts";
import type { Logger } from "../core/logging.ts";
import { judgeHandOuts } from "./hand-outs.ts";
import { type BatchWriteOutcome, writeObservations } from "./observation-writes.ts";

export const OBSERVATION_INGEST_LOOP = "observation_ingest";
/** Entries a read takes and a batch holds at most. */
export const OBSERVATION_BATCH_SIZE = 5_000;

export interface ObservationIngestOptions {
  database: Pick<Database, "sql">;
  /** The process's client: scripts, completions, reclaims. */
  redis: Redis;
  keys: Pick<RedisKeys, "observationsStream" | "proxyLastExit">;
  settings: Pick<
    ControlSettings,
    "claimTimeoutMs" | "reclaimIntervalMs" | "maxDeliveries" | "stopGraceMs"
  >;
  logger: Logger;
  /** This process's consumer name (the worker's). */
  consumer: string;
  batchSize?: number;
}

/** The ingest's row in the snapshot: a group consumer's, and what it wrote. */
export interface ObservationIngestSnapshot extends GroupConsumerSnapshot {
  observations_ingested: number;
  observations_malformed: number;
  /** Ingested without an exit row: their connector is gone, or they named none. */
  observations_without_connector: number;
  hand_outs: number;
}

/**
 * Ingests one batch of decoded observations: hand-outs judged oldest first (ties by address, so
 * every worker orders a batch alike), then the one transaction.
 */
export async function ingestObservations(
  stores: Pick<ObservationIngestOptions, "database" | "redis" | "keys">,
  observations: readonly Observation[],
): Promise<BatchWriteOutcome> {
  const ordered = [...observations].sort((a, b) =>
    a.observedAt - b.observedAt || (a.ip < b.ip ? -1 : a.ip > b.ip ? 1 : 0)
  );
  const verdicts = await judgeHandOuts(stores.redis, stores.keys, ordered);
  return await writeObservations(stores.database, ordered, verdicts);
}

export class ObservationIngest extends EntryIngest<Observation> {
  readonly #o: ObservationIngestOptions;
  #ingested = 0;
  #withoutConnector = 0;
  #handOuts = 0;

  constructor(options: ObservationIngestOptions) {
    super({
      ...options,
      name: OBSERVATION_INGEST_LOOP,
      stream: options.keys.observationsStream,
      streamName: "observations",
      field: OBSERVATION_FIELD,
      batchSize: options.batchSize ?? OBSERVATION_BATCH_SIZE,
    });
    this.#o = options;
  }

  override snapshot(): ObservationIngestSnapshot {
    return {
      ...super.snapshot(),
      observations_ingested: this.#ingested,
      observations_malformed: this.malformed,
      observations_without_connector: this.#withoutConnector,
      hand_outs: this.#handOuts,
    };
  }

  protected override decode(entry: string): Decoded<Observation> {
    const decoded = decodeObservation(entry);
    return decoded.ok ? { ok: true, item: decoded.observation } : decoded;
  }

  protected override async ingest(observations: Observation[]): Promise<void> {
    const outcome = await ingestObservations(this.#o, observations);
    this.#ingested += outcome.logged;
    this.#withoutConnector += outcome.withoutConnector;
    this.#handOuts += outcome.handOuts;
  }
}
