/**
 * The provider layer's budgets:
 * - rendering a dynamic-session username (a client session hashed with the project id, its
 *   country and session time in the vendor's syntax) on the request path, under Deno: at most
 *   5 µs; with a whole acquire through a dynamic-sessions connector beside one through a static
 *   connector, so the rendering's share of a request shows;
 * - a sync of a 10,000-slot port pool whose exits the vendor's API lists (the vendor emulator,
 *   over HTTPS under the egress guard) into Postgres: at most 30 s of the worker's time, for the
 *   first sync (10,000 additions) and for one after 1,000 exits moved (1,000 edits);
 * - a provider API's answer of 10,000 proxies parsed, deduplicated and stored in the pool: 1 s.
 */
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { type AnswerSpec, parseAnswer } from "../../control/provider-api/answer.ts";
import { CredentialSealer } from "../../control/provider-api/pool/credentials.ts";
import { RedisPoolStore } from "../../control/provider-api/pool/store.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { SyncJob } from "../../control/jobs/sync.ts";
import { testCertificate } from "../../testkit/certs.ts";
import { startVendorApi, type VendorExit } from "../../testkit/upstreams/vendor-emulator.ts";
import { startHarness } from "../../testkit/api-harness.ts";
import { entryRuntime, runEntry } from "./runtime.ts";
import { median, type Row, type Suite, type SuiteContext } from "./suite.ts";

const SLOTS = 10_000;
const MOVED = 1_000;

interface RenderRun {
  renderUs: number;
  acquireDynamicUs: number;
  acquireStaticUs: number;
}

async function renderRows(context: SuiteContext): Promise<Row[]> {
  const runtime = entryRuntime("BENCH_PROVIDERS_RUNTIME");
  const runs: RenderRun[] = [];
  for (let i = 0; i < context.runs; i++) {
    context.log(`rendering: run ${i + 1} of ${context.runs} (${runtime})`);
    runs.push(await runEntry<RenderRun>(runtime, "render-entry.ts"));
  }
  const pick = (key: keyof RenderRun) => runs.map((run) => run[key]);
  return [
    {
      figure: `dynamic-session username rendered per request (${runtime})`,
      value: median(pick("renderUs")),
      unit: "µs",
      budget: { op: "<=", limit: 5 },
      runs: pick("renderUs"),
      digits: 2,
    },
    {
      figure: "acquire through a dynamic-sessions connector (rendering included)",
      value: median(pick("acquireDynamicUs")),
      unit: "µs",
      runs: pick("acquireDynamicUs"),
      digits: 2,
      detail: `through a static connector: ${median(pick("acquireStaticUs")).toFixed(2)} µs`,
    },
  ];
}

const exitsOf = (moved: number): VendorExit[] =>
  Array.from({ length: SLOTS }, (_, i) => ({
    ip: `10.${(i >> 8) & 255}.${i & 255}.${i < moved ? 2 : 1}`,
    port: 10_000 + i,
    country: i % 2 === 0 ? "US" : "DE",
  }));

async function syncRows(context: SuiteContext): Promise<Row[]> {
  const certificate = await testCertificate();
  const caFile = join(tmpdir(), `ox-bench-ca-${process.pid}.pem`);
  await writeFile(caFile, certificate.ca);
  const api = await startVendorApi({ apiKey: "bench-key", exits: exitsOf(0) });
  const h = await startHarness({
    env: { OCTOPROX_EGRESS_ALLOW_LOOPBACK: "true", OCTOPROX_EGRESS_CA_FILE: caFile },
  });
  try {
    const as = { token: h.tokens.admin };
    const saved = await h.request("POST", "/api/v1/providers", {
      ...as,
      body: {
        confirm_hosts: ["127.0.0.1"],
        descriptor: {
          id: "bench-ports",
          name: "Bench ports",
          credential_fields: [{ key: "api_key", label: "Key", type: "password", secret: true }],
          proxy_types: [{
            id: "ports",
            name: "Ports",
            mode: "port",
            host: "gw.bench.example",
            port: 10_000,
            username: "user",
            password: "{credential.api_key}",
            call: { url: `${api.url}/exits`, headers: { "x-api-key": "{credential.api_key}" } },
            item: {
              host: "gw.bench.example",
              port: "{item.port}",
              exit: "{item.ip}",
              country: "{item.country}",
            },
          }],
        },
      },
    });
    if (saved.status !== 201) throw new Error(`descriptor: ${saved.text}`);
    const sync = new SyncJob({ deps: h.deps, logger: h.deps.logger });
    const first: number[] = [];
    const moved: number[] = [];
    const cpu: number[] = [];
    for (let run = 0; run < context.runs; run++) {
      const project = await h.request("POST", "/api/v1/projects", {
        ...as,
        body: { name: `bench ${run}`, username: `bench${run}` },
      });
      const credential = await h.request(
        "POST",
        `/api/v1/projects/${project.body.id}/credentials`,
        {
          ...as,
          body: { name: "k", provider: "bench-ports", config: { api_key: "bench-key" } },
        },
      );
      const connector = await h.request("POST", `/api/v1/projects/${project.body.id}/connectors`, {
        ...as,
        body: {
          name: "ports",
          kind: "vendor",
          provider: "bench-ports",
          credential_id: credential.body.id,
        },
      });
      api.setExits(exitsOf(0));
      context.log(`sync: run ${run + 1} of ${context.runs}, ${SLOTS} slots`);
      const cpuBefore = process.cpuUsage();
      let started = performance.now();
      const added = await sync.sync(connector.body.id);
      first.push((performance.now() - started) / 1000);
      const used = process.cpuUsage(cpuBefore);
      cpu.push((used.user + used.system) / 1e6);
      if (added?.added !== SLOTS) throw new Error(`first sync added ${added?.added}`);
      api.setExits(exitsOf(MOVED));
      started = performance.now();
      const edited = await sync.sync(connector.body.id);
      moved.push((performance.now() - started) / 1000);
      if (edited?.edited !== MOVED) throw new Error(`second sync edited ${edited?.edited}`);
    }
    return [
      {
        figure: `sync of a ${
          SLOTS.toLocaleString("en-US")
        }-slot port pool (first: every row added)`,
        value: median(first),
        unit: "s",
        budget: { op: "<=", limit: 30 },
        runs: first,
        digits: 2,
        detail: `worker CPU ${median(cpu).toFixed(2)} s (Postgres and the emulator beside it)`,
      },
      {
        figure: `sync of the same pool after ${MOVED.toLocaleString("en-US")} exits moved`,
        value: median(moved),
        unit: "s",
        budget: { op: "<=", limit: 30 },
        runs: moved,
        digits: 2,
      },
    ];
  } finally {
    await h.close();
    await api.close();
  }
}

