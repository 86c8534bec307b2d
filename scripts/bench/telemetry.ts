/**
 * Suite `telemetry`: what a Prometheus scrape of a worker's /metrics costs. Budget: under 5 ms,
 * both as the worker's CPU per scrape and as the median time a scrape takes.
 *
 * One real worker process (`control/main.ts`, role worker, every job kind with a handler, every
 * setting at its default) on a fresh database and Redis prefix; nothing feeds its streams, so
 * what it does besides answering is its heartbeat, its loop-lag timer and its blocked reads. Its
 * snapshot is built and rendered at each scrape, as on any worker: the loops, one runner per
 * kind, the stores, the loop lag and prom-client's process metrics. This process scrapes it over
 * one keep-alive connection, one scrape after another: 200 to warm up, then each run is
 * BENCH_TELEMETRY_SCRAPES scrapes (1,000 by default). A run's CPU per scrape is the worker's CPU
 * time over the run (from /proc) less its idle rate, measured for 5 s before the runs, divided by
 * the scrapes; the latency is each scrape's time from request to the last byte of the body,
 * this process's HTTP client included.
 *
 * Overrides (environment): BENCH_TELEMETRY_SCRAPES.
 */
import { startControl, waitForReady } from "../../testkit/processes.ts";
import {
  createTestDatabase,
  deletePrefix,
  TEST_REDIS_URL,
  testPrefix,
} from "../../testkit/stores.ts";
import {
  cpuMillis,
  envPositive,
  median,
  percentile,
  type Row,
  type Suite,
  type SuiteContext,
} from "./suite.ts";
import { sleep } from "../../shared/async/sleep.ts";

const BUDGET_MS = 5;
const WARM_UP_SCRAPES = 200;
const IDLE_MS = 5000;

async function scrapeOnce(url: string): Promise<number> {
  const started = performance.now();
  const response = await fetch(url);
  const text = await response.text();
  const elapsed = performance.now() - started;
  if (response.status !== 200 || !text.includes("octoprox_job_batches_total")) {
    throw new Error(`/metrics answered ${response.status} without the job families`);
  }
  return elapsed;
}

async function workerCpu(pid: number): Promise<number> {
  const ms = await cpuMillis(pid);
  if (ms === undefined) throw new Error("the worker exited");
  return ms;
}

async function run(context: SuiteContext): Promise<Row[]> {
  const scrapes = envPositive("BENCH_TELEMETRY_SCRAPES", true) ?? 1000;
  const database = await createTestDatabase();
  const prefix = testPrefix();
  const worker = await startControl({
    databaseUrl: database.url,
    prefix,
    role: "worker",
    instance: "bench-telemetry",
    // The production heartbeat, not the tests' fast one.
    extra: { OCTOPROX_HEARTBEAT_INTERVAL: "5" },
  });
  try {
    await waitForReady(worker);
    const pid = worker.child.pid!;
    const url = `${worker.url}/metrics`;
    for (let i = 0; i < WARM_UP_SCRAPES; i++) await scrapeOnce(url);
    const idleCpu = await workerCpu(pid);
    const idleStart = performance.now();
    await sleep(IDLE_MS);
    const idlePerMs = (await workerCpu(pid) - idleCpu) / (performance.now() - idleStart);
    context.log(
      `telemetry: worker idles at ${(idlePerMs * 100).toFixed(2)}% of a core; ` +
        `${context.runs} runs of ${scrapes} scrapes`,
    );

    const cpuPerScrape: number[] = [];
    const medians: number[] = [];
    const p99s: number[] = [];
    for (let runIndex = 1; runIndex <= context.runs; runIndex++) {
      const latencies: number[] = [];
      const cpuBefore = await workerCpu(pid);
      const wallBefore = performance.now();
      for (let i = 0; i < scrapes; i++) latencies.push(await scrapeOnce(url));
      const wallMs = performance.now() - wallBefore;
      const cpuMs = await workerCpu(pid) - cpuBefore - idlePerMs * wallMs;
      cpuPerScrape.push(Math.max(0, cpuMs) / scrapes);
      medians.push(median(latencies));
      p99s.push(percentile(latencies, 0.99));
      context.log(
        `telemetry run ${runIndex}: ${(cpuPerScrape.at(-1)!).toFixed(3)} ms worker CPU a ` +
          `scrape; latency median ${medians.at(-1)!.toFixed(3)} ms, p99 ${
            p99s.at(-1)!.toFixed(3)
          } ms`,
      );
    }
    const bytes = (await (await fetch(url)).text()).length;
    return [
      {
        figure: "telemetry: worker CPU per /metrics scrape",
        value: median(cpuPerScrape),
        unit: "ms",
        budget: { op: "<=", limit: BUDGET_MS },
        runs: cpuPerScrape,
        digits: 3,
      },
      {
        figure: "telemetry: worker /metrics scrape time, median",
        value: median(medians),
        unit: "ms",
        budget: { op: "<=", limit: BUDGET_MS },
        runs: medians,
        digits: 3,
        detail: `p99 ${median(p99s).toFixed(3)} ms; ${bytes} bytes a scrape`,
      },
    ];
  } finally {
    await worker.stop();
    await deletePrefix(TEST_REDIS_URL, prefix);
    await database.drop();
  }
}

export const telemetrySuite: Suite = {
  name: "telemetry",
  description: "a worker's /metrics: CPU and time per scrape",
  run,
};
