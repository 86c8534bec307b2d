/**
 * Handing feeds from the main isolate to a worker (shared/routing/feed-share.ts) and a worker's
 * dispatch following the main one's (dispatch.ts `follow`): the worker's snapshot indexes every
 * row at the slot the main isolate gave it, counts are one set for both, unchanged sections keep
 * their index in the worker too, and a structured clone (what postMessage does) loses nothing.
 */
import { describe, expect, it } from "vitest";
import { Dispatch, type DispatchBuffers } from "../../shared/routing/dispatch.ts";
import {
  type SectionsDelta,
  sectionsDelta,
  SectionsMirror,
} from "../../shared/routing/feed-share.ts";
import { CoreRouter } from "../../shared/routing/router.ts";
import type { FeedSections } from "../../shared/feed/models.ts";
import {
  client,
  feed,
  section,
  target,
  verifyPassword,
} from "../../testkit/gateway/feed-fixtures.ts";

/** The main isolate and one worker, the worker fed through structured clones. */
function pair() {
  const main = new CoreRouter({ verifyPassword });
  const workerDispatch = new Dispatch({
    follow: structuredClone(main.dispatch.buffers as DispatchBuffers),
  });
  const worker = new CoreRouter({ verifyPassword, dispatch: workerDispatch });
  const mirror = new SectionsMirror();
  let shared: FeedSections | undefined;
  const apply = (sections: FeedSections): SectionsDelta => {
    const snapshot = main.apply(sections);
    const delta = sectionsDelta(shared, snapshot);
    shared = snapshot.sections;
    // What crosses to the worker: a clone, the buffers shared.
    const message = structuredClone({ delta, dispatch: main.dispatch.buffers as DispatchBuffers });
    workerDispatch.follow(
      message.dispatch,
      message.delta.proxySlots,
      message.delta.connectorSlots,
      message.delta.projectSlots,
    );
    worker.apply(mirror.apply(message.delta));
    workerDispatch.followed();
    return delta;
  };
  return { main, worker, apply };
}

function slotsOf(router: CoreRouter): Map<string, number> {
  const slots = new Map<string, number>();
  for (const index of router.snapshot!.connectors.values()) {
    slots.set(`connector:${index.id}`, index.slot);
    for (const entry of index.proxies) slots.set(entry.id, entry.slot);
  }
  for (const project of router.snapshot!.projectsById.values()) {
    slots.set(`project:${project.id}`, project.slot);
  }
  return slots;
}

describe("feed sharing between isolates", () => {
  it("indexes every row at the main isolate's slot and shares the counts", async () => {
    const { main, worker, apply } = pair();
    // The worker's own numbering would differ: it has seen another proxy first.
    const first = apply(feed([section("c1", ["a", "b"]), section("c2", ["c"])]));
    expect(first.global).toBeDefined();
    expect(first.connectors.map(([id]) => id).sort()).toEqual(["c1", "c2"]);
    expect(slotsOf(worker)).toEqual(slotsOf(main));

    const lease = await worker.acquire(client(), target(), new Set());
    if (!("upstream" in lease)) throw new Error("expected an allocation");
    const slot = main.snapshot!.connectors.get(lease.upstream.connectorId)!.proxy(
      lease.upstream.proxyId,
    )!.slot;
    expect(main.dispatch.inFlight(slot)).toBe(1);
    lease.release({ ok: true, latencyMs: 5 });
    expect(main.dispatch.inFlight(slot)).toBe(0);
    expect(main.dispatch.okCount(slot)).toBe(1);
  });

  it("hands over only what changed; unchanged connectors keep their index", () => {
    const { main, worker, apply } = pair();
    const c1 = section("c1", ["a", "b"]);
    const c2 = section("c2", ["c"]);
    const base = feed([c1, c2]);
    apply(base);
    const c1Index = worker.snapshot!.connectors.get("c1");

    // c2 changes (a row added), c3 arrives; c1 and the global section are the same objects.
    const next: FeedSections = {
      global: base.global,
      runtime: { schema: 1, quarantines: [], traffic_blocks: [], project_blocks: [] },
      connectors: new Map([["c1", c1], ["c2", section("c2", ["c", "d"])], [
        "c3",
        section("c3", ["e"]),
      ]]),
    };
    const delta = apply(next);
    expect(delta.global).toBeUndefined();
    expect(delta.runtime).toBeDefined();
    expect(delta.connectors.map(([id]) => id).sort()).toEqual(["c2", "c3"]);
    expect(delta.proxySlots.map(([id]) => id).sort()).toEqual(["c", "d", "e"]);
    expect(worker.snapshot!.connectors.get("c1")).toBe(c1Index);
    expect(slotsOf(worker)).toEqual(slotsOf(main));

    // c2 leaves.
    const last: FeedSections = {
      ...next,
      connectors: new Map([["c1", c1], ["c3", next.connectors.get("c3")!]]),
    };
    const removal = apply(last);
    expect(removal.removed).toEqual(["c2"]);
    expect(removal.connectors).toEqual([]);
    expect([...worker.snapshot!.connectors.keys()].sort()).toEqual(["c1", "c3"]);
    expect(slotsOf(worker)).toEqual(slotsOf(main));
  });

  it("follows a buffer the main isolate grew", () => {
    const { main, worker, apply } = pair();
    apply(feed([section("c1", ["p0"])]));
    // Far past the first size: the main isolate grows its buffers in place, the worker re-views.
    const ids = Array.from({ length: 5_000 }, (_, i) => `p${i}`);
    apply(feed([section("c1", ids)]));
    expect(slotsOf(worker)).toEqual(slotsOf(main));
    const lastSlot = main.snapshot!.connectors.get("c1")!.proxy("p4999")!.slot;
    const lease = main.dispatch.acquire(
      main.snapshot!.connectors.get("c1")!.proxy("p4999")!,
      lastSlot,
      0,
      0,
    );
    expect(worker.dispatch.inFlight(lastSlot)).toBe(1);
    lease?.release({ ok: true });
  });

  it("gives no slot to a proxy the numbering isolate handed none (its table was full)", () => {
    const dispatch = new Dispatch({ follow: new Dispatch().buffers as DispatchBuffers });
    expect(dispatch.proxySlots.assign("nobody")).toBe(-1);
  });
});
