/** least_used and health_based: what this gateway has in flight, and the outcomes it saw. */
import { describe, expect, it } from "vitest";
import { CoreRouter } from "../../shared/routing/router.ts";
import { type Allocation, isRefusal, type Outcome } from "../../shared/routing/contract.ts";
import { STRATEGY_FACTORIES } from "../../shared/routing/strategy.ts";
import { STRATEGIES, type Strategy } from "../../shared/roles.ts";
import type { ConnectorSection, FeedSections } from "../../shared/feed/models.ts";
import {
  client,
  connector,
  feed,
  project,
  proxy,
  section,
  target,
  verifyPassword,
} from "../../testkit/gateway/feed-fixtures.ts";

const NOW = 1_700_000_000_000;

function routerFor(strategy: Strategy, sections: readonly ConnectorSection[]) {
  let nowMs = NOW;
  const router = new CoreRouter({ verifyPassword, nowMs: () => nowMs, log: { warn() {} } });
  const feedOf = (s: readonly ConnectorSection[]): FeedSections =>
    feed(s, { projects: [project({ strategy })] });
  router.apply(feedOf(sections));
  return {
    router,
    apply: (s: readonly ConnectorSection[]) => router.apply(feedOf(s)),
    advance: (ms: number) => {
      nowMs += ms;
    },
  };
}

/** Acquires for one request and keeps the allocation open. */
async function hold(router: CoreRouter, c = client(), exclude = new Set<string>()) {
  const result = await router.acquire(c, target(), exclude);
  if (isRefusal(result)) throw new Error(`refused: ${result.status} ${result.reason}`);
  return result;
}

/** One finished request: its proxy id. */
async function pick(router: CoreRouter, outcome: Outcome = { ok: true }, c = client()) {
  const allocation = await hold(router, c);
  allocation.release(outcome);
  return allocation.upstream.proxyId;
}

/** Holds `n` transfers on one proxy directly through dispatch (as requests in flight would). */
function holdOn(router: CoreRouter, proxyId: string, n: number): Allocation[] {
  const entry = entryOf(router, proxyId);
  return Array.from(
    { length: n },
    () => router.dispatch.acquire(entry, entry.slot, entry.connectorSlot, 0)!,
  );
}

/** Records finished requests on one proxy. */
function record(router: CoreRouter, proxyId: string, outcome: Outcome, n: number): void {
  for (const lease of holdOn(router, proxyId, n)) lease.release(outcome);
}

function entryOf(router: CoreRouter, proxyId: string) {
  for (const index of router.snapshot!.connectors.values()) {
    const entry = index.proxy(proxyId);
    if (entry !== undefined) return entry;
  }
  throw new Error(`no proxy ${proxyId}`);
}

function tally(values: readonly string[]) {
  const counts = new Map<string, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return counts;
}

const FAILED: Outcome = { ok: false, phase: "connect" };

it("the registry has every strategy the feed can name", () => {
  for (const name of STRATEGIES) expect(STRATEGY_FACTORIES[name]).toBeTypeOf("function");
});

