/**
 * How a worker builds the job of each kind it takes. The catalogue declares every kind; a kind
 * joins the producers and the runners once it is listed in WORKER_JOB_KINDS (shared/roles.ts)
 * and built here.
 */
import { TunnelLastSeenJob } from "./tunnel-last-seen.ts";
import { type JobKind, JobKind as K } from "../../shared/roles.ts";
import type { ControlDeps } from "../core/deps.ts";
import type { ObservationSink } from "../geo/observation.ts";
import { Semaphore } from "../core/semaphore.ts";
import { applyStatusChanges } from "../services/proxy-status.ts";
import { HealthCheckJob } from "./health.ts";
import { healthEcho } from "./health-echo.ts";
import { IndexHygieneJob } from "./housekeeping.ts";
import { MetricsFlushJob } from "./metrics-flush.ts";
import { TrafficJob } from "./traffic.ts";
import { CompactionJob } from "./compaction.ts";
import { SystemSnapshotJob } from "./system-snapshot.ts";
import type { Job } from "../core/job.ts";
import { ProvisionJob } from "./provision.ts";
import { SyncJob } from "./sync.ts";
import { PoolJob } from "./pool.ts";
import { GeoUpdateJob } from "./geo-update.ts";
import { poolStoreOf } from "../provider-api/pool/store.ts";
import { providerEgress } from "../provider-api/fetch/call.ts";
import { FetchCoordinator } from "../provider-api/fetch/coordinator.ts";
import type { FetchMetrics } from "../provider-api/fetch/metrics.ts";
import { ProviderRefiller } from "../provider-api/fetch/refill.ts";
import { clearDepleted, markDepleted } from "../services/sequences.ts";
import { PoolOutage } from "../provider-api/pool/outage.ts";
import { Attributor } from "../geo/attribution.ts";
import { GeoDefinitions } from "../geo/definitions.ts";
import { EnrichJob, ReattributeJob } from "./attribution.ts";
import { ScaleJob } from "./scale.ts";
import type { ScaleMetrics } from "../cloud/scale/metrics.ts";

/**
 * What a worker's jobs are built from: the process's shared parts, and where the exits a job
 * learns go (`observations.record(...)`: the process's observation recorder).
 */
export type JobDeps = ControlDeps & { observations: ObservationSink };

/** What the worker keeps of its jobs for its snapshot (and /metrics). */
export interface JobExtras {
  /** The pool job's fetch counts, per connector. */
  fetchMetrics?: FetchMetrics;
  /** The pool job's view of a Postgres outage (which pools run on last-known settings). */
  poolOutage?: PoolOutage;
  /** The worker's attributor, shared with its sighting ingest (one set of open databases). */
  attributor?: Attributor;
  /** The scale job's counts, by cloud. */
  scaleMetrics?: ScaleMetrics;
}

/**
 * The pool job's view of a Postgres outage: its log lines, and the pools on last-known settings
 * listed for three pool periods after their last such run.
 */
export function poolOutage(deps: Pick<JobDeps, "logger" | "settings">): PoolOutage {
  return new PoolOutage({
    logger: deps.logger.child({ job: K.pool }),
    windowMs: 3 * deps.settings.poolIntervalMs,
  });
}

