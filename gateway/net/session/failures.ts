/**
 * One place that turns a failed attempt into the phase the router is told, the answer the
 * client gets, and the failure log's kind and the upstream's own status. Answers name what went
 * wrong in our words, never the upstream's address or credentials: the shared errors' messages
 * name status and reply codes only. The failure log's message (`failureNote`) quotes the request
 * and the error, scrubbed (gateway/base/scrub.ts).
 */
import { ClientBodyError, ClientGoneError, errorChainText } from "../../../shared/errors.ts";
import { AttemptFailureKind } from "../../../shared/failure-kinds.ts";
import { formatAuthority } from "../../../shared/proxy-protocol/address.ts";
import {
  HandshakeFailure,
  ImpersonationUnavailableError,
  TargetTlsError,
  UpstreamConnectError,
  UpstreamFirstByteError,
  UpstreamHandshakeError,
  UpstreamIdleError,
  UpstreamRefusedError,
} from "../../../shared/proxy-protocol/errors.ts";
import {
  FailurePhase,
  type Target,
  type UpstreamChoice,
} from "../../../shared/routing/contract.ts";
import { scrubText } from "../../base/scrub.ts";
import type { Answer } from "../http/answers.ts";
import type { FailureNote, RequestProtocol } from "../../base/transfer-hooks.ts";

export { ClientBodyError, ClientGoneError };

export interface Failure {
  phase: FailurePhase;
  /** What to answer when nothing reached the client yet. */
  answer: Answer;
  timedOut: boolean;
  /** A failure of ours, not the upstream's or the client's: worth an error line. */
  internal: boolean;
  /** The failure log's kind (shared/failure-kinds.ts). */
  kind: AttemptFailureKind;
  /** What the upstream proxy itself answered (its HTTP status, a SOCKS reply code), if any. */
  vendorStatus: number | null;
}

const REFUSED = "Upstream proxy refused connection";
const TIMED_OUT = "Connection to upstream proxy timed out";
const Kind = AttemptFailureKind;

function refused(
  phase: FailurePhase,
  kind: AttemptFailureKind,
  token = "connection_refused",
  reason = REFUSED,
  vendorStatus: number | null = null,
): Failure {
  return {
    phase,
    answer: { status: 502, proxyStatus: token, reason },
    timedOut: false,
    internal: false,
    kind,
    vendorStatus,
  };
}

function timedOut(phase: FailurePhase, kind: AttemptFailureKind): Failure {
  return {
    phase,
    answer: { status: 504, proxyStatus: "connection_timeout", reason: TIMED_OUT },
    timedOut: true,
    internal: false,
    kind,
    vendorStatus: null,
  };
}

