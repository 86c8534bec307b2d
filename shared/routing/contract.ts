/**
 * The contract between the gateway's socket layer (listeners, relays, upstream dialing; Deno)
 * and its routing core (snapshot, router, dispatch; runtime-neutral, covered under Node too).
 * The socket layer asks the router who the client is and which upstream to use for one
 * attempt, and reports how the attempt went; it knows nothing of projects or strategies.
 */
import type { ProxyScheme } from "../roles.ts";
import type { FeedRateLimit } from "../feed/models.ts";
import { RefusalKind } from "../failure-kinds.ts";
import type { IpAddress } from "../net/ip.ts";
import type { DestinationResolution } from "../settings.ts";
import type { CompiledBlocking } from "../blocking/rules.ts";

/** The options a client put in its username: `<user>[-cc-..][-st-..][-city-..][-sessid-..][-sesstime-..]`. */
export interface UsernameOptions {
  /** The project username, without options. */
  user: string;
  /** ISO 3166-1 alpha-2, upper case (`uk` already read as `GB`). */
  country?: string;
  /** The subdivision part of ISO 3166-2, upper case. */
  state?: string;
  /** A slug: ASCII lower case, `_` between words. */
  city?: string;
  sessionId?: string;
  /** Minutes a sticky session lives after its last request (`-sesstime-`). */
  sessionMinutes?: number;
  /**
   * The client's own opt-out from its project's TLS interception for this connection
   * (`-mitm-off` in the username, or `X-Octoprox-Mitm: off` on the CONNECT).
   */
  mitmOff?: true;
}

/** Who a request is for, once authenticated. */
export interface Client {
  projectId: string;
  options: UsernameOptions;
  /**
   * The project's own bound on reaching an upstream (its connection_timeout_seconds): the
   * gateway waits the shorter of it and OCTOPROX_CONNECT_TIMEOUT.
   */
  connectTimeoutMs?: number;
  /**
   * The project's max_retries: how many other proxies a failed attempt may go on to, while
   * nothing of the request is spent (gateway/net/session/limits.ts).
   */
  maxRetries?: number;
  /** The project's TLS interception; absent when it is off (tunnels stay raw). */
  interception?: Interception;
  /** The project's response judging; absent when it has no rule on or in shadow. */
  blocking?: CompiledBlocking;
  /** The tunnel device the client is (its transfers count in its own window too); else absent. */
  deviceId?: string;
}

/** The modes a gateway intercepts with. */
export type InterceptionMode = "plain" | "match_ua" | "override_ua";

/** The browsers whose fingerprint `override_ua` presents (`random`: one of them per request). */
export type InterceptionBrowser = "chrome" | "firefox" | "edge" | "random";

/** A project's TLS interception, as the gateway applies it to its CONNECT and SOCKS5 tunnels. */
export interface Interception {
  /**
   * `plain`: the gateway's own TLS towards the target; `match_ua`: the fingerprint of the
   * browser the client's User-Agent names; `override_ua`: `browser`'s fingerprint and User-Agent.
   */
  mode: InterceptionMode;
  /** The browser `override_ua` presents; absent under the other modes. */
  browser?: InterceptionBrowser;
  /**
   * Hosts whose tunnels stay raw (pinned apps, banks): `example.com` matches that name only,
   * `.example.com` every name under it (not the bare name). Lower case, no port.
   */
  bypass: readonly string[];
}

/**
 * Why a request was not served, in the gateway's own words. `status` is the HTTP answer (the
 * SOCKS listener maps it to a reply code); `proxyStatus` the RFC 9209 error token for the
 * `Proxy-Status` header; `reason` a short plain-text sentence for the body (no secrets).
 */
export interface Refusal {
  status: 400 | 403 | 407 | 429 | 431 | 502 | 503 | 504 | 509;
  proxyStatus: string;
  reason: string;
  /** Why, as metering counts rejections (absent for answers that are no routing decision). */
  rejection?: RejectionReason;
}

/**
 * The rejection reasons metering counts (`request_rejected`), stable names: the failure log's
 * refusal kinds (shared/failure-kinds.ts).
 */
export const RejectionReason = RefusalKind;
export type RejectionReason = RefusalKind;