describe("least_used", () => {
  it("sends a new request to the proxy with the fewest transfers in flight", async () => {
    const { router } = routerFor("least_used", [section("c", ["x1", "x2", "x3", "x4"])]);
    const held = [
      ...holdOn(router, "x1", 2),
      ...holdOn(router, "x2", 1),
      ...holdOn(router, "x3", 1),
    ];
    for (let i = 0; i < 20; i++) expect(await pick(router)).toBe("x4");

    // Now x2, x3 and x4 have one each: the next request takes one of them, never x1.
    held.push(...holdOn(router, "x4", 1));
    const picks = [];
    for (let i = 0; i < 300; i++) picks.push(await pick(router));
    expect(picks).not.toContain("x1");
    expect(new Set(picks)).toEqual(new Set(["x2", "x3", "x4"]));
    for (const lease of held) lease.release({ ok: true });
  });

  it("spreads requests held open evenly, one more each before any proxy gets a third", async () => {
    const { router } = routerFor("least_used", [section("c", ["x1", "x2", "x3", "x4"])]);
    const open: Allocation[] = [];
    for (let i = 0; i < 8; i++) open.push(await hold(router));
    expect(tally(open.map((a) => a.upstream.proxyId))).toEqual(
      new Map([["x1", 2], ["x2", 2], ["x3", 2], ["x4", 2]]),
    );
    for (const a of open) a.release({ ok: true });
  });

  it("breaks ties at random: sequential traffic spreads over every proxy", async () => {
    const rows = Array.from({ length: 8 }, (_, i) => `r${i}`);
    const { router } = routerFor("least_used", [section("c", rows)]);
    const picks = [];
    for (let i = 0; i < 4000; i++) picks.push(await pick(router));
    const counts = tally(picks);
    expect(counts.size).toBe(8);
    for (const n of counts.values()) expect(n).toBeGreaterThan(350);
  });

  it("takes the connector with the lowest in-flight ÷ weight", async () => {
    const { router } = routerFor("least_used", [
      section(connector("light", { weight: 1 }), ["l1", "l2"]),
      section(connector("heavy", { weight: 3 }), ["h1", "h2"]),
    ]);
    // light 1/1 against heavy 2/3: heavy.
    const held = [...holdOn(router, "l1", 1), ...holdOn(router, "h1", 2)];
    for (let i = 0; i < 20; i++) expect(await pick(router)).toMatch(/^h/);
    // light 1/1 against heavy 4/3: light.
    held.push(...holdOn(router, "h2", 2));
    for (let i = 0; i < 20; i++) expect(await pick(router)).toMatch(/^l/);
    for (const lease of held) lease.release({ ok: true });
  });

  it("counts a connector's transfers through all its proxies, not only those eligible", async () => {
    const { router } = routerFor("least_used", [
      section("busy", [proxy("busy-de", { country: "DE" }), proxy("busy-us", { country: "US" })]),
      section("idle", [proxy("idle-de", { country: "DE" })]),
    ]);
    const held = holdOn(router, "busy-us", 2);
    const de = client({ user: "shop", country: "DE" });
    for (let i = 0; i < 20; i++) expect(await pick(router, { ok: true }, de)).toBe("idle-de");
    for (const lease of held) lease.release({ ok: true });
  });

  it("splits idle traffic by weight (1 and 3 give about 25% and 75%)", async () => {
    const { router } = routerFor("least_used", [
      section(connector("light", { weight: 1 }), ["l1"]),
      section(connector("heavy", { weight: 3 }), ["h1"]),
    ]);
    const picks = [];
    for (let i = 0; i < 4000; i++) picks.push(await pick(router));
    expect(tally(picks).get("h1")! / 4000).toBeCloseTo(0.75, 1);
  });

  it("skips a proxy at its concurrency limit or excluded, and refuses when nothing is usable", async () => {
    const { router } = routerFor("least_used", [
      section("c", [proxy("x1", { max_concurrency: 1 }), "x2"]),
    ]);
    const held = [...holdOn(router, "x1", 1), ...holdOn(router, "x2", 3)];
    expect(await pick(router)).toBe("x2");
    const none = await router.acquire(client(), target(), new Set(["x2"]));
    expect(isRefusal(none) && none.status).toBe(503);
    for (const lease of held) lease.release({ ok: true });
  });

  it("ranks a long list exactly when every proxy is busy", async () => {
    const rows = Array.from({ length: 200 }, (_, i) => `r${i}`);
    const { router } = routerFor("least_used", [section("c", rows)]);
    const held = rows.flatMap((id) => holdOn(router, id, id === "r137" ? 1 : 2));
    for (let i = 0; i < 10; i++) expect(await pick(router)).toBe("r137");
    for (const lease of held) lease.release({ ok: true });
  });

  it("ranks a longer list by random probes: the least busy level when many rows are at it", async () => {
    const rows = Array.from({ length: 1000 }, (_, i) => `r${i}`);
    const { router } = routerFor("least_used", [section("c", rows)]);
    const held = rows.flatMap((id, i) => holdOn(router, id, i % 2 === 0 ? 1 : 2));
    const picks = new Set<string>();
    for (let i = 0; i < 200; i++) picks.add(await pick(router));
    expect([...picks].every((id) => Number(id.slice(1)) % 2 === 0)).toBe(true);
    expect(picks.size).toBeGreaterThan(120);
    for (const lease of held) lease.release({ ok: true });
  });
});

