/**
 * The controller runtime: the lease, kept before its loops start and released after they stop;
 * the feed builder; one job producer per periodic kind that has a handler. Every loop but the
 * lease waits for the lead in the process while this controller stands by.
 */
import { JobKind, WORKER_JOB_KINDS } from "../../shared/roles.ts";
import type { JobQueue } from "../core/job-queue.ts";
import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import type { ProviderRegistry } from "../../shared/vendors/registry.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { Store } from "../../shared/errors.ts";
import type { ControlSettings } from "../../shared/settings.ts";
import type { Loop } from "../../shared/async/loop.ts";
import { FeedBuilder } from "../feed/builder.ts";
import { ControllerLease, type LeaseSnapshot } from "../core/lease.ts";
import { JobProducer } from "../jobs/producers.ts";
import { JOB_CATALOGUE } from "../core/job-catalogue.ts";
import { poolStoreOf } from "../provider-api/pool/store.ts";
import { PoolWatch } from "../provider-api/pool/watch.ts";
import type { FetchStats } from "../provider-api/fetch-contract.ts";
import { FetchCoordinator } from "../provider-api/fetch/coordinator.ts";
import {
  BaseRuntime,
  type RuntimeName,
  type RuntimeOptions,
  type RuntimeSnapshot,
} from "./runtime.ts";

export interface ControllerRuntimeOptions extends RuntimeOptions {
  settings: ControlSettings;
  database: Database;
  redis: Redis;
  keys: RedisKeys;
  instance: string;
  /** The process's provider registry (the compile builds vendor connectors' providers). */
  providers?: ProviderRegistry;
  /** A provider-API connector's fetch bookkeeping, for the pool watch. */
  fetchStats?: (connectorId: string) => Promise<FetchStats>;
  /** Run-now asks (the feed head found gone asks for `reattribute all`). */
  jobs?: JobQueue;
}

/** The controller's section of the snapshot. */
export interface ControllerSnapshot extends RuntimeSnapshot {
  lease: LeaseSnapshot;
}

export class ControllerRuntime extends BaseRuntime {
  readonly name: RuntimeName = "controller";
  readonly stores: readonly Store[] = [Store.postgres, Store.redis];
  readonly lease: ControllerLease;
  readonly feedBuilder: FeedBuilder;
  readonly producers: readonly JobProducer[];
  readonly poolWatch: PoolWatch;

  constructor(options: ControllerRuntimeOptions) {
    super(options);
    const { settings, redis, keys, logger } = options;
    this.lease = new ControllerLease({
      redis,
      keys,
      // Fresh for each process life, so a restarted controller never mistakes the key for its own.
      holderId: `${options.instance}:${randomBytes(4).toString("hex")}`,
      logger,
      ttlMs: settings.controllerLeaseTtlMs,
      refreshMs: settings.controllerLeaseRefreshMs,
      pollMs: settings.controllerLeasePollMs,
    });
    this.feedBuilder = new FeedBuilder({
      database: options.database,
      redis,
      keys,
      lease: this.lease,
      logger,
      compileIntervalMs: settings.feedCompileIntervalMs,
      reconcileIntervalMs: settings.reconcileIntervalMs,
      internalSecret: settings.internalSecret,
      defaultStrategy: settings.defaultStrategy,
      providers: options.providers,
      requestReattribute: options.jobs === undefined
        ? undefined
        : () => options.jobs!.request(JobKind.reattribute, ["all"]),
    });
    const producers: JobProducer[] = [];
    for (const kind of WORKER_JOB_KINDS) {
      const spec = JOB_CATALOGUE[kind];
      const periodMs = spec.periodMs(settings);
      if (periodMs === undefined) continue;
      producers.push(
        new JobProducer({
          kind,
          periodMs,
          keys: spec.keyed ? () => this.feedBuilder.latest?.jobKeys.get(kind) : undefined,
          firstLane: () => this.feedBuilder.latest?.firstLaneKeys.get(kind),
          redis,
          redisKeys: keys,
          lease: this.lease,
          logger,
        }),
      );
    }
    this.producers = producers;
    const fetches = new FetchCoordinator({ redis, keys, logger });
    this.poolWatch = new PoolWatch({
      redis,
      keys,
      store: poolStoreOf({ redis, keys, settings }),
      lease: this.lease,
      logger,
      intervalMs: settings.heartbeatIntervalMs,
      pools: () => this.feedBuilder.latest?.pools,
      fetchStats: options.fetchStats ?? ((id) => fetches.stats(id)),
    });
  }

  protected override beforeLoops(): Promise<void> {
    this.lease.start();
    return Promise.resolve();
  }

  protected override loops(): Loop[] {
    return [this.feedBuilder, ...this.producers, this.poolWatch];
  }

  protected override afterLoopsStop(): Promise<void> {
    return this.lease.stop();
  }

  override readiness(): string | undefined {
    // publishProblem is set only while leading: a standby publishes nothing and stays ready.
    const problem = this.feedBuilder.publishProblem;
    return super.readiness() ??
      (!this.lease.reachable
        ? "controller: lease unreachable"
        : problem === undefined
        ? undefined
        : `controller: feed cannot be published: ${problem}`);
  }

  override snapshot(): ControllerSnapshot {
    return { ...super.snapshot(), lease: this.lease.snapshot() };
  }
}
