/** The routing snapshot: which rows serve a place, and an incremental build that reuses indexes. */
import { describe, expect, it } from "vitest";
import { buildSnapshot, type ConnectorIndex } from "../../shared/routing/snapshot.ts";
import { Dispatch } from "../../shared/routing/dispatch.ts";
import {
  connector,
  emptyRuntime,
  feed,
  project,
  proxy,
  section,
} from "../../testkit/gateway/feed-fixtures.ts";
import type { UsernameOptions } from "../../shared/routing/contract.ts";

const ids = (index: ConnectorIndex, options: Omit<UsernameOptions, "user">) =>
  index.rowsFor({ user: "shop", ...options }).rows.map((p) => p.id);

describe("snapshot eligibility", () => {
  const undeclared = section(connector("c-any"), [
    proxy("de1", { country: "DE" }),
    proxy("us1", { country: "US" }),
    proxy("nocountry"),
    proxy("de-down", { country: "DE", status: "unhealthy" }),
    proxy("de-draining", { country: "DE", status: "draining" }),
  ]);
  const declared = section(connector("c-de-fr", { countries: ["DE", "FR"] }), [
    proxy("d-de", { country: "DE" }),
    proxy("d-us", { country: "US" }),
    proxy("d-unknown"),
  ]);
  const snapshot = buildSnapshot(feed([undeclared, declared]));
  const any = snapshot.connectors.get("c-any")!;
  const listed = snapshot.connectors.get("c-de-fr")!;

  it("serves only healthy rows; a request without a place takes any country", () => {
    expect(ids(any, {})).toEqual(["de1", "us1", "nocountry"]);
  });

  it("a proxy with a known country must match it exactly", () => {
    expect(ids(any, { country: "DE" })).toEqual(["de1"]);
    expect(ids(any, { country: "US" })).toEqual(["us1"]);
  });

  it("a proxy of unknown country serves only through its connector's list", () => {
    expect(ids(any, { country: "FR" })).toEqual([]);
    expect(ids(listed, { country: "FR" })).toEqual(["d-unknown"]);
    expect(ids(listed, { country: "DE" })).toEqual(["d-de", "d-unknown"]);
  });

  it("a connector that declares countries serves only those, never widened", () => {
    expect(ids(listed, { country: "US" })).toEqual([]);
    expect(listed.rowsFor({ user: "shop", country: "US" }).present).toBe(0);
  });

  it("counts rows that serve the place but are down, and leaves draining ones out", () => {
    expect(any.rowsFor({ user: "shop", country: "DE" }).present).toBe(2);
  });

  it("a state or city is served by no row whose place is unknown, never the country", () => {
    expect(ids(any, { country: "DE", state: "BY" })).toEqual([]);
    expect(ids(any, { country: "DE", city: "berlin" })).toEqual([]);
  });

  it("a state or city is served by the rows attribution saw there", () => {
    const s = buildSnapshot(feed([
      section(connector("seen"), [
        proxy("berlin", { country: "DE", region: "DE-BE", city: "berlin" }),
        proxy("munich", { country: "DE", region: "DE-BY", city: "munich" }),
        proxy("de", { country: "DE" }),
        proxy("paris", { country: "FR", region: "FR-IDF", city: "Paris" }),
      ]),
    ]));
    const seen = s.connectors.get("seen")!;
    expect(ids(seen, { country: "DE" })).toEqual(["berlin", "munich", "de"]);
    expect(ids(seen, { country: "DE", state: "BE" })).toEqual(["berlin"]);
    expect(ids(seen, { country: "DE", state: "BY", city: "munich" })).toEqual(["munich"]);
    expect(ids(seen, { country: "DE", state: "BE", city: "munich" })).toEqual([]);
    expect(ids(seen, { country: "DE", city: "berlin" })).toEqual(["berlin"]);
    // A city the feed did not carry as a slug is read as one.
    expect(ids(seen, { country: "FR", city: "paris" })).toEqual(["paris"]);
    // The state of another country never serves.
    expect(ids(seen, { country: "FR", state: "BE" })).toEqual([]);
  });

  it("under a strict location policy, rows whose sources disagree do not serve", () => {
    const rows = [
      proxy("agreed", { country: "DE" }),
      proxy("conflicted", { country: "DE", location_conflict: true }),
    ];
    const relaxed = buildSnapshot(feed([section(connector("c1"), rows)]));
    expect(ids(relaxed.connectors.get("c1")!, {})).toEqual(["agreed", "conflicted"]);
    expect(ids(relaxed.connectors.get("c1")!, { country: "DE" })).toEqual(["agreed", "conflicted"]);
    const strictFeed = feed([section(connector("c1"), rows)], {
      projects: [project({ location_policy: "strict" })],
    });
    // The same sections under a policy now strict: the connector is indexed again.
    const strict = buildSnapshot(strictFeed, relaxed);
    const c1 = strict.connectors.get("c1")!;
    expect(c1).not.toBe(relaxed.connectors.get("c1"));
    expect(ids(c1, {})).toEqual(["agreed"]);
    expect(ids(c1, { country: "DE" })).toEqual(["agreed"]);
    expect(c1.rowsFor({ user: "shop", country: "DE" }).present).toBe(1);
    // And back to warn: served again.
    const warn = buildSnapshot(
      feed([strictFeed.connectors.get("c1")!], {
        projects: [project({ location_policy: "warn" })],
      }),
      strict,
    );
    expect(ids(warn.connectors.get("c1")!, { country: "DE" })).toEqual(["agreed", "conflicted"]);
  });

  it("works a place out once for the life of the index", () => {
    const first = any.rowsFor({ user: "shop", country: "DE" });
    expect(any.rowsFor({ user: "shop", country: "DE" })).toBe(first);
  });

  it("domain filter: an allow list matches the host and names under it; a deny list refuses", () => {
    const s = buildSnapshot(feed([
      section(connector("allow", { domain_allow: ["Example.com", "*.shop.test"] }), ["a"]),
      section(connector("deny", { domain_deny: ["bing.com"] }), ["b"]),
    ]));
    const allow = s.connectors.get("allow")!;
    const deny = s.connectors.get("deny")!;
    expect(allow.allowsHost("example.com")).toBe(true);
    expect(allow.allowsHost("www.example.com")).toBe(true);
    expect(allow.allowsHost("a.shop.test")).toBe(true);
    expect(allow.allowsHost("badexample.com")).toBe(false);
    expect(allow.allowsHost("example.org")).toBe(false);
    expect(deny.allowsHost("www.bing.com")).toBe(false);
    expect(deny.allowsHost("bing.com")).toBe(false);
    expect(deny.allowsHost("notbing.com")).toBe(true);
  });

  it("indexes projects by username", () => {
    expect(snapshot.projectsByUsername.get("shop")?.id).toBe("p1");
    expect(snapshot.connectorsByProject.get("p1")?.map((c) => c.id)).toEqual(["c-any", "c-de-fr"]);
  });
});

