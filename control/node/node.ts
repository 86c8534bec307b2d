/**
 * The node: one per process. It builds once what the runtimes of one process share (the logger,
 * one Redis client, one Postgres pool, the change log) and the runtimes of its role.
 *
 * Start: migrate (one process at a time, through the migration lock), connect Redis (and, if
 * this process applied a migration, announce `all` on the change stream), start the runtimes in
 * the role's order, then the node's own loops, the heartbeat last. When anything fails to start,
 * everything started is stopped and the error raised: a process never serves half a role.
 *
 * Stop: the runtimes in reverse, then the node's loops, then the change log closes (sending once
 * more what Redis has not taken), then the heartbeat's keys are withdrawn, then the stores close.
 * A stop never raises, and a second does nothing more.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type pino from "pino";
import type { Redis } from "ioredis";
import { createDatabase, type Database } from "../../db/client.ts";
import { migrate } from "../../db/migrate.ts";
import { errorText, Store } from "../../shared/errors.ts";
import { type RedisKeys, redisKeys } from "../../shared/redis-keys.ts";
import { ChangeKind, ROLE_RUNTIMES } from "../../shared/roles.ts";
import { ProviderRegistry } from "../../shared/vendors/registry.ts";
import type { ControlSettings } from "../../shared/settings.ts";
import type { ApiDeps, MetricsText, ProcessInfo, Readiness } from "../api/deps.ts";
import { ChangeLog } from "../core/changelog.ts";
import { createLogger, type Logger } from "../core/logging.ts";
import { sleep } from "../../shared/async/sleep.ts";
import { createRedis } from "../core/redis.ts";
import { JobQueue } from "../core/job-queue.ts";
import { readProvidersDir } from "../vendors/catalogue.ts";
import { callOptions } from "../egress/call-options.ts";
import type { ControlDeps } from "../core/deps.ts";
import { TaskSet } from "../core/tasks.ts";
import { VERSION } from "../core/version.ts";
import { ApiRuntime } from "../roles/api.ts";
import { ControllerRuntime } from "../roles/controller.ts";
import type { RoleRuntime, RuntimeName } from "../roles/runtime.ts";
import { WorkerRuntime } from "../roles/worker.ts";
import {
  Heartbeat,
  type ProcessLoopSnapshot,
  type ProcessReport,
  type ProcessSnapshot,
} from "./heartbeat.ts";
import { HttpServer } from "../core/http-server.ts";
import { LoopLagMonitor } from "./loop-lag.ts";
import { probeRoutes } from "../api/probes.ts";
import { Telemetry } from "./telemetry/telemetry.ts";
import { EchoRuntime } from "../roles/echo.ts";
import { ObservationRecorder } from "../geo/observation-recorder.ts";
import { OutboxRelay } from "../core/outbox.ts";

export interface NodeOptions {
  settings: ControlSettings;
  /** Where log lines go; standard output by default. */
  logDestination?: pino.DestinationStream;
  /** Where the one line with a generated admin password goes; standard output by default. */
  announce?: (line: string) => void;
  /** How long the start waits for Redis before going on without it. */
  redisConnectTimeoutMs?: number;
}

const Phase = {
  created: "created",
  starting: "starting",
  running: "running",
  stopping: "stopping",
  stopped: "stopped",
} as const;
type Phase = (typeof Phase)[keyof typeof Phase];

/** A random instance id: the host's short name and a few random hex digits. */
function randomInstanceId(): string {
  const host = hostname().split(".")[0].replace(/[^A-Za-z0-9_-]/g, "") || "octoprox";
  return `${host}-${randomBytes(3).toString("hex")}`;
}

export class Node {
  readonly settings: ControlSettings;
  readonly instance: string;
  readonly logger: Logger;
  readonly keys: RedisKeys;
  readonly database: Database;
  readonly redis: Redis;
  readonly changes: ChangeLog;
  /** Run-now requests, for writes that ask for a job after their commit. */
  readonly jobs: JobQueue;
  readonly providers = new ProviderRegistry();
  /** Where the exits this process learns go, appended to their stream (api and worker roles). */
  readonly observations: ObservationRecorder;
  /** Announces the change entries their writers could not (api and worker processes). */
  readonly outbox: OutboxRelay;
  readonly process: ProcessInfo;
  readonly runtimes: readonly RoleRuntime[];

