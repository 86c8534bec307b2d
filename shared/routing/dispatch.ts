/**
 * Dispatch: seed 001's Acquire/Commit/Release on per-proxy counts this gateway keeps.
 *
 * Every proxy in the snapshot has a slot, a small integer that indexes its counts in one
 * `Int32Array`: `occupancy` (reserved + active, the one word the concurrency limit is checked
 * and reserved on, so the check and the reservation are one compare-and-swap), `reserved`,
 * `active`, and the outcomes health_based reads (`ok`, `failed`, summed connect latency, since the
 * gateway started or the proxy last joined the snapshot). Connectors have slots of their own with
 * their transfers in flight (least_used reads both).
 *
 * The arrays sit on a growable `SharedArrayBuffer` where the runtime has one, and every update is
 * an `Atomics` operation, so isolates of one process can share exact counts. An allocation still
 * out on a proxy that left the snapshot releases into the slot it took, and a proxy that leaves is
 * forgotten (its id no longer maps to the slot) only once its counts are zero; its outcomes are
 * cleared as it leaves, so one that comes back (to the same slot, while still busy) starts
 * unmeasured. A forgotten proxy's slot is free for the next new proxy, so the table is as large as
 * the most proxies the snapshot held at once (plus those still busy after leaving), not as the
 * proxies ever seen: short-lived pools churn through millions. Each slot has an epoch, bumped
 * when it is given to another proxy: an isolate still routing on an older snapshot cannot reserve
 * the new holder's slot for the old proxy, and a lease of the old holder that ends late records
 * no outcome against the new one. Past `maxProxySlots` a new proxy gets no slot: it is left out of
 * the snapshot (not routed) and counted, and the gateway says so in its log and on /metrics.
 */
import type { Allocation, FailurePhase, Outcome, UpstreamChoice } from "./contract.ts";

/** Field offsets inside a proxy's stride. */
export const ProxyField = {
  occupancy: 0,
  reserved: 1,
  active: 2,
  ok: 3,
  failed: 4,
  /** Wraps as an unsigned 32-bit sum: readers take differences, which survive the wrap. */
  latencyMsSum: 5,
  /** Bumped each time the slot is given to another proxy. */
  epoch: 6,
} as const;
export const PROXY_STRIDE = 8;

/** Misuse the invariants make harmless, counted so a bug shows in /metrics. */
export const DispatchErrorKind = {
  doubleRelease: 0,
  doubleCommit: 1,
  commitAfterRelease: 2,
  /** A reservation lost its compare-and-swap race at the limit (not misuse; contention). */
  reserveConflict: 3,
} as const;
export type DispatchErrorKind = (typeof DispatchErrorKind)[keyof typeof DispatchErrorKind];
const ERROR_KINDS = 4;

/** What strategies may read of the counts (never write). */
export interface DispatchReader {
  /** Reserved plus active transfers through the proxy on this gateway. */
  inFlight(proxySlot: number): number;
  reserved(proxySlot: number): number;
  active(proxySlot: number): number;
  okCount(proxySlot: number): number;
  failedCount(proxySlot: number): number;
  /** Unsigned 32-bit running sum of connect latency (ms) of successful outcomes. */
  latencyMsSum(proxySlot: number): number;
  connectorInFlight(connectorSlot: number): number;
}

// ---------------------------------------------------------------------------------------------

interface GrowableSab extends SharedArrayBuffer {
  grow(newByteLength: number): void;
  readonly maxByteLength: number;
}
type GrowableSabConstructor = new (
  byteLength: number,
  options: { maxByteLength: number },
) => GrowableSab;

const CAN_SHARE = typeof SharedArrayBuffer === "function";
const CAN_GROW_SHARED = CAN_SHARE && "grow" in SharedArrayBuffer.prototype;
/** Address space reserved up front for a growable buffer (committed only as it grows). */
const MAX_SHARED_BYTES = 1 << 28;

/** An `Int32Array` that grows by doubling, shared and grown in place when the runtime can. */
class CounterArray {
  buffer: ArrayBufferLike;
  /** A fixed-length view: length-tracking views over a growable buffer are slower to index. */
  view: Int32Array;
  private length: number;
  /** Over another isolate's buffer, which that isolate grows: `ensure` only re-views it. */
  private following = false;

