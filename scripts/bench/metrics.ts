/**
 * Suite `metrics`: the metrics pipeline's budgets.
 *
 * - Flush: 100,000 proxy windows plus 10,000 host windows (and their 100 connectors' and 10
 *   projects' windows), written to Redis by the gateway's own metering, taken and committed by
 *   one metrics flush in a worker-shaped process of its own (metrics-flush-child.ts). Budget:
 *   within 10 s of that process's wall time. Its peak resident memory is shown beside the
 *   memory it had before the flush: bounded, since windows are read back in pages of 1,000.
 * - Usage read: one project's last 24 hours in minute buckets (1,440 points) through the api
 *   (the Hono app in this process, a viewer's token, real Postgres and Redis), with 100
 *   projects' minute history in the table. Budget: the p99 of 50 reads within 100 ms.
 *
 * Overrides (environment): BENCH_FLUSH_PROXIES, BENCH_FLUSH_HOSTS.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { createDatabase } from "../../db/client.ts";
import { migrate } from "../../db/migrate.ts";
import { RequestMetering } from "../../gateway/metering/metering.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import { startHarness } from "../../testkit/api-harness.ts";
import { registerScript } from "../../shared/lua/loader.ts";
import {
  createTestDatabase,
  deletePrefix,
  TEST_REDIS_URL,
  testPrefix,
} from "../../testkit/stores.ts";
import { envPositive, MB, median, type Row, type Suite, type SuiteContext } from "./suite.ts";

const run = promisify(execFile);
const CHILD = fileURLToPath(new URL("./metrics-flush-child.ts", import.meta.url));
const TSX = fileURLToPath(new URL("../../node_modules/.bin/tsx", import.meta.url));

const FLUSH_BUDGET_MS = 10_000;
const READ_BUDGET_MS = 100;
const PROJECTS = 10;
const READS = 50;

interface ChildResult {
  outcome: { result: string; windows: number };
  wallMs: number;
  cpuMs: number;
  rssBefore: number;
  maxRss: number;
}

async function flushFigures(context: SuiteContext): Promise<Row[]> {
  const proxyCount = envPositive("BENCH_FLUSH_PROXIES", true) ?? 100_000;
  const hostCount = envPositive("BENCH_FLUSH_HOSTS", true) ?? 10_000;
  const connectorsPerProject = 10;
  const connectors = PROJECTS * connectorsPerProject;
  const proxiesPerConnector = Math.ceil(proxyCount / connectors);
  const hostsPerConnector = Math.ceil(hostCount / connectors);
  const database = await createTestDatabase();
  const prefix = testPrefix();
  const keys = redisKeys(prefix);
  const redis = new Redis(TEST_REDIS_URL);
  const db = createDatabase(database.url, { poolSize: 2 });
  try {
    await migrate(database.url);
    context.log(`metrics: ${PROJECTS} projects, ${connectors} connectors, ${proxyCount} proxies`);
    const layout: { projectId: string; connectorId: string; proxyIds: string[] }[] = [];
    for (let p = 0; p < PROJECTS; p++) {
      const projectId = randomUUID();
      await db.sql`insert into projects (id, name, username, password)
        values (${projectId}, ${`bench ${p}`}, ${`bench${p}`}, 'password-1')`;
      for (let c = 0; c < connectorsPerProject; c++) {
        const connectorId = randomUUID();
        await db.sql`insert into connectors (id, project_id, name, kind)
          values (${connectorId}, ${projectId}, ${`c${c}`}, 'static')`;
        const proxyIds = Array.from({ length: proxiesPerConnector }, () => randomUUID());
        await db.sql`insert into proxies (id, project_id, connector_id, scheme, host, port,
            status)
          select id, ${projectId}, ${connectorId}, 'http', 'h' || n, 3128, 'healthy'
          from unnest(${proxyIds}::uuid[]) with ordinality as u(id, n)`;
        layout.push({ projectId, connectorId, proxyIds });
      }
    }
    const script = await registerScript(
      "metering_apply",
      readFileSync(new URL("../../shared/lua/metering_apply.lua", import.meta.url), "utf8"),
    );
    const results: ChildResult[] = [];
    for (let r = 1; r <= context.runs; r++) {
      // The windows a minute of traffic leaves: one transfer per proxy, hosts spread.
      const metering = new RequestMetering({
        redis,
        keys,
        script,
        instance: "bench",
        intervalMs: 3_600_000,
      });
      let i = 0;
      for (const { projectId, connectorId, proxyIds } of layout) {
        for (const [n, proxyId] of proxyIds.entries()) {
          const meter = metering.begin({
            kind: "connect",
            client: { projectId, options: { user: "u" } },
            target: { host: `host${n % hostsPerConnector}.example`, port: 443 },
            upstream: {
              proxyId,
              connectorId,
              scheme: "http",
              host: "10.0.0.1",
              port: 3128,
              username: null,
              password: null,
            },
            latencyMs: 12.5,
          });
          meter?.bytes(100 + (i % 50), 5_000 + (i % 700));
          meter?.finish({ ok: i % 20 !== 0, latencyMs: 12.5 });
          i++;
        }
      }
      if (!(await metering.publishNow())) throw new Error("metering did not publish");
      await metering.close();
      const windows = await redis.scard(keys.metricIndex("proxy")) +
        await redis.scard(keys.metricIndex("host"));
      const { stdout } = await run(
        TSX,
        [CHILD, database.url, TEST_REDIS_URL, prefix, `${Date.now()}-${r}`],
        { maxBuffer: 1024 * 1024 },
      );
      const result = JSON.parse(stdout.trim().split("\n").at(-1)!) as ChildResult;
      if (result.outcome.result !== "committed") {
        throw new Error(`flush ended ${result.outcome.result}`);
      }
      results.push(result);
      context.log(
        `metrics flush run ${r}: ${result.outcome.windows} windows (${windows} proxy and host) ` +
          `in ${(result.wallMs / 1000).toFixed(2)} s, CPU ${(result.cpuMs / 1000).toFixed(2)} s, ` +
          `RSS ${(result.rssBefore / MB).toFixed(0)} -> peak ${(result.maxRss / MB).toFixed(0)} MB`,
      );
    }
    const seconds = results.map((r) => r.wallMs / 1000);
    return [
      {
        figure: `metrics flush: ${proxyCount} proxy + ${hostCount} host windows, one worker`,
        value: median(seconds),
        unit: "s",
        budget: { op: "<=", limit: FLUSH_BUDGET_MS / 1000 },
        runs: seconds,
        detail: `CPU ${median(results.map((r) => r.cpuMs / 1000)).toFixed(2)} s`,
      },
      {
        figure: "metrics flush: worker peak RSS (before the flush)",
        value: median(results.map((r) => r.maxRss / MB)),
        unit: "MB",
        runs: results.map((r) => r.maxRss / MB),
        detail: `${median(results.map((r) => r.rssBefore / MB)).toFixed(0)} MB before`,
      },
    ];
  } finally {
    redis.disconnect();
    await db.close();
    await deletePrefix(TEST_REDIS_URL, prefix).catch(() => {});
    await database.drop();
  }
}

async function readFigures(context: SuiteContext): Promise<Row[]> {
  const h = await startHarness();
  try {
    const sql = h.deps.database.sql;
    const ids = Array.from({ length: 100 }, () => randomUUID());
    await sql`insert into projects (id, name, username, password)
      select id, 'read ' || n, 'read' || n, 'password-1'
      from unnest(${ids}::uuid[]) with ordinality as u(id, n)`;
    const end = Math.floor(Date.now() / 60_000) * 60_000;
    // A day of minute rows for every project: 144,000 rows in project_metrics.
    await sql`insert into project_metrics (project_id, bucket_start, bucket_seconds, requests,
        successes, failures, bytes_sent, bytes_received, latency_sum_ms)
      select p, to_timestamp(${end / 1000} - m * 60), 60, 1000 + m, 990, 10, 100000, 5000000,
        12345.5
      from unnest(${ids}::uuid[]) as u(p), generate_series(1, 1440) as m`;
    await sql`analyze project_metrics`;
    const path = `/api/v1/projects/${ids[0]}/metrics/history?range=24h`;
    const p99s: number[] = [];
    const medians: number[] = [];
    for (let r = 1; r <= context.runs; r++) {
      const times: number[] = [];
      for (let i = 0; i < READS + 5; i++) {
        const started = performance.now();
        const answer = await h.request("GET", path, { token: h.tokens.viewer });
        const ms = performance.now() - started;
        if (answer.status !== 200 || answer.body.points.length < 1440) {
          throw new Error(`usage read answered ${answer.status}`);
        }
        if (i >= 5) times.push(ms); // the first reads warm the code and the plan cache
      }
      times.sort((a, b) => a - b);
      const p99 = times[Math.ceil(times.length * 0.99) - 1];
      p99s.push(p99);
      medians.push(median(times));
      context.log(
        `usage read run ${r}: median ${median(times).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms`,
      );
    }
    return [{
      figure: "usage read: one project's 24 h in minute buckets (p99 of 50)",
      value: median(p99s),
      unit: "ms",
      budget: { op: "<=", limit: READ_BUDGET_MS },
      runs: p99s,
      detail: `median ${median(medians).toFixed(1)} ms`,
    }];
  } finally {
    await h.close();
  }
}

export const metricsSuite: Suite = {
  name: "metrics",
  description: "metrics flush of 100,000 proxy and 10,000 host windows; a 24 h usage read",
  async run(context) {
    return [...await flushFigures(context), ...await readFigures(context)];
  },
};
