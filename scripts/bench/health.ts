/**
 * Suite `health`: one real worker process checking 10,000 proxies of which 5% hang until the
 * check timeout. Budget: at least 150 checks a second, and memory that stays flat. Then the
 * same checks in the single-instance shape (below).
 *
 * Set-up: a fresh database (migrated), one project and static connector, and 10,000 proxy rows
 * inserted directly. The rows point at real upstream proxies on loopback, every one of them in
 * a child process of its own so the worker is measured alone: two tinyproxy instances (HTTP)
 * and our fault proxy passing traffic (SOCKS5) share 95% of the rows, our fault proxy in `hang`
 * mode takes every twentieth. Each row has a login of its own (the proxies take any login), so
 * 10,000 distinct rows need only four upstreams. The connector names no check URL, so every
 * check asks our local origin's `/echo`, as most connectors do (OCTOPROX_ECHO_URL), and the
 * echo-outage check runs on every batch with a hung proxy.
 *
 * One worker process (`control/main.ts`, role worker, health jobs only, every setting at its
 * default unless BENCH_HEALTH_* says otherwise). Each run feeds the health stream as a producer
 * would, only faster: keys arrive spread out (1.5 x the proxies per check timeout) until the
 * worker is saturated, then a backlog of 1,000 to 1,500 unread keys is kept, going round the
 * proxies in a fresh random order each pass. Spreading the start matters: keys appended all at
 * once start every batch at once, and since a batch with a hung proxy ends a timeout later, the
 * worker would then complete its work in bursts a timeout apart. Checks are counted from the
 * worker's side: entries are deleted once handled, so entries appended less the stream's length
 * are the checks done. The rate is taken over whole check timeouts (at least 30 s) from a
 * timeout plus 2 s after the start, when the first hung checks have ended; whatever rhythm is
 * left repeats once a timeout, so a window of whole timeouts averages it out. Then the feed
 * stops and the stream drains. The worker's CPU over the window is read from /proc, its RSS
 * every 250 ms throughout, and the runs go one after another on the same worker, so a leak would
 * show as growth from run to run. At the end every proxy must have been checked, and the suite
 * reports how many fail (the hanging ones).
 *
 * Then the single-instance shape (runSingleInstance below): one `npm start` process of role
 * `all` judging 10,000 new proxies uploaded through its admin API, behind one upstream, 5%
 * hanging. Budget: at least 300 judged a second.
 *
 * Overrides (environment): BENCH_HEALTH_PROXIES, BENCH_HEALTH_TIMEOUT (seconds),
 * BENCH_HEALTH_CONCURRENCY (probes; the worker alone), BENCH_HEALTH_SHAPE=single (that shape
 * alone), BENCH_VERBOSE=1 (completions per 5 s per run, proxies judged about once a second).
 */
import { Redis } from "ioredis";
import postgres from "postgres";
import { Cluster } from "../../testkit/cluster.ts";
import { appendWork } from "../../control/core/work-streams.ts";
import { migrate } from "../../db/migrate.ts";
import { redisKeys, WORKERS_GROUP } from "../../shared/redis-keys.ts";
import { JobKind } from "../../shared/roles.ts";
import { startControl, waitForReady } from "../../testkit/processes.ts";
import { testSettings } from "../../testkit/settings.ts";
import {
  createTestDatabase,
  deletePrefix,
  TEST_REDIS_URL,
  testPrefix,
} from "../../testkit/stores.ts";
import {
  cpuMillis,
  cpuMillisOf,
  envPositive,
  MB,
  median,
  residentBytes,
  type Row,
  type Suite,
  type SuiteContext,
} from "./suite.ts";
import { sleep } from "../../shared/async/sleep.ts";
import { startUpstreams, type Upstreams } from "./upstreams.ts";

const CHECKS_PER_SECOND_BUDGET = 150;
/** New proxies judged a second by one `npm start` process (role all): issue 18, part 5. */
const SINGLE_JUDGED_PER_SECOND_BUDGET = 300;
/** The share of the new proxies judged between which the single instance's rate is taken. */
const JUDGED_FROM = 0.1;
const JUDGED_TO = 0.5;
const HANG_EVERY = 20; // 5%
/** RSS growth allowed from the first run's peak to the last run's: flat, within noise. */
const RSS_GROWTH_BUDGET_MB = 25;

