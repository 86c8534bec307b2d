/**
 * What a gateway process reports in its heartbeat snapshot (`instance:<id>:snapshot`, written by
 * gateway/app/heartbeat.ts every beat), as the System page reads it (control/metrics/system-stats.ts).
 * Plain data, no secrets: digests, counts, times and the publishers' last errors.
 */
import type { InstanceIdentity } from "./instance-registry.ts";
import type { LoopLagSnapshot } from "./loop-lag.ts";

/** A batch publisher's state (request metering, the failure log), as of the beat. */
export interface PublisherState {
  sends: number;
  failures: number;
  consecutive_failures: number;
  last_error: string | null;
}

/** One isolate serving the process: isolate 0 is the main one, which follows the feed. */
export interface GatewayIsolateSnapshot {
  isolate: number;
  connections_open: number;
  tunnels_open: number;
  loop_lag: LoopLagSnapshot;
  metering: PublisherState & {
    owed_parts: number;
    pending_rows: number;
    meters_open: number;
  };
  failure_log: PublisherState & {
    recorded: number;
    examples_written: number;
    examples_capped: number;
    examples_dropped: number;
    pending_examples: number;
  };
}

/** The feed this gateway routes on. */
export interface GatewayFeedSnapshot {
  /** The head's digest it applied last; null before its first feed. */
  applied_digest: string | null;
  applied_at: string | null;
  /** When the controller compiled that feed (its clock). */
  compiled_at: string | null;
  /** Milliseconds since it was applied, as of the beat. */
  apply_age_ms: number | null;
  applies: number;
  failures: number;
  consecutive_failures: number;
  last_error: string | null;
  /** What the follower waits out (no head, a head of another schema), if anything. */
  holding: string | null;
}

export interface GatewaySnapshot extends InstanceIdentity {
  role: "gateway";
  feed: GatewayFeedSnapshot;
  /** Summed over the isolates that answered. */
  connections_open: number;
  tunnels_open: number;
  /** Isolates configured (OCTOPROX_GATEWAY_ISOLATES, resolved) and each that answered. */
  isolates_configured: number;
  isolates: GatewayIsolateSnapshot[];
  /** The main isolate's: the event loop the feed follower and the heartbeat run on. */
  loop_lag: LoopLagSnapshot;
}

/** The applied digest of a gateway's snapshot as read back from Redis (null if none or unknown). */
export function appliedDigestOf(snapshot: Record<string, unknown> | null): string | null {
  const feed = snapshot?.feed;
  if (typeof feed !== "object" || feed === null) return null;
  const digest = (feed as Record<string, unknown>).applied_digest;
  return typeof digest === "string" ? digest : null;
}
