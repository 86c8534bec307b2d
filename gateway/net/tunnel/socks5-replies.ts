/**
 * What a SOCKS5 client hears for each of the gateway's answers (docs/gateway.md has the table).
 * SOCKS5 has nine reply codes and no sentence, so the mapping keeps what a client can act on:
 * "not allowed" for policy (the guard, a bad username option, a traffic limit), "network
 * unreachable" when no upstream can take the request, "connection refused" and "TTL expired"
 * (a timeout) for what an upstream did, and "general failure" for the rest. Runtime-neutral.
 */
import {
  HandshakeFailure,
  HandshakeProtocol,
  UpstreamHandshakeError,
} from "../../../shared/proxy-protocol/errors.ts";
import { Socks5Reply } from "../../../shared/proxy-protocol/socks5.ts";
import type { Refusal } from "../../../shared/routing/contract.ts";
import type { Failure } from "../session/failures.ts";

/** The reply for a refusal of the router or the guard (never 407: that fails the auth step). */
export function socksReplyForRefusal(refusal: Pick<Refusal, "status" | "proxyStatus">): number {
  switch (refusal.status) {
    case 400: // a username option written wrong: credentials were not the problem
    case 403: // the destination guard
      return Socks5Reply.notAllowed;
    case 502:
      // A name the gateway could not resolve (gateway resolution): the host is what is missing.
      if (refusal.proxyStatus === "dns_error") return Socks5Reply.hostUnreachable;
      // Nothing serves the place or domain, or every proxy was tried.
      return Socks5Reply.networkUnreachable;
    case 503:
      // Every proxy down: no route. At their concurrency limit, or no feed yet: try again.
      return refusal.proxyStatus === "destination_unavailable"
        ? Socks5Reply.networkUnreachable
        : Socks5Reply.generalFailure;
    case 429:
    case 509:
      // A traffic limit is policy; proxies resting after rate limits will come back.
      return refusal.proxyStatus === "bandwidth_limit_exceeded"
        ? Socks5Reply.notAllowed
        : Socks5Reply.generalFailure;
    case 504:
      return Socks5Reply.ttlExpired;
    default:
      return Socks5Reply.generalFailure;
  }
}

/**
 * The reply when every attempt failed before the tunnel was up. A SOCKS5 upstream's own reply
 * about the target is passed on as it came; an HTTP upstream's status is read the same way.
 */
export function socksReplyForFailure(failure: Failure, error: unknown): number {
  if (failure.timedOut) return Socks5Reply.ttlExpired;
  if (error instanceof UpstreamHandshakeError) {
    if (error.reason === HandshakeFailure.rejected) {
      const code = error.replyCode;
      if (
        error.protocol === HandshakeProtocol.socks5 && code !== undefined && code >= 1 && code <= 8
      ) {
        return code;
      }
      return Socks5Reply.connectionRefused;
    }
    if (error.reason === HandshakeFailure.status) {
      switch (error.status) {
        case 403:
          return Socks5Reply.notAllowed;
        case 502:
        case 503:
          return Socks5Reply.hostUnreachable;
        case 504:
          return Socks5Reply.ttlExpired;
        default:
          return Socks5Reply.connectionRefused;
      }
    }
  }
  if (failure.answer.proxyStatus === "connection_refused") return Socks5Reply.connectionRefused;
  return Socks5Reply.generalFailure;
}
