/**
 * A worker's attribution: the rows its attributor judged, wrote, moved in the feed, and wrote
 * with sources that disagree on the country (control/geo/attribution.ts counts them; the worker's
 * snapshot carries them). No labels beyond the role.
 */
import type { Registry } from "prom-client";
import type { AttributionCounts } from "../../geo/attribution.ts";
import { type Sample, type Scrape, TelemetryPart } from "./family.ts";

function counts(
  scrape: Scrape,
  value: (counts: AttributionCounts) => number,
): Sample<never>[] {
  const worker = scrape.snapshot.runtimes.worker as
    | { attribution?: AttributionCounts }
    | undefined;
  return worker?.attribution === undefined ? [] : [[{}, value(worker.attribution)]];
}

export class AttributionTelemetry extends TelemetryPart {
  constructor(registry: Registry, read: () => Scrape) {
    super(registry, read);
    this.counter({
      name: "octoprox_attribution_judged_total",
      help: "Proxies whose exit this worker's attributor judged (health checks, enrich, syncs, " +
        "sightings, re-attribution).",
      samples: (scrape) => counts(scrape, (c) => c.judged),
    });
    this.counter({
      name: "octoprox_attribution_written_total",
      help: "Proxy rows whose location the attributor wrote (a judgement that changed nothing " +
        "writes nothing).",
      samples: (scrape) => counts(scrape, (c) => c.written),
    });
    this.counter({
      name: "octoprox_attribution_moved_total",
      help: "Proxy rows whose country, region, city or conflict the attributor moved (each " +
        "announced to the routing feed).",
      samples: (scrape) => counts(scrape, (c) => c.moved),
    });
    this.counter({
      name: "octoprox_attribution_conflicts_total",
      help: "Proxy rows written with location sources that disagree on the country.",
      samples: (scrape) => counts(scrape, (c) => c.conflicts),
    });
  }
}
