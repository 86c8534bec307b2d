/**
 * A worker's job stats per kind it takes, from its job runners (one per kind, and one more for
 * a kind's first lane, summed with it): every kind it runs is listed from the first scrape, at
 * zero until its first batch.
 */
import type { Registry } from "prom-client";
import type { JobRunnerSnapshot } from "../../jobs/runner.ts";
import { type Sample, type Scrape, TelemetryPart } from "./family.ts";
import { isJobRunner } from "./rows.ts";

type KindSample = Sample<"kind">;

/** One series per kind: a kind with a first lane has two runners, summed. */
function perKind(
  scrape: Scrape,
  value: (runner: JobRunnerSnapshot) => number,
): KindSample[] {
  const byKind = new Map<string, number>();
  for (const runner of scrape.snapshot.loops.filter(isJobRunner)) {
    byKind.set(runner.job_kind, (byKind.get(runner.job_kind) ?? 0) + value(runner));
  }
  return [...byKind].map(([kind, total]) => [{ kind }, total]);
}

export class JobTelemetry extends TelemetryPart {
  constructor(registry: Registry, read: () => Scrape) {
    super(registry, read);
    const labelNames = ["kind"] as const;
    this.counter({
      name: "octoprox_job_batches_total",
      help: "Batches of the kind the job ran to their end.",
      labelNames,
      samples: (scrape) => perKind(scrape, (r) => r.runs - r.batches_given_up),
    });
    this.counter({
      name: "octoprox_job_batch_failures_total",
      help: "Batches of the kind whose run failed (left pending for a later delivery).",
      labelNames,
      samples: (scrape) => perKind(scrape, (r) => r.failures),
    });
    this.counter({
      name: "octoprox_job_batches_given_up_total",
      help: "Batches of the kind given up at the delivery after the last allowed.",
      labelNames,
      samples: (scrape) => perKind(scrape, (r) => r.batches_given_up),
    });
    this.counter({
      name: "octoprox_job_entries_given_up_total",
      help: "Stream entries of the kind completed without being run, after their last delivery.",
      labelNames,
      samples: (scrape) => perKind(scrape, (r) => r.dropped),
    });
    this.counter({
      name: "octoprox_job_keys_total",
      help: "Keys in the batches of the kind that ran to their end (each once per batch).",
      labelNames,
      samples: (scrape) => perKind(scrape, (r) => r.keys_done),
    });
    this.counter({
      name: "octoprox_job_entries_reclaimed_total",
      help: "Stream entries of the kind this worker took over from consumers that went quiet.",
      labelNames,
      samples: (scrape) => perKind(scrape, (r) => r.reclaimed),
    });
    this.gauge({
      name: "octoprox_job_batches_running",
      help: "Batches of the kind running now.",
      labelNames,
      samples: (scrape) => perKind(scrape, (r) => r.running_batches),
    });
  }
}
