/**
 * A worker's job runner: one per kind it takes, a consumer of that kind's stream sized by the
 * catalogue (batch size times concurrency is one worker's capacity for the kind); and one more
 * for the first lane of a kind that has one (FIRST_LANE_KINDS), so its urgent work never waits
 * for the regular stream's batches to end.
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import type { ControlSettings } from "../../shared/settings.ts";
import type { JobKind } from "../../shared/roles.ts";
import { GroupConsumer, type GroupConsumerSnapshot, type WorkBatch } from "../core/consumers.ts";
import type { Logger } from "../core/logging.ts";
import { JOB_CATALOGUE } from "../core/job-catalogue.ts";
import type { Job } from "../core/job.ts";

export interface JobRunnerOptions {
  job: Job;
  redis: Redis;
  keys: RedisKeys;
  settings: ControlSettings;
  logger: Logger;
  /** This process's consumer name. */
  consumer: string;
  /** Overrides the catalogue's concurrency (tests, benchmarks). */
  concurrency?: number;
  /** Runs the kind's first lane instead of its regular stream. */
  first?: boolean;
}

/** A job runner's row in the snapshot: a group consumer's, and the kind it runs. */
export interface JobRunnerSnapshot extends GroupConsumerSnapshot {
  job_kind: JobKind;
}

export class JobRunner extends GroupConsumer {
  readonly #job: Job;

  constructor(options: JobRunnerOptions) {
    const spec = JOB_CATALOGUE[options.job.kind];
    const { settings } = options;
    const first = options.first === true;
    super({
      name: first ? `job_runner_${spec.kind}_first` : `job_runner_${spec.kind}`,
      logger: options.logger,
      redis: options.redis,
      reader: options.redis.duplicate({ enableOfflineQueue: true }),
      stream: first ? options.keys.jobFirstStream(spec.kind) : options.keys.jobStream(spec.kind),
      streamName: first ? `jobs.${spec.kind}.first` : `jobs.${spec.kind}`,
      first,
      consumer: options.consumer,
      batchSize: spec.batchSize,
      concurrency: options.concurrency ?? spec.concurrency(settings),
      claimTimeoutMs: settings.claimTimeoutMs,
      reclaimIntervalMs: settings.reclaimIntervalMs,
      maxDeliveries: settings.maxDeliveries,
      stopGraceMs: settings.stopGraceMs,
    });
    this.#job = options.job;
  }

  override snapshot(): JobRunnerSnapshot {
    return { ...super.snapshot(), job_kind: this.#job.kind };
  }

  protected override handle(batch: WorkBatch, signal: AbortSignal): Promise<void> {
    return this.#job.run(batch, signal);
  }

  protected override async giveUp(batch: WorkBatch, signal: AbortSignal): Promise<void> {
    await super.giveUp(batch, signal);
    await this.#job.giveUp?.(batch, signal);
  }
}
