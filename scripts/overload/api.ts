/**
 * Overload of the api: one api process (role api, its own database and Redis prefix) takes a
 * burst of writes (proxy creates, one request each, and list uploads) and then a burst of usage
 * reads (the project's usage, its history and its per-proxy usage), each far more at once than
 * its database pool serves (OCTOPROX_DATABASE_POOL_SIZE, 10). Answers must be 2xx, or a clean
 * 429 or 503 (with a JSON error) if any: never a 500, a reset, or a timeout. Its RSS and /live
 * are watched, and once the bursts end a plain read must come back within its normal latency.
 */
import { randomBytes } from "node:crypto";
import { Cluster } from "../../testkit/cluster.ts";
import { formatNumber, median, percentile, type Row } from "../bench/suite.ts";
import { sleep } from "../../shared/async/sleep.ts";
import type { OverloadContext } from "./context.ts";
import { watchProcess, watchRows } from "../bench/process-watch.ts";

/** Requests in flight at once: ten times the database pool. */
const CONCURRENCY = 100;
const CREATES = 2_000;
const UPLOADS = 40;
const UPLOAD_LINES = 500;
const READS = 3_000;
/** Idle near 150 MB; a burst holds at most CONCURRENCY bodies of 20 KB and their rows. */
const RSS_BOUND_MB = 600;
/** Bursts queue on the pool: 100 waiting for 10 connections, a few ms each, with room. */
const P99_BOUND_MS = 5_000;
/** Once the burst is over nothing is left queued: the next read is normal again at once. */
const RECOVERY_BOUND_MS = 5_000;

interface Burst {
  statuses: Record<string, number>;
  latencies: number[];
  elapsedMs: number;
}

async function burst(
  total: number,
  send: (index: number) => Promise<{ status: number; body: unknown }>,
): Promise<Burst> {
  const statuses: Record<string, number> = {};
  const latencies: number[] = [];
  let next = 0;
  const startedMs = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < total) {
      const index = next++;
      const sentMs = performance.now();
      let label: string;
      try {
        const answer = await send(index);
        label = String(answer.status);
        // A refusal under load must be a clean one: an error body, not a page or a trace.
        if (
          (answer.status === 429 || answer.status === 503) &&
          typeof (answer.body as { error?: unknown })?.error !== "string"
        ) label = `${answer.status} without an error body`;
      } catch (error) {
        label = error instanceof Error ? error.name : "failed";
      }
      latencies.push(performance.now() - sentMs);
      statuses[label] = (statuses[label] ?? 0) + 1;
    }
  }));
  return { statuses, latencies, elapsedMs: performance.now() - startedMs };
}

function unclean(statuses: Record<string, number>): number {
  return Object.entries(statuses)
    .filter(([status]) => !/^(2\d\d|429|503)$/.test(status))
    .reduce((sum, [, n]) => sum + n, 0);
}

