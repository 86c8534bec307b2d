/** Queries of the usage and failure reads: a range, a bucket width, an end, filters, pages. */
import * as v from "valibot";
import { FAILURE_KINDS } from "../../shared/failure-kinds.ts";
import { Ineligible } from "../../shared/routing/eligibility.ts";
import { NotServing } from "../../shared/routing/expected-share.ts";
import { queryInteger, uuidField } from "./common.ts";

/** The named ranges a usage read may ask for, and how long each is. */
export const RANGES = {
  "1h": 3_600_000,
  "6h": 6 * 3_600_000,
  "24h": 24 * 3_600_000,
  "7d": 7 * 86_400_000,
  "30d": 30 * 86_400_000,
  "90d": 90 * 86_400_000,
} as const;
export type RangeName = keyof typeof RANGES;
export const RANGE_NAMES = Object.keys(RANGES) as RangeName[];

/**
 * Why a connector takes no share of the traffic split: the router's own names (its eligibility
 * test's codes, then why an eligible one still serves nothing), except `disabled`, the name the
 * split gave a disabled connector before it asked the router, kept for it; the router's
 * `not_taking_requests` is then a connector being deleted.
 */
export const SPLIT_EXCLUSIONS = [
  "disabled",
  ...Object.values(Ineligible),
  ...Object.values(NotServing),
] as const;
export type SplitExclusion = (typeof SPLIT_EXCLUSIONS)[number];

/** Every width a row can have, and so every bucket width a read may ask for. */
export const BUCKET_WIDTHS = [60, 3_600, 21_600, 86_400] as const;
export type BucketWidth = (typeof BUCKET_WIDTHS)[number];

const rangeField = (withAll: boolean, defaultValue: string) => {
  const names = withAll ? [...RANGE_NAMES, "all"] : RANGE_NAMES;
  return v.optional(
    v.pipe(
      v.string(),
      v.description(
        `How far back: ${names.join(", ")}${withAll ? " (all: everything retained)" : ""}`,
      ),
      v.picklist(names, `must be one of ${names.join(", ")}`),
    ),
    defaultValue,
  );
};

const bucketSeconds = v.optional(
  v.pipe(
    v.string(),
    v.description(
      `Bucket width in seconds: ${BUCKET_WIDTHS.join(", ")}; by default 60 up to 24h, 3600 ` +
        "for 7d, 21600 for 30d, 86400 for 90d. Minutes are kept a day, hours a week, six " +
        "hours 30 days: a width finer than the range's oldest rows is refused.",
    ),
    v.regex(/^\d{1,6}$/, `must be one of ${BUCKET_WIDTHS.join(", ")}`),
    v.transform(Number),
    v.picklist(BUCKET_WIDTHS, `must be one of ${BUCKET_WIDTHS.join(", ")}`),
  ),
);

const endField = v.optional(
  v.pipe(
    v.string(),
    v.description("The window's end, ISO 8601 (now when absent)"),
    v.isoTimestamp("must be an ISO 8601 timestamp such as 2026-12-01T12:00:00Z"),
    v.transform((text) => Date.parse(text)),
  ),
);

export const HistoryQuery = v.object({
  range: rangeField(false, "24h"),
  bucket_seconds: bucketSeconds,
  end: endField,
});

export const RangeQuery = v.object({
  range: rangeField(false, "24h"),
});

export const RangeOrAllQuery = v.object({
  range: rangeField(true, "24h"),
});

export const HostsQuery = v.object({
  range: rangeField(true, "24h"),
  connector_id: v.optional(uuidField),
  search: v.optional(
    v.pipe(v.string(), v.maxLength(255, "must be at most 255 characters")),
  ),
  page: queryInteger(1, 1_000_000, 1),
  page_size: queryInteger(1, 500, 50),
});

/** At most this many hosts' series in one read. */
export const MAX_HOST_SERIES = 12;

export const HostHistoryQuery = v.object({
  hosts: v.pipe(
    v.string("is required: a comma-separated list of hosts"),
    v.transform((text) => [
      ...new Set(text.split(",").map((h) => h.trim().toLowerCase()).filter((h) => h !== "")),
    ]),
    v.minLength(1, "must name at least one host"),
    v.maxLength(MAX_HOST_SERIES, `must name at most ${MAX_HOST_SERIES} hosts`),
  ),
  range: rangeField(false, "24h"),
  bucket_seconds: bucketSeconds,
  end: endField,
});

/** At most this many proxies named by `ids` in one usage read (a list page's worth). */
export const MAX_PROXY_IDS = 1000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const ProxiesUsageQuery = v.object({
  connector_id: v.optional(uuidField),
  ids: v.optional(
    v.pipe(
      v.string(),
      v.transform((text) => [
        ...new Set(text.split(",").map((id) => id.trim().toLowerCase()).filter((id) => id !== "")),
      ]),
      v.check(
        (ids) => ids.every((id) => UUID.test(id)),
        "must be proxy ids (uuids), comma-separated",
      ),
      v.minLength(1, "must name at least one proxy"),
      v.maxLength(MAX_PROXY_IDS, `must name at most ${MAX_PROXY_IDS} proxies`),
    ),
  ),
  order: v.optional(
    v.picklist(
      ["requests", "failures", "bytes"],
      "must be one of requests, failures, bytes",
    ),
    "requests",
  ),
  page: queryInteger(1, 1_000_000, 1),
  page_size: queryInteger(1, 1000, 50),
});

export const FailuresQuery = v.object({
  range: rangeField(false, "24h"),
  connector_id: v.optional(uuidField),
});

export const FailureExamplesQuery = v.object({
  kind: v.optional(
    v.picklist(FAILURE_KINDS, `must be one of ${FAILURE_KINDS.join(", ")}`),
  ),
  connector_id: v.optional(uuidField),
  limit: queryInteger(1, 200, 50),
  cursor: v.optional(v.pipe(v.string(), v.maxLength(100, "is not a cursor this API gave"))),
});

export const SYSTEM_RANGES = ["1h", "24h", "7d", "30d", "90d"] as const;

export const SystemHistoryQuery = v.object({
  range: v.optional(
    v.picklist(SYSTEM_RANGES, `must be one of ${SYSTEM_RANGES.join(", ")}`),
    "24h",
  ),
});
