/**
 * Pending metering deltas: one row of numbers per Redis hash (a window or a demand hash), keyed
 * by the hash's full key, so every request of a window merges into its entities' rows. Memory
 * therefore follows the number of entities, not of requests, and each kind is capped: a host
 * past the cap folds into its project and connector's `(other)` host, and a row of another kind
 * past its cap is dropped and counted (entities come from the snapshot, so the cap is far above
 * any install; it guards memory, not accuracy).
 */
import {
  DEMAND_FIELDS,
  DEVICE_FIELDS,
  FAILURE_FIELDS,
  fieldNames,
  type FieldTypes,
  METERED_WINDOW_KINDS,
  type MeteredKindName,
  TRANSFER_FIELDS,
} from "../../shared/metric-windows.ts";

/** A field's position in its kind's rows (declaration order). */
function positions<Fields extends FieldTypes>(fields: Fields): { [F in keyof Fields]: number } {
  const out = {} as Record<string, number>;
  fieldNames(fields).forEach((name, index) => {
    out[name] = index;
  });
  return out as { [F in keyof Fields]: number };
}

export const TransferField = positions(TRANSFER_FIELDS);
/** A device's row: the transfer fields at TransferField's positions, then its own. */
export const DeviceField = positions(DEVICE_FIELDS);
export const DemandField = positions(DEMAND_FIELDS);
export const FailureField = positions(FAILURE_FIELDS);

/** What the caps cost, since the process started. */
export interface OverflowCounts {
  /** Additions sent to a host's `(other)` row instead of its own. */
  hostsFolded: number;
  /** Additions lost to a full kind without an `(other)` row. */
  rowsDropped: number;
}

export class DeltaRows {
  readonly width: number;
  readonly maxRows: number;
  readonly #rows = new Map<string, number[]>();
  readonly #overflow: OverflowCounts;

  constructor(width: number, maxRows: number, overflow: OverflowCounts) {
    this.width = width;
    this.maxRows = maxRows;
    this.#overflow = overflow;
  }

  get size(): number {
    return this.#rows.size;
  }

  /**
   * The row to add to: the key's own, a new one while under the cap, else the overflow key's
   * (granted past the cap: one per project and connector), else none.
   */
  row(key: string, overflowKey?: string): number[] | undefined {
    const own = this.#rows.get(key);
    if (own) return own;
    if (this.#rows.size < this.maxRows) return this.#create(key);
    if (overflowKey === undefined) {
      this.#overflow.rowsDropped++;
      return undefined;
    }
    this.#overflow.hostsFolded++;
    return this.#rows.get(overflowKey) ?? this.#create(overflowKey);
  }

  #create(key: string): number[] {
    const row = new Array<number>(this.width).fill(0);
    this.#rows.set(key, row);
    return row;
  }

  entries(): IterableIterator<[string, number[]]> {
    return this.#rows.entries();
  }
}

/** The hashes one batch writes: the window kinds in METERED_WINDOW_KINDS order, then demand. */
export type DeltaKindName = MeteredKindName | "demand";

export const DELTA_KINDS: readonly DeltaKindName[] = [
  ...METERED_WINDOW_KINDS.map((kind) => kind.name),
  "demand",
];

export interface MeteringCaps {
  /** Distinct hosts per window (default 10,000); the rest fold into `(other)`. */
  maxHosts: number;
  /** Distinct proxies, projects, connectors, tunnel devices or failure keys per window. */
  maxEntities: number;
  /** Distinct project minutes per window (an outage of an hour with many projects fits). */
  maxDemandRows: number;
}

export const DEFAULT_CAPS: MeteringCaps = {
  maxHosts: 10_000,
  maxEntities: 250_000,
  maxDemandRows: 100_000,
};

/** At most this many traffic decisions asked per window (each limited subject once). */
export const MAX_ASKS_PER_WINDOW = 100_000;

/** One window of deltas: what accumulates between two cuts. */
export class MeteringWindow {
  readonly kinds: Readonly<Record<DeltaKindName, DeltaRows>>;
  /**
   * Traffic subjects (shared/traffic-subjects.ts) with a limit that this window carried bytes of:
   * each gets a decision asked for with the window's first part.
   */
  readonly asks = new Set<string>();

  constructor(caps: MeteringCaps, overflow: OverflowCounts) {
    const transferWidth = fieldNames(TRANSFER_FIELDS).length;
    this.kinds = {
      proxy: new DeltaRows(transferWidth, caps.maxEntities, overflow),
      project: new DeltaRows(transferWidth, caps.maxEntities, overflow),
      connector: new DeltaRows(transferWidth, caps.maxEntities, overflow),
      device: new DeltaRows(fieldNames(DEVICE_FIELDS).length, caps.maxEntities, overflow),
      host: new DeltaRows(transferWidth, caps.maxHosts, overflow),
      failure: new DeltaRows(fieldNames(FAILURE_FIELDS).length, caps.maxEntities, overflow),
      demand: new DeltaRows(fieldNames(DEMAND_FIELDS).length, caps.maxDemandRows, overflow),
    };
  }

  get rows(): number {
    let total = 0;
    for (const name of DELTA_KINDS) total += this.kinds[name].size;
    return total;
  }
}
