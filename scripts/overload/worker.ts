/**
 * Overload of a worker: a health backlog of 100,000 keys (--keys) appended at once, as a
 * producer would after an outage, to one real worker process (control/main.ts, role worker,
 * health jobs only, 1% of its proxies hanging until the check timeout of 5 s, its heartbeat at its default 5 s). Watched every 500 ms until the stream is empty: its resident memory, its heartbeat
 * (the age of its snapshot key, read off the key's TTL), the entries it holds (pending) and
 * whether any of them went idle past the claim timeout (a lease lost: another worker would take
 * it). Then every key must have run to its end in a batch, none given up:
 * nothing lost (the worker's own counts, /metrics).
 */
import { appendWork } from "../../control/core/work-streams.ts";
import { WORKERS_GROUP } from "../../shared/redis-keys.ts";
import { startControl, waitForReady } from "../../testkit/processes.ts";
import { startHealthBed, streamDepth } from "../bench/health.ts";
import { formatNumber, type Row } from "../bench/suite.ts";
import { seriesValue } from "../../testkit/promtool.ts";
import { sleep } from "../../shared/async/sleep.ts";
import type { OverloadContext } from "./context.ts";
import { watchProcess, watchRows } from "../bench/process-watch.ts";

const HANG_EVERY = 100; // 1%
const CHECK_TIMEOUT_S = 5;
/** The default beat: its keys live three beats. */
const HEARTBEAT_S = 5;
/** The default claim timeout: an entry held longer without a touch is taken by another worker. */
const CLAIM_TIMEOUT_MS = 60_000;
/** The worker reads at most its batches in flight; 100,000 keys waiting in Redis cost it nothing. */
const RSS_BOUND_MB = 400;
/**
 * A beat at most one interval late (its Postgres check may hold it 2 s): later, the worker is
 * starved; at three intervals its keys expire and it leaves the System page.
 */
const HEARTBEAT_AGE_BOUND_MS = 2 * HEARTBEAT_S * 1000;
/** The health bench's floor with 5% hanging (npm run bench -- health): with 1%, at least that. */
const DRAIN_RATE_BOUND = 150;
/** A run that has not drained by then has failed whatever its rate. */
const DRAIN_DEADLINE_MS = 20 * 60_000;

