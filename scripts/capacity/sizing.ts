/**
 * The arithmetic of docs/capacity.md, apart from where its inputs come from: gateways for a peak
 * at a target utilization, and the allowance for losing a failure domain.
 */

/** What the fleet is sized for: the doc's explanation of each is in docs/capacity.md. */
export const PLAN = {
  /** Requests a second at the busiest moment. */
  peakPerSecond: 100_000,
  /** No gateway planned past this share of its tested rate. */
  targetUtilization: 0.6,
  /** Zones the gateways are spread over, when the failure domain is a zone. */
  zones: 3,
  /** A mix of keep-alive HTTP requests and new tunnels: the share of the first. */
  mixKeepAliveShare: 0.7,
  /** How long a request takes through real upstreams, for the requests in flight. */
  upstreamLatencySeconds: 0.2,
  /** Long-lived tunnels held open across the cluster, for memory. */
  openTunnels: 100_000,
} as const;

/** Gateways that carry `peak` at `utilization` of `tested` requests a second each. */
export function carrying(peak: number, tested: number, utilization: number): number {
  return Math.ceil(peak / (tested * utilization));
}

/**
 * The count when the failure domain is one of `zones` zones: the smallest `n` whose survivors
 * after losing its largest zone (`ceil(n / zones)` gateways) still number `base`.
 */
export function overZones(base: number, zones: number): { total: number; perZone: number } {
  let total = base;
  while (total - Math.ceil(total / zones) < base) total++;
  return { total, perZone: Math.ceil(total / zones) };
}

/** One gateway's rate for a mix: the per-request costs weighted, `share` of them at `a`. */
export function mixedRate(a: number, b: number, share: number): number {
  return 1 / (share / a + (1 - share) / b);
}
