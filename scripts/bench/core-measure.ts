/**
 * The gateway routing core's figures, runtime-neutral (no node: or Deno APIs), for the
 * `gateway-core` suite, which runs them under Deno as the gateway does (core-entry.ts):
 *
 * - snapshot build from a decoded feed of `proxies` rows over `connectors` connectors (median
 *   of 5 builds);
 * - a one-connector update (`proxies / connectors` rows) applied to the router: 31 applies, each
 *   of a fresh section object (through JSON, as a decode makes one), the first 11 left out as
 *   warm-up, the median of the other 20;
 * - a runtime section of `quarantines` quarantines: 101 applies, the first 51 left out, the
 *   median of the other 50;
 * - dispatch (acquire, commit, release) per operation under round_robin: 100,000 cycles of
 *   warm-up, then `iterations` timed one by one (p50, p99, p99.9, max) and their rate;
 * - the same under least_used, health_based and sticky (10,000 sessions, no Redis), and
 *   least_used with half and then every proxy holding a transfer (its probes miss and it ranks).
 *
 * Decoding sections is the feed's part (the `feed` suite): every section here is already an
 * object, as the follower hands them over.
 */
import type { ConnectorSection, FeedProxy, FeedSections } from "../../shared/feed/models.ts";
import { CoreRouter } from "../../shared/routing/router.ts";
import { buildSnapshot } from "../../shared/routing/snapshot.ts";
import { type Allocation, type Client, isRefusal } from "../../shared/routing/contract.ts";
import type { Strategy } from "../../shared/roles.ts";
import { project } from "../../testkit/gateway/feed-fixtures.ts";

export interface CoreParameters {
  proxies: number;
  connectors: number;
  iterations: number;
  quarantines: number;
}

export const CORE_DEFAULTS: CoreParameters = {
  proxies: 100_000,
  connectors: 20,
  iterations: 1_000_000,
  quarantines: 2_000,
};

/** Every time in milliseconds. */
export interface CoreResult {
  runtime: string;
  parameters: CoreParameters;
  rowsPerConnector: number;
  buildMs: number;
  updateMs: number;
  updateFirstMs: number;
  runtimeSectionMs: number;
  runtimeSectionFirstMs: number;
  dispatch: { p50: number; p99: number; p999: number; max: number; perSecond: number };
  asyncDispatch: { p50: number; p99: number };
  strategies: Record<string, { p50: number; p99: number }>;
  leastUsedHalfBusy: { p50: number; p99: number };
  leastUsedAllBusy: { p50: number; p99: number };
}

const COUNTRIES = ["DE", "US", "GB", "FR", "NL", "PL", "JP", "BR", null] as const;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function time(fn: () => void): number {
  const start = performance.now();
  fn();
  return performance.now() - start;
}

