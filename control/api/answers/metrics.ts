/** Usage, the traffic split, failures and the system history as the API answers them. */
import * as v from "valibot";
import { FAILURE_KINDS } from "../../../shared/failure-kinds.ts";
import { SPLIT_EXCLUSIONS } from "../../model/metrics.ts";
import { count, DeviceCountsAnswer, id, PAGE_FIELDS, timestamp, UsageAnswer } from "./common.ts";

/** An entity's usage over everything retained. */
export const TotalsAnswer = v.strictObject({
  usage: UsageAnswer,
  /** Whether the live window was added (false: Redis did not answer). */
  live_included: v.boolean(),
});

/** Counts over time, one point per bucket (zeros where a bucket has none). */
function seriesAnswer<TCounts extends v.ObjectEntries>(counts: TCounts) {
  return v.strictObject({
    range: v.string(),
    bucket_seconds: count,
    from: timestamp,
    to: timestamp,
    live_included: v.boolean(),
    points: v.array(v.strictObject({
      /** The bucket's start. */
      t: timestamp,
      ...counts,
    })),
  });
}

/** Usage over time, one point per bucket (zeros where a bucket has none). */
export const SeriesAnswer = seriesAnswer(UsageAnswer.entries);
export type Series = v.InferOutput<typeof SeriesAnswer>;

/** A tunnel device's usage over time: each point with its encrypted DNS closed too. */
export const DeviceSeriesAnswer = seriesAnswer(DeviceCountsAnswer.entries);
export type DeviceSeries = v.InferOutput<typeof DeviceSeriesAnswer>;

/** A project's all-time usage and its pool as it stands. */
export const ProjectMetricsAnswer = v.strictObject({
  ...TotalsAnswer.entries,
  pool: v.strictObject({
    total: count,
    by_status: v.record(v.string(), count),
    /** Proxies resting in a rate-limit quarantine now; null when Redis did not answer. */
    quarantined: v.nullable(count),
  }),
});
export type ProjectMetrics = v.InferOutput<typeof ProjectMetricsAnswer>;

export const SplitRowAnswer = v.strictObject({
  connector_id: id,
  name: v.string(),
  enabled: v.boolean(),
  weight: count,
  proxies: count,
  healthy: count,
  /**
   * Its share of requests that name no place and no domain, as gateways route them now: its
   * weight over the weights of the connectors that can take one; 0 when excluded.
   */
  expected_share: v.number(),
  /** Its share of the window's requests; null when the window has none. */
  observed_share: v.nullable(v.number()),
  /** Its share of the window's bytes (both directions); null when the window has none. */
  observed_bytes_share: v.nullable(v.number()),
  /** Why it takes no such request, in the router's words (docs/api.md); null when it takes them. */
  excluded_reason: v.nullable(v.picklist(SPLIT_EXCLUSIONS)),
  usage: UsageAnswer,
  /** Bytes both ways in decimal GB times the connector's price_per_gb; null without a price. */
  cost: v.nullable(v.number()),
  currency: v.nullable(v.string()),
});
export type SplitRow = v.InferOutput<typeof SplitRowAnswer>;

export const SplitAnswer = v.strictObject({
  range: v.string(),
  items: v.array(SplitRowAnswer),
  /** False when Redis did not answer: expected shares without quarantines, blocks or pools. */
  runtime_included: v.boolean(),
});
export type Split = v.InferOutput<typeof SplitAnswer>;

export const ProxyUsageRowAnswer = v.strictObject({
  proxy_id: id,
  connector_id: id,
  host: v.string(),
  port: count,
  status: v.string(),
  usage: UsageAnswer,
});
export type ProxyUsageRow = v.InferOutput<typeof ProxyUsageRowAnswer>;

export const ProxyUsagePageAnswer = v.strictObject({
  items: v.array(ProxyUsageRowAnswer),
  ...PAGE_FIELDS,
  live_included: v.boolean(),
});

export const HostsPageAnswer = v.strictObject({
  range: v.string(),
  items: v.array(v.strictObject({ host: v.string(), ...UsageAnswer.entries })),
  ...PAGE_FIELDS,
});

export const HostHistoryAnswer = v.strictObject({
  items: v.array(v.strictObject({ host: v.string(), series: SeriesAnswer })),
});

/** `GET /projects/{id}/failures`: the flushed failure counts over a range. */
export const FailureReportAnswer = v.strictObject({
  range: v.string(),
  from: timestamp,
  to: timestamp,
  total: count,
  /** Every kind with failures in the window, most first. */
  by_kind: v.array(v.strictObject({ kind: v.string(), count })),
  /** The same counts split by connector and the upstream's own status. */
  rows: v.array(v.strictObject({
    kind: v.string(),
    connector_id: v.nullable(id),
    vendor_status: v.nullable(count),
    count,
  })),
});
export type FailureReport = v.InferOutput<typeof FailureReportAnswer>;

/** One scrubbed example of a failed request. */
export const FailureExampleAnswer = v.strictObject({
  /** The stream entry's id: with the kind, what a cursor names. */
  id: v.string(),
  at: timestamp,
  kind: v.picklist(FAILURE_KINDS),
  protocol: v.string(),
  client_status: count,
  proxy_status: v.string(),
  vendor_status: v.nullable(count),
  connector_id: v.nullable(v.string()),
  proxy_id: v.nullable(v.string()),
  target: v.string(),
  message: v.string(),
});
export type FailureExample = v.InferOutput<typeof FailureExampleAnswer>;

export const FailureExamplesAnswer = v.strictObject({
  items: v.array(FailureExampleAnswer),
  /** Pass as `cursor` for the next page; null at the end. */
  next_cursor: v.nullable(v.string()),
});

export const SystemPointAnswer = v.strictObject({
  t: timestamp,
  readings: count,
  database_bytes: count,
  redis_used_memory_bytes: v.nullable(count),
  redis_keys: v.nullable(count),
  projects: count,
  connectors: count,
  proxies_by_status: v.record(v.string(), count),
});
export type SystemPoint = v.InferOutput<typeof SystemPointAnswer>;

export const SystemHistoryAnswer = v.strictObject({
  range: v.string(),
  bucket_seconds: count,
  points: v.array(SystemPointAnswer),
});
export type SystemHistory = v.InferOutput<typeof SystemHistoryAnswer>;