  constructor(initialLength: number) {
    this.length = initialLength;
    this.buffer = CounterArray.allocate(initialLength * 4);
    this.view = new Int32Array(this.buffer, 0, initialLength);
  }

  /** Counts on `buffer` from now on (another isolate's, which it grows and this one follows). */
  adopt(buffer: SharedArrayBuffer): void {
    this.following = true;
    this.buffer = buffer;
    this.length = Math.floor(buffer.byteLength / 4);
    this.view = new Int32Array(buffer, 0, this.length);
  }

  get shared(): boolean {
    return CAN_SHARE && this.buffer instanceof SharedArrayBuffer;
  }

  /** Makes room for index `length - 1`, keeping every count. */
  ensure(length: number): void {
    if (length <= this.length) return;
    if (this.following) {
      // The owner grew the shared buffer before handing the slots over: view what it has now.
      const available = Math.floor(this.buffer.byteLength / 4);
      if (available < length) throw new Error("Shared dispatch counts are smaller than a slot");
      this.view = new Int32Array(this.buffer, 0, available);
      this.length = available;
      return;
    }
    let next = Math.max(this.length, 16);
    while (next < length) next *= 2;
    const bytes = next * 4;
    const buffer = this.buffer as Partial<GrowableSab>;
    if (
      typeof buffer.grow === "function" && buffer.maxByteLength !== undefined &&
      bytes <= buffer.maxByteLength
    ) {
      buffer.grow(bytes);
      this.view = new Int32Array(this.buffer, 0, next);
    } else {
      // No room to grow in place: copy (exact within one isolate; sharing isolates must re-map).
      const copy = CounterArray.allocate(bytes);
      const view = new Int32Array(copy, 0, next);
      view.set(this.view);
      this.buffer = copy;
      this.view = view;
    }
    this.length = next;
  }

  private static allocate(bytes: number): ArrayBufferLike {
    if (CAN_GROW_SHARED && bytes <= MAX_SHARED_BYTES) {
      const Growable = SharedArrayBuffer as unknown as GrowableSabConstructor;
      const buffer = new Growable(bytes, { maxByteLength: MAX_SHARED_BYTES });
      if (buffer.maxByteLength === MAX_SHARED_BYTES) return buffer;
    }
    return CAN_SHARE ? new SharedArrayBuffer(bytes) : new ArrayBuffer(bytes);
  }
}

/** What a slot table may take and what it did with its room. */
export interface SlotTableOptions {
  /** Slots at most; a new id past it gets none (-1). Infinity: no bound. */
  maxSlots?: number;
  /** A free slot is given to a new id (the counts clear what the old holder left). */
  onReuse?: (slot: number) => void;
}

/**
 * Stable ids to slots: an id keeps its slot while it is in the snapshot, and after while busy;
 * an id forgotten when idle frees its slot for a new id (a numbering table only).
 */
export class SlotTable {
  private readonly slotOf = new Map<string, number>();
  private readonly leaving = new Map<string, number>();
  private next = 0;
  private readonly onGrow: (slots: number) => void;
  private readonly onRetire: (slot: number) => void;
  private readonly onReuse: (slot: number) => void;
  private readonly maxSlots: number;
  /** Slots of forgotten ids, for the next new ones. */
  private readonly free: number[] = [];
  private refusedIds = 0;
  /** The build each slot was last assigned in, so a build finds the rows that left by slot. */
  private seen = new Int32Array(16);
  private build = 0;
  /**
   * Slots another isolate assigned (the main one, which numbers them for the process), handed
   * over with the feed update they serve; set only on a following table.
   */
  private presets: Map<string, number> | undefined;

  constructor(
    onGrow: (slots: number) => void,
    onRetire: (slot: number) => void = () => {},
    options: SlotTableOptions = {},
  ) {
    this.onGrow = onGrow;
    this.onRetire = onRetire;
    this.onReuse = options.onReuse ?? (() => {});
    this.maxSlots = options.maxSlots ?? Infinity;
  }

