/**
 * sticky: one proxy per -sessid-, its binding in memory and in a store, moved when the proxy can
 * no longer serve, read under the request deadline and failing open, written in the background at
 * most once per half the session's life. The store here is in memory, on the test's clock (the
 * Redis one is in sticky-redis.test.ts).
 */
import { describe, expect, it } from "vitest";
import { CoreRouter, type StickyOptions } from "../../shared/routing/router.ts";
import { type Allocation, type Client, isRefusal } from "../../shared/routing/contract.ts";
import { SessionBindings } from "../../shared/routing/strategies/sticky-bindings.ts";
import { sessionHashes } from "../../shared/routing/strategies/session-hash.ts";
import { HeldTasks } from "../../shared/routing/sticky/held-tasks.ts";
import type { StickyStore } from "../../shared/routing/sticky/store.ts";
import type { ConnectorSection, FeedProject, RuntimeSection } from "../../shared/feed/models.ts";
import {
  client,
  connector,
  emptyRuntime,
  feed,
  project,
  proxy,
  section,
  target,
  verifyPassword,
} from "../../testkit/gateway/feed-fixtures.ts";

const NOW = 1_700_000_000_000;
const ROWS = Array.from({ length: 10 }, (_, i) => `x${i}`);

/** A store in memory on the test's clock, counting what it is asked. */
class MemoryStore implements StickyStore {
  readonly values = new Map<string, { proxyId: string; untilMs: number }>();
  readonly sets: { key: string; proxyId: string; ttlMs: number; atMs: number }[] = [];
  gets = 0;
  private readonly clock: () => number;

  constructor(clock: () => number) {
    this.clock = clock;
  }

  get(projectId: string, sessionId: string): Promise<string | undefined> {
    this.gets++;
    const value = this.values.get(`${projectId}:${sessionId}`);
    return Promise.resolve(
      value !== undefined && value.untilMs > this.clock() ? value.proxyId : undefined,
    );
  }

  set(projectId: string, sessionId: string, proxyId: string, ttlMs: number): Promise<void> {
    const key = `${projectId}:${sessionId}`;
    this.sets.push({ key, proxyId, ttlMs, atMs: this.clock() });
    this.values.set(key, { proxyId, untilMs: this.clock() + ttlMs });
    return Promise.resolve();
  }
}

interface Setup {
  sections?: readonly ConnectorSection[];
  project?: Partial<FeedProject>;
  runtime?: RuntimeSection;
  sticky?: StickyOptions | "none";
  clock?: { nowMs: number };
}

function gateway(setup: Setup = {}) {
  const clock = setup.clock ?? { nowMs: NOW };
  const store = new MemoryStore(() => clock.nowMs);
  const warnings: string[] = [];
  const router = new CoreRouter({
    verifyPassword,
    nowMs: () => clock.nowMs,
    log: { warn: (message) => warnings.push(message) },
    sticky: setup.sticky === "none" ? undefined : { store, ...setup.sticky },
  });
  const sections = setup.sections ?? [section("c", ROWS)];
  const apply = (s: readonly ConnectorSection[], runtime = setup.runtime) =>
    router.apply(feed(s, {
      projects: [project({ strategy: "sticky", ...setup.project })],
      runtime,
    }));
  apply(sections);
  return { router, store, clock, warnings, apply };
}

const session = (sessionId: string, more: Partial<Client["options"]> = {}) =>
  client({ user: "shop", sessionId, ...more });

async function pick(router: CoreRouter, c: Client, exclude = new Set<string>()) {
  const result = await router.acquire(c, target(), exclude);
  if (isRefusal(result)) throw new Error(`refused: ${result.status} ${result.reason}`);
  result.release({ ok: true });
  return result.upstream.proxyId;
}

