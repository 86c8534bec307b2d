/**
 * Every answer the routing core gives instead of an upstream, in one place: status, the RFC 9209
 * `Proxy-Status` error token and a short sentence for the body.
 *
 * Tokens: `http_request_error` for options the client wrote wrong, `http_request_denied` for
 * credentials and for a client address a project does not take, `destination_ip_prohibited`
 * for the guard, `destination_unavailable` when no upstream serves the request or every one is
 * down (the next hop is what is unavailable; the status tells "none" (502) from "down" (503)
 * apart), `connection_limit_reached` when upstreams exist but are resting (429) or at their
 * concurrency limit (503). Traffic limits use the extension token `bandwidth_limit_exceeded`,
 * as Octoprox clients already read it. A project's connector sequence that cannot serve (run
 * past its end, or its current connector unable to) is `destination_unavailable` with 503: the
 * upstream the project is on now is down, and no other may stand in for it.
 */
import type { Refusal } from "./contract.ts";
import { RejectionReason } from "./contract.ts";
import type { UsernameOptions } from "./contract.ts";
import { Ineligible } from "./eligibility.ts";

export const CREDENTIALS_REQUIRED =
  "Valid project credentials required in Proxy-Authorization header";

export const unauthenticated: Refusal = Object.freeze({
  status: 407,
  proxyStatus: "http_request_denied",
  reason: CREDENTIALS_REQUIRED,
  rejection: RejectionReason.unauthenticated,
});

/** The project's allowed_cidrs do not hold the client's address. */
export const clientAddressDenied: Refusal = Object.freeze({
  status: 403,
  proxyStatus: "http_request_denied",
  reason: "Client address not allowed for this project",
  rejection: RejectionReason.clientAddressDenied,
});

/**
 * Strict mode (a gateway listening beyond loopback): a project whose password-less blocks let
 * every address in is not served without a password.
 */
export const openProjectRefused: Refusal = Object.freeze({
  status: 403,
  proxyStatus: "http_request_denied",
  reason: "Password-less access refused: this project lets every address in without a password " +
    "(strict mode)",
  rejection: RejectionReason.clientAddressDenied,
});

export function badOptions(message: string): Refusal {
  return {
    status: 400,
    proxyStatus: "http_request_error",
    reason: message,
    rejection: RejectionReason.invalidLocation,
  };
}

export const notReady: Refusal = Object.freeze({
  status: 503,
  proxyStatus: "proxy_internal_error",
  reason: "The gateway has no routing feed yet",
  rejection: RejectionReason.notReady,
});

/**
 * OCTOPROX_FEED_MAX_STALE: the gateway has not read the feed for longer than it may route on
 * it; new requests wait for the next good read.
 */
export function feedStale(ageMs: number, maxStaleMs: number): Refusal {
  return {
    status: 503,
    proxyStatus: "proxy_internal_error",
    reason: `The gateway's routing feed is stale: not read for ${Math.round(ageMs / 1000)} s ` +
      `(OCTOPROX_FEED_MAX_STALE is ${maxStaleMs / 1000} s)`,
    rejection: RejectionReason.feedStale,
  };
}

/** `DE`, `US, state NY`, `US, state NY, city new_york`; undefined when no place was asked. */
export function describePlace(options: UsernameOptions): string | undefined {
  if (options.country === undefined) return undefined;
  let place = options.country;
  if (options.state !== undefined) place += `, state ${options.state}`;
  if (options.city !== undefined) place += `, city ${options.city}`;
  return place;
}

export function noUpstream(options: UsernameOptions, domainExcluded: boolean): Refusal {
  const place = describePlace(options);
  const what = place === undefined
    ? (domainExcluded ? "this domain" : "this project")
    : (domainExcluded ? `${place} and this domain` : place);
  return {
    status: 502,
    proxyStatus: "destination_unavailable",
    reason: `No upstream proxy available for ${what}`,
    rejection: RejectionReason.noProxyAvailable,
  };
}

export const allDown: Refusal = Object.freeze({
  status: 503,
  proxyStatus: "destination_unavailable",
  reason: "Every upstream proxy for this request is down",
  rejection: RejectionReason.allProxiesDown,
});

export const allQuarantined: Refusal = Object.freeze({
  status: 429,
  proxyStatus: "connection_limit_reached",
  reason: "All proxies are temporarily rate-limited. Retry later.",
  rejection: RejectionReason.allProxiesQuarantined,
});

/** sticky_quarantine: the session stays on its proxy while it rests, rather than moving. */
export const sessionResting: Refusal = Object.freeze({
  status: 429,
  proxyStatus: "connection_limit_reached",
  reason: "This session's proxy is temporarily rate-limited. Retry later.",
  rejection: RejectionReason.sessionProxyQuarantined,
});

export const allBusy: Refusal = Object.freeze({
  status: 503,
  proxyStatus: "connection_limit_reached",
  reason: "Every upstream proxy for this request is at its concurrency limit",
  rejection: RejectionReason.allProxiesBusy,
});

/** Every usable proxy was already tried for this request (the caller's own error says more). */
export const allTried: Refusal = Object.freeze({
  status: 502,
  proxyStatus: "destination_unavailable",
  reason: "No other upstream proxy available for this request",
  rejection: RejectionReason.allProxiesTried,
});

