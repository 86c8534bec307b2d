/** The router: credentials, eligibility, weights, strategies, exclusions and every refusal. */
import { describe, expect, it } from "vitest";
import { CoreRouter, LOCAL_QUARANTINE_MAX_MS } from "../../shared/routing/router.ts";
import { FeedFreshness } from "../../shared/routing/feed-freshness.ts";
import {
  type Allocation,
  isRefusal,
  type Refusal,
  RejectionReason,
} from "../../shared/routing/contract.ts";
import type { RoutingStrategy } from "../../shared/routing/strategy-contract.ts";
import type { FeedSections } from "../../shared/feed/models.ts";
import {
  basic,
  client,
  connector,
  digestOf,
  emptyRuntime,
  feed,
  project,
  proxy,
  section,
  target,
  verifyPassword,
} from "../../testkit/gateway/feed-fixtures.ts";

const NOW = 1_700_000_000_000;
const RATE_LIMIT = {
  max_requests: 3,
  window_seconds: 60,
  quarantine_seconds_min: 60,
  quarantine_seconds_max: 60,
  sticky_quarantine: false,
};

function routerFor(
  sections: FeedSections,
  extra: Partial<ConstructorParameters<typeof CoreRouter>[0]> = {},
) {
  const warnings: string[] = [];
  const router = new CoreRouter({
    verifyPassword,
    nowMs: () => NOW,
    log: { warn: (message) => warnings.push(message) },
    ...extra,
  });
  router.apply(sections);
  return { router, warnings };
}

async function pick(
  router: CoreRouter,
  c = client(),
  host = "example.com",
  exclude = new Set<string>(),
) {
  const result = await router.acquire(c, target(host), exclude);
  if (isRefusal(result)) throw new Error(`refused: ${result.status} ${result.reason}`);
  result.release({ ok: true });
  return result.upstream;
}

async function refusal(
  router: CoreRouter,
  c = client(),
  host = "example.com",
  exclude = new Set<string>(),
) {
  const result = await router.acquire(c, target(host), exclude);
  if (!isRefusal(result)) {
    result.release({ ok: true });
    throw new Error(`served by ${result.upstream.proxyId}`);
  }
  return result;
}

function tally(values: readonly string[]) {
  const counts = new Map<string, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return counts;
}

describe("authenticate", () => {
  it("reads Basic credentials and the username's options", async () => {
    const { router } = routerFor(feed([section("c", ["x"])]));
    const result = await router.authenticate(basic("shop-cc-uk-sessid-42"));
    expect(result).toEqual({
      ok: true,
      client: {
        projectId: "p1",
        options: { user: "shop", country: "GB", sessionId: "42" },
        connectTimeoutMs: 30_000,
        maxRetries: 3,
      },
    });
  });

  it.each([
    ["no header", null],
    ["another scheme", "Bearer abc"],
    ["bad base64", "Basic !!!"],
    ["no colon", `Basic ${btoa("shop")}`],
    ["unknown project", basic("nobody")],
    ["wrong password", basic("shop", "wrong-password")],
  ])("%s: 407", async (_, header) => {
    const { router } = routerFor(feed([section("c", ["x"])]));
    expect(await router.authenticate(header)).toEqual({
      ok: false,
      refusal: {
        status: 407,
        proxyStatus: "http_request_denied",
        reason: "Valid project credentials required in Proxy-Authorization header",
        rejection: RejectionReason.unauthenticated,
      },
    });
  });

  it("bad options: 400 with the grammar's message", async () => {
    const { router } = routerFor(feed([section("c", ["x"])]));
    expect(await router.authenticate(basic("shop-st-ny"))).toEqual({
      ok: false,
      refusal: {
        status: 400,
        proxyStatus: "http_request_error",
        reason: "State and city targeting need a country: add -cc-<code>, such as user-cc-us-st-ny",
        rejection: RejectionReason.invalidLocation,
      },
    });
  });

  it("checks a password once, then from the cache until the digest changes", async () => {
    let checks = 0;
    const counting = (password: string, digest: string) => {
      checks++;
      return verifyPassword(password, digest);
    };
    const { router } = routerFor(feed([section("c", ["x"])]), { verifyPassword: counting });
    for (let i = 0; i < 5; i++) expect((await router.authenticate(basic("shop"))).ok).toBe(true);
    expect(checks).toBe(1);
    expect((await router.authenticate(basic("shop", "wrong-one"))).ok).toBe(false);
    expect(checks).toBe(2);
    const changed = feed([section("c", ["x"])], {
      projects: [project({ password_digest: digestOf("new-pass") })],
    });
    router.apply(changed);
    expect((await router.authenticate(basic("shop"))).ok).toBe(false);
    expect((await router.authenticate(basic("shop", "new-pass"))).ok).toBe(true);
    expect(checks).toBe(4);
  });

  it("asks afresh under a new snapshot: a project gone since refuses a header it accepted", async () => {
    const { router } = routerFor(feed([section("c", ["x"])]));
    const header = basic("shop-cc-us");
    const first = await router.authenticate(header);
    expect(first.ok && first.client.options.country).toBe("US");
    expect((await router.authenticate(header)).ok).toBe(true);
    router.apply(feed([section("c", ["x"])], { projects: [] }));
    const after = await router.authenticate(header);
    expect(after.ok === false && after.refusal.status).toBe(407);
  });

  it("hands the project's connection timeout on with the client", async () => {
    const { router } = routerFor(
      feed([section("c", ["x"])], { projects: [project({ connection_timeout_seconds: 7 })] }),
    );
    const result = await router.authenticate(basic("shop"));
    expect(result.ok && result.client.connectTimeoutMs).toBe(7_000);
  });

  it("hands the project's max_retries on with the client, bounded", async () => {
    for (const [given, handed] of [[0, 0], [4, 4], [1000, 10], [-1, undefined]]) {
      const { router } = routerFor(
        feed([section("c", ["x"])], { projects: [project({ max_retries: given })] }),
      );
      const result = await router.authenticate(basic("shop"));
      expect(result.ok && result.client.maxRetries).toBe(handed);
    }
  });

  it("answers 503 before the first feed and says it is not ready", async () => {
    const router = new CoreRouter({ verifyPassword });
    expect(router.ready).toBe(false);
    const result = await router.authenticate(basic("shop"));
    expect(result.ok === false && result.refusal.status).toBe(503);
  });
});