describe("sticky sessions", () => {
  it("keeps one proxy across requests for one -sessid-, and spreads sessions", async () => {
    const { router } = gateway();
    const first = await pick(router, session("alpha"));
    for (let i = 0; i < 30; i++) expect(await pick(router, session("alpha"))).toBe(first);
    const bySession = new Set<string>();
    for (let i = 0; i < 200; i++) bySession.add(await pick(router, session(`s${i}`)));
    expect(bySession.size).toBe(10);
  });

  it("behaves as random without -sessid-", async () => {
    const { router, store } = gateway();
    const picks = new Map<string, number>();
    for (let i = 0; i < 2000; i++) {
      const id = await pick(router, client());
      picks.set(id, (picks.get(id) ?? 0) + 1);
    }
    expect(picks.size).toBe(10);
    for (const n of picks.values()) expect(n).toBeGreaterThan(120);
    expect(store.gets + store.sets.length).toBe(0);
  });

  it("places a new session by its hash, so gateways without Redis agree", async () => {
    const a = gateway({ sticky: "none" }).router;
    const b = gateway({ sticky: "none" }).router;
    for (let i = 0; i < 50; i++) {
      expect(await pick(b, session(`s${i}`))).toBe(await pick(a, session(`s${i}`)));
    }
    // Pinned, so a gateway of another runtime or release places sessions the same way (the same
    // figures under Deno): FNV-1a, then MurmurHash3's finaliser.
    expect(sessionHashes("alpha")).toEqual([2744486511, 927925882]);
  });

  it("answers without a Promise when it has the binding in memory", async () => {
    const { router } = gateway();
    const first = await router.acquire(session("alpha"), target());
    (first as Allocation).release({ ok: true });
    const again = router.acquire(session("alpha"), target());
    expect(again).not.toBeInstanceOf(Promise);
    (again as Allocation).release({ ok: true });
  });

  it("moves the session when its proxy turns unhealthy, and keeps it there", async () => {
    const { router, store, apply } = gateway();
    const first = await pick(router, session("alpha"));
    apply([
      section("c", ROWS.map((id) => proxy(id, { status: id === first ? "unhealthy" : "healthy" }))),
    ]);
    const moved = await pick(router, session("alpha"));
    expect(moved).not.toBe(first);
    // Healthy again, the proxy does not take its session back: the binding moved.
    apply([section("c", ROWS)]);
    for (let i = 0; i < 5; i++) expect(await pick(router, session("alpha"))).toBe(moved);
    await router.drain();
    expect(store.values.get("p1:alpha")?.proxyId).toBe(moved);
  });

  it("moves the session when its proxy leaves routing or is quarantined", async () => {
    const { router, apply } = gateway();
    const first = await pick(router, session("alpha"));
    apply([section("c", ROWS.filter((id) => id !== first))]);
    const second = await pick(router, session("alpha"));
    expect(second).not.toBe(first);
    apply([section("c", ROWS)], {
      ...emptyRuntime(),
      quarantines: [{ proxy_id: second, until_ms: NOW + 60_000 }],
    });
    // Placed afresh by its hash over what can serve now: the first proxy is back.
    expect(await pick(router, session("alpha"))).toBe(first);
  });

  describe("sticky_quarantine", () => {
    const resting = (proxyId: string) => ({
      ...emptyRuntime(),
      quarantines: [{ proxy_id: proxyId, until_ms: NOW + 60_000 }],
    });
    const rateLimited = (stickyQuarantine: boolean) =>
      connector("c", {
        rate_limit: {
          max_requests: 10,
          window_seconds: 60,
          quarantine_seconds_min: 30,
          quarantine_seconds_max: 60,
          sticky_quarantine: stickyQuarantine,
        },
      });

    it("on the project: 429 while the session's proxy rests, then the same proxy again", async () => {
      const { router, apply } = gateway({ project: { sticky_quarantine: true } });
      const first = await pick(router, session("alpha"));
      apply([section("c", ROWS)], resting(first));
      const refused = await router.acquire(session("alpha"), target());
      expect(isRefusal(refused) && [refused.status, refused.rejection]).toEqual([
        429,
        "session_proxy_quarantined",
      ]);
      // Other sessions are served meanwhile, never by the resting proxy.
      for (let i = 0; i < 20; i++) expect(await pick(router, session(`s${i}`))).not.toBe(first);
      apply([section("c", ROWS)], emptyRuntime());
      expect(await pick(router, session("alpha"))).toBe(first);
    });

    it("on the bound proxy's connector: the same; set nowhere: the session moves", async () => {
      const held = gateway({ sections: [section(rateLimited(true), ROWS)] });
      const first = await pick(held.router, session("alpha"));
      held.apply([section(rateLimited(true), ROWS)], resting(first));
      const refused = await held.router.acquire(session("alpha"), target());
      expect(isRefusal(refused) && refused.status).toBe(429);

      const moving = gateway({ sections: [section(rateLimited(false), ROWS)] });
      expect(await pick(moving.router, session("alpha"))).toBe(first);
      moving.apply([section(rateLimited(false), ROWS)], resting(first));
      expect(await pick(moving.router, session("alpha"))).not.toBe(first);
    });

    it("keeps the session's life sliding while it is refused, past the life's end", async () => {
      // Bound (by another gateway) to a proxy its hash would not pick: only the binding keeps it.
      const placed = await pick(gateway({ sticky: "none" }).router, session("alpha"));
      const bound = ROWS.find((id) => id !== placed)!;
      const clock = { nowMs: NOW };
      const { router, store, apply } = gateway({ project: { sticky_quarantine: true }, clock });
      store.values.set("p1:alpha", { proxyId: bound, untilMs: NOW + 300_000 });
      const until = NOW + 11 * 60_000;
      apply([section("c", ROWS)], {
        ...emptyRuntime(),
        quarantines: [{ proxy_id: bound, until_ms: until }],
      });
      // Asked every two minutes for ten: twice the session's five-minute life.
      for (let minute = 0; minute <= 10; minute += 2) {
        clock.nowMs = NOW + minute * 60_000;
        const refused = await router.acquire(session("alpha"), target());
        expect(isRefusal(refused) && refused.status).toBe(429);
      }
      clock.nowMs = NOW + 12 * 60_000;
      expect(await pick(router, session("alpha"))).toBe(bound);
    });

    it("holds a binding read from the store on a gateway that never saw the session", async () => {
      const { router, store, apply } = gateway({ project: { sticky_quarantine: true } });
      store.values.set("p1:alpha", { proxyId: "x7", untilMs: NOW + 10_000 });
      apply([section("c", ROWS)], resting("x7"));
      const refused = await router.acquire(session("alpha"), target());
      expect(isRefusal(refused) && refused.status).toBe(429);
      apply([section("c", ROWS)], emptyRuntime());
      expect(await pick(router, session("alpha"))).toBe("x7");
      expect(store.gets).toBe(1);
    });

    it("still moves a session whose proxy turned unhealthy or left routing", async () => {
      const { router, apply } = gateway({ project: { sticky_quarantine: true } });
      const first = await pick(router, session("alpha"));
      apply(
        [section(
          "c",
          ROWS.map((id) => proxy(id, { status: id === first ? "unhealthy" : "healthy" })),
        )],
        resting(first),
      );
      const moved = await pick(router, session("alpha"));
      expect(moved).not.toBe(first);
      apply([section("c", ROWS.filter((id) => id !== moved))], resting(first));
      const again = await pick(router, session("alpha"));
      expect([first, moved]).not.toContain(again);
    });
  });

  it("moves the session when a retry excludes its proxy, and when it asks another country", async () => {
    const { router } = gateway({
      sections: [section(connector("c"), [
        ...ROWS.map((id) => proxy(id, { country: "DE" })),
        proxy("us1", { country: "US" }),
      ])],
    });
    const first = await pick(router, session("alpha"));
    const retry = await pick(router, session("alpha"), new Set([first]));
    expect(retry).not.toBe(first);
    expect(await pick(router, session("alpha"))).toBe(retry);
    expect(await pick(router, session("alpha", { country: "US" }))).toBe("us1");
    const de = await pick(router, session("alpha", { country: "DE" }));
    expect(de).not.toBe("us1");
    expect(await pick(router, session("alpha", { country: "DE" }))).toBe(de);
  });

  it("warms a session's first request from the store, and writes that binding's life anew", async () => {
    const { router, store } = gateway();
    // Another gateway bound the session to x7.
    store.values.set("p1:alpha", { proxyId: "x7", untilMs: NOW + 10_000 });
    expect(await pick(router, session("alpha"))).toBe("x7");
    expect(await pick(router, session("alpha"))).toBe("x7");
    expect(store.gets).toBe(1);
    await router.drain();
    expect(store.sets).toEqual([{ key: "p1:alpha", proxyId: "x7", ttlMs: 300_000, atMs: NOW }]);
  });

  it("places the session afresh when the stored proxy cannot serve", async () => {
    const unbound = await pick(gateway({ sticky: "none" }).router, session("alpha"));
    const { router, store } = gateway();
    store.values.set("p1:alpha", { proxyId: "gone", untilMs: NOW + 10_000 });
    expect(await pick(router, session("alpha"))).toBe(unbound);
    await router.drain();
    expect(store.values.get("p1:alpha")?.proxyId).toBe(unbound);
  });

  it("shares one read among a session's concurrent first requests", async () => {
    const { router, store } = gateway();
    const results = await Promise.all(
      Array.from({ length: 5 }, () => router.acquire(session("alpha"), target(), new Set())),
    );
    const ids = results.map((r) => (r as Allocation).upstream.proxyId);
    expect(new Set(ids).size).toBe(1);
    expect(store.gets).toBe(1);
    for (const r of results) (r as Allocation).release({ ok: true });
  });

  describe("a store that fails", () => {
    it("that rejects: the session is placed afresh, one warning per outage", async () => {
      const unbound = await pick(gateway({ sticky: "none" }).router, session("alpha"));
      const failing: StickyStore = {
        get: () => Promise.reject(new Error("connection refused")),
        set: () => Promise.reject(new Error("connection refused")),
      };
      const { router, warnings } = gateway({ sticky: { store: failing } });
      expect(await pick(router, session("alpha"))).toBe(unbound);
      expect(await pick(router, session("alpha"))).toBe(unbound);
      expect(await pick(router, session("beta"))).toBeDefined();
      await router.drain();
      expect(warnings.sort()).toEqual([
        "Sticky binding not written to Redis: kept on this gateway",
        "Sticky binding unreadable: session placed afresh",
      ]);
    });

    it("that throws synchronously: the same", async () => {
      const throwing: StickyStore = {
        get: () => {
          throw new Error("bug");
        },
        set: () => {
          throw new Error("bug");
        },
      };
      const { router } = gateway({ sticky: { store: throwing } });
      expect(ROWS).toContain(await pick(router, session("alpha")));
      await router.drain();
    });

    it("that hangs: the request is placed within the deadline, and the read is told to give up", async () => {
      let signal: AbortSignal | undefined;
      const hanging: StickyStore = {
        get: (_p, _s, given) => {
          signal = given;
          return new Promise(() => {});
        },
        set: () => new Promise(() => {}),
      };
      const { router } = gateway({ sticky: { store: hanging, requestTimeoutMs: 50 } });
      const started = performance.now();
      expect(ROWS).toContain(await pick(router, session("alpha")));
      const elapsedMs = performance.now() - started;
      expect(elapsedMs).toBeGreaterThanOrEqual(45);
      expect(elapsedMs).toBeLessThan(500);
      expect(signal?.aborted).toBe(true);
      // The hung write is held only until its own deadline: a stop does not wait forever.
      const draining = performance.now();
      await router.drain();
      expect(performance.now() - draining).toBeLessThan(500);
    });
  });

  describe("the session's life", () => {
    it("is -sesstime- minutes when given, else the project's session TTL", async () => {
      const { router, store } = gateway({ project: { session_ttl_seconds: 120 } });
      await pick(router, session("timed", { sessionMinutes: 3 }));
      await pick(router, session("plain"));
      await router.drain();
      expect(store.sets.map((s) => [s.key, s.ttlMs])).toEqual([
        ["p1:timed", 180_000],
        ["p1:plain", 120_000],
      ]);
    });

    it("slides with every request, and ends that long after the last one", async () => {
      const { router, store, clock } = gateway();
      const alpha = session("alpha", { sessionMinutes: 1 });
      const movedElsewhere = () =>
        store.values.set("p1:alpha", { proxyId: "x8", untilMs: Infinity });
      store.values.set("p1:alpha", { proxyId: "x3", untilMs: Infinity });
      expect(await pick(router, alpha)).toBe("x3");
      for (let i = 0; i < 5; i++) {
        clock.nowMs += 50_000;
        // Another gateway moves the session; this one keeps its own copy while it lives.
        movedElsewhere();
        expect(await pick(router, alpha)).toBe("x3");
      }
      movedElsewhere();
      clock.nowMs += 59_999;
      expect(await pick(router, alpha)).toBe("x3");
      expect(store.gets).toBe(1);
      // A minute after its last request the local copy is gone: the next request reads again.
      movedElsewhere();
      clock.nowMs += 60_000;
      expect(await pick(router, alpha)).toBe("x8");
      expect(store.gets).toBe(2);
    });

    it("rewrites the store's copy at most once per half the life", async () => {
      const { router, store, clock } = gateway();
      const at = async (offsetMs: number) => {
        clock.nowMs = NOW + offsetMs;
        await pick(router, session("alpha"));
        await router.drain();
        return store.sets.length;
      };
      expect(await at(0)).toBe(1); // a new binding is written at once
      expect(await at(1_000)).toBe(1);
      expect(await at(100_000)).toBe(1);
      expect(await at(149_999)).toBe(1);
      expect(await at(150_000)).toBe(2); // half of 300 s after the write
      expect(await at(200_000)).toBe(2);
      expect(await at(299_999)).toBe(2);
      expect(await at(300_000)).toBe(3);
      for (let t = 300_000; t < 450_000; t += 10_000) expect(await at(t)).toBe(3);
      expect(store.sets.every((s) => s.ttlMs === 300_000)).toBe(true);
      expect(store.values.get("p1:alpha")!.untilMs).toBe(NOW + 600_000);
    });
  });

  it("keeps the writes held, so the gateway's stop can wait for them", async () => {
    const held = new HeldTasks();
    let finish: () => void = () => {};
    const slow: StickyStore = {
      get: () => Promise.resolve(undefined),
      set: () => new Promise((resolve) => (finish = resolve)),
    };
    const router = new CoreRouter({
      verifyPassword,
      nowMs: () => NOW,
      held,
      sticky: { store: slow },
    });
    router.apply(feed([section("c", ROWS)], { projects: [project({ strategy: "sticky" })] }));
    await pick(router, session("alpha"));
    expect(held.size).toBe(1);
    let drained = false;
    const draining = router.drain().then(() => (drained = true));
    // The drain must not end within the window while the store write hangs: time passing is
    // the check.
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(drained).toBe(false);
    finish();
    await draining;
    expect(held.size).toBe(0);
  });

  it("keeps its memory bounded: the least recently used session goes first", async () => {
    const { router, store } = gateway({ sticky: { maxSessions: 2 } });
    for (const id of ["a", "b", "a", "c"]) await pick(router, session(id)); // b goes
    expect(store.gets).toBe(3);
    await pick(router, session("a"));
    expect(store.gets).toBe(3);
    await pick(router, session("b")); // forgotten here: read again
    expect(store.gets).toBe(4);
  });
});

describe("session bindings", () => {
  it("expire, slide, and evict the least recently used past the cap", () => {
    const bindings = new SessionBindings(3);
    bindings.bind("a", "x1", 0, 100);
    bindings.bind("b", "x2", 0, 100);
    bindings.bind("c", "x3", 0, 100);
    bindings.touch("a", bindings.get("a", 50)!, 50, 100);
    bindings.bind("d", "x4", 60, 100); // over the cap: b, the least recently used, goes
    expect(bindings.size).toBe(3);
    expect(bindings.get("b", 60)).toBeUndefined();
    expect(bindings.get("a", 140)?.proxyId).toBe("x1"); // slid to 150
    expect(bindings.get("c", 100)).toBeUndefined(); // expired at 100
    expect(bindings.get("a", 150)).toBeUndefined();
    // Expired ones at the front are swept as new sessions come.
    const many = new SessionBindings(1000);
    for (let i = 0; i < 100; i++) many.bind(`s${i}`, "x", i, 10);
    expect(many.size).toBeLessThan(20);
  });
});
