/**
 * Suite `extract`: exclusive extraction's throughput. Budget: at least 2,000 extractions a
 * second of `count` 1 from a pool of 100,000, through ONE api process.
 *
 * One real api process (`control/main.ts`, role api, production settings) on a fresh database
 * and Redis prefix; a project with one provider-API connector (reserve 0) whose pool this
 * process fills to 100,000 checked stock entries through the real pool store (and tops up to
 * 100,000 before every run); a distribution key. Each run is proxy-loadgen's `extract`
 * scenario in a child process of its own: BENCH_EXTRACT_CONCURRENCY keep-alive connections
 * (32) POSTing `{"count": 1}` with the key for BENCH_EXTRACT_SECONDS (5), as fast as answered.
 * The api's CPU per extraction is its CPU time over the run's window (from /proc) divided by the
 * extractions answered.
 *
 * Side by side, the same Lua script (shared/lua/extract.lua) with the same keys and arguments
 * as the api builds them (extractScriptCall), called by EVALSHA from this process over one
 * ioredis client, BENCH_EXTRACT_CONCURRENCY calls in flight, for as long (or until it has taken
 * half the pool, so it never runs it dry): what Redis itself
 * allows one client, so the ratio says how much of it the api's HTTP, JSON, authentication and
 * credential opening leave.
 *
 * Overrides (environment): BENCH_EXTRACT_SECONDS, BENCH_EXTRACT_CONCURRENCY, BENCH_EXTRACT_POOL.
 */
import { randomBytes, randomUUID } from "node:crypto";
import postgres from "postgres";
import {
  type ExtractRequest,
  extractScriptCall,
} from "../../control/provider-api/extraction/service.ts";
import type { NewPoolProxy } from "../../control/provider-api/pool/contract.ts";
import { CredentialSealer } from "../../control/provider-api/pool/credentials.ts";
import { RedisPoolStore } from "../../control/provider-api/pool/store.ts";
import { createRedis } from "../../control/core/redis.ts";
import { runScript } from "../../control/core/scripts.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import { startControl, waitForReady } from "../../testkit/processes.ts";
import {
  createTestDatabase,
  deletePrefix,
  TEST_REDIS_URL,
  testPrefix,
} from "../../testkit/stores.ts";
import { runLoadInChild } from "../loadgen/child.ts";
import { Scenario } from "../loadgen/options.ts";
import {
  cpuMillis,
  envPositive,
  median,
  type Row,
  type Suite,
  type SuiteContext,
} from "./suite.ts";

const BUDGET_PER_SECOND = 2000;
const ADD_BATCH = 5000;
const TTL_MS = 3_600_000;

const REQUEST: ExtractRequest = {
  count: 1,
  protocol: null,
  country: null,
  carrier: null,
  connectors: null,
  mode: "partial",
  minRemainingTtlSeconds: 0,
  maxHealthCheckAgeSeconds: null,
  leaseSeconds: 300,
};

let serial = 0;

/** Tops the connector's stock up to `size` checked entries. */
async function topUp(
  store: RedisPoolStore,
  connector: { id: string; projectId: string },
  size: number,
): Promise<void> {
  const { stock } = await store.counts(connector.id);
  let missing = size - stock;
  while (missing > 0) {
    const nowMs = Date.now();
    const proxies: NewPoolProxy[] = [];
    for (let i = 0; i < Math.min(ADD_BATCH, missing); i++) {
      serial += 1;
      const host = `10.${(serial >> 16) & 255}.${(serial >> 8) & 255}.${serial & 255}`;
      const port = 1024 + Math.floor(serial / 16_777_216);
      proxies.push({
        key: `http|${host}|${port}|u${serial}`,
        scheme: "http",
        host,
        port,
        username: `u${serial}`,
        password: `p-${serial}`,
        country: "DE",
        expiresAtMs: nowMs + TTL_MS,
        usableUntilMs: nowMs + TTL_MS - 10_000,
      });
    }
    const added = await store.add(connector, proxies, { nowMs, maxSize: 10_000_000 });
    await store.markChecked(connector, added.ids.map((id) => ({ id, passed: true })), {
      nowMs,
      reserve: 0,
    });
    missing -= added.added;
  }
}