describe("a bound on a stale feed (OCTOPROX_FEED_MAX_STALE)", () => {
  const sections = () => feed([section("c", ["a"])]);

  it("routes while the last read is within the bound, refuses past it, and routes again after a read", async () => {
    let now = NOW;
    const freshness = new FeedFreshness(2_000);
    const { router } = routerFor(sections(), { freshness, nowMs: () => now });
    freshness.read(now);
    now += 2_000;
    expect(await pick(router)).toMatchObject({ proxyId: "a" });
    now += 1;
    const refused = await router.acquire(client(), target("example.com"));
    expect(isRefusal(refused) && refused).toMatchObject({
      status: 503,
      rejection: RejectionReason.feedStale,
    });
    expect((refused as Refusal).reason).toBe(
      "The gateway's routing feed is stale: not read for 2 s (OCTOPROX_FEED_MAX_STALE is 2 s)",
    );
    freshness.read(now);
    expect(await pick(router)).toMatchObject({ proxyId: "a" });
  });

  it("is off at 0: any age routes", async () => {
    const freshness = new FeedFreshness(0);
    freshness.read(NOW - 86_400_000);
    const { router } = routerFor(sections(), { freshness });
    expect(await pick(router)).toMatchObject({ proxyId: "a" });
    expect(freshness.staleForMs(NOW)).toBeUndefined();
    expect(freshness.recheckIntervalMs(30_000)).toBe(30_000);
  });

  it("a worker isolate's copy reads the main isolate's time through the shared word", () => {
    const main = new FeedFreshness(5_000);
    const worker = new FeedFreshness(5_000, main.buffer);
    expect(worker.ageMs(NOW)).toBeUndefined();
    main.read(NOW - 6_000);
    expect(worker.staleForMs(NOW)).toBe(6_000);
    main.read(NOW);
    expect(worker.staleForMs(NOW)).toBeUndefined();
    // The follower reads the head at least four times within the bound.
    expect(main.recheckIntervalMs(30_000)).toBe(1_250);
  });
});

