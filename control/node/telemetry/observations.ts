/**
 * Observations of exits: the process's recorder (api and worker processes: recorded, appended to
 * the stream, dropped from a full buffer through a Redis outage, trimmed by the stream's cap, and
 * those waiting) and a worker's ingest (written, malformed, hand-outs). Read off their loop rows,
 * each told by the fields only its class writes; no labels beyond the role.
 */
import type { Registry } from "prom-client";
import type { LoopSnapshot } from "../../../shared/async/loop.ts";
import type { ObservationIngestSnapshot } from "../../geo/observation-ingest.ts";
import type { ObservationRecorderSnapshot } from "../../geo/observation-recorder.ts";
import { type Sample, type Scrape, TelemetryPart } from "./family.ts";

function isRecorder<T extends LoopSnapshot>(loop: T): loop is T & ObservationRecorderSnapshot {
  return "observations_recorded" in loop;
}

function isIngest<T extends LoopSnapshot>(loop: T): loop is T & ObservationIngestSnapshot {
  return "observations_ingested" in loop;
}

/** One sample from the recorder's row; none where the process runs no recorder. */
function recorder(
  scrape: Scrape,
  value: (row: ObservationRecorderSnapshot) => number,
): Sample<never>[] {
  return scrape.snapshot.loops.filter(isRecorder).map((row) => [{}, value(row)] as const);
}

function ingest(
  scrape: Scrape,
  value: (row: ObservationIngestSnapshot) => number,
): Sample<never>[] {
  return scrape.snapshot.loops.filter(isIngest).map((row) => [{}, value(row)] as const);
}

/** The recorder's families: a process that runs an api or a worker. */
export class ObservationRecorderTelemetry extends TelemetryPart {
  constructor(registry: Registry, read: () => Scrape) {
    super(registry, read);
    this.counter({
      name: "octoprox_observations_recorded_total",
      help: "Observations of exits this process recorded.",
      samples: (scrape) => recorder(scrape, (r) => r.observations_recorded),
    });
    this.counter({
      name: "octoprox_observations_published_total",
      help: "Observations this process appended to the observations stream (confirmed by Redis).",
      samples: (scrape) => recorder(scrape, (r) => r.observations_published),
    });
    this.counter({
      name: "octoprox_observations_dropped_total",
      help: "Observations dropped, oldest first, from a full buffer (Redis away).",
      samples: (scrape) => recorder(scrape, (r) => r.observations_dropped),
    });
    this.counter({
      name: "octoprox_observations_trimmed_total",
      help: "Entries the observations stream's cap removed as this process appended (no worker " +
        "takes the stream).",
      samples: (scrape) => recorder(scrape, (r) => r.observations_trimmed),
    });
    this.gauge({
      name: "octoprox_observations_waiting",
      help: "Observations recorded and not appended yet: buffered, or in the part owed to Redis.",
      samples: (scrape) => recorder(scrape, (r) => r.observations_buffered + r.observations_owed),
    });
  }
}

/** The ingest's families: a process that runs a worker. */
export class ObservationIngestTelemetry extends TelemetryPart {
  constructor(registry: Registry, read: () => Scrape) {
    super(registry, read);
    this.counter({
      name: "octoprox_observations_ingested_total",
      help: "Observations this worker wrote to the observation log (and their exits).",
      samples: (scrape) => ingest(scrape, (r) => r.observations_ingested),
    });
    this.counter({
      name: "octoprox_observations_malformed_total",
      help: "Observation entries this release could not read, completed unwritten.",
      samples: (scrape) => ingest(scrape, (r) => r.observations_malformed),
    });
    this.counter({
      name: "octoprox_observation_hand_outs_total",
      help: "Hand-outs this worker counted: a proxy seen on another exit than its last.",
      samples: (scrape) => ingest(scrape, (r) => r.hand_outs),
    });
  }
}