/** The feed's tick: the stream is read (and topped up) every 250 ms. */
const TICK_MS = 250;
/** Keys fed per check timeout while ramping, as a multiple of the proxies. */
const RAMP_FACTOR = 1.5;
/** Once the backlog reaches BACKLOG_LOW the worker is saturated; it is kept near BACKLOG_HIGH. */
const BACKLOG_LOW = 1000;
const BACKLOG_HIGH = 1500;
/** The measured window: whole check timeouts, at least this long. */
const MIN_WINDOW_MS = 30_000;

interface RunResult {
  rate: number;
  cpuShare: number;
  upstreamCpuShare: number;
  peakRss: number;
  endRss: number;
  /** The backlog never ran out during the window. */
  saturated: boolean;
}

interface Sample {
  at: number;
  /** Entries completed (appended and deleted) so far. */
  completed: number;
  cpuMs: number;
  upstreamCpuMs: number;
}

/** Appends the proxies' keys in turn, each pass in a fresh random order. */
class Feeder {
  readonly #ids: readonly string[];
  #order: string[] = [];
  #next = 0;
  appended = 0;

  constructor(ids: readonly string[]) {
    this.#ids = ids;
  }

  async append(redis: Redis, stream: string, count: number): Promise<void> {
    const keys: string[] = [];
    while (keys.length < count) {
      if (this.#next >= this.#order.length) {
        this.#order = shuffled(this.#ids);
        this.#next = 0;
      }
      keys.push(this.#order[this.#next++]);
    }
    await appendWork(redis, stream, keys.map((key) => ({ key })));
    this.appended += keys.length;
  }
}

function shuffled<T>(items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/**
 * What a health-check run needs before its worker starts: the upstreams and origin, a migrated
 * database of its own with `count` proxies (every `hangEvery`-th hanging), a Redis prefix of its
 * own and the health stream's key. Each part's cleanup goes onto `cleanups`.
 */
export async function startHealthBed(
  count: number,
  hangEvery: number,
  cleanups: (() => Promise<void>)[],
) {
  const upstreams = await startUpstreams();
  cleanups.push(() => upstreams.close());
  const database = await createTestDatabase();
  cleanups.push(() => database.drop());
  await migrate(database.url);
  const sql = postgres(database.url, { max: 2, onnotice: () => {} });
  cleanups.push(() => sql.end());
  const { ids, hanging } = await insertHealthProxies(sql, upstreams, count, hangEvery);
  const prefix = testPrefix();
  const keys = redisKeys(prefix);
  const redis = new Redis(TEST_REDIS_URL);
  cleanups.push(async () => {
    await deletePrefix(TEST_REDIS_URL, prefix);
    redis.disconnect();
  });
  return {
    upstreams,
    database,
    sql,
    ids,
    hanging,
    prefix,
    keys,
    redis,
    stream: keys.jobStream(JobKind.health),
  };
}

async function run(context: SuiteContext): Promise<Row[]> {
  const proxiesWanted = envPositive("BENCH_HEALTH_PROXIES") ?? 10_000;
  const timeoutOverride = envPositive("BENCH_HEALTH_TIMEOUT");
  const concurrencyOverride = envPositive("BENCH_HEALTH_CONCURRENCY");
  const verbose = process.env.BENCH_VERBOSE === "1";
  const defaults = testSettings({ prefix: "unused:" });
  const timeoutMs = timeoutOverride !== undefined
    ? timeoutOverride * 1000
    : defaults.healthCheckTimeoutMs;
  const probes = concurrencyOverride ?? defaults.healthCheckConcurrency;
  if (process.env.BENCH_HEALTH_SHAPE === "single") {
    return await runSingleInstance(context, proxiesWanted, timeoutMs);
  }

  const cleanups: (() => Promise<void>)[] = [];
  try {
    context.log("health: starting upstream proxies and origin in a child process");
    const { upstreams, database, ids, hanging, prefix, keys, stream, redis } = await startHealthBed(
      proxiesWanted,
      HANG_EVERY,
      cleanups,
    );
    context.log(
      `health: ${ids.length} proxies (${hanging} hang), timeout ${timeoutMs / 1000} s, ` +
        `${probes} probes per worker, ${context.runs} runs`,
    );

    const worker = await startControl({
      databaseUrl: database.url,
      prefix,
      role: "worker",
      extra: {
        OCTOPROX_WORKER_JOBS: "health",
        OCTOPROX_ECHO_URL: `http://127.0.0.1:${upstreams.origin}/echo`,
        OCTOPROX_HEARTBEAT_INTERVAL: undefined,
        OCTOPROX_HEALTH_CHECK_TIMEOUT: timeoutOverride?.toString(),
        OCTOPROX_HEALTH_CHECK_CONCURRENCY: concurrencyOverride?.toString(),
      },
    });
    cleanups.push(async () => {
      await worker.stop("SIGTERM", Math.max(20_000, timeoutMs + 10_000));
    });
    await waitForReady(worker);
    const pid = worker.child.pid!;

    // RSS throughout, every 250 ms.
    let rssNow = (await residentBytes(pid)) ?? 0;
    let rssPeak = 0;
    const sampler = setInterval(() => {
      void residentBytes(pid).then((bytes) => {
        if (bytes === undefined) return;
        rssNow = bytes;
        rssPeak = Math.max(rssPeak, bytes);
      });
    }, 250);
    cleanups.push(() => Promise.resolve(clearInterval(sampler)));
    await sleep(2000);
    const rssStart = rssNow;

    const results: RunResult[] = [];
    const feeder = new Feeder(ids);
    const windowMs = timeoutMs * Math.max(1, Math.ceil(MIN_WINDOW_MS / timeoutMs));
    const rampPerSecond = (RAMP_FACTOR * ids.length) / (timeoutMs / 1000);
    for (let runIndex = 1; runIndex <= context.runs; runIndex++) {
      rssPeak = rssNow;
      const startedAt = Date.now();
      let lastTick = startedAt;
      let saturated = false;
      let start: Sample | undefined;
      let end: Sample | undefined;
      let starvedInWindow = false;
      const samples: Sample[] = [];
      const deadline = startedAt + timeoutMs + windowMs + 5 * 60_000;
      // Feed and count, every tick, until one window past the first check timeout.
      while (end === undefined) {
        await sleep(TICK_MS);
        if (!worker.alive()) {
          throw new Error(`worker exited:\n${worker.stderr.slice(-20).join("\n")}`);
        }
        const [length, pending] = await streamDepth(redis, stream);
        const now = Date.now();
        const backlog = length - pending;
        // Entries are deleted once handled: what was appended and is gone was checked.
        const sample: Sample = {
          at: now,
          completed: feeder.appended - length,
          cpuMs: (await cpuMillis(pid)) ?? 0,
          upstreamCpuMs: await cpuMillisOf(upstreams.allPids),
        };
        samples.push(sample);
        if (!saturated && backlog >= BACKLOG_LOW) saturated = true;
        if (start === undefined && now >= startedAt + timeoutMs + 2000) start = sample;
        else if (start !== undefined) {
          // The worker reads all it has batch slots for: it waited for work only when it held
          // fewer keys than it has probe slots, with none left to read.
          if (backlog <= 0 && pending < probes) starvedInWindow = true;
          if (now - start.at >= windowMs) end = sample;
        }
        if (now > deadline) throw new Error("health run did not reach its window");
        // Ramp as a producer would (spread out, so batches start at spread-out moments),
        // then keep a backlog so the worker never waits for work.
        const wanted = saturated
          ? Math.max(0, BACKLOG_HIGH - backlog)
          : Math.round((rampPerSecond * (now - lastTick)) / 1000);
        lastTick = now;
        if (wanted > 0) await feeder.append(redis, stream, wanted);
      }
      // Then let it drain: the last hung checks end a timeout later.
      for (;;) {
        await sleep(TICK_MS);
        const [length] = await streamDepth(redis, stream);
        if (length === 0) break;
        if (Date.now() > deadline + 10 * 60_000) {
          throw new Error(`health stream not drained: ${length} entries left`);
        }
      }
      const first = start!;
      const spanMs = end.at - first.at;
      const result: RunResult = {
        rate: ((end.completed - first.completed) / spanMs) * 1000,
        cpuShare: (end.cpuMs - first.cpuMs) / spanMs,
        upstreamCpuShare: (end.upstreamCpuMs - first.upstreamCpuMs) / spanMs,
        peakRss: rssPeak,
        endRss: rssNow,
        saturated: !starvedInWindow,
      };
      results.push(result);
      context.log(
        `health run ${runIndex}: ${result.rate.toFixed(0)} checks/s over ` +
          `${(spanMs / 1000).toFixed(1)} s from ${((first.at - startedAt) / 1000).toFixed(0)} s` +
          `${result.saturated ? "" : " (the worker ran out of work: a lower bound)"}; ` +
          `worker CPU ${(result.cpuShare * 100).toFixed(0)}% of a core, upstreams ` +
          `${(result.upstreamCpuShare * 100).toFixed(0)}%; RSS peak ` +
          `${(rssPeak / MB).toFixed(0)} MB, after the drain ${(rssNow / MB).toFixed(0)} MB; ` +
          `${feeder.appended} keys appended so far`,
      );
      if (verbose) context.log(`  checks per 5 s: ${perInterval(samples, startedAt, 5000)}`);
    }
    await sleep(3000);
    const rssEnd = rssNow;

    // Every proxy was checked, and exactly the hanging ones failed.
    const pipeline = redis.pipeline();
    for (const id of ids) pipeline.hmget(keys.proxyHealth(id), "checked_at", "failures");
    const replies = (await pipeline.exec()) ?? [];
    let checked = 0;
    let failing = 0;
    for (const [error, value] of replies) {
      if (error) throw error;
      const [checkedAt, failures] = value as [string | null, string | null];
      if (checkedAt !== null) checked += 1;
      if (Number(failures) > 0) failing += 1;
    }
    context.log(`health: ${checked} proxies checked, ${failing} failing (${hanging} hang)`);
    if (checked < ids.length) throw new Error(`only ${checked} of ${ids.length} proxies checked`);

    const single = await runSingleInstance(context, proxiesWanted, timeoutMs);

    const firstRun = results[0];
    const lastRun = results[results.length - 1];
    const conditions = `${ids.length} proxies, ${(100 / HANG_EVERY).toFixed(0)}% hang ` +
      `${timeoutMs / 1000} s, ${probes} probes`;
    return [
      {
        figure: `health: checks/s, one worker (${conditions})`,
        value: median(results.map((r) => r.rate)),
        unit: "/s",
        budget: { op: ">=", limit: CHECKS_PER_SECOND_BUDGET },
        runs: results.map((r) => r.rate),
      },
      {
        figure: "health: worker CPU while checking",
        value: median(results.map((r) => r.cpuShare * 100)),
        unit: "% core",
        runs: results.map((r) => r.cpuShare * 100),
      },
      ...single,
      {
        figure: "health: upstream side CPU (child + tinyproxies)",
        value: median(results.map((r) => r.upstreamCpuShare * 100)),
        unit: "% core",
        runs: results.map((r) => r.upstreamCpuShare * 100),
      },
      {
        figure: "health: proxies failing after the runs (the hanging ones)",
        value: failing,
        unit: `of ${ids.length}`,
      },
      {
        figure: "health: worker RSS idle before the first run",
        value: rssStart / MB,
        unit: "MB",
      },
      {
        figure: "health: worker RSS peak, per run",
        value: Math.max(...results.map((r) => r.peakRss)) / MB,
        unit: "MB",
        runs: results.map((r) => r.peakRss / MB),
      },
      {
        figure: "health: worker RSS growth, first run's peak to last run's",
        value: (lastRun.peakRss - firstRun.peakRss) / MB,
        unit: "MB",
        budget: { op: "<=", limit: RSS_GROWTH_BUDGET_MB },
      },
      {
        figure: "health: worker RSS idle after the last run",
        value: rssEnd / MB,
        unit: "MB",
      },
    ];
  } finally {
    for (const cleanup of cleanups.reverse()) {
      await cleanup().catch((error) => context.log(`health: cleanup failed: ${error}`));
    }
  }
}

interface SingleRun {
  /** New proxies judged a second between JUDGED_FROM and JUDGED_TO of them. */
  rate: number;
  /** From the upload's start until every new proxy was judged. */
  allJudgedMs: number;
  cpuShare: number;
  upstreamCpuShare: number;
}

/**
 * The single-instance shape, as `npm start` runs it: one control process of role `all` (api,
 * controller and worker on one event loop), every setting at its default, its checks asking
 * its own `/echo` (OCTOPROX_PUBLIC_URL is its own address). Each run starts a fresh process and
 * database, then uploads `count` new proxies through the admin API in one list, as a user does:
 * 95% behind ONE upstream (a tinyproxy), every twentieth on the proxy that hangs until the
 * check timeout. The upload asks for their first checks at once; the controller's periodic
 * re-checks come on top, as they do. A proxy is judged once its status leaves `initializing`.
 *
 * The rate is taken between the 10% and the 50% judged: a batch's verdicts are written when its
 * slowest check ends, so the batches holding a hung proxy (40% of ten-key batches) are judged
 * one check timeout after they began whatever the throughput, and the time to judge all of them
 * is a timeout plus the rest. The first half is what the throughput decides, and what a stall
 * (every batch slot waiting on a hung proxy) shows in.
 */
async function runSingleInstance(
  context: SuiteContext,
  count: number,
  timeoutMs: number,
): Promise<Row[]> {
  const upstreams = await startUpstreams();
  const runs: SingleRun[] = [];
  try {
    const upstream = upstreams.tinyproxies[0];
    const list = Array.from(
      { length: count },
      (_, i) =>
        i % HANG_EVERY === HANG_EVERY - 1
          ? `http://hang${i}:p@127.0.0.1:${upstreams.hang}`
          : `http://new${i}:p@127.0.0.1:${upstream}`,
    ).join("\n");
    for (let runIndex = 1; runIndex <= context.runs; runIndex++) {
      runs.push(await singleInstanceRun(context, runIndex, upstreams, list, count, timeoutMs));
    }
  } finally {
    await upstreams.close();
  }
  const conditions = `${count} new proxies uploaded, ${(100 / HANG_EVERY).toFixed(0)}% hang ` +
    `${timeoutMs / 1000} s, one upstream`;
  return [
    {
      figure: `health: new proxies judged/s, single instance (role all; ${conditions})`,
      value: median(runs.map((r) => r.rate)),
      unit: "/s",
      budget: { op: ">=", limit: SINGLE_JUDGED_PER_SECOND_BUDGET },
      runs: runs.map((r) => r.rate),
      detail: `${JUDGED_FROM * 100}% to ${JUDGED_TO * 100}% judged`,
    },
    {
      figure: "health: single instance, upload to every new proxy judged",
      value: median(runs.map((r) => r.allJudgedMs / 1000)),
      unit: "s",
      runs: runs.map((r) => r.allJudgedMs / 1000),
    },
    {
      figure: "health: single instance CPU while judging",
      value: median(runs.map((r) => r.cpuShare * 100)),
      unit: "% core",
      runs: runs.map((r) => r.cpuShare * 100),
    },
    {
      figure: "health: single instance's upstream side CPU (origin child + tinyproxy)",
      value: median(runs.map((r) => r.upstreamCpuShare * 100)),
      unit: "% core",
      runs: runs.map((r) => r.upstreamCpuShare * 100),
    },
  ];
}

async function singleInstanceRun(
  context: SuiteContext,
  runIndex: number,
  upstreams: Upstreams,
  list: string,
  count: number,
  timeoutMs: number,
): Promise<SingleRun> {
  const cluster = await Cluster.create({ defaults: true });
  try {
    const all = await cluster.start("all");
    const pid = all.child.pid!;
    const { projectId, connectorId } = await cluster.createConnector();
    const token = await cluster.token();
    const samples: { at: number; judged: number; cpuMs: number; upstreamCpuMs: number }[] = [];
    const sample = async () => {
      const [row] = await cluster.sql`
        select count(*)::int as judged from proxies where status <> 'initializing'`;
      samples.push({
        at: Date.now(),
        judged: row.judged as number,
        cpuMs: (await cpuMillis(pid)) ?? 0,
        upstreamCpuMs: await cpuMillisOf(upstreams.allPids),
      });
    };
    await sample();
    const startedAt = Date.now();
    const response = await fetch(
      `${cluster.apiUrl}/api/v1/projects/${projectId}/proxies/upload?connector_id=${connectorId}`,
      {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "text/plain" },
        body: list,
      },
    );
    const report = await response.json() as { added?: number };
    if (response.status !== 200 || report.added !== count) {
      throw new Error(`upload answered ${response.status}: ${JSON.stringify(report)}`);
    }
    const deadline = startedAt + 4 * timeoutMs + 5 * 60_000;
    while (samples[samples.length - 1].judged < count) {
      await sleep(TICK_MS);
      if (!all.alive()) throw new Error(`the process exited:\n${all.stderr.slice(-20).join("\n")}`);
      if (Date.now() > deadline) {
        throw new Error(`${samples[samples.length - 1].judged} of ${count} judged by the deadline`);
      }
      await sample();
    }
    const at = (share: number) => samples.find((s) => s.judged >= share * count)!;
    const [from, to] = [at(JUDGED_FROM), at(JUDGED_TO)];
    const spanMs = to.at - from.at;
    const last = samples[samples.length - 1];
    const result: SingleRun = {
      rate: ((to.judged - from.judged) / spanMs) * 1000,
      allJudgedMs: last.at - startedAt,
      cpuShare: (to.cpuMs - from.cpuMs) / spanMs,
      upstreamCpuShare: (to.upstreamCpuMs - from.upstreamCpuMs) / spanMs,
    };
    context.log(
      `health single instance run ${runIndex}: ${result.rate.toFixed(0)} judged/s from ` +
        `${((from.at - startedAt) / 1000).toFixed(1)} s to ${
          ((to.at - startedAt) / 1000).toFixed(1)
        } s; ` +
        `all ${count} judged after ${(result.allJudgedMs / 1000).toFixed(1)} s; process CPU ` +
        `${(result.cpuShare * 100).toFixed(0)}% of a core, upstreams ` +
        `${(result.upstreamCpuShare * 100).toFixed(0)}%`,
    );
    if (process.env.BENCH_VERBOSE === "1") {
      context.log(
        `  judged, about once a second: ${
          samples.filter((_, i) => i % 4 === 0).map((s) => s.judged).join(" ")
        }`,
      );
    }
    return result;
  } catch (error) {
    cluster.dump();
    throw error;
  } finally {
    await cluster.close();
  }
}

/**
 * One project and static connector with `count` proxy rows on the upstreams: every
 * `hangEvery`th (0: none) on the proxy that never answers, the rest shared by the two tinyproxy
 * instances and the passing fault proxy (SOCKS5), each row with a login of its own.
 */
export async function insertHealthProxies(
  sql: postgres.Sql,
  upstreams: Upstreams,
  count: number,
  hangEvery: number,
): Promise<{ ids: string[]; hanging: number }> {
  const [project] = await sql`
    insert into projects (name, username, password)
    values ('bench', 'bench', 'bench-password') returning id`;
  const [connector] = await sql`
    insert into connectors (project_id, name, kind, provider)
    values (${project.id}, 'bench-static', 'static', 'static') returning id`;
  const passing = [
    { scheme: "http", port: upstreams.tinyproxies[0] },
    { scheme: "http", port: upstreams.tinyproxies[1] },
    { scheme: "socks5", port: upstreams.pass },
  ];
  const rows = Array.from({ length: count }, (_, i) => {
    const hangs = hangEvery > 0 && i % hangEvery === hangEvery - 1;
    const target = hangs ? { scheme: "http", port: upstreams.hang } : passing[i % 3];
    return {
      project_id: project.id as string,
      connector_id: connector.id as string,
      scheme: target.scheme,
      host: "127.0.0.1",
      port: target.port,
      username: `bench-${i}`,
      password: "bench",
      status: "healthy",
    };
  });
  const ids: string[] = [];
  for (let start = 0; start < rows.length; start += 1000) {
    const inserted = await sql`insert into proxies ${
      sql(rows.slice(start, start + 1000))
    } returning id`;
    ids.push(...inserted.map((r) => r.id as string));
  }
  return { ids, hanging: rows.filter((r) => r.port === upstreams.hang).length };
}

/** The stream's length and the group's pending count. */
export async function streamDepth(redis: Redis, stream: string): Promise<[number, number]> {
  const replies = (await redis.pipeline().xlen(stream).xinfo("GROUPS", stream).exec()) ?? [];
  const [lengthError, length] = replies[0] ?? [];
  if (lengthError) throw lengthError;
  let pending = 0;
  const [groupsError, groups] = replies[1] ?? [];
  if (!groupsError && Array.isArray(groups)) {
    for (const group of groups as unknown[][]) {
      const info = new Map<string, unknown>();
      for (let i = 0; i + 1 < group.length; i += 2) info.set(String(group[i]), group[i + 1]);
      if (info.get("name") === WORKERS_GROUP) pending = Number(info.get("pending") ?? 0);
    }
  }
  return [Number(length), pending];
}

/** Completions per interval from the start, for a look at the worker's rhythm. */
function perInterval(samples: readonly Sample[], from: number, intervalMs: number): string {
  const counts: number[] = [];
  let previous = 0;
  for (const sample of samples) {
    const index = Math.floor((sample.at - from) / intervalMs);
    counts[index] = (counts[index] ?? 0) + sample.completed - previous;
    previous = sample.completed;
  }
  return Array.from(counts, (count) => count ?? 0).join(" ");
}

export const healthSuite: Suite = {
  name: "health",
  description: "one worker checking 10,000 proxies, 5% hanging until the check timeout",
  run,
};
