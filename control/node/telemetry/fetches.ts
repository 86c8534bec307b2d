/**
 * The fetch path's metrics as a worker sees them (seed 001 section 16): call durations,
 * back-offs started, proxies added and duplicates, per connector. The fetches by outcome, the
 * 429s, the back-off, the streaks, the calls in flight and the ledger are the cluster's, kept in
 * Redis by the coordinator: the leading controller's pool watch reads them once for everyone
 * (control/node/telemetry/pools.ts), so no sum over workers counts them twice.
 *
 * `FetchMetrics` counts in memory as the refiller observes fetches (plain numbers, no
 * prom-client; its snapshot keeps the outcomes and 429s too, for the heartbeat and tests), and
 * `FetchTelemetry` is the families a control process's registry renders from such a snapshot
 * at each scrape, as the other families read the heartbeat's (control/node/telemetry/). The one
 * label is `connector`, an id: never an address, a URL or a credential.
 */
import { Histogram, type Registry } from "prom-client";
import type { Sample, Scrape } from "./family.ts";
import { TelemetryPart } from "./family.ts";
import { type FetchKind, FetchKind as Kind } from "../../provider-api/answer.ts";

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

type ConnectorSample = Sample<"connector">;

function perConnector(
  snapshot: FetchMetricsSnapshot | undefined,
  value: (counts: ConnectorFetchCounts) => number,
): ConnectorSample[] {
  return Object.entries(snapshot?.connectors ?? {}).map(([connector, counts]) => [
    { connector },
    value(counts),
  ]);
}

/** A histogram family's samples in prom-client's shape, from a snapshot's counts. */
function durationValues(name: string, snapshot: FetchMetricsSnapshot | undefined) {
  const values: { labels: Record<string, string | number>; value: number; metricName: string }[] =
    [];
  for (const [connector, counts] of Object.entries(snapshot?.connectors ?? {})) {
    const duration = counts.duration;
    FETCH_DURATION_BUCKETS_SECONDS.forEach((bound, index) => {
      values.push({
        labels: { connector, le: bound },
        value: duration.buckets[index],
        metricName: `${name}_bucket`,
      });
    });
    values.push({
      labels: { connector, le: "+Inf" },
      value: duration.count,
      metricName: `${name}_bucket`,
    });
    values.push({ labels: { connector }, value: duration.sum_seconds, metricName: `${name}_sum` });
    values.push({ labels: { connector }, value: duration.count, metricName: `${name}_count` });
  }
  return values;
}

/**
 * The worker's fetch families on a process's registry, read at each scrape from `source` (the
 * worker's `FetchMetrics.snapshot()`, or the part of the heartbeat snapshot that carries it).
 * Every connector the worker fetched for is listed, zero or not.
 */
export class FetchTelemetry extends TelemetryPart {
  constructor(
    registry: Registry,
    read: () => Scrape,
    source: (scrape: Scrape) => FetchMetricsSnapshot | undefined,
  ) {
    super(registry, read);
    const labelNames = ["connector"] as const;
    this.counter({
      name: "octoprox_provider_fetch_backoffs_total",
      help: "Back-offs a provider API fetch started or lengthened (one per error fetch).",
      labelNames,
      samples: (scrape) => perConnector(source(scrape), (c) => c.backoffs),
    });
    this.counter({
      name: "octoprox_provider_fetch_proxies_added_total",
      help: "Proxies provider API fetches added to the pool (checking).",
      labelNames,
      samples: (scrape) => perConnector(source(scrape), (c) => c.proxies_added),
    });
    this.counter({
      name: "octoprox_provider_fetch_duplicates_total",
      help: "Proxies of provider API answers the pool already held, or the answer repeated.",
      labelNames,
      samples: (scrape) => perConnector(source(scrape), (c) => c.duplicates),
    });
    const name = "octoprox_provider_fetch_duration_seconds";
    const help = "Provider API calls' durations, from sending to the whole answer read.";
    const histogram = new Histogram({
      name,
      help,
      labelNames,
      buckets: [...FETCH_DURATION_BUCKETS_SECONDS],
      registers: [registry],
    });
    // As the counters: the values come from the scrape's snapshot, read before the first await.
    const render = () => {
      const values = durationValues(name, source(read()));
      return Promise.resolve({
        name,
        help,
        type: "histogram" as const,
        values,
        aggregator: "sum" as const,
      });
    };
    Object.assign(histogram, { getForPromString: render, get: render });
  }
}
