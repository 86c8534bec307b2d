/**
 * One client connection of the HTTP listener: reads request heads one after another
 * (keep-alive), answers what it must refuse itself, and hands each request to the forwarder
 * (http/forward.ts) or the CONNECT handler (tunnel/connect.ts). They see it through the session
 * contract (contract.ts): they ask it to run admission (`admit`) and to answer; what the
 * admission steps hold is released once the handler returned. Nothing here throws out of
 * `run`: a malformed request gets 400 and a close, never a stack trace.
 */
import { EMPTY_BYTES } from "../../../shared/proxy-protocol/bytes.ts";
import type { Client, MaybePromise, Refusal, Target } from "../../../shared/routing/contract.ts";
import { type Answer, encodeAnswer } from "../http/answers.ts";
import { handleForward, handleInner } from "../http/forward.ts";
import {
  HeadError,
  headerValue,
  type HeadReader,
  type RequestHead,
  requestHeadReader,
} from "../http/parse.ts";
import { Leg, tuneTcp } from "../io/leg.ts";
import { readPrelude } from "../io/proxy-prelude.ts";
import { RequestKind, RequestOutcome } from "../../base/metrics.ts";
import { handleConnect } from "../tunnel/connect.ts";
import { AdmissionStage } from "../../base/admission.ts";
import { AdmissionTicket } from "./admission-pipeline.ts";
import type { ClientAddress } from "../../base/admission.ts";
import type {
  AnswerOptions,
  AttachedUpstream,
  HttpSession,
  InnerTunnel,
  NetContext,
  TunnelRunning,
} from "./contract.ts";
import { safely } from "../../base/transfer-hooks.ts";
import { endOfRun, SessionCancel } from "./lifecycle.ts";

/** Room for the heads a forwarded exchange sends, with the first body bytes after them. */
const SCRATCH_BYTES = 4096;

export class ClientSession implements HttpSession {
  readonly ctx: NetContext;
  readonly client: Leg;
  readonly #cancellation = new SessionCancel();
  readonly openedMs = Date.now();
  /** Its place among its listener's sessions (the listener keeps it). */
  slot = -1;
  /** Undefined while the connection is a tunnel's (taken again if a read ever needs it). */
  #headBuffer: Uint8Array | undefined;
  /** Undefined while the connection is a tunnel's, as the head buffer. */
  #headReader: HeadReader<RequestHead> | undefined;
  /** Bytes read from the client and not used yet (a view; see `takePending`). */
  #pending: Uint8Array = EMPTY_BYTES;
  #upstream: AttachedUpstream | undefined;
  #headStartedMs = 0;
  /** Idle checks apply (reading a head or a body); off while a deadline of its own runs. */
  idleWatch = true;
  #idleFired = false;
  #scratch: Uint8Array | undefined;
  /** The request under way's admission: reused by each request, released once it ended. */
  readonly #admission: AdmissionTicket;
  /** Set when this session serves the requests inside an intercepted tunnel. */
  readonly #inner: InnerTunnel | undefined;
  /** The session serving this one's intercepted tunnel, while it runs. */
  readonly #inside = new InnerServing();

