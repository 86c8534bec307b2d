/**
 * The upstream failures, one class per phase so callers (the gateway's answers, health checks)
 * tell them apart by type or code. Messages name the proxy's status or reply code, never its
 * credentials; the runtime's own error is kept as `cause`.
 */
import { ErrorCode, OctoproxError } from "../errors.ts";

export interface UpstreamErrorOptions {
  /** The phase's deadline passed, as opposed to the peer closing or failing. */
  timedOut?: boolean;
  cause?: unknown;
}

/** The base of every upstream failure. */
export class UpstreamError extends OctoproxError {
  readonly timedOut: boolean;
  constructor(code: ErrorCode, message: string, options: UpstreamErrorOptions = {}) {
    super(code, message, { cause: options.cause });
    this.name = "UpstreamError";
    this.timedOut = options.timedOut ?? false;
  }
}

/** The TCP or TLS connection to the proxy (or the probe's TLS to the target) failed. */
export class UpstreamConnectError extends UpstreamError {
  constructor(message: string, options?: UpstreamErrorOptions) {
    super(ErrorCode.upstreamConnect, message, options);
    this.name = "UpstreamConnectError";
  }
}

/**
 * Nothing listens at the proxy's address (ECONNREFUSED): no byte was sent, so a retry on
 * another proxy is always safe.
 */
export class UpstreamRefusedError extends UpstreamError {
  constructor(message: string, options?: UpstreamErrorOptions) {
    super(ErrorCode.upstreamRefused, message, options);
    this.name = "UpstreamRefusedError";
  }
}

/** Why a proxy's handshake failed. */
export const HandshakeFailure = {
  /** An HTTP proxy answered CONNECT (or a forward request) with a non-2xx status. */
  status: "status",
  /** HTTP 407: the proxy wants (other) credentials. */
  authRequired: "auth_required",
  /** SOCKS5 username/password rejected, or SOCKS4 user id refused. */
  authFailed: "auth_failed",
  /** SOCKS5: the proxy accepts none of the methods offered. */
  noAcceptableMethod: "no_acceptable_method",
  /** A SOCKS reply other than success; `replyCode` says which. */
  rejected: "rejected",
  /** Bytes that are not the protocol's reply. */
  badReply: "bad_reply",
  /** An HTTP response head larger than the parser's bound. */
  headTooLarge: "head_too_large",
  /** The proxy closed or reset the connection before its answer was complete. */
  closed: "closed",
  /** The deadline passed during the handshake. */
  timeout: "timeout",
  /** The request cannot be expressed in the protocol (bad host, credentials too long). */
  invalidRequest: "invalid_request",
} as const;
export type HandshakeFailure = (typeof HandshakeFailure)[keyof typeof HandshakeFailure];

export const HandshakeProtocol = { http: "http", socks4: "socks4", socks5: "socks5" } as const;
export type HandshakeProtocol = (typeof HandshakeProtocol)[keyof typeof HandshakeProtocol];

export interface UpstreamHandshakeErrorOptions extends UpstreamErrorOptions {
  /** The HTTP proxy's status code. */
  status?: number;
  /** The SOCKS reply code (or the SOCKS5 auth status). */
  replyCode?: number;
}

/** The proxy refused, gave a bad reply or failed authentication. */
export class UpstreamHandshakeError extends UpstreamError {
  readonly protocol: HandshakeProtocol;
  readonly reason: HandshakeFailure;
  readonly status: number | undefined;
  readonly replyCode: number | undefined;
  constructor(
    protocol: HandshakeProtocol,
    reason: HandshakeFailure,
    message: string,
    options: UpstreamHandshakeErrorOptions = {},
  ) {
    super(ErrorCode.upstreamHandshake, message, {
      timedOut: options.timedOut ?? reason === HandshakeFailure.timeout,
      cause: options.cause,
    });
    this.name = "UpstreamHandshakeError";
    this.protocol = protocol;
    this.reason = reason;
    this.status = options.status;
    this.replyCode = options.replyCode;
  }
}

/** The target's answer did not begin: the deadline passed, or the tunnel closed first. */
export class UpstreamFirstByteError extends UpstreamError {
  constructor(message: string, options?: UpstreamErrorOptions) {
    super(ErrorCode.upstreamFirstByte, message, options);
    this.name = "UpstreamFirstByteError";
  }
}

/** The answer stalled or broke off mid-transfer. */
export class UpstreamIdleError extends UpstreamError {
  constructor(message: string, options?: UpstreamErrorOptions) {
    super(ErrorCode.upstreamIdle, message, options);
    this.name = "UpstreamIdleError";
  }
}

/**
 * The browser-grade modes' engine (gateway/net/tls/impersonation.ts) could not be loaded on this
 * gateway: no proxy would do better, so none is tried. The message says why.
 */
export class ImpersonationUnavailableError extends OctoproxError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.impersonationUnavailable, message, options);
    this.name = "ImpersonationUnavailableError";
  }
}

/**
 * The target's certificate failed verification on an intercepting gateway's TLS towards it (an
 * unknown issuer, a name it does not cover, expired): the target's fault, not the proxy's, so
 * no other proxy is tried and the proxy is not blamed. The message says why, in the TLS
 * engine's words (it names no proxy).
 */
export class TargetTlsError extends UpstreamError {
  constructor(message: string, options?: UpstreamErrorOptions) {
    super(ErrorCode.targetTls, message, options);
    this.name = "TargetTlsError";
  }
}