/**
 * A provider API's answer of 10,000 proxies read, checked, deduplicated and stored in the
 * activity pool (credentials sealed, ownership taken), as a fetch does: budget 1 s for all of it.
 * Each run stores into a fresh project's pool; a second add of the same answer shows the
 * duplicates path.
 */
async function answerRows(context: SuiteContext): Promise<Row[]> {
  const entries = Array.from({ length: SLOTS }, (_, n) => ({
    ip: `10.${(n >> 8) & 255}.${n & 255}.1`,
    port: 8000 + (n % 1000),
    user: `u${n}`,
    pass: `p${n}`,
    cc: "us",
    ttl: 300,
  }));
  const body = JSON.stringify({ data: { list: entries } });
  const spec: AnswerSpec = {
    format: "json",
    items: "data.list",
    fields: {
      host: "ip",
      port: "port",
      username: "user",
      password: "pass",
      country: "cc",
      ttl_seconds: "ttl",
    },
    defaultScheme: "http",
    safetyMarginMs: 30_000,
  };
  const prefix = testPrefix();
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
  const store = new RedisPoolStore({
    redis,
    keys: redisKeys(prefix),
    sealer: new CredentialSealer("bench-internal-secret-".repeat(2)),
  });
  const runs: number[] = [];
  const parseRuns: number[] = [];
  const duplicateRuns: number[] = [];
  try {
    for (let run = 0; run < context.runs; run++) {
      const connector = { id: randomUUID(), projectId: randomUUID() };
      const started = performance.now();
      const answer = parseAnswer(body, spec, Date.now());
      const parsedAt = performance.now();
      const added = await store.add(connector, answer.proxies, {
        nowMs: Date.now(),
        maxSize: SLOTS,
      });
      runs.push(performance.now() - started);
      parseRuns.push(parsedAt - started);
      if (added.added !== SLOTS) throw new Error(`stored ${added.added} of ${SLOTS}`);
      const again = performance.now();
      const repeat = await store.add(connector, parseAnswer(body, spec, Date.now()).proxies, {
        nowMs: Date.now(),
        maxSize: SLOTS,
      });
      duplicateRuns.push(performance.now() - again);
      if (repeat.duplicates !== SLOTS) throw new Error(`${repeat.duplicates} duplicates`);
    }
  } finally {
    redis.disconnect();
    await deletePrefix(TEST_REDIS_URL, prefix);
  }
  return [{
    figure: `a provider API answer of ${
      SLOTS.toLocaleString("en-US")
    } proxies parsed, deduplicated and stored`,
    value: median(runs),
    unit: "ms",
    budget: { op: "<=", limit: 1000 },
    runs,
    detail: `parsing ${median(parseRuns).toFixed(0)} ms of it; the same answer again (all ` +
      `duplicates) ${median(duplicateRuns).toFixed(0)} ms`,
  }];
}

export const providersSuite: Suite = {
  name: "providers",
  description:
    "dynamic-session rendering per request (Deno); a 10,000-slot port pool's sync; a provider API answer parsed and stored",
  async run(context) {
    return [...await renderRows(context), ...await syncRows(context), ...await answerRows(context)];
  },
};
