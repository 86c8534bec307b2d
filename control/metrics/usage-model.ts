/**
 * What a usage read answers: counts summed from the history, the totals and the live windows,
 * and the figures derived from them. One shape for a project, connector, proxy or host, so the
 * api and the dashboard read every entity alike.
 */

/** Summed transfer counts (the history's and the windows' fields). */
export interface Counts {
  requests: number;
  successes: number;
  failures: number;
  bytesSent: number;
  bytesReceived: number;
  latencySumMs: number;
}

export const ZERO_COUNTS: Readonly<Counts> = Object.freeze({
  requests: 0,
  successes: 0,
  failures: 0,
  bytesSent: 0,
  bytesReceived: 0,
  latencySumMs: 0,
});

export function addCounts(a: Counts, b: Counts): Counts {
  return {
    requests: a.requests + b.requests,
    successes: a.successes + b.successes,
    failures: a.failures + b.failures,
    bytesSent: a.bytesSent + b.bytesSent,
    bytesReceived: a.bytesReceived + b.bytesReceived,
    latencySumMs: a.latencySumMs + b.latencySumMs,
  };
}

/** Counts as the api answers them. */
export interface Usage {
  requests: number;
  successes: number;
  failures: number;
  /** successes / requests, 0 to 1; null without requests. */
  success_rate: number | null;
  /** Client to upstream. */
  bytes_sent: number;
  /** Upstream to client. */
  bytes_received: number;
  /** Connect to first byte (or tunnel up), averaged over requests; null without requests. */
  avg_latency_ms: number | null;
}

const round = (value: number, digits: number) => {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
};

export function usageOf(counts: Counts): Usage {
  const { requests } = counts;
  return {
    requests,
    successes: counts.successes,
    failures: counts.failures,
    success_rate: requests > 0 ? round(counts.successes / requests, 4) : null,
    bytes_sent: counts.bytesSent,
    bytes_received: counts.bytesReceived,
    avg_latency_ms: requests > 0 ? round(counts.latencySumMs / requests, 1) : null,
  };
}

/** A row of sums as Postgres answers them (bigint sums come back as text). */
export interface SumRow {
  requests: string | number | null;
  successes: string | number | null;
  failures: string | number | null;
  bytes_sent: string | number | null;
  bytes_received: string | number | null;
  latency_sum_ms: string | number | null;
}

export function countsOfRow(row: SumRow | undefined): Counts {
  if (!row) return { ...ZERO_COUNTS };
  return {
    requests: Number(row.requests ?? 0),
    successes: Number(row.successes ?? 0),
    failures: Number(row.failures ?? 0),
    bytesSent: Number(row.bytes_sent ?? 0),
    bytesReceived: Number(row.bytes_received ?? 0),
    latencySumMs: Number(row.latency_sum_ms ?? 0),
  };
}

/** The select list summing a history table's counts into a SumRow. */
export const SUMS_SQL = `coalesce(sum(requests), 0)::text as requests,
  coalesce(sum(successes), 0)::text as successes,
  coalesce(sum(failures), 0)::text as failures,
  coalesce(sum(bytes_sent), 0)::text as bytes_sent,
  coalesce(sum(bytes_received), 0)::text as bytes_received,
  coalesce(sum(latency_sum_ms), 0)::float8 as latency_sum_ms`;
