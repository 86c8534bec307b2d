/**
 * The socket layer's counters, kept as plain numbers on the request path and written out in
 * the Prometheus text format on /metrics. Labels take values from small fixed sets (kinds,
 * outcomes, phases, status codes), never hosts, projects or proxies.
 */

/** `socks5`: a SOCKS5 CONNECT, counted with the status its HTTP twin would have had. */
export const RequestKind = { http: "http", connect: "connect", socks5: "socks5" } as const;
export type RequestKind = (typeof RequestKind)[keyof typeof RequestKind];

export const RequestOutcome = {
  /** Relayed: an upstream answered (whatever its status) or the tunnel came up. */
  relayed: "relayed",
  /** Refused by the gateway before any upstream (400, 407, 403, 431, no proxy...). */
  refused: "refused",
  /** Every attempt failed before anything reached the client (502, 504). */
  failed: "failed",
  /** Broke off after the answer began (upstream idle or reset, client gone). */
  broken: "broken",
} as const;
export type RequestOutcome = (typeof RequestOutcome)[keyof typeof RequestOutcome];

/** One isolate's counters as plain data, summed into the process's /metrics. */
export interface MetricsSnapshot {
  /** Which isolate of the process (0 is the main one). */
  isolate: number;
  connectionsOpen: number;
  connectionsAccepted: number;
  connectionsRejected: number;
  tunnelsOpen: number;
  retries: number;
  toUpstreamBytes: number;
  toClientBytes: number;
  requests: [string, number][];
  failures: [string, number][];
  /** The isolate's metering and rate-limiter series (wiring.ts `IsolateCore.samples`). */
  core?: MetricSample[];
}

/** The kind and outcome labels of every request count, built once. */
const REQUEST_LABELS = Object.fromEntries(
  Object.values(RequestKind).map((kind) => [
    kind,
    Object.fromEntries(
      Object.values(RequestOutcome).map((outcome) => [
        outcome,
        `kind="${kind}",outcome="${outcome}"`,
      ]),
    ),
  ]),
) as Record<RequestKind, Record<RequestOutcome, string>>;

export class GatewayMetrics {
  connectionsOpen = 0;
  connectionsAccepted = 0;
  /** Closed at once: over OCTOPROX_MAX_CLIENT_CONNECTIONS. */
  connectionsRejected = 0;
  tunnelsOpen = 0;
  retries = 0;
  toUpstreamBytes = 0;
  toClientBytes = 0;
  /** Counts by kind and outcome, then by status: no label string is built per request. */
  readonly #requests = new Map<string, Map<number, number>>();
  readonly #failures = new Map<string, number>();
  /** Extra gauges and counters others add (the feed follower, the logger). */
  readonly #extra = new Map<string, () => number>();

  request(kind: RequestKind, outcome: RequestOutcome, status: number): void {
    const labels = REQUEST_LABELS[kind][outcome];
    let byStatus = this.#requests.get(labels);
    if (byStatus === undefined) {
      byStatus = new Map();
      this.#requests.set(labels, byStatus);
    }
    byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
  }