export function trafficLimited(status: 429 | 509): Refusal {
  return {
    status,
    proxyStatus: "bandwidth_limit_exceeded",
    reason: "Traffic limit reached for this project's upstream proxies",
    rejection: RejectionReason.trafficLimitExceeded,
  };
}

/** The project's own traffic quota is used up for this period (509, or 429 when so set). */
export function quotaExceeded(status: 429 | 509): Refusal {
  return {
    status,
    proxyStatus: "bandwidth_limit_exceeded",
    reason: "Traffic quota reached for this project",
    rejection: RejectionReason.quotaExceeded,
  };
}

/** The project's request-rate limit: more requests a second than it allows, across gateways. */
export const projectRateLimited: Refusal = Object.freeze({
  status: 429,
  proxyStatus: "connection_limit_reached",
  reason: "Request rate limit reached for this project. Retry later.",
  rejection: RejectionReason.rateLimited,
});

/** The project's cap on requests at once through this gateway. */
export const projectConnectionLimit: Refusal = Object.freeze({
  status: 429,
  proxyStatus: "connection_limit_reached",
  reason: "Too many connections at once for this project",
  rejection: RejectionReason.connectionLimit,
});

export function prohibitedDestination(host: string, address: string, kind: string): Refusal {
  const what = host === address ? `${host} is` : `${host} resolves to ${address},`;
  const article = /^[aeiou]/.test(kind) ? "an" : "a";
  return {
    status: 403,
    proxyStatus: "destination_ip_prohibited",
    reason: `Destination not allowed: ${what} ${article} ${kind} address`,
    rejection: RejectionReason.destinationProhibited,
  };
}

/** A per-domain rule of the project refuses the host: its reason, or a sentence naming the host. */
export function domainRefused(host: string, reason: string | undefined): Refusal {
  return {
    status: 403,
    proxyStatus: "http_request_denied",
    reason: reason ?? `This project does not serve ${host}`,
    rejection: RejectionReason.domainRefused,
  };
}

/** No connector a per-domain rule names for the host can serve the request now. */
export function domainRuleUnserved(host: string): Refusal {
  return {
    status: 503,
    proxyStatus: "destination_unavailable",
    reason: `No connector this project's domain rule names for ${host} can serve it now`,
    rejection: RejectionReason.noProxyAvailable,
  };
}

/**
 * The gateway resolves destinations (OCTOPROX_DESTINATION_RESOLUTION=gateway) and this name
 * gave no address: there is nothing checked to send the upstream, so nothing is sent. RFC 9209's
 * `dns_error`; counted as the guard's refusal.
 */
export function unresolvedDestination(host: string): Refusal {
  return {
    status: 502,
    proxyStatus: "dns_error",
    reason: `Destination not resolved: ${host} has no address the gateway could find`,
    rejection: RejectionReason.destinationProhibited,
  };
}

const NO_OPTIONS: UsernameOptions = Object.freeze({ user: "" });

/** The project's connector sequence ran past its last connector (on_end stop): nothing serves. */
export const sequenceExhausted: Refusal = Object.freeze({
  status: 503,
  proxyStatus: "destination_unavailable",
  reason: "This project's connector sequence is exhausted: its last connector ran dry",
  rejection: RejectionReason.sequenceExhausted,
});

/**
 * Why a sequence's current connector cannot serve: a router verdict, not in the feed, or every
 * healthy row past its usable-until.
 */
export type SequenceStop = Ineligible | "not_in_routing" | "no_usable_proxy";

/**
 * The current connector of the project's sequence cannot serve this request (on_unavailable
 * reject, the only answer so far): 503 saying which place in the sequence it holds and why. The
 * connector's name is the operator's and is not told to clients.
 */
export function sequenceUnavailable(
  sequence: { readonly position: number; readonly length: number },
  stop: SequenceStop,
  pendingDeletion: boolean,
  options: UsernameOptions = NO_OPTIONS,
): Refusal {
  const place = sequence.position === 0
    ? "The current connector of this project's sequence"
    : `The current connector of this project's sequence (${sequence.position} of ${sequence.length})`;
  return {
    status: 503,
    proxyStatus: "destination_unavailable",
    reason: `${place} ${sequenceStopText(stop, pendingDeletion, options)}`,
    rejection: RejectionReason.sequenceUnavailable,
  };
}

function sequenceStopText(
  stop: SequenceStop,
  pendingDeletion: boolean,
  options: UsernameOptions,
): string {
  switch (stop) {
    case "not_in_routing":
      return "is not in routing";
    case "no_usable_proxy":
      return "has no usable proxy";
    case Ineligible.notTakingRequests:
      return pendingDeletion ? "is being deleted" : "is disabled";
    case Ineligible.placeNotServed: {
      const place = describePlace(options);
      return place === undefined ? "has no proxy in routing" : `has no proxy for ${place}`;
    }
    case Ineligible.domainFiltered:
      return "does not serve this domain";
    case Ineligible.notInDomainRule:
      return "is not among the connectors the project's domain rule names";
    case Ineligible.noHealthyProxy:
      return "has no healthy proxy";
    default:
      return "cannot serve this request";
  }
}
