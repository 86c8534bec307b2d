/**
 * The worker's scale families (control/cloud/scale/metrics.ts counts them): cloud calls by
 * cloud, operation and outcome; scaling steps and the instances they moved; rotations; listed
 * instances with no row terminated; the scale runs' count and CPU. Counts of this worker's
 * runs: Prometheus sums them over workers.
 */
import type { Registry } from "prom-client";
import type { ScaleMetricsSnapshot } from "../../cloud/scale/metrics.ts";
import type { Sample, Scrape } from "./family.ts";
import { TelemetryPart } from "./family.ts";

type Source = (scrape: Scrape) => ScaleMetricsSnapshot | undefined;

function split<L extends string>(
  record: Record<string, number> | undefined,
  labels: readonly L[],
): Sample<L>[] {
  return Object.entries(record ?? {}).map(([key, value]) => {
    const parts = key.split("\t");
    return [
      Object.fromEntries(labels.map((label, i) => [label, parts[i] ?? ""])) as Record<L, string>,
      value,
    ];
  });
}

export class ScaleTelemetry extends TelemetryPart {
  constructor(registry: Registry, read: () => Scrape, source: Source) {
    super(registry, read);
    this.counter({
      name: "octoprox_cloud_calls_total",
      help: "Calls to a cloud's API by this worker's scale runs, by cloud, operation (list, " +
        "create, terminate) and outcome (ok, or the failure: auth, refused, throttled, " +
        "unavailable, timeout, lost, other).",
      labelNames: ["cloud", "operation", "outcome"],
      samples: (scrape) => split(source(scrape)?.calls, ["cloud", "operation", "outcome"]),
    });
    this.counter({
      name: "octoprox_scale_steps_total",
      help: "Scaling steps this worker's scale runs took, by cloud and direction.",
      labelNames: ["cloud", "direction"],
      samples: (scrape) => split(source(scrape)?.steps, ["cloud", "direction"]),
    });
    this.counter({
      name: "octoprox_scale_step_instances_total",
      help: "Instances scaling steps created (up) or set draining (down), by cloud.",
      labelNames: ["cloud", "direction"],
      samples: (scrape) => split(source(scrape)?.stepInstances, ["cloud", "direction"]),
    });
    this.counter({
      name: "octoprox_scale_rotations_total",
      help: "Cloud instances replaced by rotation, by cloud.",
      labelNames: ["cloud"],
      samples: (scrape) => split(source(scrape)?.rotations, ["cloud"]),
    });
    this.counter({
      name: "octoprox_scale_unrecorded_terminated_total",
      help: "Listed cloud instances with neither a row nor a fresh creating entry, terminated.",
      labelNames: ["cloud"],
      samples: (scrape) => split(source(scrape)?.unrecorded, ["cloud"]),
    });
    this.counter({
      name: "octoprox_scale_runs_total",
      help: "Scale runs this worker finished, failed ones included.",
      samples: (scrape) => {
        const s = source(scrape);
        return s === undefined ? [] : [[{}, s.runs]];
      },
    });
    this.counter({
      name: "octoprox_scale_run_failures_total",
      help: "Scale runs that failed (the next run tries again).",
      samples: (scrape) => {
        const s = source(scrape);
        return s === undefined ? [] : [[{}, s.failedRuns]];
      },
    });
    this.counter({
      name: "octoprox_scale_run_cpu_seconds_total",
      help: "CPU time (user and system) this worker spent in scale runs.",
      samples: (scrape) => {
        const s = source(scrape);
        return s === undefined ? [] : [[{}, s.cpuMicros / 1e6]];
      },
    });
  }
}
