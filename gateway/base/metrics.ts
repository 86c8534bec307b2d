/**
 * The socket layer's counters, kept as plain numbers on the request path and written out in
 * the Prometheus text format on /metrics, each family with its HELP (metric-help.ts) and TYPE.
 * Labels take values from small fixed sets (kinds, outcomes, phases, status codes, isolates),
 * never hosts, clients, projects, proxies, sessions, URLs or request ids.
 */
import type { GatewayIsolateSnapshot } from "../../shared/gateway-snapshot.ts";
import { helpLine } from "./metric-help.ts";

/** `socks5`: a SOCKS5 CONNECT, counted with the status its HTTP twin would have had. */
export const RequestKind = {
  http: "http",
  connect: "connect",
  socks5: "socks5",
  /** A tunnel device's connection, through the transparent listener. */
  device: "device",
} as const;
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

/** Request durations: a forwarded answer takes milliseconds, a tunnel can live for minutes. */
export const DURATION_BUCKETS_SECONDS: readonly number[] = [
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
  60,
  300,
];

/** Upstream connections: a loopback proxy in a millisecond, a far one in a second or more. */
export const CONNECT_BUCKETS_SECONDS: readonly number[] = [
  0.001,
  0.0025,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
];

/** A histogram's counts as plain data: per bucket (not cumulative), the last one past the bounds. */
export interface HistogramData {
  counts: number[];
  sum: number;
  count: number;
}

/** A fixed-bucket histogram; observing allocates nothing. */
export class Histogram {
  readonly bounds: readonly number[];
  readonly #counts: number[];
  #sum = 0;
  #count = 0;

  constructor(bounds: readonly number[]) {
    this.bounds = bounds;
    this.#counts = new Array<number>(bounds.length + 1).fill(0);
  }

  observe(seconds: number): void {
    if (!(seconds >= 0)) return;
    const bounds = this.bounds;
    let index = 0;
    while (index < bounds.length && seconds > bounds[index]) index++;
    this.#counts[index]++;
    this.#sum += seconds;
    this.#count++;
  }

