/**
 * The admission contract: what a step deciding whether a request may go on is given and may
 * answer. Every listener (HTTP forwarding, CONNECT, SOCKS5) runs the same ordered list of steps
 * (admission-steps.ts) through one pipeline (admission-pipeline.ts) before any upstream is
 * chosen; a refusal of any step is answered by the listener's one refusal path (the HTTP
 * session's `refuse`, the SOCKS5 session's reply), which also tells metering and the failure log.
 *
 * A step answers undefined (go on, nothing held), a Refusal (stop: the request is answered with
 * it), or a grant (go on, holding something: a count of connections in flight, say) whose
 * `release` the pipeline guarantees is called exactly once, when the request ends, or at once
 * when a later step refuses. Steps answer synchronously whenever they can: a request whose
 * steps all do so is admitted without a Promise (the request path's MaybePromise rule).
 *
 * Steps run in two stages. `client` steps decide who the client is and whether it may use the
 * gateway at all; `request` steps decide what it asks for and need the target. HTTP knows both
 * from the request head and runs every step at once; SOCKS5 runs the client steps when its
 * username and password arrive (a refusal there is the sub-negotiation's failure status) and
 * the request steps once its CONNECT request names the target. Every client step comes before
 * every request step in the list.
 */
import type { IpAddress } from "../../shared/net/ip.ts";
import type { Client, MaybePromise, Refusal, Target } from "../../shared/routing/contract.ts";
import type { RequestProtocol } from "./transfer-hooks.ts";

/** One header line of a request, as parsed. */
export interface HeaderField {
  /** As the client wrote it (forwarded in its case). */
  readonly name: string;
  /** Lower case, for lookups. */
  readonly lower: string;
  readonly value: string;
}

export const AdmissionStage = {
  /** Who the client is and whether it may use the gateway: before the target is known. */
  client: "client",
  /** What the client asks for: once the request names its target. */
  request: "request",
} as const;
export type AdmissionStage = (typeof AdmissionStage)[keyof typeof AdmissionStage];

/** Where a request comes from (an IP literal, IPv6 without brackets, and a port). */
export interface ClientAddress {
  readonly hostname: string;
  readonly port: number;
}

/** One request as the steps see it: what the listener knows, and what earlier steps set. */
export interface AdmissionRequest {
  readonly protocol: RequestProtocol;
  /**
   * The client's address: the connection's peer, or the source a PROXY protocol header from a
   * trusted balancer (OCTOPROX_TRUSTED_PROXIES) named, set before the connection's first
   * request.
   */
  readonly clientAddress: ClientAddress;
  /**
   * `clientAddress` parsed once per connection, as address rules compare it (IPv4-mapped IPv6
   * read as IPv4, shared/net/cidr-set.ts); undefined only for a peer that is no IP literal.
   */
  readonly clientIp: IpAddress | undefined;
  /**
   * The credentials offered, as a `Proxy-Authorization` value: the HTTP field's, or SOCKS5's
   * username and password as the Basic value an HTTP client would send. Null: none offered
   * (for SOCKS5, the no-authentication method).
   */
  readonly credentials: string | null;
  /** The request's header fields (HTTP and CONNECT); none for SOCKS5. */
  readonly headers: readonly HeaderField[];
  /** Where the request goes; undefined only while SOCKS5 runs its client steps. */
  readonly target: Target | undefined;
  /**
   * Who the request is for, set by the step that establishes it (credentials) and read by the
   * steps after it. Every admitted request has one.
   */
  client: Client | undefined;
  /**
   * Where the upstream is sent instead of `target`: the address the destination step checked,
   * when the gateway resolves destinations (OCTOPROX_DESTINATION_RESOLUTION=gateway). Undefined:
   * the target goes on as the client named it.
   */
  dialTarget: Target | undefined;
  /**
   * Keeps a request header field (its lower-case name) from reaching the upstream: one the
   * gateway consumed as an option. A forwarded request is sent without it; a tunnel has no
   * header fields past its CONNECT head, which never leaves the gateway.
   */
  stripHeader(lower: string): void;
}

/** What a step holds for an admitted request, given back once the request ended. */
export interface AdmissionGrant {
  /** Called exactly once: when the request (or the tunnel) ended, or a later step refused it. */
  release(): void;
}

/** A step's answer: go on (undefined, or holding a grant), or refuse. */
export type AdmissionVerdict = Refusal | AdmissionGrant | undefined;

export interface AdmissionStep {
  /** Named in the log when the step fails with an error. */
  readonly name: string;
  readonly stage: AdmissionStage;
  /**
   * Decides on one request. Never keeps `request` past its answer: the session reuses it for
   * its next request. A step that throws (or rejects) fails the request with the gateway's own
   * error; it is a bug, not a refusal.
   */
  admit(request: AdmissionRequest): MaybePromise<AdmissionVerdict>;
}

/** Tells a refusal from a grant (grants carry no status). */
export function isAdmissionRefusal(verdict: Refusal | AdmissionGrant): verdict is Refusal {
  return (verdict as Partial<Refusal>).status !== undefined;
}
