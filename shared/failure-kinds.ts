/**
 * The failure log's kinds: why a request the gateway could not complete failed, in stable names.
 * The gateway counts each failure under one kind (the failure windows the metrics flush takes
 * into failure_metrics) and keeps examples in one capped stream per project and kind; the api
 * reads a project's examples by walking these kinds. Names are identifiers: renaming one is an
 * API change.
 *
 * Two families: refusals the routing core answered itself before any proxy took the request
 * (the rejection reasons, shared/routing/contract.ts), and attempts through a proxy that failed.
 */

/** Refused before a proxy took the request: the gateway's own answer. */
export const RefusalKind = {
  invalidLocation: "invalid_location",
  unauthenticated: "unauthenticated",
  destinationProhibited: "destination_prohibited",
  noProxyAvailable: "no_proxy_available",
  allProxiesDown: "all_proxies_down",
  allProxiesQuarantined: "all_proxies_quarantined",
  sessionProxyQuarantined: "session_proxy_quarantined",
  allProxiesBusy: "all_proxies_busy",
  allProxiesTried: "all_proxies_tried",
  trafficLimitExceeded: "traffic_limit_exceeded",
  /** The project's own traffic quota is used up for its period. */
  quotaExceeded: "quota_exceeded",
  /** The project does not take requests from the client's address (its allowed_cidrs). */
  clientAddressDenied: "client_address_denied",
  /** The project's request-rate limit: too many requests a second across the gateways. */
  rateLimited: "rate_limited",
  /** The project's cap on requests at once on this gateway. */
  connectionLimit: "connection_limit",
  /** The project's connector sequence ran past its last connector (on_end stop). */
  sequenceExhausted: "sequence_exhausted",
  /** The current connector of the project's sequence cannot serve the request. */
  sequenceUnavailable: "sequence_unavailable",
  notReady: "not_ready",
  /** The gateway has not read the feed for longer than OCTOPROX_FEED_MAX_STALE. */
  feedStale: "feed_stale",
  /**
   * Preflight saw the exit elsewhere than the request requires: the first mismatch under
   * `reject`, a sticky session's under `retry`, or every attempt's under `retry`.
   */
  preflightMismatch: "preflight_mismatch",
  /** A per-domain rule of the project refuses the target's host. */
  domainRefused: "domain_refused",
} as const;
export type RefusalKind = (typeof RefusalKind)[keyof typeof RefusalKind];

/** An attempt through a proxy that failed. */
export const AttemptFailureKind = {
  /** The proxy could not be reached (refused, reset, unroutable). */
  upstreamUnreachable: "upstream_unreachable",
  /** Reaching the proxy, or its handshake, ran past the connect deadline. */
  upstreamTimeout: "upstream_timeout",
  /** The proxy said no to the request (a non-2xx to CONNECT, a SOCKS refusal). */
  upstreamRefused: "upstream_refused",
  /** The proxy refused our credentials for it (407, a SOCKS auth failure). */
  upstreamAuthFailed: "upstream_auth_failed",
  /** The proxy answered something that is not its protocol, or an oversized head. */
  upstreamProtocolError: "upstream_protocol_error",
  /** The proxy closed the connection before answering. */
  upstreamClosed: "upstream_closed",
  /** No answer byte came within the deadline after the request was sent. */
  firstByteTimeout: "first_byte_timeout",
  /** The answer or the tunnel broke off from the upstream's side, or went idle too long. */
  transferBroken: "transfer_broken",
  /** An intercepted request's target presented a certificate that failed verification. */
  targetCertificate: "target_certificate",
  /** The client went away or broke the exchange while its request was under way. */
  clientGone: "client_gone",
  /** A fault of the gateway's own. */
  gatewayError: "gateway_error",
} as const;
export type AttemptFailureKind = (typeof AttemptFailureKind)[keyof typeof AttemptFailureKind];

export type FailureKind = RefusalKind | AttemptFailureKind;

export const REFUSAL_KINDS: readonly RefusalKind[] = Object.values(RefusalKind);
export const ATTEMPT_FAILURE_KINDS: readonly AttemptFailureKind[] = Object.values(
  AttemptFailureKind,
);
/** Every kind, refusals first. */
export const FAILURE_KINDS: readonly FailureKind[] = [...REFUSAL_KINDS, ...ATTEMPT_FAILURE_KINDS];

const KNOWN = new Set<string>(FAILURE_KINDS);

export function isFailureKind(text: string): text is FailureKind {
  return KNOWN.has(text);
}
