/**
 * How the feed follower stands, as the process reports it: its part of the heartbeat snapshot,
 * its lines of /metrics, and staleness as a reason the gateway is unready.
 */
import type { GatewayFeedSnapshot } from "../../shared/gateway-snapshot.ts";
import type { FeedFreshness } from "../../shared/routing/feed-freshness.ts";
import { helpLine } from "../base/metric-help.ts";
import type { FeedFollowerStats } from "../feed/follower.ts";

export function feedState(stats: FeedFollowerStats): GatewayFeedSnapshot {
  const appliedMs = stats.applied_at === null ? null : Date.parse(stats.applied_at);
  return {
    applied_digest: stats.applied_digest,
    applied_at: stats.applied_at,
    compiled_at: stats.compiled_at,
    apply_age_ms: appliedMs === null ? null : Math.max(0, Date.now() - appliedMs),
    applies: stats.applies,
    failures: stats.failures,
    consecutive_failures: stats.consecutive_failures,
    last_error: stats.last_error,
    holding: stats.holding,
  };
}

/** The follower's series as Prometheus text, newline-terminated. */
export function feedMetrics(stats: FeedFollowerStats, freshness: FeedFreshness): string {
  const lines: string[] = [];
  const metric = (name: string, type: string, value: number) => {
    const help = helpLine(name);
    if (help !== undefined) lines.push(help);
    lines.push(`# TYPE ${name} ${type}`, `${name} ${value}`);
  };
  metric("octoprox_gateway_feed_applies_total", "counter", stats.applies);
  metric("octoprox_gateway_feed_failures_total", "counter", stats.failures);
  metric("octoprox_gateway_feed_consecutive_failures", "gauge", stats.consecutive_failures);
  // Only once a feed is applied: before, there is no age to tell (octoprox_gateway_ready).
  if (stats.applied_at !== null && stats.compiled_at !== null) {
    const ageMs = Math.max(0, Date.now() - Date.parse(stats.applied_at));
    metric("octoprox_gateway_feed_applied_age_seconds", "gauge", ageMs / 1000);
    const readAgeMs = freshness.ageMs(Date.now());
    if (readAgeMs !== undefined) {
      metric("octoprox_gateway_feed_read_age_seconds", "gauge", readAgeMs / 1000);
    }
    metric(
      "octoprox_gateway_feed_compiled_timestamp_seconds",
      "gauge",
      Date.parse(stats.compiled_at) / 1000,
    );
  }
  return `${lines.join("\n")}\n`;
}

/** Past OCTOPROX_FEED_MAX_STALE without a read, the gateway is unready. */
export function feedUnready(freshness: FeedFreshness): string[] {
  const staleMs = freshness.staleForMs(Date.now());
  if (staleMs === undefined) return [];
  return [
    `routing feed stale: not read for ${Math.round(staleMs / 1000)} s ` +
    `(OCTOPROX_FEED_MAX_STALE ${freshness.maxStaleMs / 1000} s); new requests are refused`,
  ];
}
