/**
 * One client connection: reads request heads one after another (keep-alive), answers what it
 * must refuse itself, and hands each request to the forwarder or the CONNECT handler. Nothing
 * here throws out of `run`: a malformed request gets 400 and a close, never a stack trace.
 */
import { EMPTY_BYTES } from "../../../shared/proxy-protocol/bytes.ts";
import type {
  AuthResult,
  Client,
  DestinationGuard,
  MaybePromise,
  Refusal,
  Router,
  Target,
} from "../../core/contract.ts";
import { type Answer, encodeAnswer } from "../http/answers.ts";
import type { BufferPool } from "../io/buffers.ts";
import { handleConnect } from "../tunnel/connect.ts";
import type { TransferHooks } from "./hooks.ts";
import { safely } from "./hooks.ts";
import { handleForward } from "../http/forward.ts";
import {
  HeadError,
  headerValue,
  type HeadReader,
  type RequestHead,
  requestHeadReader,
} from "../http/parse.ts";
import { Leg, tuneTcp } from "../io/leg.ts";
import type { Logger } from "../process/log.ts";
import { type GatewayMetrics, RequestKind, RequestOutcome } from "../process/metrics.ts";
import type { UpstreamPool } from "../io/upstream-pool.ts";
import type { NetLimits } from "./limits.ts";

/** What every session shares: the routing core, limits, counters and buffers. */
export interface NetContext {
  router: Router;
  guard: DestinationGuard;
  logger: Logger;
  metrics: GatewayMetrics;
  hooks: TransferHooks | undefined;
  pool: BufferPool;
  /** Small buffers (SMALL_BUFFER_BYTES): client heads, and tunnels until they move bulk. */
  small: BufferPool;
  /** Idle keep-alive connections to HTTP(S) upstream proxies, for forwarded requests. */
  upstreams: UpstreamPool;
  limits: NetLimits;
}

/** Room for the heads a forwarded exchange sends, with the first body bytes after them. */
const SCRATCH_BYTES = 4096;

export class ClientSession {
  readonly ctx: NetContext;
  readonly client: Leg;
  readonly #abort = new AbortController();
  readonly openedMs = Date.now();
  readonly #headBuffer: Uint8Array;
  readonly #reader: HeadReader<RequestHead>;
  /** Bytes read from the client and not used yet (a view; see `takePending`). */
  #pending: Uint8Array = EMPTY_BYTES;
  #upstream: Leg | undefined;
  #headStartedMs = 0;
  /** Idle checks apply (reading a head or a body); off while a deadline of its own runs. */
  idleWatch = true;
  #idleFired = false;
  #scratch: Uint8Array | undefined;

  constructor(conn: Deno.Conn, ctx: NetContext) {
    tuneTcp(conn);
    this.client = new Leg(conn);
    this.ctx = ctx;
    this.#headBuffer = ctx.small.take();
    this.#reader = requestHeadReader(ctx.limits.maxHeaderBytes);
  }

  /** Aborted when the session is cancelled (the gateway stopping). */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** The idle check closed the session. */
  get idleFired(): boolean {
    return this.#idleFired;
  }

