/**
 * A control process's /metrics: its heartbeat snapshot turned into metric families when
 * Prometheus scrapes, on a prom-client registry of its own. The snapshot is built from memory
 * once per scrape and every family reads that one, so a scrape costs nothing between scrapes
 * and never disagrees with the heartbeat. Each part of the snapshot has a class of its own
 * here, apart from the snapshot models, which import nothing of prom-client. Every sample
 * carries the process's role (`all` for role all), as does each of prom-client's process
 * metrics.
 */
import { collectDefaultMetrics, Registry } from "prom-client";
import type { Role } from "../../../shared/roles.ts";
import type { MetricsText } from "../../api/deps.ts";
import type { RuntimeName } from "../../roles/runtime.ts";
import type { ProcessSnapshot } from "../heartbeat.ts";
import { FeedTelemetry, LeaseTelemetry, ProducerTelemetry } from "./controller.ts";
import type { Scrape } from "./family.ts";
import { ExtractionTelemetry } from "./extraction.ts";
import { JobTelemetry } from "./jobs.ts";
import { AttributionTelemetry } from "./attribution.ts";
import { LoopLagTelemetry } from "./loop-lag.ts";
import { LoopTelemetry } from "./loops.ts";
import { FetchTelemetry } from "./fetches.ts";
import type { FetchMetricsSnapshot } from "../../provider-api/fetch/metrics.ts";
import { PoolTelemetry } from "./pools.ts";
import { ScaleTelemetry } from "./scale.ts";
import type { ScaleMetricsSnapshot } from "../../cloud/scale/metrics.ts";
import { ProcessTelemetry } from "./process.ts";
import { StreamTelemetry } from "./streams.ts";
import { ObservationIngestTelemetry, ObservationRecorderTelemetry } from "./observations.ts";
import { SightingIngestTelemetry } from "./sightings.ts";
import { OutboxTelemetry } from "./outbox.ts";
import { AlertTelemetry } from "./alerts.ts";

const LINT_REFUSED_DEFAULTS = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
];

export interface TelemetryOptions {
  role: Role;
  /** The runtimes the process runs: each adds its parts' families. */
  runtimes: readonly RuntimeName[];
  /** The process's snapshot as of now (Node.snapshot). */
  snapshot(): ProcessSnapshot;
  /** Add prom-client's process metrics (CPU, memory, heap, GC); on unless told otherwise. */
  processMetrics?: boolean;
}

export class Telemetry {
  readonly #registry = new Registry();
  readonly #snapshot: () => ProcessSnapshot;
  #scrape: Scrape | undefined;

  constructor(options: TelemetryOptions) {
    this.#snapshot = options.snapshot;
    this.#registry.setDefaultLabels({ role: options.role });
    const read = () => {
      if (this.#scrape === undefined) throw new Error("Telemetry read outside a scrape");
      return this.#scrape;
    };
    new ProcessTelemetry(this.#registry, read);
    new LoopTelemetry(this.#registry, read);
    new LoopLagTelemetry(this.#registry, read);
    new StreamTelemetry(this.#registry, read);
    if (options.runtimes.includes("worker")) {
      new JobTelemetry(this.#registry, read);
      new AttributionTelemetry(this.#registry, read);
      new FetchTelemetry(
        this.#registry,
        read,
        (scrape) =>
          (scrape.snapshot.runtimes.worker as { fetch?: FetchMetricsSnapshot } | undefined)?.fetch,
      );
      new ScaleTelemetry(
        this.#registry,
        read,
        (scrape) =>
          (scrape.snapshot.runtimes.worker as { scale?: ScaleMetricsSnapshot } | undefined)?.scale,
      );
    }
    if (options.runtimes.includes("api")) {
      new ExtractionTelemetry(this.#registry, read);
      new AlertTelemetry(this.#registry, read);
    }
    if (options.runtimes.includes("api") || options.runtimes.includes("worker")) {
      new ObservationRecorderTelemetry(this.#registry, read);
      new OutboxTelemetry(this.#registry, read);
    }
    if (options.runtimes.includes("worker")) {
      new ObservationIngestTelemetry(this.#registry, read);
      new SightingIngestTelemetry(this.#registry, read);
    }
    if (options.runtimes.includes("controller")) {
      new LeaseTelemetry(this.#registry, read);
      new FeedTelemetry(this.#registry, read);
      new ProducerTelemetry(this.#registry, read);
      new PoolTelemetry(this.#registry, read);
    }
    if (options.processMetrics ?? true) {
      collectDefaultMetrics({ register: this.#registry });
      // Gauges named `_total`, which promtool's lint refuses; each is the sum over `type` of
      // the family of the same name without it, which stays.
      for (const name of LINT_REFUSED_DEFAULTS) this.#registry.removeSingleMetric(name);
    }
  }

  /** The names of the families this process exports (the dashboards' and rules' check). */
  families(): string[] {
    return this.#registry.getMetricsAsArray().map((metric) => metric.name);
  }

  /** The text exposition of every family, as of this call. */
  async render(): Promise<MetricsText> {
    // The registry asks every family for its values within this call, before its first await,
    // so each family reads this scrape even when another starts meanwhile.
    this.#scrape = { snapshot: this.#snapshot(), nowMs: Date.now() };
    const body = await this.#registry.metrics();
    return { contentType: this.#registry.contentType, body };
  }
}
