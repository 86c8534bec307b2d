/**
 * A worker's sighting ingest (control/geo/sighting-ingest.ts): the gateways' preflight sightings
 * it applied, those it could not read, the rows they moved and the vendor session slots it
 * rotated. Read off its loop row, told by the fields only its class writes; no labels beyond the
 * role.
 */
import type { Registry } from "prom-client";
import type { LoopSnapshot } from "../../../shared/async/loop.ts";
import type { SightingIngestSnapshot } from "../../geo/sighting-ingest.ts";
import { type Sample, type Scrape, TelemetryPart } from "./family.ts";

function isIngest<T extends LoopSnapshot>(loop: T): loop is T & SightingIngestSnapshot {
  return "sightings_ingested" in loop;
}

function ingest(
  scrape: Scrape,
  value: (row: SightingIngestSnapshot) => number,
): Sample<never>[] {
  return scrape.snapshot.loops.filter(isIngest).map((row) => [{}, value(row)] as const);
}

/** The ingest's families: a process that runs a worker. */
export class SightingIngestTelemetry extends TelemetryPart {
  constructor(registry: Registry, read: () => Scrape) {
    super(registry, read);
    this.counter({
      name: "octoprox_sightings_ingested_total",
      help: "Preflight sightings this worker applied through attribution.",
      samples: (scrape) => ingest(scrape, (r) => r.sightings_ingested),
    });
    this.counter({
      name: "octoprox_sightings_malformed_total",
      help: "Sighting entries this release could not read, completed unwritten.",
      samples: (scrape) => ingest(scrape, (r) => r.sightings_malformed),
    });
    this.counter({
      name: "octoprox_sightings_written_total",
      help: "Proxy rows the sightings this worker applied moved (written forward).",
      samples: (scrape) => ingest(scrape, (r) => r.sightings_written),
    });
    this.counter({
      name: "octoprox_sighting_slots_rotated_total",
      help: "Vendor session slots this worker deleted for a fresh session: their exit " +
        "contradicted the vendor's claim under preflight retry or reject.",
      samples: (scrape) => ingest(scrape, (r) => r.slots_rotated),
    });
  }
}
