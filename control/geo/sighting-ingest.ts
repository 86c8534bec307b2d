/**
 * The sighting ingest: one per worker process, a consumer of the sightings stream in the group
 * `workers` (control/core/entry-ingest.ts: reclaim, keep-alive, the deliveries allowed, the stop
 * grace, entries it cannot read). Each read takes up to 500 entries, one batch at a time. A batch may hold several gateways' sightings out of order; it is:
 *
 * 1. decoded (shared/geo/sighting-wire.ts): an entry this release cannot read is logged and
 *    completed with its batch, never retried;
 * 2. applied in observed_at order through the attributor (attribution.ts), which judges each
 *    exit by the one rule, writes the row forward only and records the observation. A proxy
 *    seen more than once in the batch is applied once per sighting, oldest first, so each
 *    sighting is observed and the newest judges the row; the store's forward-only write means
 *    a sighting that arrives late (in a later batch, or on another worker) never overwrites a
 *    newer one;
 * 3. rotation: a vendor session slot whose newest sighting in the batch, seen under `retry` or
 *    `reject`, contradicts the vendor's claim is deleted, all of the batch's in one delete that
 *    asks each of their connectors for one sync (services/proxies.ts `rotateSessionSlots`), so
 *    the vendor gives the slot a fresh session.
 *
 * A batch that fails stays pending and comes again after the claim timeout; after its last
 * delivery it is given up and its sightings are lost (the next sightings of those exits say the
 * same again).
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import type { ControlSettings } from "../../shared/settings.ts";
import { decodeSighting, type Sighting, SIGHTING_FIELD } from "../../shared/geo/sighting-wire.ts";
import type { GroupConsumerSnapshot } from "../core/consumers.ts";
import { type Decoded, EntryIngest } from "../core/entry-ingest.ts";
import type { Logger } from "../core/logging.ts";
import type { ServiceDeps } from "../core/store.ts";
import { rotateSessionSlots } from "../services/proxies.ts";
import type { Attributor, Judged, SeenExit } from "./attribution.ts";
import { ObservationSource } from "./observation.ts";

export const SIGHTING_INGEST_LOOP = "sighting_ingest";
/** Entries a read takes and a batch holds at most. */
export const SIGHTING_BATCH_SIZE = 500;

/** The modes under which a contradicted slot is rotated (`report` only tells). */
const ROTATING_MODES: ReadonlySet<string> = new Set(["retry", "reject"]);

export interface SightingIngestOptions {
  /** The services' deps: the rotation's delete and the syncs it asks. */
  deps: ServiceDeps;
  /** Judges, writes and observes what the sightings saw. */
  attributor: Pick<Attributor, "apply">;
  /** The process's client: completions, reclaims. */
  redis: Redis;
  keys: Pick<RedisKeys, "sightingsStream">;
  settings: Pick<
    ControlSettings,
    "claimTimeoutMs" | "reclaimIntervalMs" | "maxDeliveries" | "stopGraceMs"
  >;
  logger: Logger;
  /** This process's consumer name (the worker's). */
  consumer: string;
  batchSize?: number;
}

export interface SightingIngestSnapshot extends GroupConsumerSnapshot {
  sightings_ingested: number;
  sightings_malformed: number;
  /** Rows the sightings moved (written forward). */
  sightings_written: number;
  slots_rotated: number;
}

export interface IngestOutcome {
  applied: number;
  written: number;
  rotated: string[];
}

/** The exit a sighting saw, as the attributor takes it. */
function seenExit(sighting: Sighting): SeenExit {
  return {
    proxyId: sighting.proxyId,
    ip: sighting.ip,
    seenAt: new Date(sighting.observedAt),
    endpoint: sighting.endpoint,
    instanceId: sighting.instanceId,
  };
}

/** A slot's claim contradicted by what was seen, and the project rotating such slots. */
function contradicted(judged: Judged, sighting: Sighting): boolean {
  const seen = judged.attribution.country;
  return ROTATING_MODES.has(sighting.mode) && judged.vendorCountry !== null && seen !== null &&
    seen !== judged.vendorCountry;
}

/**
 * Ingests one batch of decoded sightings (see the module's comment), oldest first; ties by
 * proxy, so every worker orders a batch alike.
 */
export async function ingestSightings(
  parts: Pick<SightingIngestOptions, "deps" | "attributor">,
  sightings: readonly Sighting[],
): Promise<IngestOutcome> {
  const ordered = [...sightings].sort((a, b) =>
    a.observedAt - b.observedAt || (a.proxyId < b.proxyId ? -1 : a.proxyId > b.proxyId ? 1 : 0)
  );
  // Round n holds each proxy's n-th sighting: the attributor judges one exit per proxy a call.
  const rounds: Sighting[][] = [];
  const seenCount = new Map<string, number>();
  for (const sighting of ordered) {
    const n = seenCount.get(sighting.proxyId) ?? 0;
    seenCount.set(sighting.proxyId, n + 1);
    (rounds[n] ??= []).push(sighting);
  }
  let written = 0;
  // The newest sighting of each proxy decides its rotation.
  const rotate = new Map<string, boolean>();
  for (const round of rounds) {
    const bySlot = new Map(round.map((sighting) => [sighting.proxyId, sighting]));
    const judged = await parts.attributor.apply(round.map(seenExit), ObservationSource.preflight);
    for (const entry of judged) {
      if (entry.written) written++;
      rotate.set(entry.proxyId, contradicted(entry, bySlot.get(entry.proxyId)!));
    }
  }
  const slots = [...rotate].filter(([, yes]) => yes).map(([proxyId]) => proxyId);
  const rotated = await rotateSessionSlots(parts.deps, slots);
  return { applied: ordered.length, written, rotated };
}

export class SightingIngest extends EntryIngest<Sighting> {
  readonly #o: SightingIngestOptions;
  #ingested = 0;
  #written = 0;
  #rotated = 0;

  constructor(options: SightingIngestOptions) {
    super({
      ...options,
      name: SIGHTING_INGEST_LOOP,
      stream: options.keys.sightingsStream,
      streamName: "sightings",
      field: SIGHTING_FIELD,
      batchSize: options.batchSize ?? SIGHTING_BATCH_SIZE,
    });
    this.#o = options;
  }

  override snapshot(): SightingIngestSnapshot {
    return {
      ...super.snapshot(),
      sightings_ingested: this.#ingested,
      sightings_malformed: this.malformed,
      sightings_written: this.#written,
      slots_rotated: this.#rotated,
    };
  }

  protected override decode(entry: string): Decoded<Sighting> {
    const decoded = decodeSighting(entry);
    return decoded.ok ? { ok: true, item: decoded.sighting } : decoded;
  }

  protected override async ingest(sightings: Sighting[]): Promise<void> {
    const outcome = await ingestSightings(this.#o, sightings);
    this.#ingested += outcome.applied;
    this.#written += outcome.written;
    this.#rotated += outcome.rotated.length;
    if (outcome.rotated.length > 0) {
      this.logger.info(
        { slots: outcome.rotated.length },
        "Vendor session slots rotated: their exits contradict the vendor's claim",
      );
    }
  }
}
