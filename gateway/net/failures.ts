/**
 * One place that turns a failed attempt into the phase the router is told and the answer the
 * client gets. Answers name what went wrong in our words, never the upstream's address or
 * credentials: the shared errors' messages name status and reply codes only.
 */
import {
  HandshakeFailure,
  UpstreamConnectError,
  UpstreamFirstByteError,
  UpstreamHandshakeError,
  UpstreamIdleError,
  UpstreamRefusedError,
} from "../../shared/proxy-protocol/errors.ts";
import { FailurePhase } from "../core/contract.ts";
import type { Answer } from "./answers.ts";

/** The client went away or broke the exchange: nothing to answer, the proxy is not at fault. */
export class ClientGoneError extends Error {
  constructor(message = "Client closed the connection", options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ClientGoneError";
  }
}

/** The client's request body was not what its framing said (400 if nothing was answered). */
export class ClientBodyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ClientBodyError";
  }
}

export interface Failure {
  phase: FailurePhase;
  /** What to answer when nothing reached the client yet. */
  answer: Answer;
  timedOut: boolean;
  /** A failure of ours, not the upstream's or the client's: worth an error line. */
  internal: boolean;
}

const REFUSED = "Upstream proxy refused connection";
const TIMED_OUT = "Connection to upstream proxy timed out";

function refused(phase: FailurePhase, token = "connection_refused", reason = REFUSED): Failure {
  return {
    phase,
    answer: { status: 502, proxyStatus: token, reason },
    timedOut: false,
    internal: false,
  };
}

function timedOut(phase: FailurePhase): Failure {
  return {
    phase,
    answer: { status: 504, proxyStatus: "connection_timeout", reason: TIMED_OUT },
    timedOut: true,
    internal: false,
  };
}

export function describeFailure(error: unknown): Failure {
  if (error instanceof ClientGoneError) {
    return { ...refused(FailurePhase.client, "connection_terminated"), internal: false };
  }
  if (error instanceof ClientBodyError) {
    return {
      phase: FailurePhase.client,
      answer: { status: 400, proxyStatus: "http_request_error", reason: error.message },
      timedOut: false,
      internal: false,
    };
  }
  if (error instanceof UpstreamRefusedError) return refused(FailurePhase.refused);
  if (error instanceof UpstreamConnectError) {
    return error.timedOut ? timedOut(FailurePhase.connect) : refused(FailurePhase.connect);
  }
  if (error instanceof UpstreamHandshakeError) {
    if (error.timedOut) return timedOut(FailurePhase.handshake);
    switch (error.reason) {
      case HandshakeFailure.closed:
        return refused(FailurePhase.handshake, "connection_terminated");
      case HandshakeFailure.badReply:
        return refused(
          FailurePhase.handshake,
          "http_protocol_error",
          "Upstream proxy sent a malformed answer",
        );
      case HandshakeFailure.headTooLarge:
        return refused(
          FailurePhase.handshake,
          "http_response_header_section_size",
          "Upstream proxy sent an oversized answer head",
        );
      case HandshakeFailure.authRequired:
      case HandshakeFailure.authFailed:
      case HandshakeFailure.noAcceptableMethod:
        return refused(FailurePhase.handshake, "connection_refused", `${REFUSED} (credentials)`);
      case HandshakeFailure.invalidRequest:
        return {
          phase: FailurePhase.handshake,
          answer: {
            status: 502,
            proxyStatus: "http_request_error",
            reason: "The upstream proxy's protocol cannot express this target",
          },
          timedOut: false,
          internal: false,
        };
      default:
        return refused(
          FailurePhase.handshake,
          "connection_refused",
          `${REFUSED}: ${error.message}`,
        );
    }
  }
  if (error instanceof UpstreamFirstByteError) {
    return error.timedOut ? timedOut(FailurePhase.firstByte) : refused(
      FailurePhase.firstByte,
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
    };
  }
  return {
    phase: FailurePhase.connect,
    answer: { status: 502, proxyStatus: "proxy_internal_error", reason: "Gateway error" },
    timedOut: false,
    internal: true,
  };
}