describe("choosing an upstream", () => {
  it("round_robin visits every proxy of a connector in turn", async () => {
    const { router } = routerFor(feed([section("c", ["x1", "x2", "x3", "x4"])]));
    const seen = [];
    for (let i = 0; i < 8; i++) seen.push((await pick(router)).proxyId);
    expect(seen).toEqual(["x1", "x2", "x3", "x4", "x1", "x2", "x3", "x4"]);
  });

  it("round_robin keeps a cursor per place", async () => {
    const { router } = routerFor(feed([section("c", [
      proxy("de1", { country: "DE" }),
      proxy("us1", { country: "US" }),
      proxy("de2", { country: "DE" }),
    ])]));
    const de = client({ user: "shop", country: "DE" });
    expect((await pick(router, de)).proxyId).toBe("de1");
    expect((await pick(router)).proxyId).toBe("de1");
    expect((await pick(router, de)).proxyId).toBe("de2");
    expect((await pick(router)).proxyId).toBe("us1");
  });

  it("weights 1 and 3 give about 25% and 75% (round_robin exactly, smooth: A A B A)", async () => {
    const sections = [
      section(connector("light", { weight: 1 }), ["l1", "l2"]),
      section(connector("heavy", { weight: 3 }), ["h1", "h2"]),
    ];
    const { router } = routerFor(feed(sections));
    const order = [];
    for (let i = 0; i < 400; i++) order.push((await pick(router)).connectorId);
    expect(order.slice(0, 4)).toEqual(["heavy", "heavy", "light", "heavy"]);
    expect(tally(order).get("heavy")).toBe(300);

    const random =
      routerFor(feed(sections, { projects: [project({ strategy: "random" })] })).router;
    const drawn = [];
    for (let i = 0; i < 4000; i++) drawn.push((await pick(random)).connectorId);
    expect(tally(drawn).get("heavy")! / 4000).toBeCloseTo(0.75, 1);
  });

  it("equal weights split about 50/50 however many rows each connector has", async () => {
    const sections = [
      section("ten", Array.from({ length: 10 }, (_, i) => `t${i}`)),
      section("one", ["o1"]),
    ];
    for (const strategy of ["round_robin", "random"] as const) {
      const { router } = routerFor(feed(sections, { projects: [project({ strategy })] }));
      const picks = [];
      for (let i = 0; i < 2000; i++) picks.push((await pick(router)).connectorId);
      expect(tally(picks).get("one")! / 2000).toBeCloseTo(0.5, 1);
    }
  });

  it("random spreads over every row", async () => {
    const rows = Array.from({ length: 10 }, (_, i) => `r${i}`);
    const { router } = routerFor(
      feed([section("c", rows)], { projects: [project({ strategy: "random" })] }),
    );
    const picks = [];
    for (let i = 0; i < 5000; i++) picks.push((await pick(router)).proxyId);
    const counts = tally(picks);
    expect(counts.size).toBe(10);
    for (const n of counts.values()) expect(n).toBeGreaterThan(350);
  });

  it("excluded proxies (already tried for this request) are skipped: a retry takes another", async () => {
    const { router } = routerFor(feed([section("c", ["x1", "x2", "x3"])]));
    const first = await pick(router);
    const retry = await pick(router, client(), "example.com", new Set([first.proxyId]));
    expect(retry.proxyId).not.toBe(first.proxyId);
    const third = await pick(
      router,
      client(),
      "example.com",
      new Set([first.proxyId, retry.proxyId]),
    );
    expect([first.proxyId, retry.proxyId]).not.toContain(third.proxyId);
    const none = await refusal(router, client(), "example.com", new Set(["x1", "x2", "x3"]));
    expect(none).toMatchObject({ status: 502, rejection: RejectionReason.allProxiesTried });
  });

  it("skips disabled, pending-deletion and unhealthy, and only the project's own connectors", async () => {
    const { router } = routerFor(feed([
      section(connector("off", { enabled: false }), ["off1"]),
      section(connector("deleting", { pending_deletion: true }), ["del1"]),
      section("mixed", [proxy("sick", { status: "degraded" }), "good"]),
      section(connector("other", { project_id: "p2" }), ["theirs"]),
    ]));
    for (let i = 0; i < 5; i++) expect((await pick(router)).proxyId).toBe("good");
  });

  it("skips quarantined proxies and traffic-blocked connectors, and lets them back when it ends", async () => {
    const runtime = {
      ...emptyRuntime(),
      quarantines: [{ proxy_id: "a1", until_ms: NOW + 1000 }, {
        proxy_id: "a2",
        until_ms: NOW - 1,
      }],
      traffic_blocks: [{ connector_id: "b", until_ms: NOW + 1000 }],
    };
    const { router } = routerFor(
      feed([section("a", ["a1", "a2"]), section("b", ["b1"])], { runtime }),
    );
    for (let i = 0; i < 4; i++) expect((await pick(router)).proxyId).toBe("a2");
  });

  it("allocates no proxy past its usable-until, whatever the feed says, and refuses when none is left", async () => {
    let now = NOW;
    const { router } = routerFor(
      feed([section("p", [
        proxy("short", { usable_until_ms: NOW + 1000 }),
        proxy("long", { usable_until_ms: NOW + 60_000 }),
      ])]),
      { nowMs: () => now },
    );
    const seen = new Set<string>();
    for (let i = 0; i < 4; i++) seen.add((await pick(router)).proxyId);
    expect(seen).toEqual(new Set(["short", "long"]));
    now = NOW + 1000;
    for (let i = 0; i < 4; i++) expect((await pick(router)).proxyId).toBe("long");
    now = NOW + 60_000;
    const refused = await router.acquire(client(), target(), new Set());
    expect(isRefusal(refused) && refused.status).toBe(503);
  });

  it("honours a proxy's concurrency limit and moves on to the next", async () => {
    const { router } = routerFor(
      feed([section("c", [proxy("one", { max_concurrency: 1 }), "two"])]),
    );
    const held = await router.acquire(client(), target(), new Set());
    expect(isRefusal(held) || held.upstream.proxyId).toBe("one");
    for (let i = 0; i < 3; i++) expect((await pick(router)).proxyId).toBe("two");
    (held as Allocation).release({ ok: true });
  });

  it("serves a strategy it has no implementation of as round_robin, warning once", async () => {
    const { router, warnings } = routerFor(
      feed([section("c", ["x1", "x2"])], { projects: [project({ strategy: "least_used" })] }),
      { strategies: { least_used: undefined } },
    );
    expect((await pick(router)).proxyId).toBe("x1");
    expect((await pick(router)).proxyId).toBe("x2");
    expect(warnings).toEqual(["Routing strategy not available yet: served as round_robin"]);
  });

  it("takes asynchronous strategies (sticky's shape), and selects again when a reservation is lost", async () => {
    const asyncFirst: RoutingStrategy = {
      name: "sticky",
      select: (candidates) => Promise.resolve(candidates.choices[0].rows.find(candidates.usable)),
    };
    const { router } = routerFor(
      feed([section("c", [proxy("x1", { max_concurrency: 1 }), "x2"])], {
        projects: [project({ strategy: "sticky" })],
      }),
      { strategies: { sticky: () => asyncFirst } },
    );
    const result = router.acquire(client(), target());
    expect(result).toBeInstanceOf(Promise);
    const first = (await result) as Allocation;
    expect(first.upstream.proxyId).toBe("x1");
    expect((await pick(router)).proxyId).toBe("x2");
    first.release({ ok: true });

    // A strategy that ignores `usable` and returns a full proxy loses the race and is asked again.
    let calls = 0;
    const stubborn: RoutingStrategy = {
      name: "sticky",
      select: (candidates) => {
        calls++;
        return calls === 1 ? candidates.choices[0].rows[0] : candidates.choices[0].rows[1];
      },
    };
    const r2 = routerFor(
      feed([section("c", [proxy("x1", { max_concurrency: 1 }), "x2"])], {
        projects: [project({ strategy: "sticky" })],
      }),
      { strategies: { sticky: () => stubborn } },
    ).router;
    const hold = r2.dispatch.acquire(
      r2.snapshot!.connectors.get("c")!.proxies[0],
      r2.snapshot!.connectors.get("c")!.proxies[0].slot,
      r2.snapshot!.connectors.get("c")!.slot,
      1,
    )!;
    expect((await pick(r2)).proxyId).toBe("x2");
    expect(calls).toBe(2);
    hold.release({ ok: true });
  });

  it("the sync path answers without a Promise for the built-in strategies", () => {
    const { router } = routerFor(feed([section("c", ["x1"])]));
    const result = router.acquire(client(), target());
    expect(result).not.toBeInstanceOf(Promise);
    (result as Allocation).release({ ok: true });
  });
});