  constructor(conn: Deno.Conn, ctx: NetContext, inner?: InnerTunnel) {
    tuneTcp(conn);
    this.client = new Leg(conn);
    this.ctx = ctx;
    this.#inner = inner;
    this.#headBuffer = ctx.small.take();
    this.#admission = new AdmissionTicket(
      inner?.clientAddress ?? conn.remoteAddr as Deno.NetAddr,
    );
  }

  get inner(): InnerTunnel | undefined {
    return this.#inner;
  }

  /** The client, as admission sees it (a trusted PROXY header's address included). */
  get clientAddress(): ClientAddress {
    return this.#admission.clientAddress;
  }

  /** The CONNECT's admission ends early: an intercepted tunnel's requests hold their own. */
  releaseAdmission(): void {
    this.#admission.release();
  }

  /** Serves an intercepted tunnel's decrypted connection, each request on its own. */
  serveInner(conn: Deno.Conn, inner: InnerTunnel): Promise<void> {
    return this.#inside.serve(new ClientSession(conn, this.ctx, inner), this.cancelled);
  }

  /** Aborted when the session is cancelled (the gateway stopping). */
  get signal(): AbortSignal {
    return this.#cancellation.signal;
  }

  get cancelled(): boolean {
    return this.#cancellation.cancelled;
  }

  /** The idle check closed the session. */
  get idleFired(): boolean {
    return this.#idleFired;
  }

  /** Serves the connection until it ends (a tunnel's end, for one); never rejects. */
  run(): Promise<void> {
    return endOfRun(this.#serve(), () => this.#close(), this.ctx.logger, "Client session failed");
  }

  #close(): void {
    this.#admission.release();
    this.#upstream?.close();
    this.client.close();
    // Every read into it was awaited by #serve; pending bytes in it are dropped with the session.
    this.#pending = EMPTY_BYTES;
    if (this.#headBuffer !== undefined) this.ctx.small.give(this.#headBuffer);
    this.#headBuffer = undefined;
  }

  /** Ends the session at once: pending reads and writes are aborted. Safe to call again. */
  cancel(): void {
    this.#cancellation.cancel();
    this.#inside.cancel();
    this.#upstream?.close();
    this.client.close();
  }

  /** Closes an idle session: no read or write finished for `idleMs`, or a head dragging on. */
  checkIdle(nowMs: number, idleMs: number): void {
    if (this.#inside.checkIdle(nowMs, idleMs)) return;
    if (!this.idleWatch || this.client.closed) return;
    const upstream = this.#upstream;
    const last = upstream && upstream.lastActivityMs > this.client.lastActivityMs
      ? upstream.lastActivityMs
      : this.client.lastActivityMs;
    const slowHead = this.#headStartedMs > 0 && nowMs - this.#headStartedMs > idleMs;
    if (nowMs - last > idleMs || slowHead) {
      this.#idleFired = true;
      this.ctx.logger.debug("Idle client connection closed", { slowHead });
      this.#upstream?.close();
      this.client.close();
    }
  }

  keepAlive(): void {
    this.client.keepAlive();
    this.#upstream?.keepAlive();
    this.#inside.keepAlive();
  }

  /** The upstream leg of the exchange under way, so cancel and idle checks reach it. */
  attach(leg: AttachedUpstream | undefined): void {
    this.#upstream = leg;
  }

  /** Takes the unread client bytes (a view of a buffer no read will touch until it is used). */
  takePending(): Uint8Array {
    const pending = this.#pending;
    this.#pending = EMPTY_BYTES;
    return pending;
  }

  takeForTunnel(): Uint8Array {
    const pending = this.#pending.length > 0 ? this.#pending.slice() : EMPTY_BYTES;
    this.#pending = EMPTY_BYTES;
    // No read into it is pending: the session awaits the tunnel.
    if (this.#headBuffer !== undefined) this.ctx.small.give(this.#headBuffer);
    this.#headBuffer = undefined;
    this.#headReader = undefined;
    this.#scratch = undefined;
    // Nothing waits on it any more: cancelling a tunnel closes its legs.
    this.#cancellation.release();
    return pending;
  }

  get #reader(): HeadReader<RequestHead> {
    return this.#headReader ??= requestHeadReader(this.ctx.limits.maxHeaderBytes);
  }

  /** The head buffer, taken again after a tunnel gave it back. */
  get #heads(): Uint8Array {
    return this.#headBuffer ??= this.ctx.small.take();
  }

  /** Puts back client bytes past what an exchange used (a pipelined request's). */
  setPending(bytes: Uint8Array): void {
    this.#pending = bytes;
  }

  async #serve(): Promise<void> {
    const inner = this.#inner;
    if (inner === undefined && !await this.#prelude()) return;
    for (;;) {
      this.idleWatch = true;
      let head: RequestHead | null;
      try {
        head = await this.#readHead();
      } catch (error) {
        if (error instanceof HeadError) {
          await this.answer(
            { status: error.status, proxyStatus: "http_request_error", reason: error.message },
            { keepAlive: false, kind: RequestKind.http },
          );
        }
        return;
      }
      if (head === null) return;
      this.idleWatch = false;
      const startedMs = performance.now();
      const kind = head.method === "CONNECT" && inner === undefined
        ? RequestKind.connect
        : RequestKind.http;
      let handled: boolean | TunnelRunning;
      try {
        handled = inner !== undefined
          ? await this.#innerRequest(head, inner)
          : kind === RequestKind.connect
          ? await handleConnect(this, head)
          : await handleForward(this, head);
      } catch (error) {
        this.#admission.release();
        throw error;
      }
      if (typeof handled !== "boolean") {
        // A tunnel ends the connection: this loop returns now and the request ends with it.
        return handled.ended.then(() => this.#requestEnded(kind, startedMs));
      }
      this.#requestEnded(kind, startedMs);
      if (!handled || this.client.closed) return;
    }
  }

  /** A request inside an intercepted tunnel, counted as one. */
  #innerRequest(head: RequestHead, inner: InnerTunnel): Promise<boolean> {
    const mitm = this.ctx.mitm;
    if (mitm !== undefined) mitm.requests++;
    return handleInner(this, head, inner);
  }

  /** The request (or its tunnel) ended: what admission's steps hold goes back. */
  #requestEnded(kind: RequestKind, startedMs: number): void {
    this.#admission.release();
    this.ctx.metrics.requestDuration(kind, performance.now() - startedMs);
  }

  /**
   * The connection's first bytes: a PROXY protocol header a trusted balancer sent names the
   * client; one from anyone else (or malformed) is answered 400 and the connection closed.
   * False: the session ends.
   */
  async #prelude(): Promise<boolean> {
    const ticket = this.#admission;
    const peer = ticket.clientAddress.hostname;
    const policy = this.ctx.proxyHeaders;
    const prelude = await readPrelude(
      this.client,
      this.#heads,
      policy.trusts(ticket.clientIp),
    );
    if (prelude.kind === "closed") return false;
    if (prelude.kind === "refused") {
      policy.refused(peer, prelude.reason);
      await this.answer(
        { status: 400, proxyStatus: "http_request_error", reason: prelude.reason },
        { keepAlive: false, kind: RequestKind.http },
      );
      return false;
    }
    if (prelude.client !== undefined) ticket.setClientAddress(prelude.client);
    this.#pending = this.#heads.subarray(prelude.start, prelude.end);
    return true;
  }

  /** The next request head; null when the client closed (or failed) between requests. */
  async #readHead(): Promise<RequestHead | null> {
    for (;;) {
      if (this.#pending.length > 0) {
        const chunk = this.#pending;
        this.#pending = EMPTY_BYTES;
        const parsed = this.#reader.push(chunk);
        if (parsed) {
          this.#headStartedMs = 0;
          this.#pending = chunk.subarray(parsed.consumed);
          return parsed.head;
        }
      }
      if (this.#reader.started && this.#headStartedMs === 0) this.#headStartedMs = Date.now();
      let count: number | null;
      try {
        count = await this.client.read(this.#heads);
      } catch {
        return null;
      }
      if (count === null) return null;
      this.#pending = this.#heads.subarray(0, count);
    }
  }

  /**
   * Runs admission on the request (every step, the target being known); on refusal answers it
   * (keeping the connection when `keepAlive`) and gives undefined. Answers at once when every
   * step does (the usual case).
   */
  admit(
    head: RequestHead,
    kind: RequestKind,
    keepAlive: boolean,
    target: Target,
  ): MaybePromise<Client | undefined> {
    const ticket = this.#admission;
    // Inside an intercepted tunnel, every request is the tunnel's client's.
    const inner = this.#inner;
    const credentials = inner !== undefined
      ? inner.credentials
      : headerValue(head, "proxy-authorization");
    ticket.begin(kind, credentials, target, head.headers);
    let refused: MaybePromise<Refusal | undefined>;
    try {
      refused = this.ctx.admission.run(ticket, AdmissionStage.request);
    } catch (error) {
      return this.#admissionFailed(error, head.method, kind);
    }
    if (refused instanceof Promise) {
      return refused.then(
        (refusal) => this.#admitted(refusal, head.method, kind, keepAlive),
        (error) => this.#admissionFailed(error, head.method, kind),
      );
    }
    return this.#admitted(refused, head.method, kind, keepAlive);
  }

  #admitted(
    refusal: Refusal | undefined,
    method: string,
    kind: RequestKind,
    keepAlive: boolean,
  ): MaybePromise<Client | undefined> {
    const ticket = this.#admission;
    if (refusal === undefined) return ticket.client;
    return this.refuse(refusal, { keepAlive, kind, method }, ticket.client, ticket.target)
      .then(() => undefined);
  }

  async #admissionFailed(error: unknown, method: string, kind: RequestKind): Promise<undefined> {
    const step = this.ctx.admission.failedStep(this.#admission);
    this.ctx.logger.error("Admission failed with an error", { step, error });
    await this.answer(
      { status: 500, proxyStatus: "proxy_internal_error", reason: "Gateway error" },
      { keepAlive: false, kind, method },
    );
    return undefined;
  }

  get strippedHeaders(): ReadonlySet<string> | undefined {
    return this.#admission.strippedHeaders;
  }

  get dialTarget(): Target | undefined {
    return this.#admission.dialTarget;
  }

  /** Answers a refusal of the routing core (and tells metering). */
  async refuse(
    refusal: Refusal,
    options: AnswerOptions,
    client: Client | undefined,
    target: Target | undefined,
  ): Promise<void> {
    const hooks = this.ctx.hooks;
    if (hooks?.rejected) safely(() => hooks.rejected!(refusal, client, target, options.kind));
    await this.answer(refusal, options);
  }

  /**
   * Sends one of our own answers. Without keep-alive the connection then closes, lingering
   * so the answer is read before any reset.
   */
  async answer(answer: Answer, options: AnswerOptions): Promise<void> {
    const outcome = options.outcome ??
      (answer.status >= 500 ? RequestOutcome.failed : RequestOutcome.refused);
    this.ctx.metrics.request(options.kind, outcome, answer.status);
    const keepAlive = options.keepAlive && !this.client.closed;
    try {
      await this.client.write(encodeAnswer(answer, { keepAlive, method: options.method }));
    } catch {
      this.client.close();
      return;
    }
    if (!keepAlive) {
      // Whatever was unread is dropped with the connection.
      this.#pending = EMPTY_BYTES;
      await this.client.lingerClose(this.#heads);
    }
  }

  /**
   * The session's own buffer for the heads an exchange sends (built there rather than in a new
   * array each time: typed arrays are costly to allocate). One exchange at a time uses it.
   */
  get scratch(): Uint8Array {
    return this.#scratch ??= new Uint8Array(SCRATCH_BYTES);
  }
}

/**
 * The session serving an intercepted tunnel's requests while it runs, held by the session the
 * tunnel opened in (CONNECT's or SOCKS5's), which passes its cancel, idle checks and keepalive on.
 */
export class InnerServing {
  #session: ClientSession | undefined;

  /** Runs `session` until it ends (cancelled at once when its owner was). */
  async serve(session: ClientSession, cancelled: boolean): Promise<void> {
    this.#session = session;
    if (cancelled) session.cancel();
    try {
      await session.run();
    } finally {
      this.#session = undefined;
    }
  }

  cancel(): void {
    this.#session?.cancel();
  }

  /** Checks the inner session; false when none runs (the owner checks itself). */
  checkIdle(nowMs: number, idleMs: number): boolean {
    if (this.#session === undefined) return false;
    this.#session.checkIdle(nowMs, idleMs);
    return true;
  }

  keepAlive(): void {
    this.#session?.keepAlive();
  }
}
