/**
 * Where request metering plugs into the socket layer. A transfer begins when the upstream
 * answered or the tunnel came up, reports its bytes as they are handed on, and is finished
 * exactly once on every path; refusals are announced on their own, and so is every attempt
 * through a proxy that failed before a transfer began, once the request's final answer is known.
 * Receivers touch only memory and never throw or wait: the socket layer calls them on the byte
 * path. What a failure carries is built on failure paths only.
 */
import type { AttemptFailureKind } from "../../shared/failure-kinds.ts";
import type { MitmCapture } from "../../shared/mitm-captures.ts";
import type {
  Client,
  Outcome,
  Refusal,
  Target,
  UpstreamChoice,
} from "../../shared/routing/contract.ts";

/**
 * `http` a forwarded request, `connect` an HTTP CONNECT tunnel, `socks5` a SOCKS5 one, `device`
 * a tunnel device's connection.
 */
export type RequestProtocol = "http" | "connect" | "socks5" | "device";

export interface TransferStart {
  kind: "http" | "connect";
  client: Client;
  target: Target;
  upstream: UpstreamChoice;
  /** Connect to first byte (or to the tunnel's 200). */
  latencyMs: number;
  /**
   * Ends the transfer now: its connector was blocked with the `interrupt` traffic action. The
   * client sees its tunnel closed, or its answer cut short and its connection closed.
   */
  interrupt?: () => void;
}

/** A failure as the failure log keeps it (gateway/net/session/failures.ts `failureNote`). */
export interface FailureNote {
  kind: AttemptFailureKind;
  protocol: RequestProtocol;
  /** What the client was finally answered (an HTTP status, a SOCKS5 reply's HTTP twin); 0: nothing. */
  clientStatus: number;
  /** The Proxy-Status token of that answer when it was the gateway's own; "" otherwise. */
  proxyStatus: string;
  /** What the upstream proxy itself answered, if anything. */
  vendorStatus: number | null;
  /** Quotes the request and the error; scrubbed of the proxy's credentials and URL queries. */
  message: string;
}

/** An attempt through a proxy that failed before a transfer began (dial, handshake, exchange). */
export interface FailedAttempt {
  client: Client;
  target: Target;
  upstream: UpstreamChoice;
  /** From the attempt's start to its failure. */
  elapsedMs: number;
  note: FailureNote;
}

export interface TransferMeter {
  /** Bytes handed on since the last call, per direction. */
  bytes(toUpstreamBytes: number, toClientBytes: number): void;
  /**
   * The transfer ended; `outcome` is what the router was told. A failed one (`ok: false`) says
   * how in `failure`.
   */
  finish(outcome: Outcome, failure?: FailureNote): void;
}

export interface TransferHooks {
  begin(start: TransferStart): TransferMeter | undefined;
  /** A request refused before any transfer (the refusal's `rejection` names why). */
  rejected?(
    refusal: Refusal,
    client: Client | undefined,
    target: Target | undefined,
    protocol: RequestProtocol,
  ): void;
  /** One failed attempt, told once the request ended (its note says what the client got). */
  attemptFailed?(attempt: FailedAttempt): void;
  /**
   * A tunnel device's connection closed as encrypted DNS (DNS over TLS, a well-known
   * DNS-over-HTTPS resolver) before anything was dialled: no request, counted for the device
   * (`client.deviceId`). Only the transparent listener's sessions call it.
   */
  encryptedDnsClosed?(client: Client): void;
  /**
   * Whether an exchange of the project inside an intercepted tunnel is captured now (asked
   * before the request builds its capture: the Inspector keeps a sample).
   */
  capturing?(projectId: string): boolean;
  /** An exchange inside an intercepted tunnel ended: its capture, for the Inspector. */
  captured?(projectId: string, capture: MitmCapture): void;
}

/** Calls a hook and swallows what it throws: metering must never break a transfer. */
export function safely<T>(call: () => T): T | undefined {
  try {
    return call();
  } catch {
    return undefined;
  }
}
