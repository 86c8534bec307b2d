/**
 * Suite `producers`: what the job stream costs the controller. Budget: 20,000 health keys
 * published in one period cost under 1% of a core.
 *
 * A real JobProducer for `health` with 20,000 keys and the default 60 s period, under a real
 * ControllerLease (default TTL, refresh and poll) on a prefix of its own, runs in this process,
 * which does nothing else meanwhile. Each run is one whole period, from one period boundary (an
 * epoch second divisible by the period) to the next, so every slot second is published exactly
 * once within it; its cost is this process's CPU time (process.cpuUsage, user plus system) over
 * the wall time, as a share of one core. The lease's own refreshes are counted in, as they are on
 * a controller. One whole period before the runs is left out: it warms the code up (the first
 * minute after a start costs two to three times a steady one, once per process life). Before the
 * producer starts, the same process with the lease alone is measured for 20 s, after 10 s to
 * settle from its own start: the baseline the producer adds to. Nothing consumes the stream meanwhile;
 * its length cap is Redis's work, not the controller's.
 *
 * Overrides (environment): BENCH_PRODUCER_KEYS, BENCH_PRODUCER_PERIOD (seconds).
 */
import { randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import { Redis } from "ioredis";
import { ControllerLease } from "../../control/core/lease.ts";
import { JobProducer } from "../../control/jobs/producers.ts";
import { createLogger } from "../../control/core/logging.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import { JobKind } from "../../shared/roles.ts";
import { testSettings } from "../../testkit/settings.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { envPositive, median, type Row, type Suite, type SuiteContext } from "./suite.ts";
import { cpuNowMs, untilBoundary } from "./periods.ts";
import { sleep } from "../../shared/async/sleep.ts";

const CPU_SHARE_BUDGET_PERCENT = 1;
const SETTLE_MS = 10_000;
const BASELINE_MS = 20_000;

async function run(context: SuiteContext): Promise<Row[]> {
  const keyCount = envPositive("BENCH_PRODUCER_KEYS", true) ?? 20_000;
  const defaults = testSettings({ prefix: "unused:" });
  const periodSeconds = envPositive("BENCH_PRODUCER_PERIOD", true) ??
    Math.round(defaults.healthCheckIntervalMs / 1000);
  const prefix = testPrefix();
  const keys = redisKeys(prefix);
  const redis = new Redis(TEST_REDIS_URL);
  // A real logger, writing nowhere: the producer logs nothing on a good run anyway.
  const logger = createLogger({
    level: "info",
    instance: "bench",
    role: "controller",
    destination: new Writable({ write: (_chunk, _encoding, callback) => callback() }),
  });
  const lease = new ControllerLease({
    redis,
    keys,
    holderId: `bench-${randomUUID()}`,
    logger,
    ttlMs: defaults.controllerLeaseTtlMs,
    refreshMs: defaults.controllerLeaseRefreshMs,
    pollMs: defaults.controllerLeasePollMs,
  });
  const healthKeys = Array.from({ length: keyCount }, () => randomUUID());
  const producer = new JobProducer({
    kind: JobKind.health,
    periodMs: periodSeconds * 1000,
    keys: () => healthKeys,
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
      `producers: lease alone for ${BASELINE_MS / 1000} s, then a warm-up period and ` +
        `${context.runs} periods of ` +
        `${periodSeconds} s with ${keyCount} keys`,
    );
    // Let the start's own garbage and compilation settle before the baseline.
    await sleep(SETTLE_MS);
    const baseCpu = cpuNowMs();
    const baseStart = performance.now();
    await sleep(BASELINE_MS);
    const baseline = (cpuNowMs() - baseCpu) / (performance.now() - baseStart) * 100;

    void producer.start();
    // The first period may start mid-way, and the next one warms the code up (the first
    // minute costs two to three times a steady one): runs are whole periods after both.
    await untilBoundary(periodSeconds);
    context.log("producers: one period of warm-up");
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
        `producers run ${runIndex}: ${count} keys in ${(wallMs / 1000).toFixed(1)} s, ` +
          `${cpuMs.toFixed(0)} ms CPU = ${((cpuMs / wallMs) * 100).toFixed(3)}% of a core`,
      );
    }
    return [
      {
        figure: `producers: controller CPU, ${keyCount} health keys per ${periodSeconds} s period`,
        value: median(shares),
        unit: "% core",
        budget: { op: "<=", limit: CPU_SHARE_BUDGET_PERCENT },
        runs: shares,
        digits: 3,
      },
      {
        figure: "producers: of which the lease alone (baseline)",
        value: baseline,
        unit: "% core",
        digits: 3,
      },
      {
        figure: "producers: keys published per period",
        value: median(published),
        unit: "keys",
        runs: published,
      },
    ];
  } finally {
    await producer.stop();
    await lease.stop();
    await deletePrefix(TEST_REDIS_URL, prefix);
    redis.disconnect();
  }
}

export const producersSuite: Suite = {
  name: "producers",
  description: "controller CPU for 20,000 health keys published over one period",
  run,
};
