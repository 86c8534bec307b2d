/**
 * The api's extraction counts (control/provider-api/extraction/stats.ts), per project and, for calls, per
 * mode. Labels are the project's id, the mode and an outcome: never an address, a key, a lease
 * or a client.
 */
import type { Registry } from "prom-client";
import {
  EXTRACT_MODES,
  type ExtractionSnapshot,
  type ModeCounts,
  type ProjectExtractionCounts,
} from "../../provider-api/extraction/stats.ts";
import { type Sample, type Scrape, TelemetryPart } from "./family.ts";

function extractionOf(scrape: Scrape): ExtractionSnapshot | undefined {
  // The api runtime's section is what ApiRuntime.details wrote.
  return scrape.snapshot.runtimes.api?.extraction as ExtractionSnapshot | undefined;
}

function perMode(
  scrape: Scrape,
  value: (counts: ModeCounts) => number,
): Sample<"project" | "mode">[] {
  const projects = extractionOf(scrape)?.projects ?? {};
  return Object.entries(projects).flatMap(([project, counts]) =>
    EXTRACT_MODES.map((mode) => [{ project, mode }, value(counts.modes[mode])] as const)
  );
}

function perProject(
  scrape: Scrape,
  value: (counts: ProjectExtractionCounts) => number,
): Sample<"project">[] {
  const projects = extractionOf(scrape)?.projects ?? {};
  return Object.entries(projects).map(([project, counts]) => [{ project }, value(counts)]);
}

export class ExtractionTelemetry extends TelemetryPart {
  constructor(registry: Registry, read: () => Scrape) {
    super(registry, read);
    const modeLabels = ["project", "mode"] as const;
    this.counter({
      name: "octoprox_extraction_calls_total",
      help: "Extraction calls that ran (idempotent replays and conflicts not counted).",
      labelNames: modeLabels,
      samples: (scrape) => perMode(scrape, (m) => m.calls),
    });
    this.counter({
      name: "octoprox_extraction_requested_proxies_total",
      help: "Proxies extraction calls asked for.",
      labelNames: modeLabels,
      samples: (scrape) => perMode(scrape, (m) => m.requested),
    });
    this.counter({
      name: "octoprox_extraction_returned_proxies_total",
      help: "Proxies extraction calls handed out.",
      labelNames: modeLabels,
      samples: (scrape) => perMode(scrape, (m) => m.returned),
    });
    this.counter({
      name: "octoprox_extraction_insufficient_total",
      help: "Extraction calls that found fewer eligible proxies than asked (all_or_nothing: " +
        "handed out none).",
      labelNames: modeLabels,
      samples: (scrape) => perMode(scrape, (m) => m.insufficient),
    });
    this.counter<"project">({
      name: "octoprox_extraction_idempotency_conflicts_total",
      help: "Extraction calls refused: their Idempotency-Key was used with another request.",
      labelNames: ["project"],
      samples: (scrape) => perProject(scrape, (p) => p.conflicts),
    });
    this.counter<"project">({
      name: "octoprox_extraction_idempotent_replays_total",
      help: "Extraction calls answered with the stored answer of their Idempotency-Key.",
      labelNames: ["project"],
      samples: (scrape) => perProject(scrape, (p) => p.replays),
    });
    this.counter<"project" | "outcome">({
      name: "octoprox_extraction_leases_ended_total",
      help: "Extraction leases ended by this process: released by their holder, or lapsed " +
        "(returned after their end; the index_hygiene job returns those no api came across).",
      labelNames: ["project", "outcome"],
      samples: (scrape) => [
        ...perProject(scrape, (p) => p.released).map(([labels, value]) =>
          [{ ...labels, outcome: "released" }, value] as const
        ),
        ...perProject(scrape, (p) => p.lapsed).map(([labels, value]) =>
          [{ ...labels, outcome: "lapsed" }, value] as const
        ),
      ],
    });
    this.counter<"project">({
      name: "octoprox_extraction_leases_renewed_total",
      help: "Extraction lease renewals that moved a lease's end.",
      labelNames: ["project"],
      samples: (scrape) => perProject(scrape, (p) => p.renewed),
    });
  }
}
