/**
 * Seed 001 §7.1's invariants on the dispatch counts; slots that outlive their proxies, are reused
 * once idle under a new epoch, and are bounded.
 */
import { dispatchSamples } from "../../gateway/base/dispatch-metrics.ts";
import { renderSamples } from "../../gateway/base/metrics.ts";
import { describe, expect, it } from "vitest";
import {
  Dispatch,
  type DispatchBuffers,
  DispatchErrorKind,
  type Lease,
} from "../../shared/routing/dispatch.ts";
import type { UpstreamChoice } from "../../shared/routing/contract.ts";

const upstream: UpstreamChoice = {
  proxyId: "x1",
  connectorId: "c1",
  scheme: "http",
  host: "x1.test",
  port: 3128,
  username: null,
  password: null,
};

function setUp() {
  const dispatch = new Dispatch();
  const slot = dispatch.proxySlots.assign("x1");
  const cslot = dispatch.connectorSlots.assign("c1");
  const acquire = (limit = 0) => dispatch.acquire(upstream, slot, cslot, limit);
  const counts = () => ({
    reserved: dispatch.reserved(slot),
    active: dispatch.active(slot),
    inFlight: dispatch.inFlight(slot),
    connector: dispatch.connectorInFlight(cslot),
  });
  return { dispatch, slot, acquire, counts };
}