export async function measureCore(parameters: CoreParameters): Promise<CoreResult> {
  const { proxies: PROXIES, connectors: CONNECTORS, iterations: ITERATIONS } = parameters;
  const PER_CONNECTOR = Math.ceil(PROXIES / CONNECTORS);

  const row = (c: number, i: number, salt = 0): FeedProxy => {
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
  };

  const connectorSection = (c: number, salt = 0): ConnectorSection => {
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
      config: null,
      credential: null,
    };
  };

  const connectors = new Map<string, ConnectorSection>();
  for (let c = 0; c < CONNECTORS; c++) {
    const s = connectorSection(c);
    connectors.set(s.connector.id, s);
  }
  const base: FeedSections = {
    global: {
      schema: 1,
      default_strategy: "round_robin",
      projects: [project({ id: "bench", name: "bench", username: "bench", password_digest: "x" })],
      descriptors: [],
    },
    runtime: { schema: 1, quarantines: [], traffic_blocks: [], project_blocks: [] },
    connectors,
  };

  // --- snapshot build -------------------------------------------------------------------------
  const builds: number[] = [];
  for (let i = 0; i < 5; i++) builds.push(time(() => buildSnapshot(base)));

  // --- one-connector update -------------------------------------------------------------------
  const router = new CoreRouter({
    verifyPassword: () => Promise.resolve(true),
    log: { warn() {} },
  });
  router.apply(base);
  const changedIndex = Math.floor(CONNECTORS / 2);
  const changedId = `conn-${String(changedIndex).padStart(3, "0")}`;
  const variants = [connectorSection(changedIndex, 1), connectorSection(changedIndex, 0)];
  const updates: number[] = [];
  let updateFirstMs = 0;
  let current = base;
  for (let i = 0; i < 31; i++) {
    const fresh: ConnectorSection = JSON.parse(JSON.stringify(variants[i % 2]));
    const changed = new Map(current.connectors);
    changed.set(changedId, fresh);
    const next: FeedSections = { ...current, connectors: changed };
    const ms = time(() => router.apply(next));
    if (i === 0) updateFirstMs = ms;
    if (i > 10) updates.push(ms);
    current = next;
  }

  // --- runtime section change -----------------------------------------------------------------
  const runtimes: number[] = [];
  let runtimeFirstMs = 0;
  for (let i = 0; i < 101; i++) {
    const until = Date.now() + 60_000 + i;
    const quarantines = [];
    for (let q = 0; q < parameters.quarantines; q++) {
      quarantines.push({
        proxy_id: `px-${q % CONNECTORS}-${(q * 7 + i) % PER_CONNECTOR}`,
        until_ms: until,
      });
    }
    // Through JSON, so its strings are what a decode hands over (flat, unhashed).
    const runtime = JSON.parse(
      JSON.stringify({ schema: 1, quarantines, traffic_blocks: [], project_blocks: [] }),
    );
    const next: FeedSections = { ...current, connectors: new Map(current.connectors), runtime };
    const ms = time(() => router.apply(next));
    if (i === 0) runtimeFirstMs = ms;
    if (i > 50) runtimes.push(ms); // the first 51 warm the code up
    current = next;
  }

  // --- dispatch -------------------------------------------------------------------------------
  const clients: Client[] = [
    { projectId: "bench", options: { user: "bench" } },
    { projectId: "bench", options: { user: "bench", country: "DE" } },
    { projectId: "bench", options: { user: "bench", country: "US" } },
    { projectId: "bench", options: { user: "bench" } },
  ];
  const targetHost = { host: "www.example.com", port: 443 };
  const noneExcluded: ReadonlySet<string> = new Set();

  const cycle = (client: Client) => {
    const result = router.acquire(client, targetHost, noneExcluded);
    if (result instanceof Promise || isRefusal(result)) {
      throw new Error("bench expects a sync allocation");
    }
    const lease: Allocation = result;
    lease.commit();
    lease.release({ ok: true, latencyMs: 5 });
  };

  for (let i = 0; i < 100_000; i++) cycle(clients[i & 3]); // warm the JIT and the place caches
  const samples = new Float64Array(ITERATIONS);
  const wall = performance.now();
  for (let i = 0; i < ITERATIONS; i++) {
    const start = performance.now();
    cycle(clients[i & 3]);
    samples[i] = performance.now() - start;
  }
  const wallMs = performance.now() - wall;
  samples.sort();
  const pct = (xs: Float64Array, p: number) =>
    xs[Math.min(xs.length - 1, Math.floor(xs.length * p))];

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

  // --- the other strategies -------------------------------------------------------------------
  // The project's strategy changed by a global section, as the feed would.
  const useStrategy = (strategy: Strategy) => {
    const projects = current.global.projects.map((p) => ({ ...p, strategy }));
    current = { ...current, global: { ...current.global, projects } };
    router.apply(current);
  };
  const percentiles = (clientOf: (i: number) => Client, iterations: number) => {
    for (let i = 0; i < 50_000; i++) cycle(clientOf(i));
    const times = new Float64Array(iterations);
    for (let i = 0; i < iterations; i++) {
      const start = performance.now();
      cycle(clientOf(i));
      times[i] = performance.now() - start;
    }
    times.sort();
    return { p50: pct(times, 0.5), p99: pct(times, 0.99) };
  };
  const strategyIterations = Math.max(1000, Math.floor(ITERATIONS / 5));
  const sessions: Client[] = Array.from({ length: 10_000 }, (_, i) => ({
    projectId: "bench",
    options: { user: "bench", sessionId: `session-${i}` },
  }));
  const strategies: Record<string, { p50: number; p99: number }> = {};
  const strategyRuns: [Strategy, (i: number) => Client][] = [
    ["least_used", (i) => clients[i & 3]],
    ["health_based", (i) => clients[i & 3]],
    ["sticky", (i) => sessions[i % sessions.length]],
  ];
  for (const [strategy, clientOf] of strategyRuns) {
    useStrategy(strategy);
    strategies[strategy] = percentiles(clientOf, strategyIterations);
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
  const leastUsedHalfBusy = percentiles((i) => clients[i & 3], strategyIterations);
  holdOpen(1);
  const leastUsedAllBusy = percentiles(
    (i) => clients[i & 3],
    Math.max(1000, Math.floor(strategyIterations / 10)),
  );
  for (const lease of busy) lease.release({ ok: true });
  useStrategy("round_robin");

  return {
    runtime: "Deno" in globalThis ? "Deno" : "Node",
    parameters,
    rowsPerConnector: PER_CONNECTOR,
    buildMs: median(builds),
    updateMs: median(updates),
    updateFirstMs,
    runtimeSectionMs: median(runtimes),
    runtimeSectionFirstMs: runtimeFirstMs,
    dispatch: {
      p50: pct(samples, 0.5),
      p99: pct(samples, 0.99),
      p999: pct(samples, 0.999),
      max: samples[samples.length - 1],
      perSecond: ITERATIONS / (wallMs / 1000),
    },
    asyncDispatch: { p50: pct(asyncSamples, 0.5), p99: pct(asyncSamples, 0.99) },
    strategies,
    leastUsedHalfBusy,
    leastUsedAllBusy,
  };
}