/** Tells the two answers of `Router.acquire` apart. */
export function isRefusal(result: Allocation | Refusal): result is Refusal {
  return (result as Partial<Refusal>).status !== undefined;
}

export type AuthResult = { ok: true; client: Client } | { ok: false; refusal: Refusal };

export interface Target {
  /**
   * A host name (passed to the upstream unresolved, unless the gateway resolves destinations) or
   * an IP literal (IPv6 without brackets).
   */
  host: string;
  port: number;
}

/** The upstream proxy one attempt goes through: everything the dialer needs, nothing more. */
export interface UpstreamChoice {
  proxyId: string;
  connectorId: string;
  scheme: ProxyScheme;
  host: string;
  port: number;
  username: string | null;
  password: string | null;
  /**
   * The connector's rate limit, which metering counts the proxy's requests against; absent or
   * null for none.
   */
  rateLimit?: FeedRateLimit | null;
  /**
   * No upstream: the gateway connects to the target itself (a per-domain rule's `direct`); host
   * and port are the target's. Counted under DIRECT_ID as proxy and connector.
   */
  direct?: true;
}

/** The proxy and connector id a direct attempt is counted under. */
export const DIRECT_ID = "direct";

/** The phase an attempt failed in, as the error catalogue names them. */
export const FailurePhase = {
  connect: "connect",
  refused: "refused",
  handshake: "handshake",
  firstByte: "first_byte",
  idle: "idle",
  client: "client",
} as const;
export type FailurePhase = (typeof FailurePhase)[keyof typeof FailurePhase];

export interface Outcome {
  ok: boolean;
  phase?: FailurePhase;
  /** Connect-to-first-byte (or tunnel established) latency, for the strategies' outcomes. */
  latencyMs?: number;
}

/**
 * One reserved slot on one proxy (seed 001's Acquire/Commit/Release). `commit` turns the
 * reservation into an active transfer exactly once (when the upstream answered); `release`
 * ends it, committed or not. A second release does nothing but is counted as an error.
 */
export interface Allocation {
  readonly upstream: UpstreamChoice;
  commit(): void;
  release(outcome: Outcome): void;
}

/**
 * An answer that may be ready at once. The request path asks the core several questions per
 * request, nearly always answered from memory: a Promise for each would cost every request a
 * few microtasks for nothing, so callers await only what is a Promise.
 */
export type MaybePromise<T> = T | Promise<T>;

/** The `exclude` of a first attempt: no proxy tried yet. */
export const NOTHING_TRIED: ReadonlySet<string> = new Set();

export interface Router {
  /** False until the first feed is applied: the proxy listener stays closed meanwhile. */
  readonly ready: boolean;
  /**
   * Checks `Proxy-Authorization` (Basic) and the username's options. Without credentials, the
   * client's address (`clientIp`, IPv4-mapped read as IPv4) may name the project through its
   * password-less blocks.
   */
  authenticate(proxyAuthorization: string | null, clientIp?: IpAddress): MaybePromise<AuthResult>;
  /**
   * Chooses the upstream for one attempt among eligible proxies, excluding those already tried
   * for this request, and reserves a slot on it. Never waits on Postgres.
   */
  acquire(
    client: Client,
    target: Target,
    exclude: ReadonlySet<string>,
  ): MaybePromise<Allocation | Refusal>;
}

/**
 * Refuses destinations a proxy must never reach for a client (loopback, private, link-local,
 * cloud metadata), by literal address and by the addresses a name resolves to, unless a CIDR
 * of OCTOPROX_DESTINATION_ALLOW_CIDRS covers them.
 */
export interface DestinationGuard {
  /**
   * Who resolves a destination's name (OCTOPROX_DESTINATION_RESOLUTION; absent: `upstream`).
   * With `gateway`, the destination step asks `pin` rather than `check`.
   */
  readonly resolution?: DestinationResolution;
  check(target: Target): MaybePromise<Refusal | undefined>;
  /**
   * Gateway resolution: the target with the address the guard checked in place of its name (a
   * literal in its plain form), which is what the upstream is sent, so that what was checked is
   * what is dialled; or a refusal (an address it may not reach, a name that does not resolve).
   */
  pin?(target: Target): MaybePromise<Refusal | Target>;
}
