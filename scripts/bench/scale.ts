/**
 * Suite `scale`: what cloud connectors cost the control plane. Budgets: a scale run of a connector
 * with 1,000 instances within 1 s of worker time, excluding the cloud's own latency; the
 * controller's producer publishing the scale keys of 1,000 cloud connectors within 1 % of a core.
 *
 * 1. **Scale runs.** A fresh database with one project, an AWS credential and one cloud connector
 *    per case, each with 1,000 rows (instances) in Postgres and its autoscaler hash in Redis as
 *    runs leave it (rotation times drawn, the last listing, the level). The real `ScaleRun` runs in
 *    this process on the worker's own stores and settings (a pool of the worker's size, the change
 *    log, the job queue, the scale counts, an info logger writing nowhere), and its `clientFor` is
 *    the real `cloudClientFor` (the configs parsed, the SDK client built, as every run does) whose
 *    client's calls are then answered from memory at once: a listing is 1,000 instances handed
 *    over whole, a create or a terminate returns at once. That leaves out the cloud's own latency
 *    and also the SDK's parsing of a real answer. The cases, all at their target so no step creates:
 *    - **steady**: nothing due: the rows read (twice), rotation times checked, the demand read;
 *    - **listing**: the same with the listing due (its time dropped from the hash): 1,000 listed
 *      instances matched against the rows;
 *    - **draining**: half the rows (BENCH_SCALE_DRAINING) draining, each with flushed totals in
 *      Postgres and a live window in Redis: their readings read and compared, none yet quiet;
 *    - **drained**: the same rows at their second quiet check: all moved to terminating, each
 *      terminated (from memory) and the rows deleted;
 *    - **rotating**: BENCH_SCALE_ROTATIONS rows due for rotation: each replaced (entry, re-reads,
 *      create, its row saved, the old row drained).
 *    A round runs every case once, one `ScaleRun.run` call each, timed alone: its CPU time
 *    (process.cpuUsage, user plus system; Postgres' and Redis' own work is not in it) and its wall
 *    time, with the Postgres statements (postgres.js messages) and the Redis commands it sent and
 *    their round trips (a pipeline or a transaction is one). Two rounds warm up (the first call of
 *    each case is shown as cold), then `--runs` rounds; the cases that change rows get them (and
 *    their hash) written afresh before every call, outside the clock, then `VACUUM ANALYZE`.
 * 2. **Producer.** A real `JobProducer` for `scale` with 1,000 connector ids at the default
 *    OCTOPROX_SCALE_INTERVAL (30 s), under a real ControllerLease, measured as the `producers`
 *    suite measures the health producer: one whole period of warm-up, then `--runs` whole periods
 *    from one period boundary to the next, each the process's CPU over the wall time as a share of
 *    one core, the lease's refreshes included. The lease alone is measured after them for 20 s
 *    (the producer stopped), in the same warm process: the share the producer's own is beside it.
 *
 * Overrides (environment): BENCH_SCALE_INSTANCES (at most 1,000, the most a connector has),
 * BENCH_SCALE_DRAINING, BENCH_SCALE_ROTATIONS, BENCH_SCALE_CONNECTORS (producer keys),
 * BENCH_SCALE_PERIOD (producer period, seconds).
 */
