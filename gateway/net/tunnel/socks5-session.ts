/**
 * The SOCKS5 listener's connections (OCTOPROX_SOCKS_PORT; the listener itself is
 * process/listener.ts with `protocol: "socks5"`): RFC 1928 with RFC 1929 username/password,
 * chosen whenever the client offers it. The username and password are the HTTP ones (options
 * and all): admission gets them as the Basic credentials an HTTP client would send, and runs its
 * client steps when they arrive, its request steps once the CONNECT request names the target
 * (session/admission.ts). A client offering only "no authentication" is admitted by its
 * address (a project's password-less blocks): the client steps run on the greeting, and the
 * method is chosen (no authentication) only when they admit it; otherwise no method is
 * acceptable. A PROXY protocol header from a trusted balancer may come first
 * (io/proxy-prelude.ts). Then the CONNECT command only; domain names, IPv4
 * and IPv6 targets go on to the upstream unresolved (unless the gateway resolves destinations:
 * then the address its guard checked goes on). The dispatch, the upstream dialing, the
 * retry before the tunnel is up and the relay are CONNECT's own (tunnel.ts). Refusals and
 * failures become reply codes (socks5-replies.ts).
 *
 * The handshake runs under one deadline (OCTOPROX_CLIENT_IDLE_TIMEOUT, at most 10 s); a tunnel,
 * like a CONNECT one, is not subject to the idle check. Nothing throws out of `run`.
 */
import { base64Encode, EMPTY_BYTES } from "../../../shared/proxy-protocol/bytes.ts";
import { Socks5Command, Socks5Method, Socks5Reply } from "../../../shared/proxy-protocol/socks5.ts";
import {
  encodeSocks5AuthStatus,
  encodeSocks5MethodSelection,
  encodeSocks5Reply,
  offersNoAuth,
  offersUserPass,
  parseSocks5Greeting,
  parseSocks5Request,
  parseSocks5UserPass,
  Socks5ServerError,
} from "../../../shared/proxy-protocol/socks5-server.ts";
import type { Client, MaybePromise, Refusal, Target } from "../../../shared/routing/contract.ts";
import { Leg, tuneTcp } from "../io/leg.ts";
import { readPrelude } from "../io/proxy-prelude.ts";
import { RequestKind, RequestOutcome } from "../../base/metrics.ts";
import { AdmissionStage, type ClientAddress } from "../../base/admission.ts";
import { ADMISSION_ERROR, AdmissionTicket, admitThrough } from "../session/admission-pipeline.ts";
import type {
  AttachedUpstream,
  InnerTunnel,
  InterceptSession,
  NetContext,
} from "../session/contract.ts";
import { endOfRun, SessionCancel } from "../session/lifecycle.ts";
import { safely } from "../../base/transfer-hooks.ts";
import { socksReplyForFailure, socksReplyForRefusal } from "./socks5-replies.ts";
import { dialTunnel, runTunnel } from "./tunnel.ts";
import { interceptTunnel } from "../tls/intercept.ts";
import { ClientSession, InnerServing } from "../session/client-session.ts";

/** The longest a client may take from its first byte to its CONNECT request. */
export const SOCKS_HANDSHAKE_TIMEOUT_MS = 10_000;
// Room for the longest client message (513 bytes) and whatever came after it.
const HANDSHAKE_BUFFER_BYTES = 1024;
const COLON = 0x3a;
const SUCCEEDED = encodeSocks5Reply(Socks5Reply.succeeded);

interface Parsed {
  consumed: number;
}

/** The Basic header value an HTTP client would send for these credentials (raw bytes kept). */
function basicHeader(username: Uint8Array, password: Uint8Array): string {
  const joined = new Uint8Array(username.length + 1 + password.length);
  joined.set(username, 0);
  joined[username.length] = COLON;
  joined.set(password, username.length + 1);
  return `Basic ${base64Encode(joined)}`;
}

