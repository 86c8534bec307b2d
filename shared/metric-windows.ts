/**
 * The metric window kinds: one object per kind of Redis window, naming its key format, its index
 * set, its fields and each field's type. Gateway metering writes windows through these, and the
 * metrics flush takes them through the same objects, so the two never disagree on a key or on
 * the command a field needs (HINCRBY for integers, HINCRBYFLOAT for floats: Redis refuses
 * HINCRBY once a field holds a fraction). Imports only the key catalogue's types.
 *
 * A window is `<prefix>metrics:<kind>:<key>` and is listed in `<prefix>metrics:index:<kind>` after
 * its increments. Demand hashes are not windows: nothing lists them, they expire instead.
 */
import type { RedisKeys } from "./redis-keys.ts";

export const FieldType = {
  /** Added with HINCRBY. */
  integer: "integer",
  /** Added with HINCRBYFLOAT, whole-valued deltas included. */
  float: "float",
} as const;
export type FieldType = (typeof FieldType)[keyof typeof FieldType];

export type FieldTypes = Readonly<Record<string, FieldType>>;

/** The counts of a hash, field by field, as numbers. */
export type Counts<Fields extends FieldTypes> = { [F in keyof Fields]: number };

/** Transfer counts, kept per proxy, project, connector, destination host and tunnel device. */
export const TRANSFER_FIELDS = {
  requests: FieldType.integer,
  successes: FieldType.integer,
  failures: FieldType.integer,
  /** Client to upstream. */
  bytes_sent: FieldType.integer,
  /** Upstream to client. */
  bytes_received: FieldType.integer,
  /** Connect-to-first-byte (or tunnel up) latency, summed over `requests`. */
  latency_sum_ms: FieldType.float,
} as const satisfies FieldTypes;
export type TransferCounts = Counts<typeof TRANSFER_FIELDS>;

/**
 * A tunnel device's counts: its transfers (first, at their own positions, so metering adds a
 * transfer to a device's row as to any other) and what the gateway closed of its connections.
 */
export const DEVICE_FIELDS = {
  ...TRANSFER_FIELDS,
  /**
   * Connections closed as encrypted DNS (DNS over TLS, a well-known DNS-over-HTTPS resolver),
   * with OCTOPROX_TUNNEL_BLOCK_ENCRYPTED_DNS on. No request: nothing was dialled.
   */
  encrypted_dns_closed: FieldType.integer,
} as const satisfies FieldTypes;
export type DeviceCounts = Counts<typeof DEVICE_FIELDS>;

/** Failures of one failure key (project, connector, kind, the upstream's own status). */
export const FAILURE_FIELDS = {
  count: FieldType.integer,
} as const satisfies FieldTypes;
export type FailureCounts = Counts<typeof FAILURE_FIELDS>;

/** What one project asked for in one minute: the autoscaler's demand. */
export const DEMAND_FIELDS = {
  requests: FieldType.integer,
  rejections: FieldType.integer,
} as const satisfies FieldTypes;
export type DemandCounts = Counts<typeof DEMAND_FIELDS>;

export interface MetricWindowKind<Name extends string, Key, Fields extends FieldTypes> {
  /** The kind's name in its window keys and index key. */
  readonly name: Name;
  readonly fields: Fields;
  /** Entity kinds whose windows the flush also adds to running totals. */
  readonly totalled: boolean;
  /** The part of the window key after `metrics:<kind>:`. */
  formatKey(key: Key): string;
  /** The inverse of formatKey; undefined for a key this release cannot read. */
  parseKey(text: string): Key | undefined;
}

/** Windows per entity id: proxies, projects, connectors and tunnel devices. */
export type EntityWindows<
  Name extends string,
  Fields extends FieldTypes = typeof TRANSFER_FIELDS,
> = MetricWindowKind<Name, string, Fields>;

function entityWindows<Name extends string, Fields extends FieldTypes>(
  name: Name,
  totalled: boolean,
  fields: Fields,
): EntityWindows<Name, Fields> {
  return {
    name,
    fields,
    totalled,
    formatKey: (id) => id,
    parseKey: (text) => (text === "" || text.includes(":") ? undefined : text),
  };
}

export const ProxyWindows = entityWindows("proxy", true, TRANSFER_FIELDS);
export const ProjectWindows = entityWindows("project", true, TRANSFER_FIELDS);
/** A connector's windows keep no running totals (its traffic usage reads the history). */
export const ConnectorWindows = entityWindows("connector", false, TRANSFER_FIELDS);
/**
 * A tunnel device's windows, keyed by its id alone: the data plane meters a device without
 * knowing its protocol, so the flush reads the device's project and protocol from its row.
 * They hold the device's own fields: its transfers, and the encrypted DNS closed.
 */
export const DeviceWindows = entityWindows("device", true, DEVICE_FIELDS);

