/**
 * /metrics of every control process, as a real process of each role answers it on its API
 * port: Prometheus's own `promtool check metrics` passes (the text parses, and the lint finds
 * nothing), every sample carries the role, no label can hold a proxy, client, URL or request,
 * and each family shows what the process has: its loops, a worker's job kinds from the first
 * scrape and the batches it runs, how far a controller's feed builder has read each stream, the
 * lease, and the leader-only families from the leading controller alone.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appendWork } from "../../control/core/work-streams.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import { ChangeKind, JobKind, WORKER_JOB_KINDS } from "../../shared/roles.ts";
import {
  type ControlProcess,
  killAll,
  startControl,
  waitForReady,
  waitWhileRunning,
} from "../../testkit/processes.ts";
import {
  declaredTypes,
  type ParsedSample,
  parseSamples,
  promtoolCheck,
  requirePromtool,
  samplesOf,
} from "../../testkit/promtool.ts";
import {
  createTestDatabase,
  deletePrefix,
  TEST_REDIS_URL,
  type TestDatabase,
  testPrefix,
} from "../../testkit/stores.ts";
import { waitUntil } from "../../testkit/wait.ts";

let database: TestDatabase;
let redis: Redis;
const prefixes: string[] = [];

beforeAll(async () => {
  requirePromtool();
  database = await createTestDatabase();
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  await killAll();
  redis?.disconnect();
  for (const prefix of prefixes) await deletePrefix(TEST_REDIS_URL, prefix);
  await database?.drop();
});

function newPrefix(): string {
  const prefix = testPrefix();
  prefixes.push(prefix);
  return prefix;
}

async function start(role: string, prefix: string, extra?: Record<string, string>) {
  const control = await startControl({
    databaseUrl: database.url,
    prefix,
    role,
    instance: `t-${role}-${randomBytes(3).toString("hex")}`,
    extra,
  });
  await waitForReady(control);
  return control;
}

interface Scraped {
  text: string;
  samples: ParsedSample[];
  types: Map<string, string>;
}

async function scrape(control: ControlProcess): Promise<Scraped> {
  const response = await fetch(`${control.url}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
  const text = await response.text();
  return { text, samples: parseSamples(text), types: declaredTypes(text) };
}

/** One series' value; fails when the series is absent. */
function value(scraped: Scraped, name: string, labels: Record<string, string> = {}): number {
  const found = samplesOf(scraped.samples, name, labels);
  expect(found, `${name} ${JSON.stringify(labels)}`).toHaveLength(1);
  return found[0].value;
}

/**
 * The label names our own families may use: each takes values from a small fixed set, or names
 * a definition (a connector or project with a traffic limit), bounded by the install's own rows.
 */
const OUR_LABELS = new Set([
  "role",
  "loop",
  "state",
  "kind",
  "stream",
  "store",
  "version",
  "connector",
  "project",
  "mode",
  "outcome",
  "severity",
]);

async function expectWellFormed(scraped: Scraped, role: string): Promise<void> {
  expect(await promtoolCheck(scraped.text)).toEqual({ code: 0, output: "" });
  expect(scraped.samples.length).toBeGreaterThan(0);
  expect(scraped.samples.filter((sample) => sample.labels.role !== role)).toEqual([]);
  for (const sample of scraped.samples.filter((s) => s.name.startsWith("octoprox_"))) {
    expect(Object.keys(sample.labels).filter((label) => !OUR_LABELS.has(label))).toEqual([]);
  }
}

/** The loops the process reported in its last heartbeat snapshot. */
async function snapshotLoops(instance: string, prefix: string): Promise<string[]> {
  const text = await redis.get(redisKeys(prefix).instanceSnapshot(instance));
  const snapshot = JSON.parse(text ?? "{}") as { loops?: { name: string }[] };
  return (snapshot.loops ?? []).map((loop) => loop.name).sort();
}

