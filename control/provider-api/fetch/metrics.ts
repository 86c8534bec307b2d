/**
 * The fetch path's counts as a worker sees them (seed 001 section 16): call durations,
 * back-offs started, proxies added and duplicates, per connector, kept in memory as the refiller
 * observes fetches (plain numbers, no prom-client; the snapshot keeps the outcomes and 429s
 * too, for the heartbeat and tests). A control process's registry renders them as families
 * (control/node/telemetry/fetches.ts). The one key is a connector id: never an address, a URL
 * or a credential.
 */
import { type FetchKind, FetchKind as Kind } from "../answer.ts";

/** Upper bounds of the fetch duration histogram, in seconds. */
export const FETCH_DURATION_BUCKETS_SECONDS: readonly number[] = [
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
  60,
  120,
];

const KINDS: readonly FetchKind[] = Object.values(Kind);

/** One connector's counts since the process started. */
export interface ConnectorFetchCounts {
  fetches: Record<FetchKind, number>;
  rate_limited: number;
  backoffs: number;
  proxies_added: number;
  duplicates: number;
  /** Calls' durations: observations at or under each bound (cumulative), their sum and count. */
  duration: { buckets: number[]; sum_seconds: number; count: number };
}

export interface FetchMetricsSnapshot {
  /** By connector id. */
  connectors: Record<string, ConnectorFetchCounts>;
}

/** One fetch, as the refiller saw it. */
export interface FetchObservation {
  connectorId: string;
  kind: FetchKind;
  /** The call's duration; undefined when no call was sent. */
  durationMs?: number;
  /** The provider answered 429. */
  rateLimited: boolean;
  /** The fetch started (or lengthened) a back-off. */
  backoffStarted: boolean;
  /** Entries the pool took. */
  added: number;
  /** Proxies the pool held already (for this connector or another), and repeats in the answer. */
  duplicates: number;
}

function emptyCounts(): ConnectorFetchCounts {
  return {
    fetches: Object.fromEntries(KINDS.map((kind) => [kind, 0])) as Record<FetchKind, number>,
    rate_limited: 0,
    backoffs: 0,
    proxies_added: 0,
    duplicates: 0,
    duration: { buckets: FETCH_DURATION_BUCKETS_SECONDS.map(() => 0), sum_seconds: 0, count: 0 },
  };
}

export class FetchMetrics {
  readonly #connectors = new Map<string, ConnectorFetchCounts>();

  observe(observation: FetchObservation): void {
    let counts = this.#connectors.get(observation.connectorId);
    if (counts === undefined) {
      counts = emptyCounts();
      this.#connectors.set(observation.connectorId, counts);
    }
    counts.fetches[observation.kind]++;
    if (observation.rateLimited) counts.rate_limited++;
    if (observation.backoffStarted) counts.backoffs++;
    counts.proxies_added += observation.added;
    counts.duplicates += observation.duplicates;
    if (observation.durationMs !== undefined) {
      const seconds = observation.durationMs / 1000;
      const duration = counts.duration;
      FETCH_DURATION_BUCKETS_SECONDS.forEach((bound, index) => {
        if (seconds <= bound) duration.buckets[index]++;
      });
      duration.sum_seconds += seconds;
      duration.count++;
    }
  }

  /** Drops a connector's counts (it was deleted): its series leave /metrics. */
  forget(connectorId: string): void {
    this.#connectors.delete(connectorId);
  }

  snapshot(): FetchMetricsSnapshot {
    const connectors: Record<string, ConnectorFetchCounts> = {};
    for (const [id, counts] of this.#connectors) connectors[id] = structuredClone(counts);
    return { connectors };
  }
}
