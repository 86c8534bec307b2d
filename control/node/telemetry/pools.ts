/**
 * Provider-API pools and their fetches, from the leading controller's pool watch (one reader for
 * the cluster, so nothing is counted twice; a standby has no samples). Labels name the connector
 * by id and the state or outcome: never an address, a URL or a client.
 */
import type { Registry } from "prom-client";
import type { PoolReading, PoolWatchSnapshot } from "../../provider-api/pool/watch.ts";
import type { FetchStats } from "../../provider-api/fetch-contract.ts";
import { type Sample, type Scrape, TelemetryPart } from "./family.ts";
import { leads } from "./rows.ts";

const STATES = ["checking", "routed", "stock", "suspect", "draining", "extracted"] as const;
const OUTCOMES = ["success", "empty", "duplicate_only", "error"] as const;

export function isPoolWatch<T extends { name: string }>(loop: T): loop is T & PoolWatchSnapshot {
  return loop.name === "pool_watch" && "pools" in loop;
}

function readings(scrape: Scrape): readonly PoolReading[] {
  if (!leads(scrape.snapshot)) return [];
  return scrape.snapshot.loops.find(isPoolWatch)?.pools ?? [];
}

function perConnector(
  scrape: Scrape,
  value: (fetch: FetchStats) => number,
): Sample<"connector">[] {
  const out: Sample<"connector">[] = [];
  for (const reading of readings(scrape)) {
    if (reading.fetch !== null) {
      out.push([{ connector: reading.connector_id }, value(reading.fetch)]);
    }
  }
  return out;
}

const OUTCOME_FIELD: Record<(typeof OUTCOMES)[number], keyof FetchStats> = {
  success: "success",
  empty: "empty",
  duplicate_only: "duplicateOnly",
  error: "error",
};

export class PoolTelemetry extends TelemetryPart {
  constructor(registry: Registry, read: () => Scrape) {
    super(registry, read);
    this.gauge({
      name: "octoprox_pool_entries",
      help:
        "Entries of a provider-API connector's pool by state (checking, routed, stock, suspect, " +
        "draining, extracted), as the leading controller last read them.",
      labelNames: ["connector", "state"] as const,
      samples: (scrape) =>
        readings(scrape).flatMap((reading) =>
          STATES.map((state): Sample<"connector" | "state"> => [
            { connector: reading.connector_id, state },
            reading.counts[state],
          ])
        ),
    });
    this.counter({
      name: "octoprox_provider_fetches_total",
      help: "Provider API fetches by their classification (success, empty, duplicate_only, " +
        "error), across every worker, since the pool generation began.",
      labelNames: ["connector", "outcome"] as const,
      samples: (scrape) =>
        readings(scrape).flatMap((reading) =>
          reading.fetch === null ? [] : OUTCOMES.map((outcome): Sample<"connector" | "outcome"> => [
            { connector: reading.connector_id, outcome },
            Number(reading.fetch?.[OUTCOME_FIELD[outcome]] ?? 0),
          ])
        ),
    });
    this.counter({
      name: "octoprox_provider_fetches_rate_limited_total",
      help: "Error fetches the provider answered 429, since the pool generation began.",
      labelNames: ["connector"] as const,
      samples: (scrape) => perConnector(scrape, (f) => f.rateLimited),
    });
    this.gauge({
      name: "octoprox_provider_backoff_seconds",
      help: "Seconds until the connector's next fetch may start after Error fetches; 0 when " +
        "not backing off.",
      labelNames: ["connector"] as const,
      samples: (scrape) =>
        perConnector(scrape, (f) => Math.max(0, (f.backoffUntilMs - scrape.nowMs) / 1000)),
    });
    this.gauge({
      name: "octoprox_provider_empty_streak",
      help: "Empty fetches in a row (the connector is depleted at pool.depleted_after_empty).",
      labelNames: ["connector"] as const,
      samples: (scrape) => perConnector(scrape, (f) => f.emptyStreak),
    });
    this.gauge({
      name: "octoprox_provider_fetches_in_flight",
      help: "Provider API calls in flight across every worker (bounded by fetch.max_in_flight).",
      labelNames: ["connector"] as const,
      samples: (scrape) => perConnector(scrape, (f) => f.inFlight),
    });
    this.gauge({
      name: "octoprox_provider_ledger_proxies",
      help: "The fetch.max_total ledger: proxies counted by settled calls (used) and reserved " +
        "by calls in flight (pending).",
      labelNames: ["connector", "kind"] as const,
      samples: (scrape) =>
        readings(scrape).flatMap((reading): Sample<"connector" | "kind">[] =>
          reading.fetch === null ? [] : [
            [{ connector: reading.connector_id, kind: "used" }, reading.fetch.ledgerUsed],
            [{ connector: reading.connector_id, kind: "pending" }, reading.fetch.ledgerPending],
          ]
        ),
    });
  }
}