const LEADER_ONLY = [
  "octoprox_feed_compiles_total",
  "octoprox_feed_publishes_total",
  "octoprox_feed_publish_failures_total",
  "octoprox_feed_last_publish_age_seconds",
  "octoprox_feed_sections",
  "octoprox_job_producer_entries_total",
  "octoprox_job_producer_refusals_total",
];

describe("/metrics of each role", () => {
  for (const role of ["api", "controller", "worker", "all"]) {
    it(`${role}: passes promtool, labels every sample with its role, shows its own families`, async () => {
      const prefix = newPrefix();
      const instance = `t-${role}-${randomBytes(3).toString("hex")}`;
      const control = await startControl({ databaseUrl: database.url, prefix, role, instance });
      await waitForReady(control);
      const controller = role === "controller" || role === "all";
      // A controller is ready before its first publish: scrape once it has one.
      const scraped = await waitUntil(async () => {
        const text = await scrape(control);
        return !controller || value(text, "octoprox_feed_publishes_total") > 0 ? text : undefined;
      }, { message: "a scrape of the process (a leader's after its first publish)" });
      await expectWellFormed(scraped, role);

      expect(value(scraped, "octoprox_ready")).toBe(1);
      expect(value(scraped, "octoprox_store_up", { store: "postgres" })).toBe(1);
      expect(value(scraped, "octoprox_store_up", { store: "redis" })).toBe(1);
      expect(value(scraped, "octoprox_build_info")).toBe(1);
      expect(value(scraped, "octoprox_event_loop_lag_worst_seconds")).toBeGreaterThanOrEqual(0);
      expect(value(scraped, "octoprox_event_loop_lag_mean_seconds")).toBeGreaterThanOrEqual(0);
      // The loop-lag monitor runs in every process, as a loop of the node's.
      expect(value(scraped, "octoprox_loop_runs_total", { loop: "loop_lag" })).toBeGreaterThan(0);
      expect(value(scraped, "octoprox_loop_state", { loop: "heartbeat", state: "running" }))
        .toBe(1);
      // Every loop the heartbeat reports, and no other.
      const loops = samplesOf(scraped.samples, "octoprox_loop_runs_total")
        .map((s) => s.labels.loop).sort();
      expect(loops).toEqual(await snapshotLoops(instance, prefix));
      // Process metrics, on the same registry.
      expect(value(scraped, "process_cpu_user_seconds_total")).toBeGreaterThan(0);
      expect(value(scraped, "nodejs_heap_size_used_bytes")).toBeGreaterThan(0);

      const worker = role === "worker" || role === "all";
      expect(scraped.types.has("octoprox_job_batches_total")).toBe(worker);
      // Alerting runs in every api: each severity and each outcome listed from the first scrape.
      const api = role === "api" || role === "all";
      expect(scraped.types.has("octoprox_alerts_firing")).toBe(api);
      if (api) {
        expect(value(scraped, "octoprox_alerts_firing", { severity: "critical" })).toBe(0);
        expect(value(scraped, "octoprox_alert_deliveries_total", { outcome: "given_up" })).toBe(0);
      }
      expect(scraped.types.has("octoprox_controller_lease_held")).toBe(controller);
      if (worker) {
        const kinds = samplesOf(scraped.samples, "octoprox_job_batches_total")
          .map((s) => s.labels.kind).sort();
        expect(kinds).toEqual([...WORKER_JOB_KINDS].sort());
      }
      if (controller) {
        // Alone on its prefix, it leads: the follower and leader-only families are there.
        expect(value(scraped, "octoprox_controller_lease_held")).toBe(1);
        expect(value(scraped, "octoprox_feed_publishes_total")).toBeGreaterThan(0);
        for (const stream of ["changes", "runtime"]) {
          expect(
            value(scraped, "octoprox_stream_entries_read_total", { loop: "feed_builder", stream }),
          ).toBeGreaterThanOrEqual(0);
        }
      } else {
        expect(samplesOf(scraped.samples, "octoprox_stream_entries_read_total")).toEqual([]);
      }
      expect(await control.stop("SIGTERM")).toEqual({ code: 0, signal: null });
    });
  }
});