export class Socks5Session implements InterceptSession {
  readonly ctx: NetContext;
  readonly client: Leg;
  readonly openedMs = Date.now();
  /** Its place among its listener's sessions (the listener keeps it). */
  slot = -1;
  readonly #cancellation = new SessionCancel();
  readonly #buffer = new Uint8Array(HANDSHAKE_BUFFER_BYTES);
  /** Unparsed client bytes: `#buffer[#start, #end)`. */
  #start = 0;
  #end = 0;
  #upstream: AttachedUpstream | undefined;
  /** When the client's greeting arrived: its request's duration is measured from there. */
  #requestStartedMs: number | undefined;
  /** The connection's one request's admission, released when the session ends. */
  readonly #admission: AdmissionTicket;
  /** The client's credentials as a Basic value: an intercepted tunnel's requests use them. */
  #credentials: string | null = null;
  /** The session serving this tunnel's requests, when it is intercepted. */
  readonly #inside = new InnerServing();

  constructor(conn: Deno.Conn, ctx: NetContext) {
    tuneTcp(conn);
    this.client = new Leg(conn);
    this.ctx = ctx;
    this.#admission = new AdmissionTicket(conn.remoteAddr as Deno.NetAddr);
  }

  get signal(): AbortSignal {
    return this.#cancellation.signal;
  }

  get cancelled(): boolean {
    return this.#cancellation.cancelled;
  }

  /** Serves the connection until it ends (its tunnel's end, when it got one); never rejects. */
  run(): Promise<void> {
    return endOfRun(this.#serve(), () => this.#close(), this.ctx.logger, "SOCKS5 session failed");
  }

  #close(): void {
    if (this.#requestStartedMs !== undefined) {
      this.ctx.metrics.requestDuration(
        RequestKind.socks5,
        performance.now() - this.#requestStartedMs,
      );
    }
    // The tunnel (or the refusal) ended the connection's one request.
    this.#admission.release();
    this.client.clearDeadline();
    this.#upstream?.close();
    this.client.close();
  }

  /** Ends the session at once. Safe to call again. */
  cancel(): void {
    this.#cancellation.cancel();
    this.#inside.cancel();
    this.#upstream?.close();
    this.client.close();
  }

  /**
   * The handshake has its own deadline and a tunnel is exempt, as CONNECT's; an intercepted
   * tunnel's requests are checked as a forward connection's.
   */
  checkIdle(nowMs: number, idleMs: number): void {
    this.#inside.checkIdle(nowMs, idleMs);
  }

  keepAlive(): void {
    this.client.keepAlive();
    this.#upstream?.keepAlive();
    this.#inside.keepAlive();
  }

  get clientAddress(): ClientAddress {
    return this.#admission.clientAddress;
  }

  releaseAdmission(): void {
    this.#admission.release();
  }

  serveInner(conn: Deno.Conn, inner: InnerTunnel): Promise<void> {
    return this.#inside.serve(new ClientSession(conn, this.ctx, inner), this.cancelled);
  }

  attach(leg: AttachedUpstream | undefined): void {
    this.#upstream = leg;
  }