  async run(): Promise<void> {
    try {
      await this.#serve();
    } catch (error) {
      // Handlers catch their own failures; this is a bug's last stop, not a client's doing.
      this.ctx.logger.error("Client session failed", { error });
    } finally {
      this.#upstream?.close();
      this.client.close();
      // Every read into it was awaited by #serve; pending bytes in it are dropped with the session.
      this.#pending = EMPTY_BYTES;
      this.ctx.small.give(this.#headBuffer);
    }
  }

  /** Ends the session at once: pending reads and writes are aborted. Safe to call again. */
  cancel(): void {
    this.#abort.abort();
    this.#upstream?.close();
    this.client.close();
  }

  /** Closes an idle session: no read or write finished for `idleMs`, or a head dragging on. */
  checkIdle(nowMs: number, idleMs: number): void {
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
  }

  /** The upstream leg of the exchange under way, so cancel and idle checks reach it. */
  attach(leg: Leg | undefined): void {
    this.#upstream = leg;
  }

  /** Takes the unread client bytes (a view of a buffer no read will touch until it is used). */
  takePending(): Uint8Array {
    const pending = this.#pending;
    this.#pending = EMPTY_BYTES;
    return pending;
  }

  /** Puts back client bytes past what an exchange used (a pipelined request's). */
  setPending(bytes: Uint8Array): void {
    this.#pending = bytes;
  }

  async #serve(): Promise<void> {
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
      const connect = head.method === "CONNECT";
      const keep = connect ? await handleConnect(this, head) : await handleForward(this, head);
      this.ctx.metrics.requestDuration(
        connect ? RequestKind.connect : RequestKind.http,
        performance.now() - startedMs,
      );
      if (!keep || this.client.closed) return;
    }
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
        count = await this.client.read(this.#headBuffer);
      } catch {
        return null;
      }
      if (count === null) return null;
      this.#pending = this.#headBuffer.subarray(0, count);
    }
  }

  /**
   * Authenticates the request; on refusal answers it (keeping the connection when
   * `keepAlive`) and gives undefined. Answers at once when the router does (the usual case).
   */
  authenticate(
    head: RequestHead,
    kind: RequestKind,
    keepAlive: boolean,
    target: Target,
  ): MaybePromise<Client | undefined> {
    const failed = (error: unknown) => this.#authenticationFailed(error, head.method, kind);
    let result: MaybePromise<AuthResult>;
    try {
      result = this.ctx.router.authenticate(headerValue(head, "proxy-authorization"));
    } catch (error) {
      return failed(error);
    }
    const settle = (auth: AuthResult): MaybePromise<Client | undefined> => {
      if (auth.ok) return auth.client;
      return this.refuse(auth.refusal, { keepAlive, kind, method: head.method }, undefined, target)
        .then(() => undefined);
    };
    return result instanceof Promise ? result.then(settle, failed) : settle(result);
  }

  /**
   * Authenticates the request, then checks its destination; answers a refusal of either itself
   * (keeping the connection when `keepAlive`) and gives undefined. Answers at once when the
   * core does (the usual case).
   */
  admit(
    head: RequestHead,
    kind: RequestKind,
    keepAlive: boolean,
    target: Target,
  ): MaybePromise<Client | undefined> {
    const check = (client: Client | undefined): MaybePromise<Client | undefined> => {
      if (client === undefined) return undefined;
      const settle = (denied: Refusal | undefined): MaybePromise<Client | undefined> =>
        denied === undefined ? client : this.refuse(
          denied,
          { keepAlive, kind, method: head.method },
          client,
          target,
        ).then(() => undefined);
      const denied = this.ctx.guard.check(target);
      return denied instanceof Promise ? denied.then(settle) : settle(denied);
    };
    const client = this.authenticate(head, kind, keepAlive, target);
    return client instanceof Promise ? client.then(check) : check(client);
  }

  async #authenticationFailed(
    error: unknown,
    method: string,
    kind: RequestKind,
  ): Promise<undefined> {
    this.ctx.logger.error("Authentication failed with an error", { error });
    await this.answer(
      { status: 500, proxyStatus: "proxy_internal_error", reason: "Gateway error" },
      { keepAlive: false, kind, method },
    );
    return undefined;
  }

  /** Answers a refusal of the routing core (and tells metering). */
  async refuse(
    refusal: Refusal,
    options: { keepAlive: boolean; kind: RequestKind; method?: string },
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
  async answer(
    answer: Answer,
    options: {
      keepAlive: boolean;
      kind: RequestKind;
      method?: string;
      outcome?: RequestOutcome;
    },
  ): Promise<void> {
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
      await this.client.lingerClose(this.#headBuffer);
    }
  }

  /**
   * The session's own buffer for the heads an exchange sends (built there rather than in a new
   * array each time: typed arrays are costly to allocate). One exchange at a time uses it.
   */
  get scratch(): Uint8Array {
    return this.#scratch ??= new Uint8Array(SCRATCH_BYTES);
  }

  /** A pooled buffer for a body or a tunnel, and its return once no read into it is pending. */
  get pool(): BufferPool {
    return this.ctx.pool;
  }
}