describe("a worker's job families", () => {
  it("lists every kind it takes at zero from the first scrape, then counts the batches it runs", async () => {
    const prefix = newPrefix();
    const worker = await start("worker", prefix);
    const first = await scrape(worker);
    for (const kind of WORKER_JOB_KINDS) {
      for (
        const family of [
          "octoprox_job_batches_total",
          "octoprox_job_batch_failures_total",
          "octoprox_job_batches_given_up_total",
          "octoprox_job_entries_given_up_total",
          "octoprox_job_keys_total",
          "octoprox_job_entries_reclaimed_total",
          "octoprox_job_batches_running",
        ]
      ) {
        expect(value(first, family, { kind }), `${family} ${kind}`).toBe(0);
      }
    }

    // A health key for a proxy that does not exist: the batch runs and finds nothing to check.
    await appendWork(redis, redisKeys(prefix).jobStream(JobKind.health), [{ key: randomUUID() }]);
    const after = await waitWhileRunning(worker, async () => {
      const scraped = await scrape(worker);
      return value(scraped, "octoprox_job_batches_total", { kind: "health" }) === 1
        ? scraped
        : undefined;
    }, { message: "the health batch to be counted" });
    await expectWellFormed(after, "worker");
    expect(value(after, "octoprox_job_keys_total", { kind: "health" })).toBe(1);
    expect(value(after, "octoprox_job_batch_failures_total", { kind: "health" })).toBe(0);
    expect(value(after, "octoprox_loop_runs_total", { loop: "job_runner_health" })).toBe(1);
    expect(value(after, "octoprox_job_batches_total", { kind: "index_hygiene" })).toBe(0);
    expect(await worker.stop("SIGTERM")).toEqual({ code: 0, signal: null });
  });
});

describe("loop lag", () => {
  it("a process held still for over a second logs the lateness once and reports it", async () => {
    const worker = await start("worker", newPrefix());
    expect(value(await scrape(worker), "octoprox_event_loop_lag_worst_seconds")).toBeLessThan(1);
    // SIGSTOP holds every timer of the process: the half-second timer fires at least 1.1 s late.
    // The pause is the behaviour under test (a process held still for a while), not a wait.
    worker.child.kill("SIGSTOP");
    await new Promise((resolve) => setTimeout(resolve, 1600));
    worker.child.kill("SIGCONT");
    const lagging = () => worker.stdout.filter((line) => line.includes('"Event loop lagging"'));
    const line = await waitWhileRunning(worker, () => lagging()[0], {
      message: "the lag's log line",
    });
    expect(JSON.parse(line)).toMatchObject({ level: "warn", loop: "loop_lag" });
    expect(JSON.parse(line).late_ms).toBeGreaterThan(1000);
    // Within its first minute the process reports the minute so far.
    const scraped = await scrape(worker);
    expect(value(scraped, "octoprox_event_loop_lag_worst_seconds")).toBeGreaterThan(1);
    expect(value(scraped, "octoprox_event_loop_lag_mean_seconds")).toBeGreaterThan(0);
    expect(lagging()).toHaveLength(1);
    expect(await worker.stop("SIGTERM")).toEqual({ code: 0, signal: null });
  });
});

