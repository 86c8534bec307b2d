/**
 * Benchmarks of the gateway's routing core against DESIGN.md's budgets, standalone:
 *
 *   npx tsx scripts/bench/gateway-core.ts [--proxies 100000] [--connectors 20] [--iterations 1000000]
 *
 * Measures the snapshot build from a decoded feed, a one-connector update, a runtime-section
 * change, and dispatch (acquire, commit, release) per operation, under round_robin and then under
 * least_used, health_based and sticky. Decoding sections is the feed's
 * part and is not timed here: every section below is already an object, as the follower hands
 * them over.
 */
import { parseArgs } from "node:util";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { ConnectorSection, FeedProxy, FeedSections } from "../../shared/feed/models.ts";
import { CoreRouter } from "../../gateway/core/router.ts";
import { buildSnapshot } from "../../gateway/core/snapshot.ts";
import { type Allocation, type Client, isRefusal } from "../../gateway/core/contract.ts";
import type { Strategy } from "../../shared/roles.ts";

const { values: args } = parseArgs({
  options: {
    proxies: { type: "string", default: "100000" },
    connectors: { type: "string", default: "20" },
    iterations: { type: "string", default: "1000000" },
    quarantines: { type: "string", default: "2000" },
  },
});
const PROXIES = Number(args.proxies);
const CONNECTORS = Number(args.connectors);
const ITERATIONS = Number(args.iterations);
const QUARANTINES = Number(args.quarantines);
const PER_CONNECTOR = Math.ceil(PROXIES / CONNECTORS);
const COUNTRIES = ["DE", "US", "GB", "FR", "NL", "PL", "JP", "BR", null] as const;

function row(c: number, i: number, salt = 0): FeedProxy {
  const n = c * PER_CONNECTOR + i;
  return {
    id: `px-${c}-${i}`,
    scheme: "http",
    host: `10.${c}.${(i >> 8) & 255}.${i & 255}`,
    port: 3128 + salt,
    username: `user-${n}`,
    password: `pass-${n}`,
    country: COUNTRIES[n % COUNTRIES.length],
    // About 5% down, as a pool usually has some.
    status: n % 20 === 0 ? "unhealthy" : "healthy",
    max_concurrency: n % 4 === 0 ? 64 : null,
  };
}

function connectorSection(c: number, salt = 0): ConnectorSection {
  const proxies: FeedProxy[] = [];
  for (let i = 0; i < PER_CONNECTOR; i++) proxies.push(row(c, i, salt));
  return {
    schema: 1,
    connector: {
      id: `conn-${String(c).padStart(3, "0")}`,
      project_id: "bench",
      name: `connector ${c}`,
      kind: "static",
      provider: "static",
      enabled: true,
      pending_deletion: false,
      weight: 1 + (c % 5),
      countries: c % 2 === 0 ? [] : ["DE", "US", "GB"],
      domain_allow: [],
      domain_deny: c % 3 === 0 ? ["blocked.example"] : [],
      rate_limit: null,
      traffic: null,
    },
    proxies,
  };
}