async function run(context: SuiteContext): Promise<Row[]> {
  const seconds = envPositive("BENCH_EXTRACT_SECONDS") ?? 5;
  const concurrency = envPositive("BENCH_EXTRACT_CONCURRENCY", true) ?? 32;
  const poolSize = envPositive("BENCH_EXTRACT_POOL", true) ?? 100_000;
  const database = await createTestDatabase();
  const prefix = testPrefix();
  const keys = redisKeys(prefix);
  const secret = randomBytes(32).toString("hex");
  const password = `pw-${randomBytes(8).toString("hex")}`;
  const sql = postgres(database.url, { max: 2, onnotice: () => {} });
  const redis = createRedis(TEST_REDIS_URL, { offlineQueue: true });
  const api = await startControl({
    databaseUrl: database.url,
    prefix,
    role: "api",
    instance: "bench-extract",
    extra: {
      OCTOPROX_INTERNAL_SECRET: secret,
      OCTOPROX_ADMIN_USERNAME: "admin",
      OCTOPROX_ADMIN_PASSWORD: password,
      // The production heartbeat, not the tests' fast one.
      OCTOPROX_HEARTBEAT_INTERVAL: "5",
    },
  });
  try {
    await waitForReady(api);
    const call = async (path: string, token: string | undefined, body: unknown) => {
      const response = await fetch(`${api.url}${path}`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify(body),
      });
      const answer = await response.json() as Record<string, unknown>;
      if (!response.ok) throw new Error(`${path}: ${response.status} ${JSON.stringify(answer)}`);
      return answer;
    };
    const token = (await call("/api/v1/auth/login", undefined, { username: "admin", password }))
      .access_token as string;
    const projectId = (await call("/api/v1/projects", token, {
      name: "bench",
      username: "bench",
    })).id as string;
    const config = {
      fetch: { url: "https://provider.example/proxies" },
      parser: { format: "text", ttl_seconds: 3600 },
      pool: { target_size: 10, max_size: 1_000_000, reserve_for_gateway: 0 },
    };
    const [{ id: connectorId }] = await sql<{ id: string }[]>`
      insert into connectors (project_id, name, kind, provider, config)
      values (${projectId}, 'pool', 'provider_api', 'provider_api', ${
      JSON.stringify(config)
    }::jsonb)
      returning id`;
    const key = (await call(`/api/v1/projects/${projectId}/distribution-keys`, token, {
      name: "bench",
    })).key as string;
    const connector = { id: connectorId, projectId };
    const store = new RedisPoolStore({ redis, keys, sealer: new CredentialSealer(secret) });
    const filled = performance.now();
    await topUp(store, connector, poolSize);
    context.log(
      `extract: pool of ${poolSize} filled in ${
        ((performance.now() - filled) / 1000).toFixed(1)
      } s`,
    );
    const url = new URL(`/api/v1/projects/${projectId}/extract`, api.url);
    const pid = api.child.pid!;

    // Warm-up: the key, the connector list and the JIT.
    await runLoadInChild({
      proxy: { host: url.hostname, port: Number(url.port) },
      url,
      scenario: Scenario.extract,
      requests: 2000,
      warmupMs: 0,
      concurrency,
      timeoutMs: 10_000,
      method: "POST",
      headers: [],
      extract: { key, count: 1 },
    });

    const apiRates: number[] = [];
    const cpuPerExtraction: number[] = [];
    const bareRates: number[] = [];
    const details: string[] = [];
    for (let index = 1; index <= context.runs; index++) {
      await topUp(store, connector, poolSize);
      let cpuStart = 0;
      let cpuEnd = 0;
      const report = await runLoadInChild({
        proxy: { host: url.hostname, port: Number(url.port) },
        url,
        scenario: Scenario.extract,
        durationMs: seconds * 1000,
        warmupMs: 500,
        concurrency,
        timeoutMs: 10_000,
        method: "POST",
        headers: [],
        extract: { key, count: 1 },
      }, {
        onWindow: (phase) => {
          void cpuMillis(pid).then((ms) => {
            if (phase === "start") cpuStart = ms ?? 0;
            else cpuEnd = ms ?? 0;
          });
        },
      });
      // The window's end reading lands a moment after the report: wait for it.
      for (let i = 0; i < 50 && cpuEnd === 0; i++) await new Promise((r) => setTimeout(r, 10));
      const extracted = report.extraction?.returned ?? 0;
      if (report.ok !== report.requests || extracted !== report.ok) {
        throw new Error(
          `extract run ${index}: ${report.requests} calls, ${report.ok} answered, ${extracted} ` +
            `proxies (errors ${JSON.stringify(report.errors)}): the pool ran short or calls failed`,
        );
      }
      apiRates.push(report.throughput);
      const cpuUs = ((cpuEnd - cpuStart) / report.ok) * 1000;
      cpuPerExtraction.push(cpuUs);
      details.push(
        `p50 ${report.latencyMs.p50.toFixed(2)} ms, p99 ${report.latencyMs.p99.toFixed(2)} ms, ` +
          `loadgen ${(report.cpu.cores * 100).toFixed(0)}% of a core`,
      );

      await topUp(store, connector, poolSize);
      const bare = await bareLoop(redis, keys, connector, seconds * 1000, concurrency, poolSize);
      bareRates.push(bare);
      context.log(
        `extract run ${index}: api ${report.throughput.toFixed(0)}/s (${cpuUs.toFixed(0)} µs ` +
          `api CPU each; ${details.at(-1)}); bare EVALSHA ${bare.toFixed(0)}/s`,
      );
    }
    const ratios = apiRates.map((rate, i) => (rate / bareRates[i]) * 100);
    return [
      {
        figure: `extract: extractions a second (count 1, pool ${poolSize}) via one api process`,
        value: median(apiRates),
        unit: "/s",
        budget: { op: ">=", limit: BUDGET_PER_SECOND },
        runs: apiRates,
        detail: `${concurrency} keep-alive connections; last run: ${details.at(-1)}`,
      },
      {
        figure: "extract: bare EVALSHA loop of extract.lua, one Node client",
        value: median(bareRates),
        unit: "/s",
        runs: bareRates,
        detail: `${concurrency} calls in flight on one ioredis client`,
      },
      {
        figure: "extract: api's share of the bare loop's rate",
        value: median(ratios),
        unit: "%",
        runs: ratios,
        digits: 0,
      },
      {
        figure: "extract: api CPU per extraction",
        value: median(cpuPerExtraction),
        unit: "µs",
        runs: cpuPerExtraction,
        digits: 0,
        detail: "the api process's CPU time over the window (/proc) / extractions answered",
      },
    ];
  } finally {
    await api.stop();
    redis.disconnect();
    await sql.end();
    await deletePrefix(TEST_REDIS_URL, prefix);
    await database.drop();
  }
}

