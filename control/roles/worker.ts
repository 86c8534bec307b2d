/**
 * The worker runtime: one job runner per kind it takes (OCTOPROX_WORKER_JOBS) that has a
 * handler, each a consumer of its kind's stream under a consumer name fresh for this process
 * life, and the observation and sighting ingests, whatever kinds it takes. It is unready while
 * Redis does not answer, since it takes all its work from streams.
 */
import { randomBytes } from "node:crypto";
import { Store } from "../../shared/errors.ts";
import { FIRST_LANE_KINDS, JobKind, WORKER_JOB_KINDS } from "../../shared/roles.ts";
import type { Loop } from "../../shared/async/loop.ts";
import { ScaleMetrics } from "../cloud/scale/metrics.ts";
import { buildJobs, type JobDeps, poolOutage } from "../jobs/handlers.ts";
import { JobRunner } from "../jobs/runner.ts";
import { describeHealthEcho, type HealthEcho, healthEcho } from "../jobs/health-echo.ts";
import { FetchMetrics } from "../provider-api/fetch/metrics.ts";
import type { PoolOutage } from "../provider-api/pool/outage.ts";
import { BaseRuntime, type RuntimeName, type RuntimeOptions } from "./runtime.ts";
import { ObservationIngest } from "../geo/observation-ingest.ts";
import { SightingIngest } from "../geo/sighting-ingest.ts";
import { Attributor } from "../geo/attribution.ts";
import { GeoDefinitions } from "../geo/definitions.ts";

export interface WorkerRuntimeOptions extends RuntimeOptions {
  /** The job kinds this process takes (OCTOPROX_WORKER_JOBS). */
  jobs: readonly JobKind[];
  deps: JobDeps;
  instance: string;
}

export class WorkerRuntime extends BaseRuntime {
  readonly name: RuntimeName = "worker";
  readonly stores: readonly Store[] = [Store.postgres, Store.redis];
  readonly consumer: string;
  readonly runners: readonly JobRunner[];
  /** Every worker ingests observations, one batch at a time. */
  readonly observationIngest: ObservationIngest;
  /** Every worker ingests the gateways' preflight sightings, one batch at a time. */
  readonly sightingIngest: SightingIngest;
  /** Judges the exits its jobs and its sighting ingest see (one set of open databases). */
  readonly attributor: Attributor;
  /** The pool job's fetch counts, when it takes pool runs. */
  readonly fetchMetrics: FetchMetrics | undefined;
  /** The scale job's counts, when it takes scale runs. */
  readonly scaleMetrics: ScaleMetrics | undefined;
  /** Which of its pools run on last-known settings while Postgres is away, when it takes pool runs. */
  readonly poolOutage: PoolOutage | undefined;
  readonly #jobs: readonly JobKind[];
  /** What its health checks ask, when it takes them. */
  readonly #echo: HealthEcho | undefined;

  constructor(options: WorkerRuntimeOptions) {
    super(options);
    this.#jobs = options.jobs;
    this.consumer = `${options.instance}:${randomBytes(4).toString("hex")}`;
    const taken = options.jobs.filter((kind) => WORKER_JOB_KINDS.includes(kind));
    this.#echo = taken.includes(JobKind.health) ? healthEcho(options.deps.settings) : undefined;
    this.fetchMetrics = taken.includes(JobKind.pool) ? new FetchMetrics() : undefined;
    this.poolOutage = taken.includes(JobKind.pool) ? poolOutage(options.deps) : undefined;
    this.scaleMetrics = taken.includes(JobKind.scale) ? new ScaleMetrics() : undefined;
    // One attributor, so the jobs and the sighting ingest share one set of open databases.
    const attributor = new Attributor({
      deps: options.deps,
      geo: new GeoDefinitions({
        deps: options.deps,
        logger: options.logger.child({ part: "geo" }),
      }),
      observations: options.deps.observations,
      logger: options.logger.child({ part: "attribution" }),
      verdicts: options.deps,
    });
    this.attributor = attributor;
    const extras = {
      fetchMetrics: this.fetchMetrics,
      poolOutage: this.poolOutage,
      attributor,
      scaleMetrics: this.scaleMetrics,
    };
    this.runners = buildJobs(taken, options.deps, extras).flatMap(
      (job) =>
        [false, ...(FIRST_LANE_KINDS.includes(job.kind) ? [true] : [])].map((first) =>
          new JobRunner({
            job,
            redis: options.deps.redis,
            keys: options.deps.keys,
            settings: options.deps.settings,
            logger: options.logger,
            consumer: this.consumer,
            first,
          })
        ),
    );
    this.observationIngest = new ObservationIngest({
      database: options.deps.database,
      redis: options.deps.redis,
      keys: options.deps.keys,
      settings: options.deps.settings,
      logger: options.logger,
      consumer: this.consumer,
    });
    this.sightingIngest = new SightingIngest({
      deps: options.deps,
      attributor,
      redis: options.deps.redis,
      keys: options.deps.keys,
      settings: options.deps.settings,
      logger: options.logger,
      consumer: this.consumer,
    });
  }

  protected override beforeLoops(): Promise<void> {
    // Checks that all fail because the echo is out of the proxies' reach look like a dead
    // pool; the start log says where they go, and why there.
    if (this.#echo) {
      this.logger[this.#echo.loopback ? "warn" : "info"](
        { echo_url: this.#echo.url, echo_source: this.#echo.source },
        describeHealthEcho(this.#echo),
      );
    }
    return Promise.resolve();
  }

  protected override loops(): Loop[] {
    return [...this.runners, this.observationIngest, this.sightingIngest];
  }

  protected override details(): Record<string, unknown> {
    return {
      jobs: [...this.#jobs],
      consumer: this.consumer,
      ...(this.fetchMetrics === undefined ? {} : { fetch: this.fetchMetrics.snapshot() }),
      ...(this.poolOutage === undefined ? {} : { pool_settings: this.poolOutage.snapshot() }),
      ...(this.scaleMetrics === undefined ? {} : { scale: this.scaleMetrics.snapshot() }),
      attribution: { ...this.attributor.counts },
    };
  }
}
