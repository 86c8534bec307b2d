/**
 * Preflight's counts on one isolate, for /metrics (summed over the process's isolates): checks
 * by what they found, verdicts the cache answered, echoes sent, slots retired. Plain numbers on
 * the request path.
 */
import { counterSample, type MetricSample } from "../base/metrics.ts";

export const CheckResult = {
  /** The exit is where the request requires. */
  pass: "pass",
  /** The exit is elsewhere. */
  mismatch: "mismatch",
  /** Nothing could say: the echo failed, or no source placed the exit. Traffic goes on. */
  unknown: "unknown",
} as const;
export type CheckResult = (typeof CheckResult)[keyof typeof CheckResult];

export class PreflightCounters {
  readonly checks: Record<CheckResult, number> = { pass: 0, mismatch: 0, unknown: 0 };
  /** Checks a cached verdict answered without an echo. */
  cacheHits = 0;
  echoesAnswered = 0;
  echoesFailed = 0;
  /** Session slots taken out of routing here until the worker's delete reaches the feed. */
  retired = 0;

  samples(): MetricSample[] {
    const checks = "octoprox_gateway_preflight_checks_total";
    const echoes = "octoprox_gateway_preflight_echoes_total";
    return [
      counterSample(checks, this.checks.pass, 'result="pass"'),
      counterSample(checks, this.checks.mismatch, 'result="mismatch"'),
      counterSample(checks, this.checks.unknown, 'result="unknown"'),
      counterSample("octoprox_gateway_preflight_cache_hits_total", this.cacheHits),
      counterSample(echoes, this.echoesAnswered, 'result="answered"'),
      counterSample(echoes, this.echoesFailed, 'result="failed"'),
      counterSample("octoprox_gateway_preflight_retired_total", this.retired),
    ];
  }
}
