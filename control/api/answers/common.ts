/**
 * What several answers share: times, usage counts, pages, and the traffic settings and usage a
 * project and a connector both carry. Each answer of the API is declared once, in this folder,
 * as a valibot schema: the route registry types the handler's answer against it and writes it
 * into the OpenAPI document, tests/api/answers.test.ts parses real answers with it, and the
 * dashboard and the CLI import its types (`import type`, so no server code reaches them).
 */
import * as v from "valibot";
import { RATE_LIMIT_CONFIG_FIELDS, TRAFFIC_CONFIG_FIELDS } from "../../model/connectors.ts";

/** A time as JSON writes a Date: ISO 8601 in UTC. */
export const timestamp = v.pipe(v.string(), v.isoTimestamp());

export const nullableTimestamp = v.nullable(timestamp);

/**
 * What an issued secret (an API token, a distribution key) answers of itself besides its own
 * fields: how to tell it apart and its lifecycle, never the secret.
 */
export const ISSUED_SECRET_FIELDS = {
  /** The secret's first characters, to tell one from another; never the whole secret. */
  prefix: v.string(),
  created_at: timestamp,
  expires_at: nullableTimestamp,
  last_used_at: nullableTimestamp,
  revoked_at: nullableTimestamp,
  active: v.boolean(),
};

/** An id of a row (a uuid). */
export const id = v.pipe(v.string(), v.uuid());

/** A whole number (a count, a size). */
export const count = v.pipe(v.number(), v.integer());

/** A JSON object of anything (a config, metadata). */
export const jsonObject = v.record(v.string(), v.unknown());

/** Counts of requests and bytes over some span (control/metrics/usage-model.ts). */
export const UsageAnswer = v.strictObject({
  requests: count,
  successes: count,
  failures: count,
  /** successes / requests, 0 to 1; null without requests. */
  success_rate: v.nullable(v.number()),
  /** Client to upstream. */
  bytes_sent: count,
  /** Upstream to client. */
  bytes_received: count,
  /** Connect to first byte (or tunnel up), averaged; null without requests. */
  avg_latency_ms: v.nullable(v.number()),
});
export type Usage = v.InferOutput<typeof UsageAnswer>;

/** A tunnel device's usage: the usage counts and what the gateway closed of its connections. */
export const DeviceCountsAnswer = v.strictObject({
  ...UsageAnswer.entries,
  /**
   * Connections closed as encrypted DNS (DNS over TLS, a well-known DNS-over-HTTPS resolver)
   * while the install blocks it; no requests, since nothing was dialled.
   */
  encrypted_dns_closed: count,
});

/** The fields of a page of a list; `items` is the page's own. */
export const PAGE_FIELDS = {
  total: count,
  page: count,
  page_size: count,
};

export function pageOf<TItem extends v.GenericSchema>(item: TItem) {
  return v.strictObject({ items: v.array(item), ...PAGE_FIELDS });
}

export interface Page<T> {
  items: T[];
  total: number;
  page: number;
  page_size: number;
}

/** A traffic limit and its billing as stored (a connector's traffic_config, a project's quota). */
export const TrafficConfigAnswer = v.strictObject(TRAFFIC_CONFIG_FIELDS);
export type TrafficConfig = v.InferOutput<typeof TrafficConfigAnswer>;

/** A connector's per-proxy rate limit as stored. */
export const RateLimitConfigAnswer = v.strictObject(RATE_LIMIT_CONFIG_FIELDS);
export type RateLimitConfig = v.InferOutput<typeof RateLimitConfigAnswer>;

/** The usage window of a traffic limit (control/traffic/usage-view.ts). */
export const TrafficUsageAnswer = v.strictObject({
  period: v.string(),
  period_end: timestamp,
  /** The window's start: the period's, or a reset inside it. */
  counting_since: timestamp,
  /** Both directions, the window's history and the live windows. */
  bytes: count,
  limit_bytes: v.nullable(count),
  /** Of the limit, whole; null without a limit. */
  percent: v.nullable(v.number()),
  status: v.picklist(["ok", "warning", "limit"]),
  cost: v.nullable(v.number()),
  currency: v.string(),
  /** The stored decision blocks it now (gateways refuse its requests). */
  blocked: v.boolean(),
  blocked_until: nullableTimestamp,
  /** A decision was asked for (a reset, a limit edit) and has not landed yet. */
  pending: v.boolean(),
  /** False when Redis did not answer: the history alone, no block and nothing pending shown. */
  runtime_included: v.boolean(),
});
export type TrafficUsage = v.InferOutput<typeof TrafficUsageAnswer>;

/** A request taken for later (202). */
export const AskedAnswer = v.strictObject({ asked: v.literal(true) });
