/**
 * The worker's fetch families (control/provider-api/fetch/metrics.ts counts them). The
 * fetches by outcome, the 429s, the back-off, the streaks, the calls in flight and the ledger
 * are the cluster's, kept in Redis by the coordinator: the leading controller's pool watch reads
 * them once for everyone (control/node/telemetry/pools.ts), so no sum over workers counts them
 * twice. The one label is `connector`, an id.
 */
import { Histogram, type Registry } from "prom-client";
import type { Sample, Scrape } from "./family.ts";
import { TelemetryPart } from "./family.ts";
import {
  type ConnectorFetchCounts,
  FETCH_DURATION_BUCKETS_SECONDS,
  type FetchMetricsSnapshot,
} from "../../provider-api/fetch/metrics.ts";
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
