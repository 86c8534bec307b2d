/**
 * The history's tiers: the flush writes minute rows; compaction folds minutes into hours after
 * a day, hours into six hours after a week, six hours into days after 30 days. A bucket starts
 * at floor(epoch / width) * width, the same bucketing compaction writes and reads group by, so a
 * read at a tier's width never splits one of its rows. The six history tables share one shape
 * (a tunnel device's adds the encrypted DNS closed to the transfer counts) and are described
 * here once, for compaction, retention and reads alike.
 */

import { BUCKET_WIDTHS, type BucketWidth } from "../model/metrics.ts";
import { DeviceWindows, fieldNames, TRANSFER_FIELDS } from "../../shared/metric-windows.ts";

export const DAY_MS = 86_400_000;

export interface Tier {
  /** The width of the rows this tier folds, seconds. */
  fromSeconds: number;
  /** The width they become. */
  toSeconds: number;
  /** Rows older than this fold. */
  afterMs: number;
}

export const COMPACTION_TIERS: readonly Tier[] = [
  { fromSeconds: 60, toSeconds: 3_600, afterMs: DAY_MS },
  { fromSeconds: 3_600, toSeconds: 21_600, afterMs: 7 * DAY_MS },
  { fromSeconds: 21_600, toSeconds: 86_400, afterMs: 30 * DAY_MS },
];

export { BUCKET_WIDTHS };
export type { BucketWidth };

/**
 * The finest width every row from `fromMs` on is guaranteed to have at most: compaction folds a
 * tier's rows older than its cutoff (the start of the target bucket holding now less the tier's
 * age), so a range starting at or after a tier's cutoff holds none of its folded rows. A read at
 * a finer width over older rows would lump a coarser row into one of its buckets.
 */
export function finestWidthFrom(fromMs: number, nowMs: number): BucketWidth {
  let width: BucketWidth = 60;
  for (const tier of COMPACTION_TIERS) {
    if (fromMs < tierCutoffMs(tier, nowMs)) width = tier.toSeconds as BucketWidth;
  }
  return width;
}

/** Rows of a tier's width starting before this fold (whole target buckets only). */
export function tierCutoffMs(tier: Tier, nowMs: number): number {
  return bucketStartMs(nowMs - tier.afterMs, tier.toSeconds);
}

/** The start of the bucket of `width` seconds holding `ms`. */
export function bucketStartMs(ms: number, widthSeconds: number): number {
  const widthMs = widthSeconds * 1000;
  return Math.floor(ms / widthMs) * widthMs;
}

/** A history table: its name, the columns naming one series, and its counted columns. */
export interface HistoryTable {
  name: string;
  /** The entity columns a row belongs to, project_id first. */
  series: readonly string[];
  /** Summed when rows fold. */
  counts: readonly string[];
  /** Columns kept from the newest row folded (a proxy's status). */
  latest: readonly string[];
}

/** A history table's counts are its window kind's fields, a column each of the same name. */
const TRANSFER_COLUMNS = fieldNames(TRANSFER_FIELDS);

export const HISTORY_TABLES: readonly HistoryTable[] = [
  {
    name: "proxy_metrics",
    series: ["project_id", "proxy_id"],
    counts: TRANSFER_COLUMNS,
    latest: ["status"],
  },
  { name: "project_metrics", series: ["project_id"], counts: TRANSFER_COLUMNS, latest: [] },
  {
    name: "connector_metrics",
    series: ["project_id", "connector_id"],
    counts: TRANSFER_COLUMNS,
    latest: [],
  },
  {
    name: "tunnel_device_metrics",
    series: ["project_id", "device_id", "protocol"],
    // The transfers and the encrypted DNS closed.
    counts: fieldNames(DeviceWindows.fields),
    latest: [],
  },
  {
    name: "host_metrics",
    series: ["project_id", "connector_id", "host"],
    counts: TRANSFER_COLUMNS,
    latest: [],
  },
  {
    name: "failure_metrics",
    series: ["project_id", "connector_id", "kind", "vendor_status"],
    counts: ["count"],
    latest: [],
  },
];

/** SQL for the start of a row's bucket of `width` seconds (a whole-number literal). */
export function bucketSql(column: string, widthSeconds: number): string {
  const width = Math.trunc(widthSeconds);
  return `to_timestamp(floor(extract(epoch from ${column}) / ${width}) * ${width})`;
}