  /** Slots made so far (the counts' length): in use, leaving, or free. */
  get size(): number {
    return this.next;
  }

  /** Slots held by an id now (in the snapshot, or leaving while busy). */
  get inUse(): number {
    return this.next - this.free.length;
  }

  get capacity(): number {
    return this.maxSlots;
  }

  /** Whether this table numbers its own slots (else another isolate's table does). */
  get numbering(): boolean {
    return this.presets === undefined;
  }

  /** New ids that found the table full and got no slot, since the process started. */
  get refused(): number {
    return this.refusedIds;
  }

  /** Starts a snapshot build: `assignedThisBuild` answers for this one from now on. */
  beginBuild(): void {
    this.build++;
  }

  /**
   * Makes `assign` take slots from `preset` from now on instead of numbering them: isolates that
   * share counts indexed by slot must agree on every slot, so one isolate numbers them.
   */
  follow(): void {
    this.presets ??= new Map();
  }

  /** Slots the numbering isolate gave (a following table only), for the builds to come. */
  preset(entries: Iterable<readonly [string, number]>): void {
    if (this.presets === undefined) throw new Error("preset on a table that numbers its own slots");
    for (const [id, slot] of entries) this.presets.set(id, slot);
  }

  /** Drops the presets once a build used them. */
  clearPresets(): void {
    this.presets?.clear();
  }

  /**
   * The id's slot, kept for as long as the id is in the snapshot (and after, while busy); -1
   * when the id is new and the table is full.
   */
  assign(id: string): number {
    if (this.presets !== undefined) return this.assignPreset(id, this.presets);
    let slot = this.slotOf.get(id);
    if (slot === undefined) {
      const reused = this.free.pop();
      if (reused !== undefined) {
        slot = reused;
        this.onReuse(slot);
      } else if (this.next < this.maxSlots) {
        slot = this.next++;
        this.onGrow(this.next);
        if (slot >= this.seen.length) {
          const seen = new Int32Array(this.seen.length * 2);
          seen.set(this.seen);
          this.seen = seen;
        }
      } else {
        this.refusedIds++;
        return -1;
      }
      this.slotOf.set(id, slot);
    } else if (this.leaving.size !== 0) {
      this.leaving.delete(id);
    }
    this.seen[slot] = this.build;
    return slot;
  }

  private assignPreset(id: string, presets: ReadonlyMap<string, number>): number {
    const slot = presets.get(id);
    // The numbering isolate found its table full for this id: it is not routed there either.
    if (slot === undefined) return -1;
    this.slotOf.set(id, slot);
    if (this.leaving.size !== 0) this.leaving.delete(id);
    if (slot >= this.next) {
      this.next = slot + 1;
      this.onGrow(this.next);
    }
    if (slot >= this.seen.length) {
      let length = this.seen.length * 2;
      while (length <= slot) length *= 2;
      const seen = new Int32Array(length);
      seen.set(this.seen);
      this.seen = seen;
    }
    this.seen[slot] = this.build;
    return slot;
  }

  assignedThisBuild(slot: number): boolean {
    return this.seen[slot] === this.build;
  }

  get(id: string): number | undefined {
    return this.slotOf.get(id);
  }

  /** The id left the snapshot: forget it once `idle(slot)` says so. */
  retire(id: string): void {
    const slot = this.slotOf.get(id);
    if (slot === undefined) return;
    this.leaving.set(id, slot);
    this.onRetire(slot);
  }

  /**
   * Forgets the leaving ids whose slot is idle, freeing their slots for new ids (a numbering
   * table; a following one takes its slots from the numbering isolate); returns how many are
   * still busy.
   */
  sweep(idle: (slot: number) => boolean): number {
    for (const [id, slot] of this.leaving) {
      if (idle(slot)) {
        this.leaving.delete(id);
        if (this.slotOf.get(id) === slot) {
          this.slotOf.delete(id);
          if (this.presets === undefined) this.free.push(slot);
        }
      }
    }
    return this.leaving.size;
  }
}

// ---------------------------------------------------------------------------------------------

const LeaseState = { reserved: 0, active: 1, released: 2 } as const;
type LeaseState = (typeof LeaseState)[keyof typeof LeaseState];

