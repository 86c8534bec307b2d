/** Seed 001 §7.1's invariants on the dispatch counts, and slots that outlive their proxies. */
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

  it("never reuses a slot, and forgets a departed proxy only once it is idle", () => {
    const dispatch = new Dispatch();
    const cslot = dispatch.connectorSlots.assign("c1");
    const slot = dispatch.proxySlots.assign("gone");
    const lease = dispatch.acquire(upstream, slot, cslot, 0)!;
    dispatch.proxySlots.retire("gone");
    expect(dispatch.sweep()).toBe(1);
    // Still busy: a proxy coming back meanwhile keeps its slot and its counts.
    expect(dispatch.proxySlots.assign("gone")).toBe(slot);
    dispatch.proxySlots.retire("gone");
    lease.release({ ok: true });
    expect(dispatch.sweep()).toBe(0);
    expect(dispatch.proxySlots.get("gone")).toBeUndefined();
    const again = dispatch.proxySlots.assign("gone");
    expect(again).not.toBe(slot);
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