describe("health_based", () => {
  it("stops favouring a proxy whose requests fail once it has ten outcomes", async () => {
    const { router } = routerFor("health_based", [section("c", ["bad", "good1", "good2"])]);
    const outcome = (id: string): Outcome => (id === "bad" ? FAILED : { ok: true, latencyMs: 20 });
    // Until every proxy has ten outcomes, every proxy is a candidate.
    const early = [];
    for (let i = 0; i < 300 && Math.min(...["bad", "good1", "good2"].map(outcomes)) < 10; i++) {
      const allocation = await hold(router);
      allocation.release(outcome(allocation.upstream.proxyId));
      early.push(allocation.upstream.proxyId);
    }
    expect(new Set(early)).toContain("bad");
    const later = [];
    for (let i = 0; i < 300; i++) {
      const allocation = await hold(router);
      allocation.release(outcome(allocation.upstream.proxyId));
      later.push(allocation.upstream.proxyId);
    }
    expect(later).not.toContain("bad");
    // One drawn at random among the good: both take a share.
    expect(tally(later).get("good1")).toBeGreaterThan(100);
    expect(tally(later).get("good2")).toBeGreaterThan(100);

    function outcomes(id: string) {
      const slot = entryOf(router, id).slot;
      return router.dispatch.okCount(slot) + router.dispatch.failedCount(slot);
    }
  });

  it("keeps a proxy with fewer than ten outcomes a candidate, and near-equal ones share", async () => {
    const { router } = routerFor("health_based", [
      section("c", ["best", "close", "poor", "new"]),
    ]);
    record(router, "best", { ok: true }, 20);
    record(router, "close", { ok: true }, 18); // 18 of 20: within the 0.1 margin
    record(router, "close", FAILED, 2);
    record(router, "poor", { ok: true }, 15); // 15 of 20: out
    record(router, "poor", FAILED, 5);
    record(router, "new", FAILED, 9); // nine failures: not measured yet
    const picks = [];
    for (let i = 0; i < 600; i++) picks.push(await pick(router, { ok: false, phase: "client" }));
    const counts = tally(picks);
    expect(counts.has("poor")).toBe(false);
    for (const id of ["best", "close", "new"]) expect(counts.get(id)).toBeGreaterThan(120);
  });

  it("serves through a failing proxy rather than refuse when the good ones cannot serve", async () => {
    const { router } = routerFor("health_based", [section("c", ["bad", "good"])]);
    record(router, "bad", FAILED, 10);
    record(router, "good", { ok: true }, 10);
    const result = await router.acquire(client(), target(), new Set(["good"]));
    expect(!isRefusal(result) && result.upstream.proxyId).toBe("bad");
    (result as Allocation).release({ ok: true });
  });

  it("forgets a proxy's outcomes when it leaves the snapshot", async () => {
    const rows = ["bad", "good"];
    const { router, apply } = routerFor("health_based", [section("c", rows)]);
    record(router, "bad", FAILED, 10);
    record(router, "good", { ok: true }, 10);
    for (let i = 0; i < 50; i++) expect(await pick(router)).toBe("good");
    apply([section("c", ["good"])]);
    apply([section("c", rows)]);
    const picks = [];
    for (let i = 0; i < 200; i++) picks.push(await pick(router, { ok: false, phase: "client" }));
    expect(tally(picks).get("bad")).toBeGreaterThan(50);
  });

  it("scores a long list too, keeping its scores only briefly", async () => {
    const rows = Array.from({ length: 100 }, (_, i) => `r${i}`);
    const failing = new Set(rows.filter((_, i) => i % 10 === 0));
    const { router, advance } = routerFor("health_based", [section("c", rows)]);
    for (const id of rows) record(router, id, failing.has(id) ? FAILED : { ok: true }, 10);
    const picks = [];
    for (let i = 0; i < 1000; i++) picks.push(await pick(router, { ok: false, phase: "client" }));
    expect(picks.filter((id) => failing.has(id))).toEqual([]);
    expect(tally(picks).size).toBe(90);

    // r1 turns bad: within the scores' half-second life it may still be drawn, not after.
    record(router, "r1", FAILED, 100);
    advance(500);
    const after = [];
    for (let i = 0; i < 300; i++) after.push(await pick(router, { ok: false, phase: "client" }));
    expect(after).not.toContain("r1");
  });
});