export interface DispatchOptions {
  /** Proxy slots to make room for at once (the first snapshot grows it anyway). */
  initialProxySlots?: number;
  /** Proxy slots at most (OCTOPROX_GATEWAY_MAX_PROXIES); a proxy past it is not routed. */
  maxProxySlots?: number;
  /**
   * Count on another isolate's buffers (its `buffers`) and take slots from it (`follow`): a
   * worker isolate of a gateway process shares the main isolate's exact counts.
   */
  follow?: DispatchBuffers;
}

/** The shared buffers of one process's counts. */
export interface DispatchBuffers {
  proxies: SharedArrayBuffer;
  connectors: SharedArrayBuffer;
  projects: SharedArrayBuffer;
  errors: SharedArrayBuffer;
}

export class Dispatch implements DispatchReader {
  private readonly proxyCounts: CounterArray;
  private readonly connectorCounts: CounterArray;
  /** Each project's requests in flight on this gateway (its max_connections cap). */
  private readonly projectCounts: CounterArray;
  private readonly errorCounts: CounterArray;
  readonly proxySlots: SlotTable;
  readonly connectorSlots: SlotTable;
  readonly projectSlots: SlotTable;

  constructor(options: DispatchOptions = {}) {
    this.proxyCounts = new CounterArray(
      Math.max(16, options.initialProxySlots ?? 0) * PROXY_STRIDE,
    );
    this.connectorCounts = new CounterArray(16);
    this.projectCounts = new CounterArray(16);
    this.errorCounts = new CounterArray(ERROR_KINDS);
    this.proxySlots = new SlotTable(
      (n) => this.proxyCounts.ensure(n * PROXY_STRIDE),
      (slot) => this.forgetOutcomes(slot),
      { maxSlots: options.maxProxySlots, onReuse: (slot) => this.reuseSlot(slot) },
    );
    this.connectorSlots = new SlotTable((n) => this.connectorCounts.ensure(n));
    this.projectSlots = new SlotTable((n) => this.projectCounts.ensure(n));
    if (options.follow !== undefined) {
      this.adopt(options.follow);
      // The numbering isolate forgets a departed proxy's outcomes, once for the process.
      this.proxySlots = new SlotTable((n) => this.proxyCounts.ensure(n * PROXY_STRIDE));
      this.proxySlots.follow();
      this.connectorSlots.follow();
      this.projectSlots.follow();
    }
  }

  /** Counts on these buffers (a following isolate; the owner may have replaced one). */
  adopt(buffers: DispatchBuffers): void {
    this.proxyCounts.adopt(buffers.proxies);
    this.connectorCounts.adopt(buffers.connectors);
    this.projectCounts.adopt(buffers.projects);
    this.errorCounts.adopt(buffers.errors);
  }

  /**
   * A following isolate's part of a feed update: the buffers as they are now and the slots the
   * numbering isolate gave the rows and connectors this update indexes.
   */
  follow(
    buffers: DispatchBuffers,
    proxySlots: Iterable<readonly [string, number]>,
    connectorSlots: Iterable<readonly [string, number]>,
    projectSlots: Iterable<readonly [string, number]> = [],
  ): void {
    this.adopt(buffers);
    this.proxySlots.preset(proxySlots);
    this.connectorSlots.preset(connectorSlots);
    this.projectSlots.preset(projectSlots);
  }

  /** The slots handed over were used by a build. */
  followed(): void {
    this.proxySlots.clearPresets();
    this.connectorSlots.clearPresets();
    this.projectSlots.clearPresets();
  }

  /** Whether the counts sit on a SharedArrayBuffer (so isolates can share them). */
  get shared(): boolean {
    return this.proxyCounts.shared;
  }

  /** The buffers, for an isolate that shares the counts (issue 5). */
  get buffers(): {
    proxies: ArrayBufferLike;
    connectors: ArrayBufferLike;
    projects: ArrayBufferLike;
    errors: ArrayBufferLike;
  } {
    return {
      proxies: this.proxyCounts.buffer,
      connectors: this.connectorCounts.buffer,
      projects: this.projectCounts.buffer,
      errors: this.errorCounts.buffer,
    };
  }

