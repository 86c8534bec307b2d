/**
 * The time ranges usage reads cover and the bucket widths they may ask for. A width must be one
 * the history keeps for the whole range: minute rows live a day before compaction folds them
 * into hours, hours a week, six hours 30 days (control/metrics/tiers.ts). A finer width over an
 * older range would lump coarser rows into single buckets, so it is refused, naming the field.
 */
import { ValidationError } from "../../shared/errors.ts";
import { BUCKET_WIDTHS, type BucketWidth, finestWidthFrom } from "./tiers.ts";
import { RANGE_NAMES, type RangeName, RANGES } from "../model/metrics.ts";

export { RANGE_NAMES, RANGES };
export type { RangeName };

/** The width a range is drawn at unless a read asks for another. */
export const DEFAULT_WIDTH: Readonly<Record<RangeName, BucketWidth>> = {
  "1h": 60,
  "6h": 60,
  "24h": 60,
  "7d": 3_600,
  "30d": 21_600,
  "90d": 86_400,
};

/** A series never has more points than this (90 days in hours is 2,160). */
export const MAX_POINTS = 5_000;

export interface Window {
  range: RangeName;
  widthSeconds: BucketWidth;
  /** Inclusive start, epoch ms (a bucket boundary). */
  fromMs: number;
  /** Exclusive end, epoch ms. */
  toMs: number;
  /** The window ends now: the live counts belong to its last bucket. */
  live: boolean;
}

/**
 * The window a read covers: `range` back from `endMs` (now unless given), in buckets of
 * `widthSeconds` (the range's default unless given). Throws a ValidationError naming the query
 * field at fault.
 */
export function windowOf(
  range: RangeName,
  widthSeconds: number | undefined,
  endMs: number | undefined,
  nowMs = Date.now(),
): Window {
  const width = (widthSeconds ?? DEFAULT_WIDTH[range]) as BucketWidth;
  if (!(BUCKET_WIDTHS as readonly number[]).includes(width)) {
    throw new ValidationError([{
      field: "query.bucket_seconds",
      message: `must be one of ${BUCKET_WIDTHS.join(", ")}`,
    }]);
  }
  if (endMs !== undefined && endMs > nowMs + 60_000) {
    throw new ValidationError([{ field: "query.end", message: "must not be in the future" }]);
  }
  const toMs = endMs === undefined ? nowMs + 1 : endMs;
  const widthMs = width * 1000;
  const fromMs = Math.floor((toMs - RANGES[range]) / widthMs) * widthMs;
  const finest = finestWidthFrom(fromMs, nowMs);
  if (width < finest) {
    throw new ValidationError([{
      field: "query.bucket_seconds",
      message: `is finer than the history keeps for this range: use ${finest} or more ` +
        "(minutes are kept a day, hours a week, six hours 30 days, then days)",
    }]);
  }
  if ((toMs - fromMs) / widthMs > MAX_POINTS) {
    throw new ValidationError([{
      field: "query.bucket_seconds",
      message: `gives more than ${MAX_POINTS} points for this range: use a wider bucket`,
    }]);
  }
  return { range, widthSeconds: width, fromMs, toMs, live: endMs === undefined };
}