describe("refusals", () => {
  const expectRefusal = (r: Refusal, status: number, proxyStatus: string, reason: string) =>
    expect(r).toMatchObject({ status, proxyStatus, reason });

  it("502 naming the country when nothing serves it (never widened)", async () => {
    const { router } = routerFor(feed([section(connector("c", { countries: ["US"] }), [
      proxy("us1", { country: "US" }),
    ])]));
    expectRefusal(
      await refusal(router, client({ user: "shop", country: "DE" })),
      502,
      "destination_unavailable",
      "No upstream proxy available for DE",
    );
  });

  it("502 naming state and city", async () => {
    const { router } = routerFor(feed([section("c", [proxy("us1", { country: "US" })])]));
    expectRefusal(
      await refusal(router, client({ user: "shop", country: "US", state: "NY", city: "new_york" })),
      502,
      "destination_unavailable",
      "No upstream proxy available for US, state NY, city new_york",
    );
  });

  it("502 with 'and this domain' when the domain filter excluded the rest", async () => {
    const { router } = routerFor(feed([
      section(connector("c", { domain_deny: ["blocked.test"] }), [proxy("de1", { country: "DE" })]),
    ]));
    expectRefusal(
      await refusal(router, client({ user: "shop", country: "DE" }), "www.blocked.test"),
      502,
      "destination_unavailable",
      "No upstream proxy available for DE and this domain",
    );
    expectRefusal(
      await refusal(router, client(), "blocked.test"),
      502,
      "destination_unavailable",
      "No upstream proxy available for this domain",
    );
  });

  it("502 for a project without connectors", async () => {
    const { router } = routerFor(feed([]));
    expect((await refusal(router)).reason).toBe("No upstream proxy available for this project");
  });

  it("503 when every proxy that serves the request is down", async () => {
    const { router } = routerFor(feed([section("c", [
      proxy("x1", { status: "unhealthy" }),
      proxy("x2", { status: "initializing" }),
    ])]));
    expectRefusal(
      await refusal(router),
      503,
      "destination_unavailable",
      "Every upstream proxy for this request is down",
    );
  });

  it("a quarantine this gateway tripped excludes the proxy at once, for 10 s at most, until the feed carries it", async () => {
    let now = NOW;
    const sections = feed([section(connector("c", { rate_limit: RATE_LIMIT }), ["x1", "x2"])]);
    const { router } = routerFor(sections, { nowMs: () => now });
    // The rate limiter tripped x1 for a minute: excluded here before any feed says so.
    router.quarantineLocally("x1", now + 60_000);
    for (let i = 0; i < 4; i++) expect((await pick(router)).proxyId).toBe("x2");
    // Once the feed carries the quarantine, the feed's copy rules; its lift (an api call) frees x1.
    const carried = {
      ...emptyRuntime(),
      quarantines: [{ proxy_id: "x1", until_ms: now + 60_000 }],
    };
    router.apply({ ...sections, runtime: carried });
    expect(router.localQuarantineCount).toBe(0);
    for (let i = 0; i < 2; i++) expect((await pick(router)).proxyId).toBe("x2");
    router.apply({ ...sections, runtime: emptyRuntime() });
    expect(new Set([(await pick(router)).proxyId, (await pick(router)).proxyId])).toEqual(
      new Set(["x1", "x2"]),
    );
    // A feed that never carries it (Redis away): the local copy ends after 10 s.
    router.quarantineLocally("x1", now + 60_000);
    now += LOCAL_QUARANTINE_MAX_MS - 1;
    for (let i = 0; i < 2; i++) expect((await pick(router)).proxyId).toBe("x2");
    now += 1;
    expect(new Set([(await pick(router)).proxyId, (await pick(router)).proxyId])).toEqual(
      new Set(["x1", "x2"]),
    );
    // A shorter quarantine ends when it does.
    router.quarantineLocally("x2", now + 1_000);
    for (let i = 0; i < 2; i++) expect((await pick(router)).proxyId).toBe("x1");
    now += 1_000;
    expect(new Set([(await pick(router)).proxyId, (await pick(router)).proxyId])).toEqual(
      new Set(["x1", "x2"]),
    );
  });

  it("says which connectors' running transfers the interrupt traffic action stops", () => {
    let now = NOW;
    const runtime = {
      ...emptyRuntime(),
      traffic_blocks: [
        { connector_id: "cut", until_ms: NOW + 1000 },
        { connector_id: "kept", until_ms: NOW + 1000 },
      ],
    };
    const traffic = (action: string) => ({ action, limit_status: 509 });
    const { router } = routerFor(
      feed([
        section(connector("cut", { traffic: traffic("interrupt") }), ["c1"]),
        section(connector("kept", { traffic: traffic("block") }), ["k1"]),
        section(connector("open", { traffic: traffic("interrupt") }), ["o1"]),
      ], { runtime }),
      { nowMs: () => now },
    );
    expect(router.interrupts("cut")).toBe(true);
    expect(router.interrupts("kept")).toBe(false);
    expect(router.interrupts("open")).toBe(false);
    expect(router.interrupts("gone")).toBe(false);
    now = NOW + 1000;
    expect(router.interrupts("cut")).toBe(false);
  });

  it("refuses a project blocked by its quota with its limit status, and stops its transfers under interrupt", () => {
    let now = NOW;
    const runtime = {
      ...emptyRuntime(),
      project_blocks: [{ project_id: "p1", until_ms: NOW + 1000 }],
    };
    const quota = (action: string, limit_status: number) => ({ action, limit_status });
    const build = (traffic_quota: { action: string; limit_status: number } | null) =>
      routerFor(
        feed([section("c", ["x1"])], {
          runtime,
          projects: [project({ traffic_quota }), project({ id: "p2", username: "other" })],
        }),
        { nowMs: () => now },
      ).router;
    const blocked = build(quota("interrupt", 429));
    expect(blocked.quotaRefusal("p1")).toMatchObject({
      status: 429,
      proxyStatus: "bandwidth_limit_exceeded",
      rejection: "quota_exceeded",
    });
    expect(blocked.quotaRefusal("p2")).toBeUndefined();
    expect(blocked.interrupts("c", "p1")).toBe(true);
    expect(blocked.interrupts("c", "p2")).toBe(false);
    expect(blocked.quotaLimited("p1")).toBe(true);
    expect(blocked.quotaLimited("p2")).toBe(false);
    expect(build(quota("block", 509)).quotaRefusal("p1")).toMatchObject({ status: 509 });
    expect(build(quota("block", 509)).interrupts("c", "p1")).toBe(false);
    now = NOW + 1000;
    expect(blocked.quotaRefusal("p1")).toBeUndefined();
    expect(blocked.interrupts("c", "p1")).toBe(false);
  });

  it("429 when every eligible proxy is quarantined", async () => {
    const runtime = { ...emptyRuntime(), quarantines: [{ proxy_id: "x1", until_ms: NOW + 5 }] };
    const { router } = routerFor(feed([section("c", ["x1"])], { runtime }));
    expectRefusal(
      await refusal(router),
      429,
      "connection_limit_reached",
      "All proxies are temporarily rate-limited. Retry later.",
    );
  });

  it("the connector's limit status when every connector that could serve is traffic-blocked", async () => {
    const runtime = {
      ...emptyRuntime(),
      traffic_blocks: [{ connector_id: "a", until_ms: NOW + 5 }, {
        connector_id: "b",
        until_ms: NOW + 5,
      }],
    };
    const blocked =
      routerFor(feed([section("a", ["a1"]), section("b", ["b1"])], { runtime })).router;
    expect(await refusal(blocked)).toMatchObject({
      status: 509,
      proxyStatus: "bandwidth_limit_exceeded",
      rejection: RejectionReason.trafficLimitExceeded,
    });
    const tooMany = routerFor(feed([
      section(connector("a", { traffic: { action: "block", limit_status: 429 } }), ["a1"]),
    ], { runtime })).router;
    expect((await refusal(tooMany)).status).toBe(429);
  });

  it("503 when every eligible proxy is at its concurrency limit", async () => {
    const { router } = routerFor(feed([section("c", [proxy("x1", { max_concurrency: 1 })])]));
    const held = (await router.acquire(client(), target(), new Set())) as Allocation;
    expect(await refusal(router)).toMatchObject({
      status: 503,
      proxyStatus: "connection_limit_reached",
      rejection: RejectionReason.allProxiesBusy,
    });
    held.release({ ok: true });
    expect((await pick(router)).proxyId).toBe("x1");
  });

  it("407 when the client's project left the feed since it authenticated", async () => {
    const { router } = routerFor(feed([section("c", ["x1"])]));
    expect((await refusal(router, client({ user: "gone" }, "p-gone"))).status).toBe(407);
  });
});

describe("a strategy that raises", () => {
  it("still has the request served, at random, with one warning", async () => {
    const failing: RoutingStrategy = {
      name: "sticky",
      select: () => Promise.reject(new Error("redis away")),
    };
    const { router, warnings } = routerFor(
      feed([section("c", ["x1", "x2"])], { projects: [project({ strategy: "sticky" })] }),
      { strategies: { sticky: () => failing } },
    );
    expect(["x1", "x2"]).toContain((await pick(router)).proxyId);
    expect(["x1", "x2"]).toContain((await pick(router)).proxyId);
    expect(warnings).toEqual(["Routing strategy failed: request placed at random"]);
  });
});