/** extract.lua by EVALSHA, `concurrency` calls in flight on one client: calls a second. */
async function bareLoop(
  redis: ReturnType<typeof createRedis>,
  keys: ReturnType<typeof redisKeys>,
  connector: { id: string; projectId: string },
  durationMs: number,
  concurrency: number,
  poolSize: number,
): Promise<number> {
  const from = [{ id: connector.id, reserve: 0, reuseAfterReleaseSeconds: null }];
  let calls = 0;
  const started = performance.now();
  const end = started + durationMs;
  // Never below half the pool: the loop stops early rather than run the pool dry.
  const most = Math.floor(poolSize / 2);
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < end && calls < most) {
      const call = extractScriptCall(keys, {
        projectId: connector.projectId,
        from,
        request: REQUEST,
        leaseId: randomUUID(),
        nowMs: Date.now(),
        idempotency: undefined,
      });
      const reply = await runScript(redis, "extract", call.keys, call.args) as unknown[];
      if (reply[0] !== "taken" || reply.length !== 4) {
        throw new Error(`The bare loop took nothing: ${JSON.stringify(reply).slice(0, 300)}`);
      }
      calls++;
    }
  }));
  return calls / ((performance.now() - started) / 1000);
}

export const extractSuite: Suite = {
  name: "extract",
  description: "extractions a second through one api process, beside a bare EVALSHA loop",
  run,
};