describe("controllers", () => {
  it("the leader reports the feed and the producers, a standby only its lease; the next leader takes them over", async () => {
    const prefix = newPrefix();
    const keys = redisKeys(prefix);
    // A short poll, so the standby takes the released lease at once.
    const env = { OCTOPROX_CONTROLLER_LEASE_POLL: "0.1" };
    const leader = await start("controller", prefix, env);
    const led = await waitWhileRunning(leader, async () => {
      const scraped = await scrape(leader);
      return value(scraped, "octoprox_feed_publishes_total") > 0 ? scraped : undefined;
    }, { message: "the leader's first publish" });
    await expectWellFormed(led, "controller");
    expect(value(led, "octoprox_controller_lease_held")).toBe(1);
    expect(value(led, "octoprox_controller_lease_terms_total")).toBe(1);
    expect(value(led, "octoprox_controller_lease_reachable")).toBe(1);
    expect(value(led, "octoprox_controller_lease_lapses_total")).toBe(0);
    expect(value(led, "octoprox_controller_lease_losses_total")).toBe(0);
    expect(value(led, "octoprox_feed_compiles_total")).toBeGreaterThan(0);
    expect(value(led, "octoprox_feed_publish_failures_total")).toBe(0);
    // The global section and the runtime section, on a database without connectors.
    expect(value(led, "octoprox_feed_sections")).toBe(2);
    expect(value(led, "octoprox_feed_last_publish_age_seconds")).toBeGreaterThanOrEqual(0);
    const producerKinds = samplesOf(led.samples, "octoprox_job_producer_entries_total")
      .map((s) => s.labels.kind).sort();
    expect(producerKinds.length).toBeGreaterThan(0);
    for (const kind of producerKinds) {
      expect(value(led, "octoprox_job_producer_refusals_total", { kind })).toBe(0);
    }

    // A change entry: the feed builder reads it, and its position is the entry's time.
    const id = await redis.xadd(keys.changesStream, "*", "kind", ChangeKind.project, "ref", "*");
    const read = await waitWhileRunning(leader, async () => {
      const scraped = await scrape(leader);
      const entries = value(scraped, "octoprox_stream_entries_read_total", {
        loop: "feed_builder",
        stream: "changes",
      });
      return entries >= 1 ? scraped : undefined;
    }, { message: "the feed builder to read the change" });
    expect(value(read, "octoprox_stream_entries_read_total", { stream: "changes" })).toBe(1);
    expect(value(read, "octoprox_stream_position_timestamp_seconds", { stream: "changes" }))
      .toBe(Number(id!.split("-")[0]) / 1000);
    expect(value(read, "octoprox_stream_gaps_total", { stream: "changes" })).toBe(0);
    expect(value(read, "octoprox_stream_full_reads_total", { loop: "feed_builder" }))
      .toBeGreaterThan(0);

    const standby = await start("controller", prefix, env);
    const stood = await scrape(standby);
    await expectWellFormed(stood, "controller");
    expect(value(stood, "octoprox_controller_lease_held")).toBe(0);
    expect(value(stood, "octoprox_controller_lease_terms_total")).toBe(0);
    // Declared, with no sample: a sum over every controller counts the leader's alone.
    for (const family of LEADER_ONLY) {
      expect(stood.types.has(family), family).toBe(true);
      expect(samplesOf(stood.samples, family), family).toEqual([]);
    }
    expect(value(stood, "octoprox_loop_runs_total", { loop: "feed_builder" })).toBe(0);

    expect(await leader.stop("SIGTERM")).toEqual({ code: 0, signal: null });
    const took = await waitWhileRunning(standby, async () => {
      const scraped = await scrape(standby);
      const publishes = samplesOf(scraped.samples, "octoprox_feed_publishes_total")[0]?.value;
      return (publishes ?? 0) > 0 ? scraped : undefined;
    }, { message: "the standby to lead and publish" });
    await expectWellFormed(took, "controller");
    expect(value(took, "octoprox_controller_lease_held")).toBe(1);
    expect(value(took, "octoprox_controller_lease_terms_total")).toBe(1);
    expect(
      samplesOf(took.samples, "octoprox_job_producer_entries_total").map((s) => s.labels.kind)
        .sort(),
    ).toEqual(producerKinds);
    expect(await standby.stop("SIGTERM")).toEqual({ code: 0, signal: null });
  });
});
