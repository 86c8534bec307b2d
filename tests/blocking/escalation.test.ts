/**
 * Cost-aware escalation below the wire: the policy as read, connectors ranked in tiers, the
 * script that moves a site between tiers (in a real Redis, on a prefix of the test's own), the
 * escalation book two gateways share through it, and the router serving a site from its tier.
 */
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Escalations } from "../../gateway/blocking/escalations.ts";
import { readEscalationPolicy } from "../../shared/blocking/escalation.ts";
import type { FeedProject } from "../../shared/feed/models.ts";
import { runScript } from "../../shared/lua/loader.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import { isRefusal } from "../../shared/routing/contract.ts";
import type { EscalationView } from "../../shared/routing/escalation-contract.ts";
import { CoreRouter } from "../../shared/routing/router.ts";
import { connectorTiers } from "../../shared/routing/tiers.ts";
import {
  client,
  connector,
  feed,
  project,
  section,
  target,
  verifyPassword,
} from "../../testkit/gateway/feed-fixtures.ts";
import { loadScriptNode } from "../../testkit/metering.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { waitUntil } from "../../testkit/wait.ts";

const prefix = testPrefix();
const keys = redisKeys(prefix);
let redis: Redis;

beforeAll(() => {
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
});
afterEach(() => deletePrefix(TEST_REDIS_URL, prefix));
afterAll(() => {
  redis.disconnect();
});

const BLOCKING: FeedProject["blocking"] = {
  rules: [{ name: "captcha", mode: "on", status: [403], verdict: "blocked", cool_down_seconds: 0 }],
  retry: null,
  body_bytes: null,
  escalation: { up_after_blocks: 2, probe_after_seconds: 60, down_after_probes: 2 },
};

/** Three tiers: a free static list, a datacenter at 0.5 a GB, a residential pool at 8. */
function escalatedFeed(over: Partial<FeedProject> = {}) {
  return feed([
    section(connector("resi", { price_per_gb: 8 }), ["r1"]),
    section(connector("own"), ["o1", "o2"]),
    section(connector("dc", { price_per_gb: 0.5 }), ["d1"]),
  ], { projects: [project({ blocking: BLOCKING, ...over })] });
}

describe("the policy and the tiers", () => {
  it("reads the defaults, and refuses a field out of bounds naming it", () => {
    const issues: { path: string; message: string }[] = [];
    expect(readEscalationPolicy({}, issues)).toEqual({
      up_after_blocks: 3,
      probe_after_seconds: 600,
      down_after_probes: 3,
    });
    expect(readEscalationPolicy({ up_after_blocks: 0, later: 1 }, issues)).toBeUndefined();
    expect(issues.map((issue) => issue.path)).toEqual([".later", ".up_after_blocks"]);
    expect(readEscalationPolicy("yes", [])).toBeUndefined();
  });

  it("ranks by explicit tier, then price, equal ones sharing a tier", () => {
    const ranked = (list: { id: string; tier?: number; price_per_gb?: number }[]) =>
      connectorTiers(list, (entry) => entry).map((tier) => tier.map((entry) => entry.id));
    expect(ranked([
      { id: "resi", price_per_gb: 8 },
      { id: "own" },
      { id: "dc", price_per_gb: 0.5 },
      { id: "dc2", price_per_gb: 0.5 },
    ])).toEqual([["own"], ["dc", "dc2"], ["resi"]]);
    // An explicit tier lifts a connector above every cheaper-tiered one, whatever it costs.
    expect(ranked([
      { id: "resi", price_per_gb: 8 },
      { id: "own", tier: 2 },
      { id: "dc", price_per_gb: 0.5 },
    ])).toEqual([["dc"], ["resi"], ["own"]]);
  });
});