describe("dispatch", () => {
  it("sits on a SharedArrayBuffer so isolates can share it", () => {
    expect(new Dispatch().shared).toBe(true);
    expect(new Dispatch().buffers.proxies).toBeInstanceOf(SharedArrayBuffer);
  });

  it("a reservation turns active exactly once, and release after commit frees the active count", () => {
    const { dispatch, acquire, counts } = setUp();
    const lease = acquire()!;
    expect(counts()).toEqual({ reserved: 1, active: 0, inFlight: 1, connector: 1 });
    lease.commit();
    expect(counts()).toEqual({ reserved: 0, active: 1, inFlight: 1, connector: 1 });
    lease.commit();
    expect(counts()).toEqual({ reserved: 0, active: 1, inFlight: 1, connector: 1 });
    expect(dispatch.errors(DispatchErrorKind.doubleCommit)).toBe(1);
    lease.release({ ok: true, latencyMs: 12.4 });
    expect(counts()).toEqual({ reserved: 0, active: 0, inFlight: 0, connector: 0 });
  });

  it("a failure before commit releases the reservation", () => {
    const { dispatch, slot, acquire, counts } = setUp();
    const lease = acquire()!;
    lease.release({ ok: false, phase: "connect" });
    expect(counts()).toEqual({ reserved: 0, active: 0, inFlight: 0, connector: 0 });
    expect(dispatch.failedCount(slot)).toBe(1);
    lease.commit();
    expect(counts().active).toBe(0);
    expect(dispatch.errors(DispatchErrorKind.commitAfterRelease)).toBe(1);
  });

  it("a double release is harmless and counted", () => {
    const { dispatch, acquire, counts } = setUp();
    const lease = acquire()!;
    lease.commit();
    lease.release({ ok: true });
    lease.release({ ok: true });
    lease.release({ ok: false, phase: "idle" });
    expect(counts()).toEqual({ reserved: 0, active: 0, inFlight: 0, connector: 0 });
    expect(dispatch.errors(DispatchErrorKind.doubleRelease)).toBe(2);
    // On /metrics once for the process, though every isolate reports the counts they share.
    const text = renderSamples([dispatchSamples(dispatch), dispatchSamples(dispatch)]);
    expect(text).toContain('octoprox_gateway_dispatch_misuse_total{kind="double_release"} 2\n');
    expect(text).toContain('octoprox_gateway_dispatch_misuse_total{kind="double_commit"} 0\n');
    expect(text).toContain("# TYPE octoprox_gateway_dispatch_misuse_total counter\n");
    expect(text).toContain("octoprox_gateway_dispatch_reserve_conflicts_total 0\n");
  });

  it("records outcomes for the strategies: successes, latency, proxy failures (not client ones)", () => {
    const { dispatch, slot, acquire } = setUp();
    acquire()!.release({ ok: true, latencyMs: 10 });
    acquire()!.release({ ok: true, latencyMs: 30 });
    acquire()!.release({ ok: false, phase: "handshake" });
    acquire()!.release({ ok: false, phase: "client" });
    expect(dispatch.okCount(slot)).toBe(2);
    expect(dispatch.latencyMsSum(slot)).toBe(40);
    expect(dispatch.failedCount(slot)).toBe(1);
  });

  it("honours a concurrency limit over reserved and active transfers", () => {
    const { acquire, counts } = setUp();
    const a = acquire(2)!;
    const b = acquire(2)!;
    a.commit();
    expect(acquire(2)).toBeUndefined();
    b.release({ ok: false, phase: "connect" });
    const c = acquire(2);
    expect(c).toBeDefined();
    expect(acquire(2)).toBeUndefined();
    a.release({ ok: true });
    c!.release({ ok: true });
    expect(counts().inFlight).toBe(0);
  });

  it("keeps counts exact through many interleaved leases", () => {
    const { acquire, counts } = setUp();
    const leases: Lease[] = [];
    for (let i = 0; i < 1000; i++) {
      const lease = acquire(0)!;
      if (i % 3 !== 0) lease.commit();
      leases.push(lease);
    }
    expect(counts()).toEqual({ reserved: 334, active: 666, inFlight: 1000, connector: 1000 });
    for (const lease of leases) {
      lease.release({ ok: true });
      lease.release({ ok: true });
    }
    expect(counts()).toEqual({ reserved: 0, active: 0, inFlight: 0, connector: 0 });
  });

  it("grows by doubling and keeps every count", () => {
    const dispatch = new Dispatch();
    const cslot = dispatch.connectorSlots.assign("c1");
    const first = dispatch.proxySlots.assign("p0");
    const lease = dispatch.acquire(upstream, first, cslot, 0)!;
    lease.commit();
    for (let i = 1; i < 10_000; i++) dispatch.proxySlots.assign(`p${i}`);
    expect(dispatch.proxySlots.size).toBe(10_000);
    expect(dispatch.active(first)).toBe(1);
    const last = dispatch.proxySlots.get("p9999")!;
    dispatch.acquire(upstream, last, cslot, 1)!.release({ ok: true });
    lease.release({ ok: true });
    expect(dispatch.inFlight(first)).toBe(0);
  });

  it("forgets a departed proxy only once it is idle, then gives its slot to the next new proxy", () => {
    const dispatch = new Dispatch();
    const cslot = dispatch.connectorSlots.assign("c1");
    const slot = dispatch.proxySlots.assign("gone");
    const epoch = dispatch.epochOf(slot);
    const lease = dispatch.acquire(upstream, slot, cslot, 0, epoch)!;
    lease.commit();
    dispatch.proxySlots.retire("gone");
    expect(dispatch.sweep()).toBe(1);
    // Still busy: a new proxy does not get the slot, and one coming back keeps its own.
    expect(dispatch.proxySlots.assign("newcomer")).not.toBe(slot);
    expect(dispatch.proxySlots.assign("gone")).toBe(slot);
    dispatch.proxySlots.retire("gone");
    lease.release({ ok: true, latencyMs: 5 });
    expect(dispatch.sweep()).toBe(0);
    expect(dispatch.proxySlots.get("gone")).toBeUndefined();
    // Idle and forgotten: the next new proxy takes the slot, under a new epoch, unmeasured.
    expect(dispatch.proxySlots.assign("next")).toBe(slot);
    expect(dispatch.epochOf(slot)).toBe(epoch + 1);
    expect(dispatch.okCount(slot)).toBe(0);
    expect(dispatch.proxySlots.size).toBe(2);
    expect(dispatch.proxySlots.inUse).toBe(2);
  });

  it("refuses a reservation through a row whose slot passed to another proxy, and records no late outcome on it", () => {
    const dispatch = new Dispatch();
    const cslot = dispatch.connectorSlots.assign("c1");
    const slot = dispatch.proxySlots.assign("old");
    const oldEpoch = dispatch.epochOf(slot);
    // A lease of the old holder still out when it leaves, released late (another isolate's).
    const late = dispatch.acquire(upstream, slot, cslot, 0, oldEpoch)!;
    dispatch.proxySlots.retire("old");
    dispatch.sweep();
    late.release({ ok: false, phase: "connect" });
    dispatch.sweep();
    expect(dispatch.proxySlots.assign("new")).toBe(slot);
    const newEpoch = dispatch.epochOf(slot);
    expect(newEpoch).not.toBe(oldEpoch);
    // An isolate still routing the old row cannot reserve the new holder's slot for it.
    expect(dispatch.acquire(upstream, slot, cslot, 0, oldEpoch)).toBeUndefined();
    expect(dispatch.inFlight(slot)).toBe(0);
    // An isolate on an older snapshot may still reserve a freed slot before it passes on: its
    // lease then ends under the new holder, frees its count, and records no outcome there.
    const racing = new Dispatch();
    const rc = racing.connectorSlots.assign("c1");
    const rs = racing.proxySlots.assign("a");
    racing.proxySlots.retire("a");
    racing.sweep();
    const lagging = racing.acquire(upstream, rs, rc, 0, racing.epochOf(rs))!;
    expect(racing.proxySlots.assign("b")).toBe(rs);
    lagging.release({ ok: false, phase: "connect" });
    expect(racing.inFlight(rs)).toBe(0);
    expect(racing.failedCount(rs)).toBe(0);
    const fresh = dispatch.acquire(upstream, slot, cslot, 0, newEpoch)!;
    fresh.release({ ok: true, latencyMs: 3 });
    expect(dispatch.okCount(slot)).toBe(1);
    expect(dispatch.failedCount(slot)).toBe(0);
  });

  it("holds at most maxProxySlots: a new proxy past it gets no slot and is counted", () => {
    const dispatch = new Dispatch({ maxProxySlots: 3 });
    expect([1, 2, 3].map((n) => dispatch.proxySlots.assign(`p${n}`))).toEqual([0, 1, 2]);
    expect(dispatch.proxySlots.assign("p4")).toBe(-1);
    expect(dispatch.proxySlots.refused).toBe(1);
    // A known proxy keeps its slot; one that left and is idle makes room.
    expect(dispatch.proxySlots.assign("p2")).toBe(1);
    dispatch.proxySlots.retire("p2");
    dispatch.sweep();
    expect(dispatch.proxySlots.assign("p4")).toBe(1);
    const text = renderSamples([dispatchSamples(dispatch)]);
    expect(text).toContain('octoprox_gateway_proxy_slots{state="in_use"} 3');
    expect(text).toContain('octoprox_gateway_proxy_slots{state="capacity"} 3');
    expect(text).toContain("octoprox_gateway_proxies_refused_total 1");
  });

  it("counts a project's requests in flight up to its cap, one count for every isolate", () => {
    const dispatch = new Dispatch();
    const slot = dispatch.projectSlots.assign("p1");
    const other = new Dispatch({ follow: dispatch.buffers as DispatchBuffers });
    expect(dispatch.enterProject(slot, 2)).toBe(true);
    expect(other.enterProject(slot, 2)).toBe(true);
    // Full for both isolates: the third is refused and counts nothing.
    expect(dispatch.enterProject(slot, 2)).toBe(false);
    expect(other.enterProject(slot, 2)).toBe(false);
    expect(dispatch.projectInFlight(slot)).toBe(2);
    other.leaveProject(slot);
    expect(dispatch.enterProject(slot, 2)).toBe(true);
    expect(other.projectInFlight(slot)).toBe(2);
  });
});