function makeFeed(): FeedSections {
  const connectors = new Map<string, ConnectorSection>();
  for (let c = 0; c < CONNECTORS; c++) {
    const s = connectorSection(c);
    connectors.set(s.connector.id, s);
  }
  return {
    global: {
      schema: 1,
      default_strategy: "round_robin",
      projects: [{
        id: "bench",
        name: "bench",
        username: "bench",
        password_digest: "x",
        strategy: "round_robin",
        session_ttl_seconds: 300,
        sticky_quarantine: false,
        location_policy: "off",
        location_preflight: "off",
        connection_timeout_seconds: 30,
        max_retries: 3,
      }],
    },
    runtime: { schema: 1, quarantines: [], traffic_blocks: [] },
    connectors,
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function time(fn: () => void): number {
  const start = performance.now();
  fn();
  return performance.now() - start;
}

const rows: [string, string, string, string][] = [];
function report(name: string, ms: number, budgetMs: number, unit: "ms" | "µs" = "ms") {
  const value = unit === "µs" ? ms * 1000 : ms;
  const budget = unit === "µs" ? budgetMs * 1000 : budgetMs;
  rows.push([
    name,
    `${value.toFixed(unit === "µs" ? 2 : 3)} ${unit}`,
    `${budget} ${unit}`,
    value <= budget ? "ok" : "OVER",
  ]);
}

// --- snapshot build ---------------------------------------------------------------------------
const t0 = performance.now();
const base = makeFeed();
const feedMs = performance.now() - t0;
console.log(
  `feed: ${PROXIES} proxies over ${CONNECTORS} connectors (made in ${
    feedMs.toFixed(0)
  } ms, not timed)`,
);

const builds: number[] = [];
for (let i = 0; i < 5; i++) builds.push(time(() => buildSnapshot(base)));
report(`snapshot build, ${PROXIES} proxies (median of 5)`, median(builds), 1000);

// --- one-connector update ---------------------------------------------------------------------
const router = new CoreRouter({ verifyPassword: () => Promise.resolve(true), log: { warn() {} } });
router.apply(base);
const changedId = `conn-${String(Math.floor(CONNECTORS / 2)).padStart(3, "0")}`;
const variants = [
  connectorSection(Math.floor(CONNECTORS / 2), 1),
  connectorSection(Math.floor(CONNECTORS / 2), 0),
];
const updates: number[] = [];
let current = base;
for (let i = 0; i < 31; i++) {
  // A fresh section object each time, through JSON as a decode makes one.
  const fresh: ConnectorSection = JSON.parse(JSON.stringify(variants[i % 2]));
  const connectors = new Map(current.connectors);
  connectors.set(changedId, fresh);
  const next: FeedSections = { ...current, connectors };
  const ms = time(() => router.apply(next));
  if (i === 0) {
    rows.push([`one-connector update, first apply (cold code)`, `${ms.toFixed(3)} ms`, "", ""]);
  }
  if (i > 10) updates.push(ms);
  current = next;
}
report(`one-connector update, ${PER_CONNECTOR} rows (median of 20)`, median(updates), 10);

// --- runtime section change -------------------------------------------------------------------
const runtimes: number[] = [];
for (let i = 0; i < 101; i++) {
  const until = Date.now() + 60_000 + i;
  const quarantines = [];
  for (let q = 0; q < QUARANTINES; q++) {
    quarantines.push({
      proxy_id: `px-${q % CONNECTORS}-${(q * 7 + i) % PER_CONNECTOR}`,
      until_ms: until,
    });
  }
  // Through JSON, so its strings are what a decode hands over (flat, unhashed).
  const runtime = JSON.parse(JSON.stringify({ schema: 1, quarantines, traffic_blocks: [] }));
  const next: FeedSections = { ...current, connectors: new Map(current.connectors), runtime };
  const ms = time(() => router.apply(next));
  if (i === 0) {
    rows.push([`runtime section, first apply (cold code)`, `${ms.toFixed(3)} ms`, "", ""]);
  }
  if (i > 50) runtimes.push(ms); // the first 50 warm the code up
  current = next;
}
report(`runtime section, ${QUARANTINES} quarantines (median of 50)`, median(runtimes), 0.3);

// --- dispatch ---------------------------------------------------------------------------------
const clients: Client[] = [
  { projectId: "bench", options: { user: "bench" } },
  { projectId: "bench", options: { user: "bench", country: "DE" } },
  { projectId: "bench", options: { user: "bench", country: "US" } },
  { projectId: "bench", options: { user: "bench" } },
];
const targetHost = { host: "www.example.com", port: 443 };
const noneExcluded: ReadonlySet<string> = new Set();

function cycle(i: number): void {
  const result = router.acquireNow(clients[i & 3], targetHost, noneExcluded);
  if (result instanceof Promise || isRefusal(result)) {
    throw new Error("bench expects a sync allocation");
  }
  const lease: Allocation = result;
  lease.commit();
  lease.release({ ok: true, latencyMs: 5 });
}

for (let i = 0; i < 100_000; i++) cycle(i); // warm up the JIT and the place caches
const samples = new Float64Array(ITERATIONS);
const wall = performance.now();
for (let i = 0; i < ITERATIONS; i++) {
  const start = performance.now();
  cycle(i);
  samples[i] = performance.now() - start;
}
const wallMs = performance.now() - wall;
samples.sort();
const pct = (p: number) => samples[Math.min(samples.length - 1, Math.floor(samples.length * p))];
report(`dispatch p50 (acquire+commit+release, ${PROXIES} proxies)`, pct(0.5), 0.02, "µs");
report(`dispatch p99`, pct(0.99), 0.02, "µs");
rows.push([
  "dispatch p99.9 / max",
  `${(pct(0.999) * 1000).toFixed(2)} / ${(samples[samples.length - 1] * 1000).toFixed(0)} µs`,
  "",
  "",
]);
rows.push([
  "dispatch throughput",
  `${Math.round(ITERATIONS / (wallMs / 1000)).toLocaleString("en")} /s`,
  "",
  "",
]);

// The Promise-returning `acquire`, as a socket layer awaiting it pays for it.
const asyncSamples = new Float64Array(Math.min(ITERATIONS, 200_000));
for (let i = 0; i < asyncSamples.length; i++) {
  const start = performance.now();
  const result = await router.acquire(clients[i & 3], targetHost, noneExcluded);
  if (isRefusal(result)) throw new Error("refused");
  result.commit();
  result.release({ ok: true });
  asyncSamples[i] = performance.now() - start;
}
asyncSamples.sort();
rows.push([
  `await acquire + commit + release p50 / p99 (${asyncSamples.length})`,
  `${(asyncSamples[asyncSamples.length >> 1] * 1000).toFixed(2)} / ${
    (asyncSamples[Math.floor(asyncSamples.length * 0.99)] * 1000).toFixed(2)
  } µs`,
  "",
  "",
]);
// Heap after a full collection: the router's snapshot plus this script's copies of the feed.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
gc();
const memory = process.memoryUsage();
rows.push([
  "heap after GC / resident (bench process, feed copies included)",
  `${Math.round(memory.heapUsed / 2 ** 20)} / ${Math.round(memory.rss / 2 ** 20)} MB`,
  "300 MB rss",
  "",
]);

// --- the other strategies ---------------------------------------------------------------------
// After the memory row, so what they hold open does not count there.
// The same cycle under each strategy (the project's strategy changed by a global section, as the
// feed would), sequential like the rows above; least_used also with transfers held open, where
// its idle probes miss and it ranks the whole list.
function useStrategy(strategy: Strategy): void {
  const projects = current.global.projects.map((p) => ({ ...p, strategy }));
  current = { ...current, global: { ...current.global, projects } };
  router.apply(current);
}

function percentiles(clientOf: (i: number) => Client, iterations: number): [number, number] {
  const run = (i: number) => {
    const result = router.acquireNow(clientOf(i), targetHost, noneExcluded);
    if (result instanceof Promise || isRefusal(result)) {
      throw new Error("bench expects a sync allocation");
    }
    result.commit();
    result.release({ ok: true, latencyMs: 5 });
  };
  for (let i = 0; i < 50_000; i++) run(i);
  const times = new Float64Array(iterations);
  for (let i = 0; i < iterations; i++) {
    const start = performance.now();
    run(i);
    times[i] = performance.now() - start;
  }
  times.sort();
  return [times[iterations >> 1], times[Math.floor(iterations * 0.99)]];
}

const STRATEGY_ITERATIONS = Math.max(1000, Math.floor(ITERATIONS / 5));
const sessions: Client[] = Array.from({ length: 10_000 }, (_, i) => ({
  projectId: "bench",
  options: { user: "bench", sessionId: `session-${i}` },
}));
const strategyRows: [string, Strategy, (i: number) => Client][] = [
  ["least_used", "least_used", (i) => clients[i & 3]],
  ["health_based", "health_based", (i) => clients[i & 3]],
  ["sticky, 10,000 sessions in memory (no Redis)", "sticky", (i) => sessions[i % sessions.length]],
];
for (const [label, strategy, clientOf] of strategyRows) {
  useStrategy(strategy);
  const [p50, p99] = percentiles(clientOf, STRATEGY_ITERATIONS);
  report(`${label}: dispatch p50`, p50, 0.02, "µs");
  report(`${label}: dispatch p99`, p99, 0.02, "µs");
}

// least_used with transfers open on every other proxy, then on every proxy.
useStrategy("least_used");
const busy: Allocation[] = [];
const holdOpen = (every: number) => {
  for (const index of router.snapshot!.connectors.values()) {
    for (let i = 0; i < index.proxies.length; i += every) {
      const entry = index.proxies[i];
      const lease = router.dispatch.acquire(entry, entry.slot, entry.connectorSlot, 0);
      if (lease !== undefined) busy.push(lease);
    }
  }
};
holdOpen(2);
let [busyP50, busyP99] = percentiles((i) => clients[i & 3], STRATEGY_ITERATIONS);
rows.push([
  `least_used, half the proxies busy: p50 / p99`,
  `${(busyP50 * 1000).toFixed(2)} / ${(busyP99 * 1000).toFixed(2)} µs`,
  "",
  "",
]);
holdOpen(1);
[busyP50, busyP99] = percentiles((i) => clients[i & 3], Math.floor(STRATEGY_ITERATIONS / 10));
rows.push([
  `least_used, every proxy busy (ranked by 32 probes): p50 / p99`,
  `${(busyP50 * 1000).toFixed(2)} / ${(busyP99 * 1000).toFixed(2)} µs`,
  "",
  "",
]);
for (const lease of busy) lease.release({ ok: true });
useStrategy("round_robin");

const widths = [0, 1, 2, 3].map((c) =>
  Math.max(...rows.map((r) => r[c].length), ["what", "measured", "budget", ""][c].length)
);
const line = (r: readonly string[]) => r.map((cell, c) => cell.padEnd(widths[c])).join(" | ");
console.log(line(["what", "measured", "budget", ""]));
console.log(widths.map((w) => "-".repeat(w)).join("-|-"));
for (const r of rows) console.log(line(r));