  /**
   * Counts one more request of the project in flight on this gateway unless `cap` (> 0) are
   * already; false when it is full. Every isolate counts on the same word.
   */
  enterProject(projectSlot: number, cap: number): boolean {
    const counts = this.projectCounts.view;
    if (cap <= 0) {
      Atomics.add(counts, projectSlot, 1);
      return true;
    }
    for (;;) {
      const inFlight = Atomics.load(counts, projectSlot);
      if (inFlight >= cap) return false;
      if (Atomics.compareExchange(counts, projectSlot, inFlight, inFlight + 1) === inFlight) {
        return true;
      }
    }
  }

  /** One request `enterProject` counted ended. */
  leaveProject(projectSlot: number): void {
    Atomics.sub(this.projectCounts.view, projectSlot, 1);
  }

  projectInFlight(projectSlot: number): number {
    return Atomics.load(this.projectCounts.view, projectSlot);
  }

  /** Forgets proxies that left the snapshot and have nothing in flight; returns those still busy. */
  sweep(): number {
    return this.proxySlots.sweep((slot) => this.inFlight(slot) === 0);
  }

  /** The slot's epoch now: a snapshot row keeps the one it was built with. */
  epochOf(proxySlot: number): number {
    return Atomics.load(this.proxyCounts.view, proxySlot * PROXY_STRIDE + ProxyField.epoch);
  }

  /**
   * Acquire: reserves one transfer on the proxy unless `limit` (> 0) transfers are already
   * reserved or active there; undefined when it is full, or when the slot went to another proxy
   * since the row was built (`epoch`: the row's; an isolate on an older snapshot).
   */
  acquire(
    upstream: UpstreamChoice,
    proxySlot: number,
    connectorSlot: number,
    limit: number,
    epoch?: number,
  ): Lease | undefined {
    const counts = this.proxyCounts.view;
    const base = proxySlot * PROXY_STRIDE;
    const now = Atomics.load(counts, base + ProxyField.epoch);
    if (epoch !== undefined && now !== epoch) return undefined;
    if (limit > 0) {
      for (;;) {
        const occupancy = Atomics.load(counts, base);
        if (occupancy >= limit) return undefined;
        if (Atomics.compareExchange(counts, base, occupancy, occupancy + 1) === occupancy) break;
        Atomics.add(this.errorCounts.view, DispatchErrorKind.reserveConflict, 1);
      }
    } else {
      Atomics.add(counts, base, 1);
    }
    Atomics.add(counts, base + ProxyField.reserved, 1);
    Atomics.add(this.connectorCounts.view, connectorSlot, 1);
    return new Lease(this, upstream, proxySlot, connectorSlot, now);
  }

  /** @internal Lease's commit: reserved turns active (occupancy unchanged). */
  commitSlot(proxySlot: number): void {
    const counts = this.proxyCounts.view;
    const base = proxySlot * PROXY_STRIDE;
    Atomics.sub(counts, base + ProxyField.reserved, 1);
    Atomics.add(counts, base + ProxyField.active, 1);
  }

  /** @internal Lease's release: frees the reservation or the active transfer, records the outcome. */
  releaseSlot(
    proxySlot: number,
    connectorSlot: number,
    wasActive: boolean,
    outcome: Outcome,
    epoch: number,
  ): void {
    const counts = this.proxyCounts.view;
    const base = proxySlot * PROXY_STRIDE;
    Atomics.sub(counts, base + (wasActive ? ProxyField.active : ProxyField.reserved), 1);
    Atomics.sub(counts, base, 1);
    Atomics.sub(this.connectorCounts.view, connectorSlot, 1);
    // The slot's holder changed under the lease: the outcome was the old proxy's.
    if (Atomics.load(counts, base + ProxyField.epoch) !== epoch) return;
    if (outcome.ok) {
      Atomics.add(counts, base + ProxyField.ok, 1);
      if (outcome.latencyMs !== undefined) {
        Atomics.add(counts, base + ProxyField.latencyMsSum, Math.round(outcome.latencyMs));
      }
    } else if (outcome.phase !== CLIENT_PHASE) {
      // A client that went away says nothing about the proxy.
      Atomics.add(counts, base + ProxyField.failed, 1);
    }
  }

