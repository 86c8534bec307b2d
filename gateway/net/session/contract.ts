/**
 * The session contract: what the request handlers (http/forward.ts, tunnel/connect.ts and the
 * tunnels of tunnel/tunnel.ts) depend on of the client's session, and what every session of a
 * listener shares. The sessions implement it (client-session.ts for the HTTP listener,
 * tunnel/socks5-session.ts for the SOCKS5 one) and call the handlers; the handlers know the
 * sessions only through this file.
 */
import type {
  Client,
  MaybePromise,
  Refusal,
  Router,
  Target,
} from "../../../shared/routing/contract.ts";
import type { Answer } from "../http/answers.ts";
import type { RequestHead } from "../http/parse.ts";
import type { BufferPool } from "../io/buffers.ts";
import type { Leg } from "../io/leg.ts";
import type { ProxyHeaderPolicy } from "../io/proxy-prelude.ts";
import type { UpstreamPool } from "../io/upstream-pool.ts";
import type { Logger } from "../../base/log.ts";
import type { GatewayMetrics, RequestKind, RequestOutcome } from "../../base/metrics.ts";
import type { Admission } from "./admission-pipeline.ts";
import type { Interceptor } from "../tls/interceptor.ts";
import type { ClientHello } from "../tls/client-hello.ts";
import type { TlsFingerprints } from "../tls/fingerprints.ts";
import type { ClientAddress } from "../../base/admission.ts";
import type { TransferHooks } from "../../base/transfer-hooks.ts";
import type { CooldownBook } from "../../base/cooldown-book.ts";
import type { DomainTally } from "../../base/domain-tally.ts";
import type { EscalationReports } from "../../base/escalation-reports.ts";
import type { NetLimits } from "./limits.ts";

/** What every session of a listener shares: the core, admission, limits, counters, buffers. */
export interface NetContext {
  /** Acquires the upstream of each attempt (who the client is, admission decided). */
  router: Router;
  /** The steps every request passes before any upstream is chosen. */
  admission: Admission;
  /** Who may send a PROXY protocol header before the connection's own protocol. */
  proxyHeaders: ProxyHeaderPolicy;
  logger: Logger;
  metrics: GatewayMetrics;
  hooks: TransferHooks | undefined;
  pool: BufferPool;
  /** Small buffers (SMALL_BUFFER_BYTES): client heads. */
  small: BufferPool;
  /** Buffers of tunnels' quiet directions (TUNNEL_START_BUFFER_BYTES). */
  tunnelStart: BufferPool;
  /** Idle keep-alive connections to HTTP(S) upstream proxies, for forwarded requests. */
  upstreams: UpstreamPool;
  limits: NetLimits;
  /**
   * TLS interception (the install's CA, host certificates, counts); undefined only where a test
   * builds a listener without a CA.
   */
  mitm: Interceptor | undefined;
  /**
   * The exits cooled down per site after block verdicts (shared by every gateway); undefined
   * where a test builds a listener without one (verdicts then cool nothing down).
   */
  cooldowns: CooldownBook | undefined;
  /** What judging found, per project and site (undefined: not counted). */
  domains: DomainTally | undefined;
  /** Where judged answers of escalated projects are told (undefined: no escalation). */
  escalations: EscalationReports | undefined;
}

/**
 * What a tunnel (CONNECT's and SOCKS5's) and the attempts before it need of the session: the
 * client's leg, the session's end, and a place for the upstream leg so cancelling reaches it.
 */
export interface TunnelSession {
  readonly ctx: NetContext;
  readonly client: Leg;
  /** Aborted when the session is cancelled (the gateway stopping). */
  readonly signal: AbortSignal;
  /** The session was cancelled (the same as `signal.aborted`, without making a signal). */
  readonly cancelled: boolean;
  /**
   * The connection becomes a tunnel: the client's bytes read past its request or handshake (the
   * target's, in an array of their own), and the session's read buffers go back since it reads
   * nothing more itself (an idle tunnel holds as little as it can).
   */
  takeForTunnel(): Uint8Array;
  /** The upstream leg under way, so cancel and idle checks reach it. */
  attach(leg: AttachedUpstream | undefined): void;
}

