/**
 * The job catalogue: every kind of the spec, with its batch size, its concurrency per worker,
 * its period (for the kinds the controller publishes) and whether its keys come from the
 * compile. A kind's handler lives in its own module and is registered in control/jobs/handlers.ts;
 * a kind without one yet is declared here, so adding it later only adds the handler.
 */
import { type JobKind, JobKind as K } from "../../shared/roles.ts";
import type { ControlSettings } from "../../shared/settings.ts";

export interface JobSpec {
  kind: JobKind;
  /** Keys a batch carries at most. */
  batchSize: number;
  /** Batches one worker runs at once: batch size times this is a worker's capacity. */
  concurrency(settings: ControlSettings): number;
  /** The period the controller publishes this kind at; undefined for run-now-only kinds. */
  periodMs(settings: ControlSettings): number | undefined;
  /** Keyed kinds publish the last compile's keys; install-wide kinds publish `all`. */
  keyed: boolean;
}

/** Periods are whole seconds, at least one. */
const wholeSeconds = (ms: number) => Math.max(1, Math.round(ms / 1000)) * 1000;

/**
 * Health batches are small, since a batch ends with its slowest check and a hung proxy holds
 * its batch for the whole timeout. A worker runs as many batches as it has probe slots (ten keys
 * per slot): with fewer, batches each waiting on one hung proxy filled every batch slot while
 * most probe slots sat idle, and the worker stopped checking until the timeout ended (with 5%
 * hanging, 0.4 batches per slot stalled 10,000 new proxies' checks for 12 s of every 30). Now
 * only hung probes filling the probe slots stop it.
 */
export const healthConcurrency = (probes: number) => Math.max(2, probes);

export const JOB_CATALOGUE: Readonly<Record<JobKind, JobSpec>> = {
  [K.health]: {
    kind: K.health,
    batchSize: 10,
    concurrency: (s) => healthConcurrency(s.healthCheckConcurrency),
    periodMs: (s) => wholeSeconds(s.healthCheckIntervalMs),
    keyed: true,
  },
  [K.sync]: {
    kind: K.sync,
    batchSize: 1,
    concurrency: () => 4,
    periodMs: (s) => wholeSeconds(s.ipRefreshIntervalMs),
    keyed: true,
  },
  [K.provision]: {
    kind: K.provision,
    batchSize: 1,
    concurrency: () => 4,
    periodMs: () => undefined,
    keyed: true,
  },
  [K.reattribute]: {
    kind: K.reattribute,
    batchSize: 100,
    concurrency: () => 1,
    periodMs: () => undefined,
    keyed: true,
  },
  [K.enrich]: {
    kind: K.enrich,
    batchSize: 1,
    concurrency: () => 5,
    periodMs: () => undefined,
    keyed: true,
  },
  [K.scale]: {
    kind: K.scale,
    batchSize: 1,
    concurrency: () => 4,
    periodMs: (s) => wholeSeconds(s.scaleIntervalMs),
    keyed: true,
  },
  [K.traffic]: {
    kind: K.traffic,
    batchSize: 100,
    concurrency: () => 1,
    periodMs: () => undefined,
    keyed: true,
  },
  [K.metricsFlush]: {
    kind: K.metricsFlush,
    batchSize: 1,
    concurrency: () => 1,
    periodMs: (s) => wholeSeconds(s.metricsFlushIntervalMs),
    keyed: false,
  },
  [K.compaction]: {
    kind: K.compaction,
    batchSize: 1,
    concurrency: () => 1,
    periodMs: (s) => wholeSeconds(s.compactionIntervalMs),
    keyed: false,
  },
  [K.snapshot]: {
    kind: K.snapshot,
    batchSize: 1,
    concurrency: () => 1,
    periodMs: (s) =>
      s.systemMetricsIntervalMs === 0 ? undefined : wholeSeconds(s.systemMetricsIntervalMs),
    keyed: false,
  },
  [K.geoUpdate]: {
    kind: K.geoUpdate,
    batchSize: 1,
    concurrency: () => 1,
    periodMs: (s) => wholeSeconds(s.geoUpdaterIntervalMs),
    keyed: false,
  },
  [K.tunnelLastSeen]: {
    kind: K.tunnelLastSeen,
    batchSize: 1,
    concurrency: () => 1,
    // Gateways publish at the same interval (shared/tunnel-status.ts); a run reads their last.
    periodMs: (s) => wholeSeconds(s.tunnelStatusIntervalMs),
    keyed: false,
  },
  [K.indexHygiene]: {
    kind: K.indexHygiene,
    batchSize: 1,
    concurrency: () => 1,
    periodMs: (s) => wholeSeconds(s.indexHygieneIntervalMs),
    keyed: false,
  },
  [K.pool]: {
    kind: K.pool,
    batchSize: 1,
    concurrency: () => 4,
    periodMs: (s) => wholeSeconds(s.poolIntervalMs),
    keyed: true,
  },
};

/** The key install-wide kinds are published under. */
export const INSTALL_WIDE_KEY = "all";
