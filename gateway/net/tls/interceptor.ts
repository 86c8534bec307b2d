/**
 * What an isolate's listeners share to intercept tunnels: the host certificates (one cache for
 * the HTTP and SOCKS5 listeners), the CAs targets' certificates are checked against, which
 * tunnels are opened, and the counts /metrics shows.
 */
import { createSecureContext, type SecureContext } from "node:tls";
import type { Client, Target } from "../../../shared/routing/contract.ts";
import type { MitmCa } from "../../../shared/tls/ca.ts";
import { isBypassed } from "../../../shared/tls/bypass.ts";
import { HostCertificates } from "./host-certs.ts";
import { Impersonation } from "./impersonation.ts";
import type { ImpersonationUnavailableError } from "../../../shared/proxy-protocol/errors.ts";

/** Why a tunnel of a project with interception on stayed raw, or how an interception ended. */
export const InterceptEnd = {
  /** The host is on the project's bypass list. */
  bypassed: "bypassed",
  /** The client opted out (`-mitm-off`, `X-Octoprox-Mitm: off`). */
  optedOut: "opted_out",
  /** Not TLS, to a port other than a TLS one: relayed raw. */
  notTlsRelayed: "not_tls_relayed",
  /** Not TLS to a TLS port: closed. */
  notTls: "not_tls",
  /** A ClientHello that does not parse, or never came whole. */
  badHello: "bad_hello",
  /** The client refused the certificate (a TLS alert). */
  clientRejected: "client_rejected",
  /** The handshake failed otherwise (reset, timeout, no shared cipher). */
  handshakeFailed: "handshake_failed",
} as const;
export type InterceptEnd = (typeof InterceptEnd)[keyof typeof InterceptEnd];

/** Ports a client reaches over TLS: bytes that are not TLS there are refused, not relayed. */
export const TLS_PORTS: ReadonlySet<number> = new Set([443, 8443]);

export interface InterceptorOptions {
  /** OCTOPROX_TLS_MITM_CERT_CACHE_SIZE. */
  certCacheSize: number;
  /** OCTOPROX_UPSTREAM_CA_FILE's certificates (PEM), trusted beside the runtime's own roots. */
  upstreamCaPem?: readonly string[];
  /** Told once if the browser-grade modes' engine fails to load (the isolate logs it). */
  onEngineUnavailable?: (error: ImpersonationUnavailableError) => void;
}

export class Interceptor {
  readonly ca: MitmCa;
  readonly certificates: HostCertificates;
  /** The browser-grade modes' engine, loaded on their first request. */
  readonly impersonation: Impersonation;
  /** Extra roots for targets (Deno.startTls adds them to its own). */
  readonly upstreamCaCerts: string[];
  /** The runtime's roots and the extra ones, for a `node:tls` client (built on first use). */
  #nodeContext: SecureContext | undefined;
  /** Tunnels opened, and the requests served inside them. */
  intercepted = 0;
  requests = 0;
  readonly ends = new Map<string, number>();
  /** Client alerts by name (`unknown_ca`, `bad_certificate`...). */
  readonly alerts = new Map<string, number>();

  constructor(ca: MitmCa, options: InterceptorOptions) {
    this.ca = ca;
    this.certificates = new HostCertificates(ca, options.certCacheSize);
    this.upstreamCaCerts = [...(options.upstreamCaPem ?? [])];
    this.impersonation = new Impersonation({
      onUnavailable: options.onEngineUnavailable ?? (() => {}),
    });
  }

  /**
   * A `node:tls` client's context: the runtime's default roots with the extra CAs added (a `ca`
   * option would replace the defaults, and listing them, `rootCertificates`, needs a permission
   * the gateway does not have). Undefined without extra CAs: the defaults alone.
   */
  get nodeContext(): SecureContext | undefined {
    if (this.upstreamCaCerts.length === 0) return undefined;
    if (this.#nodeContext === undefined) {
      const context = createSecureContext({});
      for (const pem of this.upstreamCaCerts) {
        (context as unknown as { context: { addCACert(pem: string): void } }).context.addCACert(
          pem,
        );
      }
      this.#nodeContext = context;
    }
    return this.#nodeContext;
  }

  /**
   * Whether this tunnel is opened: the client's project intercepts, the client did not opt out,
   * and the host is not on the project's bypass list (each of those last two counted).
   */
  intercepts(client: Client, target: Target): boolean {
    const interception = client.interception;
    if (interception === undefined) return false;
    if (client.options.mitmOff === true) {
      this.count(InterceptEnd.optedOut);
      return false;
    }
    if (isBypassed(interception.bypass, target.host)) {
      this.count(InterceptEnd.bypassed);
      return false;
    }
    return true;
  }

  count(end: InterceptEnd, alert?: string): void {
    this.ends.set(end, (this.ends.get(end) ?? 0) + 1);
    if (alert !== undefined) this.alerts.set(alert, (this.alerts.get(alert) ?? 0) + 1);
  }

  /**
   * The interception series of /metrics, each family's together (GatewayMetrics writes them,
   * adding up the isolates').
   */
  series(): [string, number][] {
    const series: [string, number][] = [
      ["octoprox_gateway_mitm_tunnels_total", this.intercepted],
      ["octoprox_gateway_mitm_requests_total", this.requests],
    ];
    for (const end of Object.values(InterceptEnd)) {
      series.push([
        `octoprox_gateway_mitm_tunnel_ends_total{end="${end}"}`,
        this.ends.get(end) ?? 0,
      ]);
    }
    for (const [browser, count] of this.impersonation.requests) {
      series.push([`octoprox_gateway_mitm_browser_requests_total{browser="${browser}"}`, count]);
    }
    for (const [alert, count] of this.alerts) {
      series.push([`octoprox_gateway_mitm_client_alerts_total{alert="${alert}"}`, count]);
    }
    const certs = this.certificates;
    series.push(
      ["octoprox_gateway_mitm_certificates", certs.size],
      ["octoprox_gateway_mitm_certificates_minted_total", certs.minted],
      ["octoprox_gateway_mitm_certificates_evicted_total", certs.evicted],
    );
    return series;
  }
}