export function describeFailure(error: unknown): Failure {
  if (error instanceof ClientGoneError) {
    return refused(FailurePhase.client, Kind.clientGone, "connection_terminated");
  }
  if (error instanceof ClientBodyError) {
    return {
      phase: FailurePhase.client,
      answer: { status: 400, proxyStatus: "http_request_error", reason: error.message },
      timedOut: false,
      internal: false,
      kind: Kind.clientGone,
      vendorStatus: null,
    };
  }
  if (error instanceof TargetTlsError) {
    // Phase `client`: not the proxy's fault, and no other proxy would do better.
    return {
      phase: FailurePhase.client,
      answer: {
        status: 502,
        proxyStatus: "tls_certificate_error",
        reason: `The target's certificate was rejected: ${error.message}`,
      },
      timedOut: false,
      internal: false,
      kind: Kind.targetCertificate,
      vendorStatus: null,
    };
  }
  if (error instanceof ImpersonationUnavailableError) {
    // Phase `client`: no other proxy would do better. Ours, so an error line.
    return {
      phase: FailurePhase.client,
      answer: {
        status: 502,
        proxyStatus: "proxy_internal_error",
        reason: "The browser-grade TLS engine is not available on this gateway",
      },
      timedOut: false,
      internal: true,
      kind: Kind.gatewayError,
      vendorStatus: null,
    };
  }
  if (error instanceof UpstreamRefusedError) {
    return refused(FailurePhase.refused, Kind.upstreamUnreachable);
  }
  if (error instanceof UpstreamConnectError) {
    return error.timedOut
      ? timedOut(FailurePhase.connect, Kind.upstreamTimeout)
      : refused(FailurePhase.connect, Kind.upstreamUnreachable);
  }
  if (error instanceof UpstreamHandshakeError) {
    if (error.timedOut) return timedOut(FailurePhase.handshake, Kind.upstreamTimeout);
    // The proxy's own answer: an HTTP status, or a SOCKS reply (or auth status) code.
    const vendor = error.status ?? error.replyCode ?? null;
    const phase = FailurePhase.handshake;
    switch (error.reason) {
      case HandshakeFailure.closed:
        return refused(phase, Kind.upstreamClosed, "connection_terminated");
      case HandshakeFailure.badReply:
        return refused(
          phase,
          Kind.upstreamProtocolError,
          "http_protocol_error",
          "Upstream proxy sent a malformed answer",
        );
      case HandshakeFailure.headTooLarge:
        return refused(
          phase,
          Kind.upstreamProtocolError,
          "http_response_header_section_size",
          "Upstream proxy sent an oversized answer head",
        );
      case HandshakeFailure.authRequired:
      case HandshakeFailure.authFailed:
      case HandshakeFailure.noAcceptableMethod:
        return refused(
          phase,
          Kind.upstreamAuthFailed,
          "connection_refused",
          `${REFUSED} (credentials)`,
          vendor,
        );
      case HandshakeFailure.invalidRequest:
        // The proxy's protocol cannot say it (an IPv6 target to SOCKS4): this proxy cannot serve
        // the request, as when it says no.
        return refused(
          phase,
          Kind.upstreamRefused,
          "http_request_error",
          "The upstream proxy's protocol cannot express this target",
        );
      default:
        return refused(
          phase,
          Kind.upstreamRefused,
          "connection_refused",
          `${REFUSED}: ${error.message}`,
          vendor,
        );
    }
  }
  if (error instanceof UpstreamFirstByteError) {
    return error.timedOut ? timedOut(FailurePhase.firstByte, Kind.firstByteTimeout) : refused(
      FailurePhase.firstByte,
      Kind.upstreamClosed,
      "connection_terminated",
      "Upstream proxy closed the connection without answering",
    );
  }
  if (error instanceof UpstreamIdleError) {
    return {
      phase: FailurePhase.idle,
      answer: {
        status: error.timedOut ? 504 : 502,
        proxyStatus: error.timedOut ? "connection_read_timeout" : "http_response_incomplete",
        reason: "Upstream answer broke off",
      },
      timedOut: error.timedOut,
      internal: false,
      kind: Kind.transferBroken,
      vendorStatus: null,
    };
  }
  return {
    phase: FailurePhase.connect,
    answer: { status: 502, proxyStatus: "proxy_internal_error", reason: "Gateway error" },
    timedOut: false,
    internal: true,
    kind: Kind.gatewayError,
    vendorStatus: null,
  };
}

/** What the failure log says a request was: its protocol and how it names its target. */
export interface FailedRequest {
  protocol: RequestProtocol;
  /** `GET http://host/path?query` as the client sent it, `CONNECT host:port`: quoted, scrubbed. */
  line: string;
  /** The proxy the attempt went through; its credentials are scrubbed from the message. */
  upstream: UpstreamChoice;
}

/** The request line a tunnel's failure quotes. */
export function tunnelLine(target: Target): string {
  return `CONNECT ${formatAuthority(target.host, target.port)}`;
}

/**
 * A failure as the failure log keeps it: the kind and the upstream's status from
 * `describeFailure`, what the client was answered (0: nothing, it had gone), and a message that
 * quotes the request and the error, scrubbed of the proxy's credentials and of URL queries.
 * Built on failure paths only.
 */
export function failureNote(
  failure: Failure,
  error: unknown,
  request: FailedRequest,
  answered: { status: number; proxyStatus: string },
): FailureNote {
  const detail = error === undefined ? failure.answer.reason : errorChainText(error);
  return {
    kind: failure.kind,
    protocol: request.protocol,
    clientStatus: answered.status,
    proxyStatus: answered.proxyStatus,
    vendorStatus: failure.vendorStatus,
    message: scrubText(`${request.line}: ${detail}`, request.upstream),
  };
}