/** Builds the jobs of the kinds a worker takes that have a handler. */
export function buildJobs(
  kinds: readonly JobKind[],
  deps: JobDeps,
  extras: JobExtras = {},
): Job[] {
  const jobs: Job[] = [];
  // One bound on probes in flight for health checks and pool checks alike.
  // A tenth of the probes (one at least, from two) is kept for first-lane checks.
  const probes = new Semaphore(deps.settings.healthCheckConcurrency, {
    urgentReserve: Math.ceil(deps.settings.healthCheckConcurrency / 10),
  });
  // One attributor for the worker's health checks, enrich and re-attribution, judging with the
  // databases and settings in force (read again before each batch).
  let attributor: Attributor | undefined;
  const attributorOf = () =>
    attributor ??= extras.attributor ?? new Attributor({
      deps,
      geo: new GeoDefinitions({ deps, logger: deps.logger.child({ part: "geo" }) }),
      observations: deps.observations,
      logger: deps.logger.child({ part: "attribution" }),
      verdicts: deps,
    });
  for (const kind of kinds) {
    switch (kind) {
      case K.reattribute:
        jobs.push(
          new ReattributeJob({
            deps,
            attributor: attributorOf(),
            logger: deps.logger.child({ job: kind }),
          }),
        );
        break;
      case K.enrich:
        jobs.push(
          new EnrichJob({
            deps,
            attributor: attributorOf(),
            logger: deps.logger.child({ job: kind }),
            echoUrl: healthEcho(deps.settings).url,
            timeoutMs: deps.settings.healthCheckTimeoutMs,
            probes,
          }),
        );
        break;
      case K.pool: {
        const logger = deps.logger.child({ job: kind });
        const store = poolStoreOf(deps);
        const outage = extras.poolOutage ?? poolOutage(deps);
        const coordinator = new FetchCoordinator({
          redis: deps.redis,
          keys: deps.keys,
          logger,
          holder: deps.settings.instanceId,
        });
        jobs.push(
          new PoolJob({
            database: deps.database,
            redis: deps.redis,
            keys: deps.keys,
            logger,
            store,
            leader: coordinator,
            refiller: new ProviderRefiller({
              coordinator,
              pool: store,
              logger,
              egress: providerEgress(deps.settings),
              metrics: extras.fetchMetrics,
            }),
            // Written to Postgres: while it is away, skipped (logged) so the run goes on.
            depletion: {
              markDepleted: outage.skipWhileAway("mark_depleted", (id) => markDepleted(deps, id)),
              clearDepleted: outage.skipWhileAway(
                "clear_depleted",
                (id) => clearDepleted(deps, id),
              ),
            },
            outage,
            probes,
            echoUrl: healthEcho(deps.settings).url,
            timeoutMs: deps.settings.healthCheckTimeoutMs,
            // Every pool run re-checks what the previous one checked: half the period, so a
            // check stamped late in one run is due by the next.
            recheckAfterMs: deps.settings.poolIntervalMs / 2,
            usableMarginMs: deps.settings.poolIntervalMs,
            // Gateways write every second: three missed, and a report no longer counts.
            heldFreshMs: 3000,
            onPurged: (id) => extras.fetchMetrics?.forget(id),
          }),
        );
        break;
      }
      case K.health:
        jobs.push(
          new HealthCheckJob({
            db: deps.database.db,
            redis: deps.redis,
            keys: deps.keys,
            logger: deps.logger.child({ job: kind }),
            writeStatuses: (changes) => applyStatusChanges(deps, changes),
            echoUrl: healthEcho(deps.settings).url,
            timeoutMs: deps.settings.healthCheckTimeoutMs,
            probes,
            attributor: attributorOf(),
          }),
        );
        break;
      case K.sync:
        jobs.push(
          new SyncJob({
            deps,
            logger: deps.logger.child({ job: kind }),
            attributor: attributorOf(),
          }),
        );
        break;
      case K.scale:
        jobs.push(
          new ScaleJob({
            deps,
            redis: deps.redis,
            keys: deps.keys,
            logger: deps.logger.child({ job: kind }),
            metrics: extras.scaleMetrics,
          }),
        );
        break;
      case K.provision:
        jobs.push(new ProvisionJob({ deps, logger: deps.logger.child({ job: kind }) }));
        break;
      case K.traffic:
        jobs.push(
          new TrafficJob({
            database: deps.database,
            redis: deps.redis,
            keys: deps.keys,
            logger: deps.logger.child({ job: kind }),
          }),
        );
        break;
      case K.metricsFlush:
        jobs.push(
          new MetricsFlushJob({
            database: deps.database,
            redis: deps.redis,
            keys: deps.keys,
            logger: deps.logger.child({ job: kind }),
          }),
        );
        break;
      case K.compaction:
        jobs.push(
          new CompactionJob({
            database: deps.database,
            logger: deps.logger.child({ job: kind }),
            auditRetentionDays: deps.settings.auditRetentionDays,
          }),
        );
        break;
      case K.snapshot:
        jobs.push(
          new SystemSnapshotJob({
            database: deps.database,
            redis: deps.redis,
            keys: deps.keys,
            logger: deps.logger.child({ job: kind }),
            intervalMs: deps.settings.systemMetricsIntervalMs,
            retentionDays: deps.settings.systemMetricsRetentionDays,
          }),
        );
        break;
      case K.geoUpdate:
        jobs.push(new GeoUpdateJob({ deps, logger: deps.logger.child({ job: kind }) }));
        break;
      case K.tunnelLastSeen:
        jobs.push(
          new TunnelLastSeenJob({
            database: deps.database,
            redis: deps.redis,
            keys: deps.keys,
            logger: deps.logger.child({ job: kind }),
          }),
        );
        break;
      case K.indexHygiene:
        jobs.push(
          new IndexHygieneJob({
            redis: deps.redis,
            keys: deps.keys,
            jobs: deps.jobs,
            logger: deps.logger.child({ job: kind }),
          }),
        );
        break;
      default:
        break;
    }
  }
  return jobs;
}