import { randomBytes, randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import { eq, inArray } from "drizzle-orm";
import type { Redis } from "ioredis";
import { ChangeLog } from "../../control/core/changelog.ts";
import { JobQueue } from "../../control/core/job-queue.ts";
import { ControllerLease } from "../../control/core/lease.ts";
import { createLogger, type Logger } from "../../control/core/logging.ts";
import { createRedis } from "../../control/core/redis.ts";
import type { ServiceDeps } from "../../control/core/store.ts";
import { cloudClientFor } from "../../control/cloud/clients.ts";
import type { CloudClient, CloudInstance } from "../../control/cloud/contract.ts";
import { instanceName } from "../../control/cloud/naming.ts";
import { ScaleMetrics } from "../../control/cloud/scale/metrics.ts";
import { MAX_CLOUD_PROXIES } from "../../control/model/cloud.ts";
import { JobProducer } from "../../control/jobs/producers.ts";
import { type ScaleOutcome, ScaleRun } from "../../control/jobs/scale-run.ts";
import { createDatabase, type Database } from "../../db/client.ts";
import { migrate } from "../../db/migrate.ts";
import { connectors, credentials, metricTotals, projects, proxies } from "../../db/schema.ts";
import { sleep } from "../../shared/async/sleep.ts";
import { ProxyWindows } from "../../shared/metric-windows.ts";
import { type RedisKeys, redisKeys } from "../../shared/redis-keys.ts";
import { JobKind, ProxyStatus } from "../../shared/roles.ts";
import type { ControlSettings } from "../../shared/settings.ts";
import { ProviderRegistry } from "../../shared/vendors/registry.ts";
import { testSettings } from "../../testkit/settings.ts";
import {
  createTestDatabase,
  deletePrefix,
  TEST_REDIS_URL,
  testPrefix,
} from "../../testkit/stores.ts";
import { envPositive, median, type Row, type Suite, type SuiteContext } from "./suite.ts";
import { cpuNowMs, untilBoundary } from "./periods.ts";

const RUN_BUDGET_MS = 1_000;
const CPU_SHARE_BUDGET_PERCENT = 1;
const WARM_ROUNDS = 2;
const BASELINE_MS = 20_000;
const HOUR = 3_600_000;

function nullLogger(level: string, role: string): Logger {
  return createLogger({
    level,
    instance: "bench",
    role,
    destination: new Writable({ write: (_chunk, _encoding, callback) => callback() }),
  });
}

const spread = (values: readonly number[], digits = 0) =>
  `${Math.min(...values).toFixed(digits)} to ${Math.max(...values).toFixed(digits)}`;

// ---------------------------------------------------------------------------------------------
// Scale runs

type CaseName = "steady" | "listing" | "draining" | "drained" | "rotating";

interface Case {
  name: CaseName;
  figure: string;
  connectorId: string;
  /** Rows the case starts from: the first `draining` of them draining, the rest healthy. */
  draining: number;
  /** Rows due for rotation (the first after the draining ones). */
  rotating: number;
  /** A draining row's quiet checks in the hash before the run (2 terminates it). */
  quietChecks: number;
  /** The listing is due (its time left out of the hash). */
  listDue: boolean;
  /** Its rows change in a run: written afresh before every one. */
  reseed: boolean;
  /** Throws when the run did not do what the case is for. */
  expect(outcome: ScaleOutcome): void;
  /** Filled by the seed: the rows' ids and instances, and the readings of the draining. */
  rows: { id: string; instance: CloudInstance }[];
  readings: Map<string, string>;
}

interface Sample {
  cpuMs: number;
  wallMs: number;
  pgStatements: number;
  redisCommands: number;
  redisTrips: number;
}

/** A client whose calls answer at once from memory, for one connector's listing. */
function memoryClient(provider: CloudClient["provider"], listing: () => CloudInstance[]) {
  let created = 0;
  const client: CloudClient = {
    provider,
    list: () => Promise.resolve(listing()),
    create: (launch) => {
      created++;
      return Promise.resolve({
        name: launch.name,
        id: `aws-i-${randomBytes(9).toString("hex").slice(0, 17)}`,
        state: "running" as const,
        address: `203.0.${(created >> 8) & 255}.${created & 255}`,
      });
    },
    terminate: () => Promise.resolve(),
    verify: () => Promise.resolve(),
  };
  return client;
}

/**
 * Counts what a run sends: postgres.js messages (its debug hook), Redis commands, and Redis round
 * trips (a pipeline or transaction is one, however many commands it holds).
 */
function countWork(database: Database, redis: Redis) {
  const counts = { pg: 0, redis: 0, redisTrips: 0 };
  (database.sql.options as { debug: unknown }).debug = () => {
    counts.pg++;
  };
  type Batch = { length: number; exec: (...args: unknown[]) => unknown };
  const client = redis as unknown as Record<string, (...args: unknown[]) => unknown>;
  const send = client.sendCommand.bind(redis);
  let batched = 0;
  client.sendCommand = (...args: unknown[]) => {
    counts.redis++;
    if (batched > 0) batched--;
    else counts.redisTrips++;
    return send(...args);
  };
  for (const method of ["pipeline", "multi"]) {
    const make = client[method].bind(redis);
    client[method] = (...args: unknown[]) => {
      const batch = make(...args) as Batch;
      const exec = batch.exec.bind(batch);
      batch.exec = (...execArgs: unknown[]) => {
        // Its commands go out together: one round trip for all of them (a transaction's EXEC
        // is queued by the exec itself).
        counts.redisTrips++;
        batched += batch.length + (method === "multi" ? 1 : 0);
        return exec(...execArgs);
      };
      return batch;
    };
  }
  return counts;
}

interface Bed {
  settings: ControlSettings;
  database: Database;
  redis: Redis;
  keys: RedisKeys;
  deps: ServiceDeps;
  projectId: string;
  credentialId: string;
}

const CONNECTOR_CONFIG = (size: number) => ({
  instance_name: "bench",
  region: "eu-west-1",
  instance_type: "t3.micro",
  ami_id: "ami-0123456789abcdef0",
  min_proxies: size,
  max_proxies: size,
  min_rotation_period_minutes: 60,
  max_rotation_period_minutes: 1440,
  tags: { team: "bench" },
});

/** The connector's rows, counters and autoscaler hash as `c` starts from. */
async function seed(bed: Bed, c: Case, instances: number): Promise<void> {
  const { database, redis, keys } = bed;
  const now = Date.now();
  const old = await database.db.select({ id: proxies.id }).from(proxies)
    .where(eq(proxies.connectorId, c.connectorId));
  if (old.length > 0) {
    const ids = old.map((row) => row.id);
    await database.db.delete(metricTotals).where(inArray(metricTotals.entityId, ids));
    await database.db.delete(proxies).where(eq(proxies.connectorId, c.connectorId));
    const pipeline = redis.pipeline();
    for (const id of ids) pipeline.del(keys.metricWindow(ProxyWindows.name, id));
    await pipeline.exec();
  }
  const values = Array.from({ length: instances }, (_, i) => {
    // Ten hours of instances, oldest first, as rotation leaves a pool.
    const createdAt = new Date(now - 10 * HOUR + Math.floor((i * 10 * HOUR) / instances));
    const name = instanceName("aws", "bench", createdAt.getTime());
    return {
      projectId: bed.projectId,
      connectorId: c.connectorId,
      instanceId: `aws-i-${randomBytes(9).toString("hex").slice(0, 17)}`,
      scheme: "http",
      host: `198.51.${(i >> 8) & 255}.${i & 255}`,
      port: 3128,
      username: `ox${randomBytes(5).toString("hex")}`,
      password: randomBytes(12).toString("hex"),
      metadata: { instance_name: name },
      status: i < c.draining ? ProxyStatus.draining : ProxyStatus.healthy,
      statusChangedAt: createdAt,
      createdAt,
      updatedAt: createdAt,
    };
  });
  const saved = await database.db.insert(proxies).values(values)
    .returning({ id: proxies.id, instanceId: proxies.instanceId });
  const idOf = new Map(saved.map((row) => [row.instanceId, row.id]));
  // In the order of `values`: the first `draining` are the draining ones.
  c.rows = values.map((v) => ({
    id: idOf.get(v.instanceId)!,
    instance: {
      name: v.metadata.instance_name,
      id: v.instanceId,
      state: "running",
      address: v.host,
    },
  }));
  const draining = c.rows.slice(0, c.draining).map((row) => row.id);
  c.readings = new Map();
  if (draining.length > 0) {
    await database.db.insert(metricTotals).values(draining.map((id, i) => ({
      entityKind: "proxy",
      entityId: id,
      requests: 1000 + i,
      successes: 1000 + i,
      bytesSent: 100_000 + i,
      bytesReceived: 1_000_000 + i,
    })));
    const pipeline = redis.pipeline();
    draining.forEach((id, i) => {
      pipeline.hset(keys.metricWindow(ProxyWindows.name, id), {
        requests: 3,
        successes: 3,
        bytes_sent: 300,
        bytes_received: 3000,
      });
      c.readings.set(id, `${1000 + i + 3}:${100_000 + i + 1_000_000 + i + 300 + 3000}`);
    });
    await pipeline.exec();
  }
  await database.sql.unsafe("vacuum analyze proxies, metric_totals");
  await writeHash(bed, c, now);
}

/** The connector's autoscaler hash as the run before this one left it. */
async function writeHash(bed: Bed, c: Case, now: number): Promise<void> {
  const hash: Record<string, string> = {
    level: "low",
    watched_since: String(now - 2 * HOUR),
    target: String(c.rows.length - c.draining),
    hold: "at_target",
    demand: "0",
    ran_at: String(now - 30_000),
  };
  if (!c.listDue) hash.listed_at = String(now - 60_000);
  c.rows.forEach((row, i) => {
    if (i < c.draining) {
      hash[`drain:${row.id}`] = `${c.readings.get(row.id)}|${c.quietChecks}`;
    } else {
      // Due a minute ago for the rotating rows; later today for the rest.
      const due = i < c.draining + c.rotating
        ? now - 60_000
        : now + HOUR + Math.floor(((i - c.draining) * 12 * HOUR) / c.rows.length);
      hash[`rotate:${row.id}`] = String(due);
    }
  });
  const key = bed.keys.autoscaler(c.connectorId);
  await bed.redis.multi().del(key, bed.keys.scaleCreating(c.connectorId)).hset(key, hash).exec();
}

function cases(
  instances: number,
  draining: number,
  rotations: number,
): Omit<Case, "connectorId">[] {
  const base = { rows: [], readings: new Map(), quietChecks: 0 };
  const check = (what: string, ok: boolean) => {
    if (!ok) throw new Error(`scale bench: the ${what} case did not run as meant`);
  };
  return [
    {
      ...base,
      name: "steady",
      figure: `scale run, ${instances} instances, steady (nothing due)`,
      draining: 0,
      rotating: 0,
      listDue: false,
      reseed: false,
      expect: (o) => check("steady", !o.listed && o.hold === "at_target" && o.created === 0),
    },
    {
      ...base,
      name: "listing",
      figure: `scale run, ${instances} instances, listing ${instances} (from memory)`,
      draining: 0,
      rotating: 0,
      listDue: true,
      reseed: false,
      expect: (o) => check("listing", o.listed && o.unrecordedTerminated === 0),
    },
    {
      ...base,
      name: "draining",
      figure: `scale run, ${instances} instances, ${draining} draining (readings)`,
      draining,
      rotating: 0,
      listDue: false,
      reseed: false,
      expect: (o) => check("draining", o.terminated === 0 && o.hold === "at_target"),
    },
    {
      ...base,
      name: "drained",
      figure: `scale run, ${instances} instances, ${draining} drained and terminated`,
      draining,
      rotating: 0,
      quietChecks: 1,
      listDue: false,
      reseed: true,
      expect: (o) => check("drained", o.terminated === draining),
    },
    {
      ...base,
      name: "rotating",
      figure: `scale run, ${instances} instances, ${rotations} rotated`,
      draining: 0,
      rotating: rotations,
      listDue: false,
      reseed: true,
      expect: (o) => check("rotating", o.created === rotations && o.hold === "at_target"),
    },
  ];
}

async function scaleRuns(context: SuiteContext): Promise<Row[]> {
  const instances = envPositive("BENCH_SCALE_INSTANCES", true) ?? MAX_CLOUD_PROXIES;
  if (instances > MAX_CLOUD_PROXIES) {
    throw new Error(`BENCH_SCALE_INSTANCES must be at most ${MAX_CLOUD_PROXIES}`);
  }
  const draining = Math.min(envPositive("BENCH_SCALE_DRAINING", true) ?? 500, instances - 1);
  const rotations = Math.min(envPositive("BENCH_SCALE_ROTATIONS", true) ?? 10, instances);
  const testDatabase = await createTestDatabase();
  const prefix = testPrefix();
  const settings = testSettings({
    databaseUrl: testDatabase.url,
    prefix,
    OCTOPROX_LOG_LEVEL: "info",
  });
  const logger = nullLogger(settings.logLevel, "worker");
  let database: Database | undefined;
  let redis: Redis | undefined;
  try {
    await migrate(testDatabase.url);
    database = createDatabase(testDatabase.url, {
      poolSize: settings.databasePoolSize,
      applicationName: "octoprox-worker",
    });
    redis = createRedis(TEST_REDIS_URL);
    const keys = redisKeys(prefix);
    const changes = new ChangeLog({
      redis,
      keys,
      logger,
      deadlineMs: settings.redisRequestTimeoutMs,
    });
    const jobs = new JobQueue({ redis, keys, logger, deadlineMs: settings.redisRequestTimeoutMs });
    const deps: ServiceDeps = {
      database,
      changes,
      settings,
      jobs,
      providers: new ProviderRegistry(),
    };
    const [project] = await database.db.insert(projects)
      .values({ name: "scale", username: "scale", password: "password-1" })
      .returning({ id: projects.id });
    const [credential] = await database.db.insert(credentials).values({
      projectId: project.id,
      name: "aws",
      provider: "aws",
      config: { access_key: "AKIAOCTOPROXBENCH001", secret_key: "octoprox-bench-secret-key" },
    }).returning({ id: credentials.id });
    const bed: Bed = {
      settings,
      database,
      redis,
      keys,
      deps,
      projectId: project.id,
      credentialId: credential.id,
    };
    const all: Case[] = [];
    for (const spec of cases(instances, draining, rotations)) {
      const active = instances - spec.draining;
      const [connector] = await database.db.insert(connectors).values({
        projectId: project.id,
        credentialId: credential.id,
        name: spec.name,
        kind: "cloud",
        provider: "aws",
        config: CONNECTOR_CONFIG(active),
      }).returning({ id: connectors.id });
      const c: Case = { ...spec, connectorId: connector.id };
      await seed(bed, c, instances);
      all.push(c);
    }
    context.log(
      `scale: ${all.length} connectors of ${instances} instances seeded; ` +
        `${WARM_ROUNDS} rounds of warm-up, then ${context.runs}`,
    );

    /** The case running: the memory client lists its instances (runs go one at a time). */
    let current: Case | undefined;
    const run = new ScaleRun({
      deps,
      redis,
      keys,
      logger,
      metrics: new ScaleMetrics(),
      // The real factory (configs parsed, the SDK client built); its calls answered from memory.
      clientFor: (s, provider, credentialConfig, config) => {
        const real = cloudClientFor(s, provider, credentialConfig, config);
        return memoryClient(real.provider, () => (current?.rows ?? []).map((row) => row.instance));
      },
    });
    const counts = countWork(database, redis);
    const samples = new Map<CaseName, Sample[]>(all.map((c) => [c.name, []]));
    const cold = new Map<CaseName, Sample>();
    for (let round = 0; round < WARM_ROUNDS + context.runs; round++) {
      for (const c of all) {
        if (round > 0) {
          if (c.reseed) await seed(bed, c, instances);
          else await writeHash(bed, c, Date.now());
        }
        current = c;
        // What the last case left behind (the outbox's batched deletes) ends before the clock.
        await sleep(200);
        const pg = counts.pg;
        const commands = counts.redis;
        const trips = counts.redisTrips;
        const cpu = cpuNowMs();
        const wall = performance.now();
        const outcome = await run.run(c.connectorId, new AbortController().signal);
        const sample = {
          wallMs: performance.now() - wall,
          cpuMs: cpuNowMs() - cpu,
          pgStatements: counts.pg - pg,
          redisCommands: counts.redis - commands,
          redisTrips: counts.redisTrips - trips,
        };
        c.expect(outcome);
        if (round === 0) cold.set(c.name, sample);
        if (round >= WARM_ROUNDS) samples.get(c.name)!.push(sample);
        context.log(
          `scale ${round < WARM_ROUNDS ? "warm-up" : `run ${round - WARM_ROUNDS + 1}`} ` +
            `${c.name}: ${sample.cpuMs.toFixed(1)} ms CPU, ${sample.wallMs.toFixed(1)} ms wall, ` +
            `${sample.pgStatements} Postgres statements, ${sample.redisCommands} Redis commands ` +
            `in ${sample.redisTrips} round trips`,
        );
      }
    }
    return all.map((c) => {
      const list = samples.get(c.name)!;
      const cpu = list.map((s) => s.cpuMs);
      const wall = list.map((s) => s.wallMs);
      const value = median(cpu);
      const pg = median(list.map((s) => s.pgStatements));
      const commands = median(list.map((s) => s.redisCommands));
      const trips = median(list.map((s) => s.redisTrips));
      return {
        figure: c.figure,
        key: `scale_run_${c.name}_cpu_ms`,
        value,
        unit: "ms CPU",
        budget: { op: "<=", limit: RUN_BUDGET_MS },
        runs: cpu,
        digits: 1,
        detail:
          `${(value / RUN_BUDGET_MS).toFixed(3)} of the budget; wall ${
            median(wall).toFixed(1)
          } ms (${
            spread(wall, 1)
          }); ${pg} Postgres statements, ${commands} Redis commands in ${trips} round trips; ` +
          `first call (cold) ${cold.get(c.name)!.cpuMs.toFixed(0)} ms CPU; cloud calls from memory`,
        facts: {
          wall_ms: median(wall),
          budget_share: value / RUN_BUDGET_MS,
          postgres_statements: pg,
          redis_commands: commands,
          redis_round_trips: trips,
        },
      } satisfies Row;
    });
  } finally {
    redis?.disconnect();
    await database?.close();
    await deletePrefix(TEST_REDIS_URL, prefix).catch(() => {});
    await testDatabase.drop();
  }
}

// ---------------------------------------------------------------------------------------------
// The producer

async function producerCost(context: SuiteContext): Promise<Row[]> {
  const connectorCount = envPositive("BENCH_SCALE_CONNECTORS", true) ?? 1_000;
  const defaults = testSettings({ prefix: "unused:" });
  const periodSeconds = envPositive("BENCH_SCALE_PERIOD", true) ??
    Math.round(defaults.scaleIntervalMs / 1000);
  const prefix = testPrefix();
  const keys = redisKeys(prefix);
  const redis = createRedis(TEST_REDIS_URL);
  const logger = nullLogger("info", "controller");
  const lease = new ControllerLease({
    redis,
    keys,
    holderId: `bench-${randomUUID()}`,
    logger,
    ttlMs: defaults.controllerLeaseTtlMs,
    refreshMs: defaults.controllerLeaseRefreshMs,
    pollMs: defaults.controllerLeasePollMs,
  });
  // The compile's scale keys: every cloud connector's id.
  const connectorIds = Array.from({ length: connectorCount }, () => randomUUID());
  const producer = new JobProducer({
    kind: JobKind.scale,
    periodMs: periodSeconds * 1000,
    keys: () => connectorIds,
    redis,
    redisKeys: keys,
    lease,
    logger,
  });
  try {
    lease.start();
    const waited = Date.now();
    while (!lease.leading) {
      if (Date.now() - waited > 30_000) throw new Error("the bench lease was never taken");
      await sleep(50);
    }
    context.log(
      `scale producer: a warm-up period, then ${context.runs} periods of ${periodSeconds} s ` +
        `with ${connectorCount} connectors, then the lease alone for ${BASELINE_MS / 1000} s`,
    );
    void producer.start();
    await untilBoundary(periodSeconds);
    context.log("scale producer: one period of warm-up");
    await untilBoundary(periodSeconds);
    const shares: number[] = [];
    const published: number[] = [];
    for (let runIndex = 1; runIndex <= context.runs; runIndex++) {
      const cpuBefore = cpuNowMs();
      const wallBefore = performance.now();
      const publishedBefore = producer.snapshot().published;
      await untilBoundary(periodSeconds);
      const cpuMs = cpuNowMs() - cpuBefore;
      const wallMs = performance.now() - wallBefore;
      const count = producer.snapshot().published - publishedBefore;
      shares.push((cpuMs / wallMs) * 100);
      published.push(count);
      context.log(
        `scale producer run ${runIndex}: ${count} keys in ${(wallMs / 1000).toFixed(1)} s, ` +
          `${cpuMs.toFixed(0)} ms CPU = ${((cpuMs / wallMs) * 100).toFixed(3)}% of a core`,
      );
    }
    // The lease alone, in the same warm process: what the producer adds to.
    await producer.stop();
    const baseCpu = cpuNowMs();
    const baseStart = performance.now();
    await sleep(BASELINE_MS);
    const baseline = (cpuNowMs() - baseCpu) / (performance.now() - baseStart) * 100;
    context.log(`scale producer: the lease alone ${baseline.toFixed(3)}% of a core`);
    const share = median(shares);
    return [
      {
        figure:
          `scale producer: controller CPU, ${connectorCount} cloud connectors per ${periodSeconds} s`,
        key: "scale_producer_core_percent",
        value: share,
        unit: "% core",
        budget: { op: "<=", limit: CPU_SHARE_BUDGET_PERCENT },
        runs: shares,
        digits: 3,
        detail: `${(share / 100).toFixed(5)} of a core, the lease included; ` +
          `the lease alone ${baseline.toFixed(3)} % (the producer's own ${
            (share - baseline).toFixed(3)
          } %); keys a period ${median(published)}`,
        facts: { lease_core_percent: baseline, keys_per_period: median(published) },
      },
    ];
  } finally {
    await producer.stop();
    await lease.stop();
    await deletePrefix(TEST_REDIS_URL, prefix).catch(() => {});
    redis.disconnect();
  }
}

async function run(context: SuiteContext): Promise<Row[]> {
  const runs = await scaleRuns(context);
  return [...runs, ...await producerCost(context)];
}

export const scaleSuite: Suite = {
  name: "scale",
  description:
    "a cloud connector's scale run at 1,000 instances (worker CPU); the scale producer for 1,000 connectors",
  run,
};