  readonly #options: NodeOptions;
  readonly #tasks: TaskSet;
  readonly #heartbeat: Heartbeat;
  readonly #lag: LoopLagMonitor;
  readonly #telemetry: Telemetry;
  readonly #startAbort = new AbortController();
  #probeServer: HttpServer | undefined;
  #phase: Phase = Phase.created;
  #started: RoleRuntime[] = [];
  #starting: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;
  #shutdown: Promise<void> | undefined;

  constructor(options: NodeOptions) {
    const { settings } = options;
    this.#options = options;
    this.settings = settings;
    this.instance = settings.instanceId ?? randomInstanceId();
    this.logger = createLogger({
      level: settings.logLevel,
      instance: this.instance,
      role: settings.role,
      destination: options.logDestination,
    });
    this.keys = redisKeys(settings.redisPrefix);
    this.process = {
      instance: this.instance,
      role: settings.role,
      version: VERSION,
      startedAt: new Date().toISOString(),
    };
    this.database = createDatabase(settings.databaseUrl, {
      poolSize: settings.databasePoolSize,
      applicationName: `octoprox-${settings.role}`,
    });
    this.redis = createRedis(settings.redisUrl, { connectionName: `octoprox:${this.instance}` });
    this.changes = new ChangeLog({
      redis: this.redis,
      keys: this.keys,
      logger: this.logger,
      deadlineMs: settings.redisRequestTimeoutMs,
    });
    this.jobs = new JobQueue({
      redis: this.redis,
      keys: this.keys,
      logger: this.logger,
      deadlineMs: settings.redisRequestTimeoutMs,
    });
    this.observations = new ObservationRecorder({
      redis: this.redis,
      keys: this.keys,
      logger: this.logger,
      instance: this.instance,
      intervalMs: settings.geoObservationPublishIntervalMs,
      sendTimeoutMs: settings.redisRequestTimeoutMs,
    });
    this.outbox = new OutboxRelay({
      database: this.database,
      redis: this.redis,
      keys: this.keys,
      logger: this.logger,
      deadlineMs: settings.redisRequestTimeoutMs,
    });
    this.runtimes = ROLE_RUNTIMES[settings.role].map((name) => this.#buildRuntime(name));
    this.#tasks = new TaskSet(this.logger);
    this.#lag = new LoopLagMonitor({ logger: this.logger });
    this.#heartbeat = new Heartbeat({
      logger: this.logger,
      redis: this.redis,
      keys: this.keys,
      database: this.database,
      instance: this.instance,
      role: settings.role,
      intervalMs: settings.heartbeatIntervalMs,
      redisDeadlineMs: settings.redisRequestTimeoutMs,
      report: () => this.#report(),
    });
    this.#telemetry = new Telemetry({
      role: settings.role,
      runtimes: ROLE_RUNTIMES[settings.role],
      snapshot: () => this.snapshot(),
    });
  }

  /** The parts every runtime of this process shares. */
  get deps(): ControlDeps {
    return {
      settings: this.settings,
      database: this.database,
      redis: this.redis,
      keys: this.keys,
      changes: this.changes,
      jobs: this.jobs,
      logger: this.logger,
      providers: this.providers,
    };
  }

  /** What every route and runtime of the api is built from. */
  get apiDeps(): ApiDeps {
    return {
      ...this.deps,
      observations: this.observations,
      process: this.process,
      readiness: () => this.readiness(),
      metrics: () => this.metrics(),
    };
  }

  /** The address this process answers HTTP on, once started. */
  get url(): string | undefined {
    const api = this.runtimes.find((runtime) => runtime instanceof ApiRuntime);
    return api?.url ?? this.#probeServer?.url;
  }

  /** The stores this process cannot serve without: Postgres always, Redis for some roles. */
  get stores(): readonly Store[] {
    const needed = new Set<Store>([Store.postgres]);
    for (const runtime of this.runtimes) for (const store of runtime.stores) needed.add(store);
    return [...needed];
  }

  /** Every reason not to serve: the phase, a needed store's last beat, each runtime's own. */
  readiness(): Readiness {
    const reasons: string[] = [];
    if (this.#phase !== Phase.running) reasons.push(`process: ${this.#phase}`);
    for (const store of this.stores) {
      if (!this.#heartbeat.answered(store)) {
        reasons.push(`${store}: no answer to the last heartbeat`);
      }
    }
    for (const runtime of this.runtimes) {
      const reason = runtime.readiness();
      if (reason !== undefined) reasons.push(reason);
    }
    return { ready: reasons.length === 0, reasons };
  }

  /** What the process reports, from memory: the heartbeat's snapshot as of now (/metrics). */
  snapshot(): ProcessSnapshot {
    return {
      ...this.#report(),
      beat_at: new Date().toISOString(),
      stores: this.#heartbeat.stores(),
    };
  }

  /** /metrics: the snapshot as of now, rendered as metric families. */
  metrics(): Promise<MetricsText> {
    return this.#telemetry.render();
  }

  start(): Promise<void> {
    if (this.#stopping) return Promise.reject(new Error("The process is stopping"));
    this.#starting ??= this.#start();
    return this.#starting;
  }

  /** Stops everything started, in reverse. Never raises; a second call waits for the first. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      this.#startAbort.abort(new Error("Stopped during start"));
      await this.#starting?.catch(() => {});
      await this.#shutdownOnce();
    })();
    return this.#stopping;
  }

  async #start(): Promise<void> {
    const signal = this.#startAbort.signal;
    this.#phase = Phase.starting;
    this.logger.info({ version: VERSION, pid: process.pid }, "Process starting");
    try {
      const { applied } = await migrate(this.settings.databaseUrl, {
        logger: this.logger,
        signal,
      });
      signal.throwIfAborted();
      if (this.settings.providersDir !== undefined) {
        this.providers.setFileDescriptors(await readProvidersDir(this.settings.providersDir));
      }
      // Read now, so a wrong path stops the start rather than the first vendor call.
      callOptions(this.settings);
      await this.#connectRedis(signal);
      if (applied.length > 0) {
        // Every running process reads everything again; processes that waited for the lock
        // found head and announce nothing.
        await this.changes.append({ kind: ChangeKind.all, ref: "*" });
      }
      for (const runtime of this.runtimes) {
        signal.throwIfAborted();
        this.#started.push(runtime);
        await runtime.start();
      }
      if (!this.runtimes.some((runtime) => runtime instanceof ApiRuntime)) {
        // Controllers and workers still answer the probes on the API port.
        this.#probeServer = new HttpServer({
          app: probeRoutes({
            process: this.process,
            readiness: () => this.readiness(),
            metrics: () => this.metrics(),
          }),
          host: this.settings.apiHost,
          port: this.settings.apiPort,
          // An echo process answers the echo there too.
          fastGets: this.runtimes.find((r) => r instanceof EchoRuntime)?.fastGets,
        });
        await this.#probeServer.start();
      }
      signal.throwIfAborted();
      // Only the api and the worker learn exits; a controller records none.
      if (this.runtimes.some((r) => r.name === "api" || r.name === "worker")) {
        this.#tasks.start(this.observations);
        this.#tasks.start(this.outbox);
      }
      this.#tasks.start(this.#lag);
      this.#tasks.start(this.#heartbeat);
      // The first beat settles readiness, so "ready" is known when the start returns.
      await Promise.race([
        this.#heartbeat.firstBeat,
        sleep(this.settings.heartbeatIntervalMs * 3, signal),
      ]);
      signal.throwIfAborted();
      this.#phase = Phase.running;
    } catch (error) {
      if (!signal.aborted) {
        this.logger.error({ error: errorText(error) }, "Process failed to start");
      }
      await this.#shutdownOnce();
      throw error;
    }
  }

  /** Waits for Redis a bounded time. Without it the process starts, unready where it needs it. */
  async #connectRedis(signal: AbortSignal): Promise<void> {
    const timeoutMs = this.#options.redisConnectTimeoutMs ?? 10_000;
    const deadline = Date.now() + timeoutMs;
    while (this.redis.status !== "ready") {
      signal.throwIfAborted();
      if (Date.now() >= deadline) {
        this.logger.warn(
          { timeout_ms: timeoutMs },
          "Redis did not answer at start; going on without it until it does",
        );
        return;
      }
      await sleep(100, signal);
    }
  }

  #shutdownOnce(): Promise<void> {
    this.#shutdown ??= this.#shutdownSteps();
    return this.#shutdown;
  }

  async #shutdownSteps(): Promise<void> {
    const wasStarting = this.#phase === Phase.starting;
    this.#phase = Phase.stopping;
    if (!wasStarting) this.logger.info({}, "Process stopping");
    for (const runtime of [...this.#started].reverse()) {
      await this.#quietly(`stop the ${runtime.name} runtime`, () => runtime.stop());
    }
    await this.#quietly("close the probe listener", async () => {
      await this.#probeServer?.stop();
    });
    await this.#quietly("stop its loops", () => this.#tasks.stop());
    // After the runtimes: it sends what their stops recorded.
    await this.#quietly("send its observations", () => this.observations.close());
    await this.#quietly("close the change log", () => this.changes.close());
    await this.#quietly("withdraw its heartbeat", () => this.#heartbeat.withdraw());
    await this.#quietly("close Redis", () => this.#closeRedis());
    await this.#quietly("close Postgres", () => this.database.close());
    this.#phase = Phase.stopped;
    this.logger.info({}, "Process stopped");
  }

  async #closeRedis(): Promise<void> {
    if (this.redis.status === "ready") {
      const timer = sleep(1000);
      await Promise.race([this.redis.quit().catch(() => {}), timer]);
    }
    this.redis.disconnect();
  }

  async #quietly(what: string, step: () => Promise<void>): Promise<void> {
    try {
      await step();
    } catch (error) {
      this.logger.warn({ error: errorText(error) }, `Failed to ${what} while stopping`);
    }
  }

  #buildRuntime(name: RuntimeName): RoleRuntime {
    switch (name) {
      case "api":
        return new ApiRuntime({ deps: this.apiDeps, announce: this.#options.announce });
      case "controller":
        return new ControllerRuntime({
          logger: this.logger,
          settings: this.settings,
          database: this.database,
          redis: this.redis,
          keys: this.keys,
          instance: this.instance,
          providers: this.providers,
          jobs: this.jobs,
        });
      case "echo":
        return new EchoRuntime({ logger: this.logger, deps: this.deps });
      case "worker":
        return new WorkerRuntime({
          logger: this.logger,
          jobs: this.settings.workerJobs,
          instance: this.instance,
          deps: { ...this.deps, observations: this.observations },
        });
    }
  }

  #report(): ProcessReport {
    const loops: ProcessLoopSnapshot[] = this.#tasks.snapshot().map((loop) => ({
      ...loop,
      owner: "node",
    }));
    const runtimes: ProcessReport["runtimes"] = {};
    for (const runtime of this.runtimes) {
      const snapshot = runtime.snapshot();
      runtimes[runtime.name] = snapshot;
      for (const loop of snapshot.loops) loops.push({ ...loop, owner: runtime.name });
    }
    const { ready, reasons } = this.readiness();
    return {
      instance: this.instance,
      role: this.settings.role,
      version: VERSION,
      pid: process.pid,
      hostname: hostname(),
      started_at: this.process.startedAt,
      ready,
      reasons,
      loops,
      runtimes,
      loop_lag: this.#lag.snapshotLag(),
    };
  }
}