  /** Its handshake buffer (1 KiB, not pooled) stays: the bytes past the handshake are copied. */
  takeForTunnel(): Uint8Array {
    // Nothing waits on it any more: cancelling a tunnel closes its legs.
    this.#cancellation.release();
    if (this.#end === this.#start) return EMPTY_BYTES;
    // A copy: the relay's reads must never land in bytes it has not sent yet.
    const pending = this.#buffer.slice(this.#start, this.#end);
    this.#start = this.#end = 0;
    return pending;
  }

  async #serve(): Promise<void> {
    const ctx = this.ctx;
    this.client.setDeadline(Math.min(ctx.limits.clientIdleTimeoutMs, SOCKS_HANDSHAKE_TIMEOUT_MS));

    if (!await this.#prelude()) return;
    const greeting = await this.#message(parseSocks5Greeting);
    if (greeting === undefined) return;
    this.#requestStartedMs = performance.now();
    const ticket = this.#admission;
    // A username option written wrong (400) and the project's limits (429, 509) are answered
    // at the request, as HTTP answers them rather than 407: the credentials are not the problem,
    // and the reply code can say what is ("not allowed", or "try again" for a rate or a cap).
    let deferredRefusal: Refusal | undefined;
    if (offersUserPass(greeting)) {
      if (!await this.#send(encodeSocks5MethodSelection(Socks5Method.userPass), false)) return;
      const credentials = await this.#message(parseSocks5UserPass);
      if (credentials === undefined) return;
      // Built before the next read: the fields are views of the handshake buffer.
      this.#credentials = basicHeader(credentials.usernameBytes, credentials.passwordBytes);
      ticket.begin(RequestKind.socks5, this.#credentials, undefined);
      const clientRefusal = await this.#admit(AdmissionStage.client);
      if (clientRefusal === ADMISSION_ERROR) {
        await this.#send(encodeSocks5AuthStatus(false), true);
        return;
      }
      if (clientRefusal !== undefined) {
        if (answeredAtRequest(clientRefusal)) deferredRefusal = clientRefusal;
        else {
          this.#rejected(clientRefusal, ticket.client, undefined);
          ctx.metrics.request(RequestKind.socks5, RequestOutcome.refused, clientRefusal.status);
          await this.#send(encodeSocks5AuthStatus(false), true);
          return;
        }
      }
      if (!await this.#send(encodeSocks5AuthStatus(true), false)) return;
    } else if (offersNoAuth(greeting)) {
      // No credentials: the client's address may name the project (its password-less blocks).
      // Who the client is refused can only be "no acceptable method" (the method is chosen
      // after admission); the project's limits are answered at the request, as above.
      ticket.begin(RequestKind.socks5, null, undefined);
      const clientRefusal = await this.#admit(AdmissionStage.client);
      if (
        clientRefusal !== undefined && clientRefusal !== ADMISSION_ERROR &&
        answeredAtRequest(clientRefusal)
      ) {
        deferredRefusal = clientRefusal;
      } else if (clientRefusal !== undefined) {
        if (clientRefusal !== ADMISSION_ERROR) {
          this.#rejected(clientRefusal, ticket.client, undefined);
          ctx.metrics.request(RequestKind.socks5, RequestOutcome.refused, clientRefusal.status);
        }
        await this.#send(encodeSocks5MethodSelection(Socks5Method.noAcceptable), true);
        return;
      }
      if (!await this.#send(encodeSocks5MethodSelection(Socks5Method.noAuth), false)) return;
    } else {
      ctx.metrics.request(RequestKind.socks5, RequestOutcome.refused, 407);
      await this.#send(encodeSocks5MethodSelection(Socks5Method.noAcceptable), true);
      return;
    }

    const request = await this.#message(parseSocks5Request);
    if (request === undefined) return;
    this.client.clearDeadline();
    const target: Target = request.target;
    if (request.command !== Socks5Command.connect) {
      ctx.metrics.request(RequestKind.socks5, RequestOutcome.refused, 400);
      await this.#send(encodeSocks5Reply(Socks5Reply.commandNotSupported), true);
      return;
    }
    if (deferredRefusal !== undefined) {
      await this.#refuse(deferredRefusal, ticket.client, target);
      return;
    }
    ticket.target = target;
    const requestRefusal = await this.#admit(AdmissionStage.request);
    if (requestRefusal === ADMISSION_ERROR) {
      await this.#send(encodeSocks5Reply(Socks5Reply.generalFailure), true);
      return;
    }
    if (requestRefusal !== undefined) {
      await this.#refuse(requestRefusal, ticket.client, target);
      return;
    }
    const client: Client = ticket.client!;

    const mitm = ctx.mitm;
    if (mitm !== undefined && mitm.intercepts(client, target)) {
      // Returned, not awaited, as a tunnel is.
      return interceptTunnel(this, mitm, {
        client,
        target,
        dialTarget: ticket.dialTarget ?? target,
        credentials: this.#credentials,
        established: SUCCEEDED,
        kind: RequestKind.socks5,
      });
    }

    const dial = await dialTunnel(
      this,
      client,
      target,
      RequestKind.socks5,
      ticket.dialTarget ?? target,
    );
    switch (dial.kind) {
      case "refused":
        await this.#refuse(dial.refusal, client, target);
        return;
      case "ended":
        return;
      case "failed":
        ctx.metrics.request(RequestKind.socks5, RequestOutcome.failed, dial.failure.answer.status);
        await this.#send(
          encodeSocks5Reply(socksReplyForFailure(dial.failure, dial.error)),
          true,
        );
        return;
      case "served":
        // Returned, not awaited: the tunnel runs on without this frame.
        return runTunnel(this, {
          client,
          target,
          up: dial.value,
          established: SUCCEEDED,
          kind: RequestKind.socks5,
        });
    }
  }

  /**
   * The connection's first bytes: a PROXY protocol header a trusted balancer sent names the
   * client; one from anyone else (or malformed) closes the connection without a reply. False:
   * the session ends.
   */
  async #prelude(): Promise<boolean> {
    const ticket = this.#admission;
    const policy = this.ctx.proxyHeaders;
    const prelude = await readPrelude(this.client, this.#buffer, policy.trusts(ticket.clientIp));
    if (prelude.kind === "closed") return false;
    if (prelude.kind === "refused") {
      policy.refused(ticket.clientAddress.hostname, prelude.reason);
      this.ctx.metrics.request(RequestKind.socks5, RequestOutcome.refused, 400);
      return false;
    }
    if (prelude.client !== undefined) ticket.setClientAddress(prelude.client);
    this.#start = prelude.start;
    this.#end = prelude.end;
    return true;
  }

  /**
   * The next client message; undefined when the client left, the deadline passed, or the bytes
   * can never be one (answered with the parser's reply, if it has one, and closed).
   */
  async #message<T extends Parsed>(parse: (bytes: Uint8Array) => T | undefined): Promise<
    T | undefined
  > {
    for (;;) {
      if (this.#end > this.#start) {
        let parsed: T | undefined;
        try {
          parsed = parse(this.#buffer.subarray(this.#start, this.#end));
        } catch (error) {
          const reply = error instanceof Socks5ServerError ? error.reply : undefined;
          this.ctx.metrics.request(RequestKind.socks5, RequestOutcome.refused, 400);
          this.ctx.logger.debug("Malformed SOCKS5 message", { error });
          if (reply !== undefined) await this.#send(encodeSocks5Reply(reply), true);
          return undefined;
        }
        if (parsed !== undefined) {
          this.#start += parsed.consumed;
          return parsed;
        }
      }
      if (this.#start > 0) {
        this.#buffer.copyWithin(0, this.#start, this.#end);
        this.#end -= this.#start;
        this.#start = 0;
      }
      let count: number | null;
      try {
        count = await this.client.read(this.#buffer.subarray(this.#end));
      } catch {
        return undefined;
      }
      if (count === null) return undefined;
      this.#end += count;
    }
  }

  /** Admission's steps through `through`'s stage (admission-pipeline.ts `admitThrough`). */
  #admit(through: AdmissionStage): MaybePromise<Refusal | undefined | typeof ADMISSION_ERROR> {
    return admitThrough(this.ctx, this.#admission, through, RequestKind.socks5);
  }

  /** Answers a refusal of the router or the guard, and tells metering. */
  async #refuse(refusal: Refusal, client: Client | undefined, target: Target): Promise<void> {
    this.#rejected(refusal, client, target);
    this.ctx.metrics.request(
      RequestKind.socks5,
      refusal.status >= 500 ? RequestOutcome.failed : RequestOutcome.refused,
      refusal.status,
    );
    await this.#send(encodeSocks5Reply(socksReplyForRefusal(refusal)), true);
  }

  #rejected(refusal: Refusal, client: Client | undefined, target: Target | undefined): void {
    const hooks = this.ctx.hooks;
    if (hooks?.rejected) safely(() => hooks.rejected!(refusal, client, target, RequestKind.socks5));
  }

  /**
   * Writes `bytes`; with `last`, then closes, lingering so the reply is read before any reset
   * (RFC 1928: the server closes soon after a failure reply). False when the write failed.
   */
  async #send(bytes: Uint8Array, last: boolean): Promise<boolean> {
    try {
      await this.client.write(bytes);
    } catch {
      this.client.close();
      return false;
    }
    if (last) {
      this.client.clearDeadline();
      this.#start = this.#end = 0;
      await this.client.lingerClose(this.#buffer);
    }
    return true;
  }
}

/** A client-stage refusal answered once the request arrives, with its reply code. */
function answeredAtRequest(refusal: Refusal): boolean {
  return refusal.status === 400 || refusal.status === 429 || refusal.status === 509;
}
