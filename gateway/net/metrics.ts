/**
 * The socket layer's counters, kept as plain numbers on the request path and written out in
 * the Prometheus text format on /metrics. Labels take values from small fixed sets (kinds,
 * outcomes, phases, status codes), never hosts, projects or proxies.
 */

export const RequestKind = { http: "http", connect: "connect" } as const;
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

export class GatewayMetrics {
  connectionsOpen = 0;
  connectionsAccepted = 0;
  /** Closed at once: over OCTOPROX_MAX_CLIENT_CONNECTIONS. */
  connectionsRejected = 0;
  tunnelsOpen = 0;
  retries = 0;
  toUpstreamBytes = 0;
  toClientBytes = 0;
  readonly #requests = new Map<string, number>();
  readonly #failures = new Map<string, number>();
  /** Extra gauges and counters others add (the feed follower, the logger). */
  readonly #extra = new Map<string, () => number>();

  request(kind: RequestKind, outcome: RequestOutcome, status: number): void {
    const key = `kind="${kind}",outcome="${outcome}",status="${status}"`;
    this.#requests.set(key, (this.#requests.get(key) ?? 0) + 1);
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

  render(): string {
    const lines: string[] = [];
    const metric = (name: string, type: string, help: string, samples: [string, number][]) => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [labels, value] of samples) {
        lines.push(labels === "" ? `${name} ${value}` : `${name}{${labels}} ${value}`);
      }
    };
    metric("octoprox_gateway_connections_open", "gauge", "Client connections open.", [
      ["", this.connectionsOpen],
    ]);
    metric("octoprox_gateway_connections_total", "counter", "Client connections by result.", [
      ['result="accepted"', this.connectionsAccepted],
      ['result="rejected"', this.connectionsRejected],
    ]);
    metric("octoprox_gateway_tunnels_open", "gauge", "CONNECT tunnels relaying now.", [
      ["", this.tunnelsOpen],
    ]);
    metric(
      "octoprox_gateway_requests_total",
      "counter",
      "Requests by kind, outcome and the status answered.",
      [...this.#requests],
    );
    metric(
      "octoprox_gateway_upstream_failures_total",
      "counter",
      "Failed upstream attempts by phase.",
      [...this.#failures],
    );
    metric("octoprox_gateway_retries_total", "counter", "Attempts retried on another proxy.", [
      ["", this.retries],
    ]);
    metric("octoprox_gateway_relay_bytes_total", "counter", "Bytes relayed, by direction.", [
      ['direction="to_upstream"', this.toUpstreamBytes],
      ['direction="to_client"', this.toClientBytes],
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