  /** A proxy left the snapshot: what it was measured at no longer counts (health_based). */
  private forgetOutcomes(proxySlot: number): void {
    const counts = this.proxyCounts.view;
    const base = proxySlot * PROXY_STRIDE;
    Atomics.store(counts, base + ProxyField.ok, 0);
    Atomics.store(counts, base + ProxyField.failed, 0);
    Atomics.store(counts, base + ProxyField.latencyMsSum, 0);
  }

  /** A free slot goes to a new proxy: a new epoch, and nothing measured of the old holder. */
  private reuseSlot(proxySlot: number): void {
    Atomics.add(this.proxyCounts.view, proxySlot * PROXY_STRIDE + ProxyField.epoch, 1);
    this.forgetOutcomes(proxySlot);
  }

  /** @internal */
  countError(kind: DispatchErrorKind): void {
    Atomics.add(this.errorCounts.view, kind, 1);
  }

  errors(kind: DispatchErrorKind): number {
    return Atomics.load(this.errorCounts.view, kind);
  }

  inFlight(proxySlot: number): number {
    return Atomics.load(this.proxyCounts.view, proxySlot * PROXY_STRIDE);
  }
  reserved(proxySlot: number): number {
    return Atomics.load(this.proxyCounts.view, proxySlot * PROXY_STRIDE + ProxyField.reserved);
  }
  active(proxySlot: number): number {
    return Atomics.load(this.proxyCounts.view, proxySlot * PROXY_STRIDE + ProxyField.active);
  }
  okCount(proxySlot: number): number {
    return Atomics.load(this.proxyCounts.view, proxySlot * PROXY_STRIDE + ProxyField.ok);
  }
  failedCount(proxySlot: number): number {
    return Atomics.load(this.proxyCounts.view, proxySlot * PROXY_STRIDE + ProxyField.failed);
  }
  latencyMsSum(proxySlot: number): number {
    return Atomics.load(
      this.proxyCounts.view,
      proxySlot * PROXY_STRIDE + ProxyField.latencyMsSum,
    ) >>>
      0;
  }
  connectorInFlight(connectorSlot: number): number {
    return Atomics.load(this.connectorCounts.view, connectorSlot);
  }
}

const CLIENT_PHASE: FailurePhase = "client";

/**
 * One reserved transfer on one proxy. Its state is its own (an allocation lives in one isolate),
 * so commit and release are plain state changes around the shared counts.
 */
export class Lease implements Allocation {
  readonly upstream: UpstreamChoice;
  readonly proxySlot: number;
  readonly connectorSlot: number;
  /** The slot's epoch when reserved. */
  readonly epoch: number;
  private readonly dispatch: Dispatch;
  private state: LeaseState = LeaseState.reserved;

  constructor(
    dispatch: Dispatch,
    upstream: UpstreamChoice,
    proxySlot: number,
    connectorSlot: number,
    epoch = 0,
  ) {
    this.dispatch = dispatch;
    this.upstream = upstream;
    this.proxySlot = proxySlot;
    this.connectorSlot = connectorSlot;
    this.epoch = epoch;
  }

  get committed(): boolean {
    return this.state === LeaseState.active;
  }

  get released(): boolean {
    return this.state === LeaseState.released;
  }

  commit(): void {
    if (this.state === LeaseState.reserved) {
      this.state = LeaseState.active;
      this.dispatch.commitSlot(this.proxySlot);
    } else {
      this.dispatch.countError(
        this.state === LeaseState.active
          ? DispatchErrorKind.doubleCommit
          : DispatchErrorKind.commitAfterRelease,
      );
    }
  }

  release(outcome: Outcome): void {
    if (this.state === LeaseState.released) {
      this.dispatch.countError(DispatchErrorKind.doubleRelease);
      return;
    }
    const wasActive = this.state === LeaseState.active;
    this.state = LeaseState.released;
    this.dispatch.releaseSlot(
      this.proxySlot,
      this.connectorSlot,
      wasActive,
      outcome,
      this.epoch,
    );
  }
}