export async function overloadApi(context: OverloadContext): Promise<Row[]> {
  const cluster = await Cluster.create();
  try {
    const api = await cluster.start("api");
    const { projectId, connectorId } = await cluster.createConnector();
    const read = () => cluster.request("GET", `/api/v1/projects/${projectId}`);
    const normal: number[] = [];
    for (let i = 0; i < 20; i++) {
      const startedMs = performance.now();
      if ((await read()).status !== 200) throw new Error("a read before the burst failed");
      normal.push(performance.now() - startedMs);
    }
    const normalMs = median(normal);
    const watch = await watchProcess(api.child.pid!, { liveUrl: `${api.url}/live` });

    const tag = randomBytes(3).toString("hex");
    const writes = await burst(CREATES + UPLOADS, (index) => {
      if (
        index % Math.ceil(CREATES / UPLOADS) === 0 && index / Math.ceil(CREATES / UPLOADS) < UPLOADS
      ) {
        return uploadList(cluster, projectId, connectorId, index, tag);
      }
      return cluster.request("POST", `/api/v1/projects/${projectId}/proxies`, {
        connector_id: connectorId,
        url: `http://u${tag}${index}:p@127.0.0.1:${10_000 + (index % 50_000)}`,
      });
    });
    context.log(
      `api: writes ${JSON.stringify(writes.statuses)} in ${writes.elapsedMs.toFixed(0)} ms`,
    );
    const paths = [
      `/api/v1/projects/${projectId}/metrics?range=30d`,
      `/api/v1/projects/${projectId}/metrics/history?range=7d`,
      `/api/v1/projects/${projectId}/metrics/proxies?range=24h`,
      `/api/v1/projects/${projectId}/metrics/connectors`,
    ];
    const reads = await burst(
      READS,
      (index) => cluster.request("GET", paths[index % paths.length]),
    );
    context.log(
      `api: usage reads ${JSON.stringify(reads.statuses)} in ${reads.elapsedMs.toFixed(0)} ms`,
    );
    const endedMs = performance.now();
    let recoveryMs = Number.NaN;
    while (performance.now() - endedMs < 30_000) {
      const startedMs = performance.now();
      const answer = await read().catch(() => undefined);
      if (
        answer?.status === 200 &&
        performance.now() - startedMs <= Math.max(3 * normalMs, normalMs + 50)
      ) {
        recoveryMs = performance.now() - endedMs;
        break;
      }
      await sleep(100);
    }
    await watch.stop();
    const [stored] = await cluster.sql<{ n: number }[]>`
      select count(*)::int as n from proxies where connector_id = ${connectorId}`;
    const created = (writes.statuses["201"] ?? 0) + UPLOADS * UPLOAD_LINES;

    const rows: Row[] = [];
    for (
      const [name, figures, count] of [["writes", writes, CREATES + UPLOADS], [
        "usage reads",
        reads,
        READS,
      ]] as const
    ) {
      rows.push(
        {
          figure: `api: ${name}, ${count} with ${CONCURRENCY} at once`,
          value: (count / figures.elapsedMs) * 1000,
          unit: "/s",
          detail: `statuses ${JSON.stringify(figures.statuses)}; p50 ${
            formatNumber(percentile(figures.latencies, 0.5))
          } ms`,
        },
        {
          figure: `api: ${name}, answers other than 2xx or a clean 429/503`,
          value: unclean(figures.statuses),
          unit: `of ${count}`,
          budget: { op: "<=", limit: 0 },
        },
        {
          figure: `api: ${name}, p99 latency`,
          value: percentile(figures.latencies, 0.99),
          unit: "ms",
          budget: { op: "<=", limit: P99_BOUND_MS },
        },
      );
    }
    rows.push(
      {
        figure: "api: proxies stored as answered (creates answered 201 plus uploaded lines)",
        value: stored.n,
        unit: `of ${created}`,
        budget: { op: ">=", limit: created },
      },
      ...watchRows(watch, { process: "api", during: "during the bursts" }, RSS_BOUND_MB),
      {
        figure: "api: time to a normal read after the bursts",
        value: recoveryMs,
        unit: "ms",
        budget: { op: "<=", limit: RECOVERY_BOUND_MS },
        detail: `normal ${formatNumber(normalMs)} ms (median of 20 before)`,
      },
    );
    return rows;
  } finally {
    await cluster.close();
  }
}

/** One upload of UPLOAD_LINES new proxies, as text/plain. */
async function uploadList(
  cluster: Cluster,
  projectId: string,
  connectorId: string,
  index: number,
  tag: string,
): Promise<{ status: number; body: unknown }> {
  const lines = Array.from(
    { length: UPLOAD_LINES },
    (_, i) => `http://up${tag}x${index}x${i}:p@127.0.0.1:${20_000 + i}`,
  ).join("\n");
  const token = await cluster.token();
  const response = await fetch(
    `${cluster.apiUrl}/api/v1/projects/${projectId}/proxies/upload?connector_id=${connectorId}`,
    {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "text/plain" },
      body: lines,
      signal: AbortSignal.timeout(30_000),
    },
  );
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON: kept as text.
  }
  return { status: response.status, body };
}