/**
 * What cancel and idle checks need of the upstream side under way: a leg (io/leg.ts), or the
 * browser-grade engine's transfer (http/browser-exchange.ts), which has no socket of ours.
 */
export interface AttachedUpstream {
  /** When a byte last moved (Date.now() ms). */
  readonly lastActivityMs: number;
  /** Ends it at once (cancel, idle). */
  close(): void;
  /** Turns TCP keepalive on, where there is a socket. */
  keepAlive(): void;
}

/** An intercepted tunnel, as the session serving the requests inside it sees it. */
export interface InnerTunnel {
  /** The tunnel's target: every request inside goes there, in origin form. */
  target: Target;
  /** The target's `host:port` (its Host by default, the upstream pool's key with the exit). */
  authority: string;
  /** The tunnel's own credentials (a Basic value): each request inside is admitted with them. */
  credentials: string | null;
  /** The client, as the tunnel's session knew it (a trusted PROXY header's address included). */
  clientAddress: ClientAddress;
  /** The client's ClientHello (its SNI, ALPN), and its fingerprints. */
  hello: ClientHello;
  fingerprints: TlsFingerprints;
}

/** What an intercepted tunnel needs of the session it opened in (CONNECT's or SOCKS5's). */
export interface InterceptSession extends TunnelSession {
  readonly clientAddress: ClientAddress;
  /**
   * The tunnel's own admission ends (what it holds goes back): the requests inside are admitted
   * each, and hold their own.
   */
  releaseAdmission(): void;
  /**
   * Serves the decrypted connection as requests until it ends; cancelling the session and its
   * idle checks reach the session serving it.
   */
  serveInner(conn: Deno.Conn, inner: InnerTunnel): Promise<void>;
}

/**
 * What a CONNECT handler gives back once its tunnel is up: the tunnel runs on by itself until
 * `ended` settles (it never rejects), and the request ends with it. The session's own loop
 * returns meanwhile, so an idle tunnel holds no suspended frame of the session or the handler.
 */
export interface TunnelRunning {
  readonly ended: Promise<void>;
}

/** How a request's own answer is sent: keep the connection, the kind counted, the method. */
export interface AnswerOptions {
  keepAlive: boolean;
  kind: RequestKind;
  method?: string;
  outcome?: RequestOutcome;
}

/** What the HTTP listener's handlers (forwarding, CONNECT) need of its session. */
export interface HttpSession extends InterceptSession {
  /** The intercepted tunnel this session serves the requests of; undefined for a client's own. */
  readonly inner: InnerTunnel | undefined;
  /** The client's bytes read past its request (a body's first bytes, a pipelined request). */
  takePending(): Uint8Array;
  /** Idle checks apply (reading a head or a body); off while a deadline of its own runs. */
  idleWatch: boolean;
  /** The idle check closed the session. */
  readonly idleFired: boolean;
  /** The session's buffer for the heads an exchange sends; one exchange at a time uses it. */
  readonly scratch: Uint8Array;
  /** Puts back client bytes past what an exchange used (a pipelined request's). */
  setPending(bytes: Uint8Array): void;
  /**
   * Runs admission on the request; answers a refusal itself (keeping the connection when
   * `keepAlive`) and gives undefined. Answers at once when every step does. What the steps
   * hold is released once the handler returned.
   */
  admit(
    head: RequestHead,
    kind: RequestKind,
    keepAlive: boolean,
    target: Target,
  ): MaybePromise<Client | undefined>;
  /** Request header fields (lower-case names) admission consumed: they are not forwarded. */
  readonly strippedHeaders: ReadonlySet<string> | undefined;
  /**
   * The admitted request's target as the upstream is sent it: the address the guard checked
   * when the gateway resolves destinations; undefined: the target as the client named it.
   */
  readonly dialTarget: Target | undefined;
  /** Answers a refusal (and tells metering and the failure log). */
  refuse(
    refusal: Refusal,
    options: AnswerOptions,
    client: Client | undefined,
    target: Target | undefined,
  ): Promise<void>;
  /** Sends one of the gateway's own answers; without keep-alive the connection then closes. */
  answer(answer: Answer, options: AnswerOptions): Promise<void>;
}