  data(): HistogramData {
    return { counts: [...this.#counts], sum: this.#sum, count: this.#count };
  }
}

/** Adds histograms of the same bounds. */
function mergeHistograms(parts: readonly HistogramData[]): HistogramData {
  const merged: HistogramData = { counts: [...parts[0].counts], sum: parts[0].sum, count: 0 };
  merged.count = parts[0].count;
  for (const part of parts.slice(1)) {
    part.counts.forEach((value, index) => (merged.counts[index] += value));
    merged.sum += part.sum;
    merged.count += part.count;
  }
  return merged;
}

/** One isolate's counters as plain data, summed into the process's /metrics. */
export interface MetricsSnapshot {
  /** Which isolate of the process (0 is the main one). */
  isolate: number;
  connectionsOpen: number;
  connectionsAccepted: number;
  connectionsRejected: number;
  tunnelsOpen: number;
  retries: number;
  verdicts: [string, number][];
  verdictRetries: number;
  toUpstreamBytes: number;
  toClientBytes: number;
  requests: [string, number][];
  failures: [string, number][];
  durations: Record<RequestKind, HistogramData>;
  upstreamConnect: HistogramData;
  /** The isolate's TLS interception series (`name` or `name{labels}`), summed across isolates. */
  interception?: [string, number][];
  /** The isolate's metering and rate-limiter series (app/isolate-core.ts `IsolateCore.samples`). */
  core?: MetricSample[];
  /** The isolate's part of the heartbeat snapshot (app/isolate-core.ts `IsolateCore.state`). */
  state?: Omit<GatewayIsolateSnapshot, "connections_open" | "tunnels_open">;
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
  /** Requests sent again after a block or rate-limit verdict. */
  verdictRetries = 0;
  /** Judged answers by verdict and mode label set. */
  readonly #verdicts = new Map<string, number>();
  toUpstreamBytes = 0;
  toClientBytes = 0;
  /** Counts by kind and outcome, then by status: no label string is built per request. */
  readonly #requests = new Map<string, Map<number, number>>();
  readonly #failures = new Map<string, number>();
  readonly #durations: Record<RequestKind, Histogram> = {
    http: new Histogram(DURATION_BUCKETS_SECONDS),
    connect: new Histogram(DURATION_BUCKETS_SECONDS),
    socks5: new Histogram(DURATION_BUCKETS_SECONDS),
    device: new Histogram(DURATION_BUCKETS_SECONDS),
  };
  readonly #upstreamConnect = new Histogram(CONNECT_BUCKETS_SECONDS);
  /** Extra gauges others add (readiness, the logger). */
  readonly #extra = new Map<string, () => number>();
  /**
   * TLS interception's series (gateway/net/tls/interceptor.ts), read when /metrics is asked;
   * names ending `_total` are counters, the others gauges.
   */
  interceptionSeries: (() => [string, number][]) | undefined;

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

  /** An answer a rule matched: acted on (`shadow` false) or only recorded. */
  verdict(verdict: string, shadow: boolean): void {
    const key = `verdict="${verdict}",mode="${shadow ? "shadow" : "on"}"`;
    this.#verdicts.set(key, (this.#verdicts.get(key) ?? 0) + 1);
  }

  upstreamFailure(phase: string): void {
    const key = `phase="${phase}"`;
    this.#failures.set(key, (this.#failures.get(key) ?? 0) + 1);
  }

  /** A request ended, `elapsedMs` after its head was read. */
  requestDuration(kind: RequestKind, elapsedMs: number): void {
    this.#durations[kind].observe(elapsedMs / 1000);
  }

  /** An upstream connection became usable `elapsedMs` after the dial began. */
  upstreamConnected(elapsedMs: number): void {
    this.#upstreamConnect.observe(elapsedMs / 1000);
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
      verdicts: [...this.#verdicts],
      verdictRetries: this.verdictRetries,
      toUpstreamBytes: this.toUpstreamBytes,
      toClientBytes: this.toClientBytes,
      requests: this.#requestSamples(),
      failures: [...this.#failures],
      durations: {
        http: this.#durations.http.data(),
        connect: this.#durations.connect.data(),
        socks5: this.#durations.socks5.data(),
        device: this.#durations.device.data(),
      },
      upstreamConnect: this.#upstreamConnect.data(),
      interception: this.interceptionSeries?.() ?? [],
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
    const metric = (name: string, type: string, samples: [string, number][]) => {
      family(lines, name, type);
      for (const [labels, value] of samples) {
        lines.push(labels === "" ? `${name} ${value}` : `${name}{${labels}} ${value}`);
      }
    };
    metric("octoprox_gateway_connections_open", "gauge", [
      ["", sum((m) => m.connectionsOpen, this.connectionsOpen)],
    ]);
    if (others.length > 0) {
      // How evenly SO_REUSEPORT spreads connections over the isolates.
      metric("octoprox_gateway_isolate_connections_open", "gauge", [
        ['isolate="0"', this.connectionsOpen],
        ...others.map((m): [string, number] => [`isolate="${m.isolate}"`, m.connectionsOpen]),
      ]);
    }
    metric("octoprox_gateway_connections_total", "counter", [
      ['result="accepted"', sum((m) => m.connectionsAccepted, this.connectionsAccepted)],
      ['result="rejected"', sum((m) => m.connectionsRejected, this.connectionsRejected)],
    ]);
    metric("octoprox_gateway_tunnels_open", "gauge", [
      ["", sum((m) => m.tunnelsOpen, this.tunnelsOpen)],
    ]);
    metric(
      "octoprox_gateway_requests_total",
      "counter",
      merge(this.#requestSamples(), (m) => m.requests),
    );
    metric(
      "octoprox_gateway_upstream_failures_total",
      "counter",
      merge(this.#failures, (m) => m.failures),
    );
    metric("octoprox_gateway_retries_total", "counter", [
      ["", sum((m) => m.retries, this.retries)],
    ]);
    metric(
      "octoprox_gateway_block_verdicts_total",
      "counter",
      merge(this.#verdicts, (m) => m.verdicts ?? []),
    );
    metric("octoprox_gateway_block_retries_total", "counter", [
      ["", sum((m) => m.verdictRetries ?? 0, this.verdictRetries)],
    ]);
    metric("octoprox_gateway_relay_bytes_total", "counter", [
      ['direction="to_upstream"', sum((m) => m.toUpstreamBytes, this.toUpstreamBytes)],
      ['direction="to_client"', sum((m) => m.toClientBytes, this.toClientBytes)],
    ]);
    const durationName = "octoprox_gateway_request_duration_seconds";
    family(lines, durationName, "histogram");
    for (const kind of Object.values(RequestKind)) {
      const own = this.#durations[kind].data();
      histogramLines(lines, durationName, `kind="${kind}"`, DURATION_BUCKETS_SECONDS, [
        own,
        ...others.map((m) => m.durations[kind]),
      ]);
    }
    const connectName = "octoprox_gateway_upstream_connect_seconds";
    family(lines, connectName, "histogram");
    histogramLines(lines, connectName, "", CONNECT_BUCKETS_SECONDS, [
      this.#upstreamConnect.data(),
      ...others.map((m) => m.upstreamConnect),
    ]);
    const interception = merge(this.interceptionSeries?.() ?? [], (m) => m.interception ?? []);
    // By family: another isolate's series of a family may come after other families.
    const families = new Map<string, string[]>();
    for (const [series, value] of interception) {
      const brace = series.indexOf("{");
      const name = brace === -1 ? series : series.slice(0, brace);
      let samples = families.get(name);
      if (samples === undefined) families.set(name, samples = []);
      samples.push(`${series} ${value}`);
    }
    for (const [name, samples] of families) {
      family(lines, name, name.endsWith("_total") ? "counter" : "gauge");
      lines.push(...samples);
    }
    for (const [name, read] of this.#extra) {
      let value: number;
      try {
        value = read();
      } catch {
        continue;
      }
      family(lines, name, "gauge");
      lines.push(`${name} ${value}`);
    }
    return `${lines.join("\n")}\n`;
  }
}

/** A family's HELP (when metric-help.ts has one) and TYPE lines. */
function family(lines: string[], name: string, type: string): void {
  const help = helpLine(name);
  if (help !== undefined) lines.push(help);
  lines.push(`# TYPE ${name} ${type}`);
}

/** One histogram's series, the isolates' copies added up (cumulative buckets, then sum and count). */
function histogramLines(
  lines: string[],
  name: string,
  labels: string,
  bounds: readonly number[],
  parts: readonly HistogramData[],
): void {
  const merged = mergeHistograms(parts);
  const prefix = labels === "" ? "" : `${labels},`;
  let cumulative = 0;
  bounds.forEach((bound, index) => {
    cumulative += merged.counts[index];
    lines.push(`${name}_bucket{${prefix}le="${bound}"} ${cumulative}`);
  });
  cumulative += merged.counts[bounds.length];
  lines.push(`${name}_bucket{${prefix}le="+Inf"} ${cumulative}`);
  const tail = labels === "" ? "" : `{${labels}}`;
  lines.push(`${name}_sum${tail} ${merged.sum}`, `${name}_count${tail} ${merged.count}`);
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
export function gaugeSample(
  name: string,
  value: number,
  merge?: "max",
  labels = "",
): MetricSample {
  return { name, type: "gauge", labels, value, ...(merge ? { merge } : {}) };
}

/**
 * The Prometheus text of every isolate's samples, merged series by series, first seen first,
 * each family with its HELP (metric-help.ts) and TYPE.
 */
export function renderSamples(lists: readonly (readonly MetricSample[])[]): string {
  // By family, then by label set: a family's series stay together whichever isolate had which.
  const families = new Map<string, Map<string, MetricSample>>();
  for (const samples of lists) {
    for (const sample of samples) {
      let series = families.get(sample.name);
      if (series === undefined) {
        series = new Map();
        families.set(sample.name, series);
      }
      const seen = series.get(sample.labels);
      if (seen === undefined) series.set(sample.labels, { ...sample });
      else if (sample.merge === "max") seen.value = Math.max(seen.value, sample.value);
      else seen.value += sample.value;
    }
  }
  const lines: string[] = [];
  for (const [name, series] of families) {
    family(lines, name, series.values().next().value!.type);
    for (const sample of series.values()) {
      lines.push(
        sample.labels === ""
          ? `${name} ${sample.value}`
          : `${name}{${sample.labels}} ${sample.value}`,
      );
    }
  }
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`;
}

/** The label every sample of a gateway's /metrics carries, as every control process's does. */
export const ROLE_LABEL = 'role="gateway"';

/**
 * Adds the role label to every sample line of a rendered text: the one place it is added, so
 * no family's emitter can leave it out.
 */
export function withRole(text: string): string {
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line === "" || line.startsWith("#")) continue;
    const brace = line.indexOf("{");
    const space = line.indexOf(" ");
    if (brace >= 0 && brace < space) {
      const empty = line[brace + 1] === "}";
      lines[i] = `${line.slice(0, brace + 1)}${ROLE_LABEL}${empty ? "" : ","}${
        line.slice(brace + 1)
      }`;
    } else {
      lines[i] = `${line.slice(0, space)}{${ROLE_LABEL}}${line.slice(space)}`;
    }
  }
  return lines.join("\n");
}
