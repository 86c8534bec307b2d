/**
 * What one isolate reports of itself: its series for /metrics (summed with the other isolates')
 * and its part of the heartbeat snapshot (its connections are the caller's).
 */
import { dispatchSamples } from "../base/dispatch-metrics.ts";
import type { GatewayIsolateSnapshot } from "../../shared/gateway-snapshot.ts";
import type { LoopLagTimer } from "../../shared/loop-lag.ts";
import type { CoreRouter } from "../../shared/routing/router.ts";
import { gaugeSample, type MetricSample } from "../base/metrics.ts";
import type { IsolateWriters } from "./isolate-writers.ts";

/** The isolate's part of the heartbeat snapshot, without the connection counts. */
export type IsolateState = Omit<GatewayIsolateSnapshot, "connections_open" | "tunnels_open">;

export function isolateSamples(
  isolate: number,
  router: CoreRouter,
  writers: IsolateWriters,
  loopLag: LoopLagTimer,
): MetricSample[] {
  const lag = loopLag.snapshot();
  const lagLabel = `isolate="${isolate}"`;
  return [
    ...writers.metering.samples(),
    ...writers.rateLimiter.samples(),
    ...writers.requestRate.samples(),
    // Every isolate holds the process's trips: the largest copy says how many there are.
    gaugeSample("octoprox_gateway_local_quarantines", router.localQuarantineCount, "max"),
    ...writers.failureLog.samples(),
    ...writers.captures.samples(),
    ...writers.poolEvidence.samples(),
    ...(writers.poolHolds?.samples() ?? []),
    ...dispatchSamples(router.dispatch),
    gaugeSample("octoprox_gateway_loop_lag_worst_seconds", lag.worst_ms / 1000, "max", lagLabel),
    gaugeSample("octoprox_gateway_loop_lag_mean_seconds", lag.mean_ms / 1000, "max", lagLabel),
  ];
}

export function isolateState(
  isolate: number,
  writers: IsolateWriters,
  loopLag: LoopLagTimer,
): IsolateState {
  const m = writers.metering.stats();
  const f = writers.failureLog.stats();
  return {
    isolate,
    loop_lag: loopLag.snapshot(),
    metering: {
      sends: m.sends,
      failures: m.failures,
      consecutive_failures: m.consecutiveFailures,
      last_error: m.lastError,
      owed_parts: m.owedParts,
      pending_rows: m.pendingRows,
      meters_open: m.metersOpen,
    },
    failure_log: {
      sends: f.writes,
      failures: f.writeFailures,
      consecutive_failures: f.consecutiveFailures,
      last_error: f.lastError,
      recorded: f.recorded,
      examples_written: f.examplesWritten,
      examples_capped: f.examplesCapped,
      examples_dropped: f.examplesDropped,
      pending_examples: f.pendingExamples,
    },
  };
}