export async function overloadWorker(context: OverloadContext): Promise<Row[]> {
  const count = context.healthKeys;
  const cleanups: (() => Promise<void>)[] = [];
  try {
    const { upstreams, database, sql, ids, hanging, prefix, keys, stream, redis } =
      await startHealthBed(count, HANG_EVERY, cleanups);
    context.log(`worker: ${ids.length} proxies (${hanging} hang ${CHECK_TIMEOUT_S} s)`);
    const instance = `overload-worker-${process.pid}`;
    const worker = await startControl({
      databaseUrl: database.url,
      prefix,
      role: "worker",
      instance,
      extra: {
        OCTOPROX_WORKER_JOBS: "health",
        OCTOPROX_ECHO_URL: `http://127.0.0.1:${upstreams.origin}/echo`,
        OCTOPROX_HEARTBEAT_INTERVAL: String(HEARTBEAT_S),
        OCTOPROX_HEALTH_CHECK_TIMEOUT: String(CHECK_TIMEOUT_S),
        OCTOPROX_CLAIM_TIMEOUT: String(CLAIM_TIMEOUT_MS / 1000),
      },
    });
    cleanups.push(async () => {
      await worker.stop("SIGTERM", 30_000);
    });
    await waitForReady(worker);
    const watch = await watchProcess(worker.child.pid!, { liveUrl: `${worker.url}/live` });

    const appendStartedMs = performance.now();
    await appendWork(redis, stream, ids.map((key) => ({ key })));
    const appendMs = performance.now() - appendStartedMs;
    context.log(`worker: ${ids.length} keys appended in ${appendMs.toFixed(0)} ms`);
    const startedMs = performance.now();
    let maxHeartbeatAgeMs = 0;
    /** Seconds into the drain at which the heartbeat key was gone (expired: beats missed). */
    const missedAtS: number[] = [];
    let maxPending = 0;
    let maxLength = 0;
    let overdue = 0;
    let lastLog = startedMs;
    for (;;) {
      await sleep(500);
      if (watch.died) throw new Error(`worker exited:\n${worker.stderr.slice(-20).join("\n")}`);
      const [length, pending] = await streamDepth(redis, stream);
      maxLength = Math.max(maxLength, length);
      maxPending = Math.max(maxPending, pending);
      const ttl = await redis.pttl(keys.instanceSnapshot(instance));
      // The keys live three beats from the last: what is gone of that is the beat's age.
      if (ttl < 0) missedAtS.push(Math.round((performance.now() - startedMs) / 1000));
      else maxHeartbeatAgeMs = Math.max(maxHeartbeatAgeMs, 3 * HEARTBEAT_S * 1000 - ttl);
      const late = (await redis.xpending(
        stream,
        WORKERS_GROUP,
        "IDLE",
        CLAIM_TIMEOUT_MS,
        "-",
        "+",
        10,
      )) as unknown[];
      overdue = Math.max(overdue, late.length);
      if (performance.now() - lastLog > 10_000) {
        lastLog = performance.now();
        context.log(
          `worker: ${length} entries left (${pending} held), ${
            ((ids.length - length) / ((lastLog - startedMs) / 1000)).toFixed(0)
          } checks/s so far, RSS ${watch.rssMb.last.toFixed(0)} MB`,
        );
      }
      if (length === 0) break;
      if (performance.now() - startedMs > DRAIN_DEADLINE_MS) {
        throw new Error(
          `the backlog did not drain in ${DRAIN_DEADLINE_MS / 60_000} min: ${length} left`,
        );
      }
    }
    const drainMs = performance.now() - startedMs;
    await watch.stop();

    // Nothing lost: every key ran in a batch to its end, none was given up.
    const metrics = await (await fetch(`${worker.url}/metrics`, {
      signal: AbortSignal.timeout(10_000),
    })).text();
    const figure = (name: string) => seriesValue(metrics, `${name}{kind="health"}`) ?? 0;
    const keysDone = figure("octoprox_job_keys_total");
    const givenUp = figure("octoprox_job_entries_given_up_total");
    const batchFailures = figure("octoprox_job_batch_failures_total");
    const pipeline = redis.pipeline();
    for (const id of ids) pipeline.hmget(keys.proxyHealth(id), "checked_at", "error");
    const replies = (await pipeline.exec()) ?? [];
    const unrecorded = replies.filter(([error, value]) =>
      error !== null || (value as (string | null)[])[0] === null
    ).length;
    // Why checks failed, the most common first (the hanging proxies' timeouts among them).
    const reasons = new Map<string, number>();
    for (const [, value] of replies) {
      const reason = (value as (string | null)[] | null)?.[1];
      if (reason) reasons.set(reason.slice(0, 80), (reasons.get(reason.slice(0, 80)) ?? 0) + 1);
    }
    const topReasons = [...reasons].sort((a, b) => b[1] - a[1]).slice(0, 3)
      .map(([reason, n]) => `${n} x ${reason}`).join("; ");
    const [moved] = await sql<{ n: number }[]>`
      select count(*)::int as n from proxies where status <> 'healthy'`;
    context.log(
      `worker: drained in ${(drainMs / 1000).toFixed(1)} s; ${keysDone} keys run, ${givenUp} ` +
        `given up, ${batchFailures} batch failures; ${unrecorded} checks not recorded; ` +
        `${moved.n} moved off healthy (${hanging} hang)`,
    );

    return [
      {
        figure: `worker: backlog of ${formatNumber(ids.length, 0)} health keys, drain rate`,
        value: (ids.length / drainMs) * 1000,
        unit: "/s",
        budget: { op: ">=", limit: DRAIN_RATE_BOUND },
        detail:
          `drained in ${
            formatNumber(drainMs / 1000, 1)
          } s; ${hanging} proxies hang ${CHECK_TIMEOUT_S} s; ` +
          `appended in ${formatNumber(appendMs, 0)} ms; stream ${maxLength} entries at most`,
      },
      ...watchRows(watch, {
        process: "worker",
        during: "with the backlog",
        after: `after the drain; ${maxPending} entries held at most`,
      }, RSS_BOUND_MB),
      {
        figure: `worker: heartbeat age at most (a beat every ${HEARTBEAT_S} s)`,
        value: maxHeartbeatAgeMs,
        unit: "ms",
        digits: 0,
        budget: { op: "<=", limit: HEARTBEAT_AGE_BOUND_MS },
        detail: missedAtS.length === 0
          ? "its keys never expired"
          : `its keys were gone (three beats missed) at ${
            missedAtS.slice(0, 10).join(", ")
          } s into the drain`,
      },
      {
        figure: "worker: readings with its heartbeat keys gone",
        value: missedAtS.length,
        unit: "",
        budget: { op: "<=", limit: 0 },
      },
      {
        figure: "worker: entries held past the claim timeout (a lease lost)",
        value: overdue,
        unit: "",
        budget: { op: "<=", limit: 0 },
      },
      {
        figure: "worker: proxies moved off healthy (information: checks failing under load)",
        value: moved.n,
        unit: `of ${ids.length}`,
        detail: `${hanging} hang for good; last errors: ${topReasons || "none"}`,
      },
      {
        figure: "worker: keys run to their end (nothing lost)",
        value: keysDone,
        unit: `of ${ids.length}`,
        budget: { op: ">=", limit: ids.length },
        detail: `${givenUp} entries given up, ${batchFailures} batch failures (retried)`,
      },
      {
        figure: "worker: entries given up after their last delivery",
        value: givenUp,
        unit: "",
        budget: { op: "<=", limit: 0 },
      },
      {
        figure: "worker: checks not recorded (information)",
        value: unrecorded,
        unit: `of ${ids.length}`,
        detail: "failed checks of the echo while the echo itself was judged down are not " +
          "counted, by design (an echo outage marks nobody down)",
      },
    ];
  } finally {
    for (const cleanup of cleanups.reverse()) {
      await cleanup().catch((error) => context.log(`worker: cleanup failed: ${error}`));
    }
  }
}