describe("the escalation script", () => {
  const report = async (
    runs: [
      site: string,
      tier: number,
      sawOk: 0 | 1,
      blocksAfter: number,
      sawBlock: 0 | 1,
      oks: number,
    ][],
    nowMs: number,
  ) => {
    const script = await loadScriptNode("escalation_report");
    return await runScript(redis, script, [keys.escalation("p1"), keys.escalationVersion("p1")], [
      String(nowMs),
      "3",
      "2",
      "60000",
      "2",
      "3600",
      "2",
      ...runs.flatMap((run) => run.map(String)),
    ]) as number[];
  };
  const state = async (site: string) => {
    const text = await redis.hget(keys.escalation("p1"), site);
    return text === null ? null : JSON.parse(text) as Record<string, unknown>;
  };

  it("moves a site up after a run of blocks, counting runs across reports", async () => {
    expect(await report([["shop.example", 0, 0, 2, 1, 0]], 1_000)).toEqual([0, 0, 0]);
    expect(await state("shop.example")).toMatchObject({ t: 0, b: 2 });
    expect(await redis.get(keys.escalationVersion("p1"))).toBeNull();
    // A good answer ends the run: one block after it is a run of one.
    await report([["shop.example", 0, 1, 1, 1, 0]], 2_000);
    expect(await state("shop.example")).toMatchObject({ t: 0, b: 1 });
    expect(await report([["shop.example", 0, 0, 2, 1, 0]], 3_000)).toEqual([1, 0, 0]);
    expect(await state("shop.example")).toMatchObject({
      t: 1,
      s: 3_000,
      w: "up",
      c: 3,
      f: 0,
      b: 0,
      n: 63_000,
    });
    expect(await redis.get(keys.escalationVersion("p1"))).toBe("1");
    // Blocks reported on the tier it left (a gateway's stale view) count for nothing.
    expect(await report([["shop.example", 0, 0, 5, 1, 0]], 4_000)).toEqual([0, 0, 0]);
    expect(await state("shop.example")).toMatchObject({ t: 1, b: 0 });
  });

  it("moves it down after good probes; a blocked probe waits again", async () => {
    await report([["shop.example", 0, 0, 3, 1, 0]], 1_000);
    await report([["shop.example", 1, 0, 3, 1, 0]], 2_000);
    expect(await state("shop.example")).toMatchObject({ t: 2, f: 1, n: 62_000 });
    // Probes on tier 1: one good, then a block, then one good: the probe failed.
    expect(await report([["shop.example", 1, 1, 0, 1, 1]], 70_000)).toEqual([0, 0, 1]);
    expect(await state("shop.example")).toMatchObject({ t: 2, p: 1, n: 130_000 });
    expect(await report([["shop.example", 1, 1, 0, 0, 1]], 131_000)).toEqual([0, 1, 0]);
    expect(await state("shop.example")).toMatchObject({
      t: 1,
      w: "down",
      c: 2,
      f: 2,
      p: 0,
      n: 191_000,
    });
    // Back on the cheapest: no probe time, the record kept to show what moved it.
    await report([["shop.example", 0, 1, 0, 0, 2]], 200_000);
    expect(await state("shop.example")).toMatchObject({ t: 0, w: "down", n: 0 });
  });

  it("keeps no record of a site never blocked, and at most the cap of new ones", async () => {
    await report([["calm.example", 0, 1, 0, 0, 9]], 1_000);
    expect(await state("calm.example")).toBeNull();
    await report([
      ["a.example", 0, 0, 1, 1, 0],
      ["b.example", 0, 0, 1, 1, 0],
      ["c.example", 0, 0, 1, 1, 0],
    ], 1_000);
    expect(await redis.hlen(keys.escalation("p1"))).toBe(2);
    expect(await state("c.example")).toBeNull();
  });
});