export interface HostKey {
  projectId: string;
  connectorId: string;
  /** Lower case; an IPv6 literal without brackets, so the key ends with its colons intact. */
  host: string;
}

/** The host every host beyond metering's cap is folded into. */
export const OTHER_HOST = "(other)";

/** Windows per destination host, within a project and connector: `<project>:<connector>:<host>`. */
export const HostWindows: MetricWindowKind<"host", HostKey, typeof TRANSFER_FIELDS> = {
  name: "host",
  fields: TRANSFER_FIELDS,
  totalled: false,
  formatKey: (key) => `${key.projectId}:${key.connectorId}:${key.host}`,
  parseKey(text) {
    const first = text.indexOf(":");
    const second = first < 0 ? -1 : text.indexOf(":", first + 1);
    if (first <= 0 || second <= first + 1 || second === text.length - 1) return undefined;
    return {
      projectId: text.slice(0, first),
      connectorId: text.slice(first + 1, second),
      host: text.slice(second + 1),
    };
  },
};

export interface FailureKey {
  projectId: string;
  /** Null: refused before a connector was chosen. */
  connectorId: string | null;
  /** shared/failure-kinds.ts. */
  kind: string;
  /** What the upstream proxy itself answered (its HTTP status, a SOCKS reply code); null if none. */
  vendorStatus: number | null;
}

/** Written where a key part is absent: ids and kinds never contain it. */
const ABSENT = "-";

/**
 * Failures per project, connector, kind and upstream status:
 * `<project>:<connector or ->:<kind>:<status or ->`.
 */
export const FailureWindows: MetricWindowKind<"failure", FailureKey, typeof FAILURE_FIELDS> = {
  name: "failure",
  fields: FAILURE_FIELDS,
  totalled: false,
  formatKey: (key) =>
    `${key.projectId}:${key.connectorId ?? ABSENT}:${key.kind}:${key.vendorStatus ?? ABSENT}`,
  parseKey(text) {
    const parts = text.split(":");
    if (parts.length !== 4) return undefined;
    const [projectId, connector, kind, status] = parts;
    if (projectId === "" || projectId === ABSENT || connector === "" || kind === "") {
      return undefined;
    }
    if (status !== ABSENT && !/^\d{1,5}$/.test(status)) return undefined;
    return {
      projectId,
      connectorId: connector === ABSENT ? null : connector,
      kind,
      vendorStatus: status === ABSENT ? null : Number(status),
    };
  },
};

/** Every kind metering writes, in the order a batch lists them. */
export const METERED_WINDOW_KINDS = [
  ProxyWindows,
  ProjectWindows,
  ConnectorWindows,
  DeviceWindows,
  HostWindows,
  FailureWindows,
] as const;

export type MeteredWindowKind = (typeof METERED_WINDOW_KINDS)[number];
export type MeteredKindName = MeteredWindowKind["name"];

/** A kind's field names, in declaration order (the order metering encodes values in). */
export function fieldNames<Fields extends FieldTypes>(fields: Fields): (keyof Fields & string)[] {
  return Object.keys(fields) as (keyof Fields & string)[];
}

export function windowKey<Key>(
  keys: RedisKeys,
  kind: MetricWindowKind<string, Key, FieldTypes>,
  key: Key,
): string {
  return keys.metricWindow(kind.name, kind.formatKey(key));
}

export function windowIndexKey(keys: RedisKeys, kind: { readonly name: string }): string {
  return keys.metricIndex(kind.name);
}

/** Reads a window or demand hash back into numbers (absent fields are zero). */
export function readCounts<Fields extends FieldTypes>(
  fields: Fields,
  hash: Readonly<Record<string, string>>,
): Counts<Fields> {
  const counts = {} as Record<string, number>;
  for (const name of Object.keys(fields)) {
    const text = hash[name];
    counts[name] = text === undefined ? 0 : Number(text);
  }
  return counts as Counts<Fields>;
}

// ---------------------------------------------------------------------------------------------
// Lives.

/** The minutes one demand hash is read for: the autoscaler's five-minute window and the minute
 * it is in. */
export const DEMAND_WINDOW_MINUTES = 5;
/** A demand hash outlives the window its readers use by a minute. */
export const DEMAND_TTL_SECONDS = (DEMAND_WINDOW_MINUTES + 1) * 60;
/**
 * A window is taken by the metrics flush within a minute; the TTL only bounds an install that
 * runs gateways without workers. Each write pushes it back, and the index sets get the same TTL,
 * so an index never expires before a window it lists.
 */
export const WINDOW_SAFETY_TTL_SECONDS = 86_400;

/** The minute (epoch minutes) a demand count belongs to. */
export function demandMinute(epochMs: number): number {
  return Math.floor(epochMs / 60_000);
}
