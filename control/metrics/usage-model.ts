/**
 * What a usage read answers: counts summed from the history, the totals and the live windows,
 * and the figures derived from them. One shape for a project, connector, proxy or host, so the
 * api and the dashboard read every entity alike; a tunnel device's adds its own field (its
 * window kind's, shared/metric-windows.ts): the connections closed as encrypted DNS.
 */
import {
  DEVICE_FIELDS,
  fieldNames,
  FieldType,
  type FieldTypes,
  TRANSFER_FIELDS,
} from "../../shared/metric-windows.ts";

/** Summed transfer counts (the history's and the windows' fields). */
export interface Counts {
  requests: number;
  successes: number;
  failures: number;
  bytesSent: number;
  bytesReceived: number;
  latencySumMs: number;
}

export const ZERO_COUNTS: Readonly<Counts> = Object.freeze({
  requests: 0,
  successes: 0,
  failures: 0,
  bytesSent: 0,
  bytesReceived: 0,
  latencySumMs: 0,
});

export function addCounts(a: Counts, b: Counts): Counts {
  return {
    requests: a.requests + b.requests,
    successes: a.successes + b.successes,
    failures: a.failures + b.failures,
    bytesSent: a.bytesSent + b.bytesSent,
    bytesReceived: a.bytesReceived + b.bytesReceived,
    latencySumMs: a.latencySumMs + b.latencySumMs,
  };
}

/** Counts as the api answers them. */
export interface Usage {
  requests: number;
  successes: number;
  failures: number;
  /** successes / requests, 0 to 1; null without requests. */
  success_rate: number | null;
  /** Client to upstream. */
  bytes_sent: number;
  /** Upstream to client. */
  bytes_received: number;
  /** Connect to first byte (or tunnel up), averaged over requests; null without requests. */
  avg_latency_ms: number | null;
}

const round = (value: number, digits: number) => {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
};

export function usageOf(counts: Counts): Usage {
  const { requests } = counts;
  return {
    requests,
    successes: counts.successes,
    failures: counts.failures,
    success_rate: requests > 0 ? round(counts.successes / requests, 4) : null,
    bytes_sent: counts.bytesSent,
    bytes_received: counts.bytesReceived,
    avg_latency_ms: requests > 0 ? round(counts.latencySumMs / requests, 1) : null,
  };
}

/**
 * A row of sums as Postgres answers them (bigint sums come back as text), or a window's counts:
 * in the fields' own names.
 */
export interface SumRow {
  requests: string | number | null;
  successes: string | number | null;
  failures: string | number | null;
  bytes_sent: string | number | null;
  bytes_received: string | number | null;
  latency_sum_ms: string | number | null;
  /** A tunnel device's rows only. */
  encrypted_dns_closed?: string | number | null;
}

export function countsOfRow(row: SumRow | undefined): Counts {
  if (!row) return { ...ZERO_COUNTS };
  return {
    requests: Number(row.requests ?? 0),
    successes: Number(row.successes ?? 0),
    failures: Number(row.failures ?? 0),
    bytesSent: Number(row.bytes_sent ?? 0),
    bytesReceived: Number(row.bytes_received ?? 0),
    latencySumMs: Number(row.latency_sum_ms ?? 0),
  };
}

/**
 * The select list summing a history table's counts into a SumRow: each field of a window kind
 * is its column of the same name (an integer's sum as text, the latency's as a float).
 */
function sumsSql(fields: FieldTypes): string {
  return fieldNames(fields).map((name) =>
    `coalesce(sum(${name}), 0)::${fields[name] === FieldType.float ? "float8" : "text"} as ${name}`
  ).join(",\n  ");
}

/** The same columns of a metric_totals row, unsummed. */
function totalsSql(fields: FieldTypes): string {
  return fieldNames(fields).map((name) => fields[name] === FieldType.float ? name : `${name}::text`)
    .join(", ");
}

/** The select list summing a history table's transfer counts into a SumRow. */
export const SUMS_SQL = sumsSql(TRANSFER_FIELDS);

/** A tunnel device's counts: its transfers, and its connections closed as encrypted DNS. */
export interface DeviceCounts extends Counts {
  encryptedDnsClosed: number;
}

/** A tunnel device's counts as the api answers them. */
export interface DeviceUsage extends Usage {
  /**
   * Its connections the gateway closed as encrypted DNS (DNS over TLS, a well-known
   * DNS-over-HTTPS resolver); no requests, since nothing was dialled.
   */
  encrypted_dns_closed: number;
}

/**
 * How one entity kind's counts are read (from a row of sums, a totals row or a live window),
 * added, zeroed and answered.
 */
export interface CountsShape<C extends Counts, U extends Usage> {
  /** Fresh zero counts. */
  zero(): C;
  /** The select list summing a history table's counts. */
  readonly sumsSql: string;
  /** The columns read from a metric_totals row. */
  readonly totalsSql: string;
  ofRow(row: SumRow | undefined): C;
  add(a: C, b: C): C;
  usage(counts: C): U;
}

/** A project's, connector's, proxy's or host's: the transfer counts. */
export const TRANSFER_SHAPE: CountsShape<Counts, Usage> = {
  zero: () => ({ ...ZERO_COUNTS }),
  sumsSql: SUMS_SQL,
  totalsSql: totalsSql(TRANSFER_FIELDS),
  ofRow: countsOfRow,
  add: addCounts,
  usage: usageOf,
};

/** A tunnel device's: the transfer counts and the encrypted DNS closed. */
export const DEVICE_SHAPE: CountsShape<DeviceCounts, DeviceUsage> = {
  zero: () => ({ ...ZERO_COUNTS, encryptedDnsClosed: 0 }),
  sumsSql: sumsSql(DEVICE_FIELDS),
  totalsSql: totalsSql(DEVICE_FIELDS),
  ofRow: (row) => ({
    ...countsOfRow(row),
    encryptedDnsClosed: Number(row?.encrypted_dns_closed ?? 0),
  }),
  add: (a, b) => ({
    ...addCounts(a, b),
    encryptedDnsClosed: a.encryptedDnsClosed + b.encryptedDnsClosed,
  }),
  usage: (counts) => ({ ...usageOf(counts), encrypted_dns_closed: counts.encryptedDnsClosed }),
};

/** The entities whose usage is read, and each one's counts. */
const SHAPES = {
  project: TRANSFER_SHAPE,
  connector: TRANSFER_SHAPE,
  proxy: TRANSFER_SHAPE,
  device: DEVICE_SHAPE,
} as const;

export type UsageKind = keyof typeof SHAPES;
export type CountsOf<K extends UsageKind> = ReturnType<(typeof SHAPES)[K]["ofRow"]>;
export type UsageOf<K extends UsageKind> = ReturnType<(typeof SHAPES)[K]["usage"]>;

/** The counts of an entity kind. */
export function countsShape<K extends UsageKind>(kind: K): CountsShape<CountsOf<K>, UsageOf<K>> {
  return SHAPES[kind] as unknown as CountsShape<CountsOf<K>, UsageOf<K>>;
}