describe("the escalation book and the router", () => {
  /** One gateway: its router on the three tiers, its book on the test's Redis. */
  async function gateway(clock: { nowMs: number }) {
    const router = new CoreRouter({ verifyPassword, log: { warn() {} } });
    router.apply(escalatedFeed());
    const book = new Escalations({
      redis,
      keys,
      logger: { info() {}, warn() {} },
      script: await loadScriptNode("escalation_report"),
      tiers: router,
      nowMs: () => clock.nowMs,
      intervalMs: 20,
    });
    router.useEscalations(book);
    book.start();
    return { router, book };
  }

  const served = async (
    router: CoreRouter,
    host = "www.shop.example",
    exclude = new Set<string>(),
  ) => {
    const result = await router.acquire(client(), target(host), exclude);
    if (isRefusal(result)) throw new Error(`refused: ${result.reason}`);
    result.release({ ok: true });
    return result.upstream.connectorId;
  };

  it("serves a site from its tier on both gateways, and probes below when it is time", async () => {
    const clock = { nowMs: 1_000_000 };
    const one = await gateway(clock);
    const two = await gateway(clock);
    try {
      expect(one.router.tierOf("p1", "dc")).toBe(1);
      expect(await served(one.router)).toBe("own");
      // Two blocks in a row on the cheapest tier move the site (not its neighbours) up.
      one.book.judged("p1", "shop.example", "own", false);
      one.book.judged("p1", "shop.example", "own", false);
      await waitUntil(() => two.book.level("p1", "shop.example")?.tier === 1, {
        message: "the other gateway reads the move",
      });
      expect(await served(two.router)).toBe("dc");
      expect(await served(two.router, "news.example")).toBe("own");
      // A tier with nothing left to try hands the request on to the tier above.
      expect(await served(two.router, "www.shop.example", new Set(["d1"]))).toBe("resi");
      expect(two.book.level("p1", "shop.example")?.probing).toBe(false);
      // A minute on: requests probe the tier below; two good probes bring the site down.
      clock.nowMs += 61_000;
      expect(two.book.level("p1", "shop.example")?.probing).toBe(true);
      expect(await served(two.router)).toBe("own");
      two.book.judged("p1", "shop.example", "own", true);
      two.book.judged("p1", "shop.example", "own", true);
      await waitUntil(() => one.book.level("p1", "shop.example") === undefined, {
        message: "the other gateway reads the move",
      });
      expect(await served(one.router)).toBe("own");
      expect(one.book.ups + two.book.ups).toBe(1);
      expect(one.book.downs + two.book.downs).toBe(1);
    } finally {
      await Promise.all([one.book.close(), two.book.close()]);
    }
  });

  it("keeps a sticky session's tiers alone unless the project lets it move", () => {
    const router = new CoreRouter({ verifyPassword, log: { warn() {} } });
    router.apply(escalatedFeed());
    const upOne: EscalationView = { level: () => ({ tier: 2, probing: false }) };
    router.useEscalations(upOne);
    const sticky = client({ user: "shop", sessionId: "s1" });
    const pick = (c = client()) => {
      const result = router.acquire(c, target("shop.example"));
      if (result instanceof Promise || isRefusal(result)) throw new Error("not served at once");
      result.release({ ok: true });
      return result.upstream.connectorId;
    };
    expect(pick()).toBe("resi");
    // Round robin over every connector: the session is not tiered.
    expect(new Set([pick(sticky), pick(sticky), pick(sticky)]).size).toBeGreaterThan(1);
    router.apply(escalatedFeed({
      blocking: {
        ...BLOCKING!,
        retry: { attempts: 2, methods: ["GET"], max_total_seconds: 30, rebind_sticky: true },
      },
    }));
    expect([pick(sticky), pick(sticky)]).toEqual(["resi", "resi"]);
  });

  it("is not tiered without escalation, or with a single tier", () => {
    const router = new CoreRouter({ verifyPassword, log: { warn() {} } });
    router.useEscalations({ level: () => ({ tier: 2, probing: false }) });
    router.apply(escalatedFeed({ blocking: { ...BLOCKING!, escalation: null } }));
    expect(router.escalation("p1")).toBeUndefined();
    expect(router.escalatedProjects()).toEqual([]);
    router.apply(feed([section("own", ["o1"])], { projects: [project({ blocking: BLOCKING })] }));
    expect(router.escalation("p1")).toBeUndefined();
  });
});