  /** Request counts as label sets, as /metrics writes them. */
  #requestSamples(): [string, number][] {
    const samples: [string, number][] = [];
    for (const [labels, byStatus] of this.#requests) {
      for (const [status, count] of byStatus) samples.push([`${labels},status="${status}"`, count]);
    }
    return samples;
  }

  upstreamFailure(phase: string): void {
    const key = `phase="${phase}"`;
    this.#failures.set(key, (this.#failures.get(key) ?? 0) + 1);
  }

  countBytes(toUpstreamBytes: number, toClientBytes: number): void {
    this.toUpstreamBytes += toUpstreamBytes;
    this.toClientBytes += toClientBytes;
  }

  /** Adds a series read when /metrics is asked (`name` is the whole metric name). */
  addGauge(name: string, read: () => number): void {
    this.#extra.set(name, read);
  }

  snapshot(isolate: number): MetricsSnapshot {
    return {
      isolate,
      connectionsOpen: this.connectionsOpen,
      connectionsAccepted: this.connectionsAccepted,
      connectionsRejected: this.connectionsRejected,
      tunnelsOpen: this.tunnelsOpen,
      retries: this.retries,
      toUpstreamBytes: this.toUpstreamBytes,
      toClientBytes: this.toClientBytes,
      requests: this.#requestSamples(),
      failures: [...this.#failures],
    };
  }

  /** The Prometheus text, these counters plus `others` (the process's other isolates'). */
  render(others: readonly MetricsSnapshot[] = []): string {
    const sum = (pick: (m: MetricsSnapshot) => number, own: number) =>
      others.reduce((total, other) => total + pick(other), own);
    const merge = (
      own: Iterable<[string, number]>,
      pick: (m: MetricsSnapshot) => [string, number][],
    ) => {
      if (others.length === 0) return [...own];
      const merged = new Map(own);
      for (const other of others) {
        for (const [key, value] of pick(other)) merged.set(key, (merged.get(key) ?? 0) + value);
      }
      return [...merged];
    };
    const lines: string[] = [];
    const metric = (name: string, type: string, help: string, samples: [string, number][]) => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [labels, value] of samples) {
        lines.push(labels === "" ? `${name} ${value}` : `${name}{${labels}} ${value}`);
      }
    };
    metric("octoprox_gateway_connections_open", "gauge", "Client connections open.", [
      ["", sum((m) => m.connectionsOpen, this.connectionsOpen)],
    ]);
    if (others.length > 0) {
      // How evenly SO_REUSEPORT spreads connections over the isolates.
      metric(
        "octoprox_gateway_isolate_connections_open",
        "gauge",
        "Client connections open, by isolate of the process.",
        [
          ['isolate="0"', this.connectionsOpen],
          ...others.map((m): [string, number] => [`isolate="${m.isolate}"`, m.connectionsOpen]),
        ],
      );
    }
    metric("octoprox_gateway_connections_total", "counter", "Client connections by result.", [
      ['result="accepted"', sum((m) => m.connectionsAccepted, this.connectionsAccepted)],
      ['result="rejected"', sum((m) => m.connectionsRejected, this.connectionsRejected)],
    ]);
    metric("octoprox_gateway_tunnels_open", "gauge", "Tunnels (CONNECT, SOCKS5) relaying now.", [
      ["", sum((m) => m.tunnelsOpen, this.tunnelsOpen)],
    ]);
    metric(
      "octoprox_gateway_requests_total",
      "counter",
      "Requests by kind, outcome and the status answered.",
      merge(this.#requestSamples(), (m) => m.requests),
    );
    metric(
      "octoprox_gateway_upstream_failures_total",
      "counter",
      "Failed upstream attempts by phase.",
      merge(this.#failures, (m) => m.failures),
    );
    metric("octoprox_gateway_retries_total", "counter", "Attempts retried on another proxy.", [
      ["", sum((m) => m.retries, this.retries)],
    ]);
    metric("octoprox_gateway_relay_bytes_total", "counter", "Bytes relayed, by direction.", [
      ['direction="to_upstream"', sum((m) => m.toUpstreamBytes, this.toUpstreamBytes)],
      ['direction="to_client"', sum((m) => m.toClientBytes, this.toClientBytes)],
    ]);
    for (const [name, read] of this.#extra) {
      let value: number;
      try {
        value = read();
      } catch {
        continue;
      }
      lines.push(`# TYPE ${name} gauge`, `${name} ${value}`);
    }
    return `${lines.join("\n")}\n`;
  }
}

/**
 * One series of a part that runs in every isolate (request metering, the rate limiter): each
 * isolate reports its own samples, and /metrics adds them up across the process (or takes the
 * largest, for a gauge like a failure streak, where a sum would say nothing).
 */
export interface MetricSample {
  name: string;
  type: "counter" | "gauge";
  /** `key="value",...` without braces; "" for none. */
  labels: string;
  value: number;
  merge?: "sum" | "max";
}

export function counterSample(name: string, value: number, labels = ""): MetricSample {
  return { name, type: "counter", labels, value };
}

/** A gauge; `merge: "max"` where the isolates' sum would mean nothing (a failure streak). */
export function gaugeSample(name: string, value: number, merge?: "max"): MetricSample {
  return { name, type: "gauge", labels: "", value, ...(merge ? { merge } : {}) };
}

/** The Prometheus text of every isolate's samples, merged series by series, first seen first. */
export function renderSamples(lists: readonly (readonly MetricSample[])[]): string {
  const merged = new Map<string, MetricSample>();
  for (const samples of lists) {
    for (const sample of samples) {
      const key = `${sample.name}{${sample.labels}}`;
      const seen = merged.get(key);
      if (seen === undefined) merged.set(key, { ...sample });
      else if (sample.merge === "max") seen.value = Math.max(seen.value, sample.value);
      else seen.value += sample.value;
    }
  }
  const lines: string[] = [];
  let typed = "";
  for (const sample of merged.values()) {
    if (sample.name !== typed) {
      lines.push(`# TYPE ${sample.name} ${sample.type}`);
      typed = sample.name;
    }
    lines.push(
      sample.labels === ""
        ? `${sample.name} ${sample.value}`
        : `${sample.name}{${sample.labels}} ${sample.value}`,
    );
  }
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`;
}