describe("incremental build", () => {
  const a = section("a", ["a1", "a2"]);
  const b = section("b", ["b1", "b2"]);
  const first = buildSnapshot(feed([a, b]));

  it("a section carried over keeps its index; a changed one is rebuilt; slots are kept", () => {
    const b2 = section("b", [proxy("b1", { status: "unhealthy" }), "b2", "b3"]);
    const next = buildSnapshot(
      { ...first.sections, connectors: new Map([["a", a], ["b", b2]]) },
      first,
    );
    expect(next).not.toBe(first);
    expect(next.connectors.get("a")).toBe(first.connectors.get("a"));
    expect(next.connectors.get("b")).not.toBe(first.connectors.get("b"));
    expect(next.stats).toMatchObject({
      connectorsIndexed: 1,
      connectorsReused: 1,
      proxiesIndexed: 3,
    });
    const slotOf = (s: typeof first, c: string, id: string) =>
      s.connectors.get(c)!.proxies.find((p) => p.id === id)!.slot;
    expect(slotOf(next, "b", "b1")).toBe(slotOf(first, "b", "b1"));
    expect(slotOf(next, "b", "b3")).toBeGreaterThan(slotOf(first, "b", "b2"));
    expect(next.dispatch).toBe(first.dispatch);
    // The old snapshot is untouched: a request that started on it finishes on it.
    expect(first.connectors.get("b")!.anyPlace.rows.map((p) => p.id)).toEqual(["b1", "b2"]);
  });

  it("a runtime-only change costs no connector and no project", () => {
    const runtime = { ...emptyRuntime(), quarantines: [{ proxy_id: "a1", until_ms: 1 }] };
    const next = buildSnapshot({ ...first.sections, runtime }, first);
    expect(next.connectors).toBe(first.connectors);
    expect(next.connectorsByProject).toBe(first.connectorsByProject);
    expect(next.projectsByUsername).toBe(first.projectsByUsername);
    expect(next.stats).toMatchObject({
      connectorsIndexed: 0,
      projectsRebuilt: false,
      runtimeRebuilt: true,
    });
    expect(next.runtime.quarantineUntilMs.get("a1")).toBe(1);
  });

  it("a changed global section rebuilds the projects only", () => {
    const global = { ...first.sections.global, projects: [project({ username: "renamed" })] };
    const next = buildSnapshot({ ...first.sections, global }, first);
    expect(next.connectors).toBe(first.connectors);
    expect(next.runtime).toBe(first.runtime);
    expect(next.projectsByUsername.has("renamed")).toBe(true);
    expect(next.projectsByUsername.has("shop")).toBe(false);
  });

  it("a connector that leaves frees its proxies' slots once idle", () => {
    const s1 = buildSnapshot(feed([section("x", ["x1"]), section("y", ["y1"])]));
    const x1 = s1.connectors.get("x")!.proxies[0];
    const lease = s1.dispatch.acquire(x1, x1.slot, x1.connectorSlot, 0)!;
    const s2 = buildSnapshot({
      ...s1.sections,
      connectors: new Map([["y", s1.sections.connectors.get("y")!]]),
    }, s1);
    expect(s2.connectors.has("x")).toBe(false);
    expect(s2.stats.slotsLeavingBusy).toBe(1);
    lease.release({ ok: true });
    const s3 = buildSnapshot({ ...s2.sections, runtime: emptyRuntime() }, s2);
    expect(s3.stats.slotsLeavingBusy).toBe(0);
    expect(s3.dispatch.proxySlots.get("x1")).toBeUndefined();
    // Its slot goes to the next new proxy: the table does not grow with churn.
    const s4 = buildSnapshot({
      ...s3.sections,
      connectors: new Map([...s3.sections.connectors, ["z", section("z", ["z1"])]]),
    }, s3);
    expect(s4.connectors.get("z")!.proxies[0].slot).toBe(x1.slot);
    expect(s4.dispatch.proxySlots.size).toBe(2);
  });

  it("leaves out the proxies a full table has no slot for, and counts them", () => {
    const s1 = buildSnapshot(feed([section("x", ["x1", "x2", "x3"])]), undefined, {
      dispatch: new Dispatch({ maxProxySlots: 2 }),
    });
    expect(s1.connectors.get("x")!.proxies.map((p) => p.id)).toEqual(["x1", "x2"]);
    expect(ids(s1.connectors.get("x")!, {})).toEqual(["x1", "x2"]);
    expect(s1.stats.proxiesRefused).toBe(1);
  });
});
