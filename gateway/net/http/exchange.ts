/**
 * One forwarded exchange through one upstream: an attempt of http/forward.ts's retry loop. Its
 * phases, in order, each a method of `Exchange` below:
 *
 *   1. take or dial the upstream leg: an idle keep-alive connection of the pool for an HTTP(S)
 *      proxy when one is there, else a new one (a tunnel for a SOCKS proxy);
 *   2. send the request: its head (the upstream's own credential, hop-by-hop fields and those
 *      admission consumed left out) and its body as the client frames it, after answering
 *      `100 Continue` ourselves when the client asked for it;
 *   3. read the answer head under the connect timeout (interim answers dropped). A pooled leg
 *      the upstream closed meanwhile fails here before any answer byte: a GET or HEAD without a
 *      body then goes once more from 1, on a new connection (not a retry: the proxy did nothing
 *      wrong); nothing else is sent twice;
 *   4. begin: commit the allocation and start the request's meter (which the interrupt traffic
 *      action may stop);
 *   5. relay the answer: its head, then its body by its framing (an HTTP/1.0 client gets a
 *      chunked body dechunked, its connection closing after it);
 *   6. settle: the allocation released exactly once and the meter finished exactly once on
 *      every path, the leg back to the pool after a cleanly framed HTTP/1.1 answer read to its
 *      end, closed otherwise.
 *
 * A failure says what may follow (attempts.ts): another proxy while nothing reached the client
 * and nothing of the request was spent; our own answer while nothing final reached it; nothing
 * once the answer began.
 */
import { concatParts, EMPTY_BYTES } from "../../../shared/proxy-protocol/bytes.ts";
import { formatAuthority } from "../../../shared/proxy-protocol/address.ts";
import { basicProxyAuthorization } from "../../../shared/proxy-protocol/http-request.ts";
import {
  HandshakeFailure,
  HandshakeProtocol,
  UpstreamFirstByteError,
  UpstreamHandshakeError,
  UpstreamIdleError,
} from "../../../shared/proxy-protocol/errors.ts";
import {
  type Allocation,
  type MaybePromise,
  type Outcome,
} from "../../../shared/routing/contract.ts";
import { type Finding, judge, needsBody } from "../../../shared/blocking/judge.ts";
import { RETRY_BODY_MAX_BYTES } from "../../../shared/blocking/rules.ts";
import { dialUpstream } from "../io/dial.ts";
import type { ForwardPlan, Judging } from "./forward-plan.ts";
import { startTargetTls } from "../tls/target-tls.ts";
import type { Leg } from "../io/leg.ts";
import { UPSTREAM_POOL_UNRETRIED_IDLE_MS, upstreamPoolKey } from "../io/upstream-pool.ts";
import type { AttemptJudged, AttemptOutcome, AttemptServed } from "../session/attempts.ts";
import { bodyPrefixText } from "./body-prefix.ts";
import type { HttpSession } from "../session/contract.ts";
import { ClientBodyError } from "../session/failures.ts";
import { safely, type TransferMeter } from "../../base/transfer-hooks.ts";
import { connectTimeoutFor } from "../session/limits.ts";
import { CONTINUE_100 } from "./answers.ts";
import { applyJudgement, judgedFields, tallyBlocked, tallyGood } from "./judging.ts";
import {
  AllocationHold,
  attemptFailed,
  attemptServed,
  readClient,
  writeClient,
} from "./attempt-end.ts";
import { ChunkedError, ChunkedScanner } from "./chunked.ts";
import {
  connectionTokens,
  encodeClientResponseHead,
  encodeUpstreamRequestHead,
  joinHeadAndBody,
} from "./heads.ts";
import { BodyKind, NO_TOKENS, type RequestFraming } from "./parse.ts";
import {
  ResponseBody,
  type ResponseFraming,
  responseFraming,
  type ResponseHead,
  responseHeadReader,
} from "./response.ts";

/** Methods sent again after a failure that consumed nothing (without a body only). */
export const RETRYABLE_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD"]);

/** Where an exchange is: each phase starts where the last ended. */
const Phase = {
  leg: 0,
  request: 1,
  answerHead: 2,
  begun: 3,
  relay: 4,
} as const;
type Phase = (typeof Phase)[keyof typeof Phase];

/** One attempt through one upstream. Releases the allocation exactly once, on every path. */
export function exchange(
  session: HttpSession,
  plan: ForwardPlan,
  allocation: Allocation,
): Promise<AttemptOutcome<boolean>> {
  return new Exchange(session, plan, allocation).run();
}

/** An answer head and the bytes read past it. */
interface AnswerHead {
  response: ResponseHead;
  leftover: Uint8Array;
}

/** One exchange's state: its phase and what it holds. */
class Exchange {
  readonly session: HttpSession;
  readonly plan: ForwardPlan;
  readonly allocation: Allocation;
  readonly startedMs = Date.now();
  /** OCTOPROX_CONNECT_TIMEOUT, or the client's project's shorter one. */
  readonly connectTimeoutMs: number;
  phase: Phase = Phase.leg;
  leg: Leg | undefined;
  /** A pooled buffer for the upstream's bytes (and the request body's). */
  buffer: Uint8Array | undefined;
  /** Request bytes sent upstream (head and body). */
  sentBytes = 0;
  /** The upstream sent a byte of its answer (a stale pooled leg sends none). */
  answerStarted = false;
  /** Connect to first byte, once the upstream answered. */
  latencyMs: number | undefined;
  /** The upstream's status, once it answered: what the client is relayed. */
  status = 0;
  meter: TransferMeter | undefined;
  /** Stopped by the interrupt traffic action: policy, not the upstream's failure. */
  interrupted = false;
  readonly hold: AllocationHold;
  /**
   * The request goes in origin form through a tunnel of its own: a SOCKS upstream's, or any
   * upstream's to an intercepted request's target.
   */
  tunnel = false;
  /** An intercepted request: the gateway's own TLS to the target runs inside the tunnel. */
  targetTls = false;
  /**
   * The upstream pool's key for the leg (undefined: a SOCKS tunnel for plain HTTP, never
   * pooled). A TLS leg to a target is pooled by upstream and target.
   */
  poolKey: string | undefined;
  /** A GET or HEAD without a body, not resent yet: a stale pooled leg may resend it once. */
  staleResend = false;
  /** How the answer's body is framed, once its head came. */
  bodyFraming: ResponseFraming | undefined;
  /** The client's connection serves another request after this answer. */
  keepAlive = false;
  /** The names the answer's Connection fields list (read once, for its head and the pool). */
  answerListed: ReadonlySet<string> = NO_TOKENS;
  /** Where the leg goes back once the answer ended cleanly (undefined: it closes). */
  keepIn: string | undefined;
  /** Bytes read from the upstream before the answer began (its head, a judged body's prefix). */
  receivedBytes = 0;
  /** The verdict a block rule gave the answer (acted on), if any. */
  verdict: Finding | undefined;
  /** The answer is held for the retry loop: settled by its deliver or drop, not by run. */
  held = false;

  constructor(session: HttpSession, plan: ForwardPlan, allocation: Allocation) {
    this.session = session;
    this.plan = plan;
    this.allocation = allocation;
    this.hold = new AllocationHold(session, allocation);
    this.connectTimeoutMs = connectTimeoutFor(session.ctx.limits, plan.client);
  }

  /**
   * The phases in order. Each is a method of its own, and only those that wait are async:
   * every await is a step of the runtime's, and this runs once per request.
   */
  async run(): Promise<AttemptOutcome<boolean>> {
    // A judged answer that goes on: the bytes it carried, for what its site's good answers cost.
    let relayed: { bytes: number } | undefined;
    try {
      const requestHead = this.prepare();
      let answer: AnswerHead;
      for (;;) {
        let reused = this.takeOrDialLeg();
        if (reused instanceof Promise) reused = await reused;
        try {
          await this.sendRequest(requestHead);
          answer = await this.readAnswerHead();
          break;
        } catch (error) {
          // A stale pooled leg: once more from phase 1, on a new connection.
          if (!this.dropStaleLeg(reused, error)) throw error;
        }
      }
      if (this.plan.judging !== undefined) {
        const judged = await this.judge(this.plan.judging, answer);
        if (judged !== undefined) return judged;
      }
      this.begin(answer.response);
      if (this.plan.judging !== undefined) relayed = this.countRelayed();
      const clean = await this.relayAnswer(answer);
      return this.served(answer.response, clean);
    } catch (error) {
      return this.failed(error);
    } finally {
      if (relayed !== undefined) {
        tallyGood(
          this.session,
          this.plan,
          this.allocation.upstream,
          this.sentBytes + relayed.bytes,
        );
      }
      if (!this.held) this.settle();
    }
  }

  /** Counts the bytes the meter is told of from now on (its own count goes on). */
  countRelayed(): { bytes: number } {
    const counted = { bytes: 0 };
    const inner = this.meter;
    this.meter = {
      bytes(toUpstream, toClient) {
        counted.bytes += toUpstream + toClient;
        inner?.bytes(toUpstream, toClient);
      },
      finish(outcome, failure) {
        inner?.finish(outcome, failure);
      },
    };
    return counted;
  }

  /**
   * Between phases 3 and 4: the answer judged by the project's rules (its body's first bytes
   * read into `answer.leftover` when a rule looks there). A `blocked` or `rate_limited` verdict
   * cools the exit down for the site and holds the answer for the retry loop.
   */
  async judge(judging: Judging, answer: AnswerHead): Promise<AttemptJudged<boolean> | undefined> {
    const { response } = answer;
    let body: string | undefined;
    if (judging.readsBody && needsBody(judging.rules, response.status, response.headers)) {
      const framing = responseFraming(response, this.plan.head.method);
      answer.leftover = await this.readBodyPrefix(answer.leftover, framing, judging.bodyBytes);
      body = bodyPrefixText(answer.leftover, framing, response.headers, judging.bodyBytes);
    }
    const judgement = judge(judging.rules, response.status, response.headers, body);
    const acted = applyJudgement(
      this.session,
      this.plan,
      judging,
      this.allocation.upstream,
      judgement,
    );
    if (acted === undefined) return undefined;
    this.verdict = acted;
    this.held = true;
    return {
      kind: "judged",
      finding: acted,
      status: response.status,
      deliver: () => this.deliver(answer),
      drop: () => this.drop(answer.response),
    };
  }

  /**
   * Reads the body's first bytes, up to `limit` of them (or its end), after what came with the
   * head; they go to the client later as if just read. Under the connect timeout, as the head.
   */
  async readBodyPrefix(
    leftover: Uint8Array,
    framing: ResponseFraming,
    limit: number,
  ): Promise<Uint8Array> {
    if (framing.kind === ResponseBody.none) return leftover;
    const want = framing.kind === ResponseBody.length
      ? Math.min(framing.lengthBytes, limit)
      : limit;
    const scanner = framing.kind === ResponseBody.chunked
      ? new ChunkedScanner({ lenient: true })
      : undefined;
    const ended = (bytes: Uint8Array) => {
      if (scanner === undefined) return false;
      try {
        return scanner.push(bytes) >= 0;
      } catch {
        return true;
      }
    };
    // Copied out of the pooled buffer, which the reads below reuse.
    const parts: Uint8Array[] = [leftover.slice()];
    let total = leftover.length;
    if (total >= want || ended(leftover)) return parts[0];
    const leg = this.leg!;
    const buffer = this.buffer!;
    leg.setDeadline(this.connectTimeoutMs);
    try {
      while (total < want) {
        let count: number | null;
        try {
          count = await leg.read(buffer);
        } catch (error) {
          throw new UpstreamIdleError("Upstream connection failed mid-answer", {
            timedOut: leg.timedOut,
            cause: error,
          });
        }
        if (count === null) break;
        const piece = buffer.slice(0, count);
        this.receivedBytes += count;
        parts.push(piece);
        total += count;
        if (ended(piece)) break;
      }
    } finally {
      leg.clearDeadline();
    }
    return concatParts(parts);
  }

  /** The held answer goes to the client after all (no other exit served). */
  async deliver(answer: AnswerHead): Promise<AttemptOutcome<boolean>> {
    // Attached again: cancelling the session and idle checks reach it while it is relayed.
    this.session.attach(this.leg);
    let relayed: { bytes: number } | undefined;
    try {
      this.begin(answer.response);
      // The blocked answer's bytes, for what its site cost.
      relayed = this.countRelayed();
      const clean = await this.relayAnswer(answer);
      return this.served(answer.response, clean);
    } catch (error) {
      return this.failed(error);
    } finally {
      this.tallyBlocked(this.sentBytes + (relayed?.bytes ?? 0), false);
      this.settle();
    }
  }

  tallyBlocked(bytes: number, retried: boolean): void {
    tallyBlocked(this.session, this.plan, this.allocation.upstream, this.verdict, bytes, retried);
  }

  /**
   * The held answer is not the client's: what was read of it is metered (the exit carried it),
   * the allocation ends as a success (the proxy worked; the site refused it), the leg closes.
   * The session may be on another attempt by now: its attached leg is left alone.
   */
  drop(response: ResponseHead): void {
    try {
      this.begin(response);
      const meter = this.meter;
      const received = this.receivedBytes;
      if (meter !== undefined && received > 0) safely(() => meter.bytes(0, received));
      const outcome: Outcome = { ok: true, latencyMs: this.latencyMs };
      this.hold.release(outcome);
      if (meter !== undefined) safely(() => meter.finish(outcome));
      this.tallyBlocked(this.sentBytes + received, true);
    } finally {
      this.keepIn = undefined;
      this.hold.settle();
      this.leg?.close();
      if (this.buffer) this.session.ctx.pool.give(this.buffer);
      this.buffer = undefined;
    }
  }

  /**
   * Before phase 1: the request head (in the session's scratch, left alone until the request
   * is sent, so a resend reuses it) and the pooled buffer the upstream's bytes are read into.
   */
  prepare(): Uint8Array {
    const upstream = this.allocation.upstream;
    const targetTls = this.plan.target.tls === true;
    this.targetTls = targetTls;
    // A direct attempt (no upstream) speaks to the target as a tunnel's would: origin form.
    this.tunnel = targetTls || upstream.scheme === "socks4" || upstream.scheme === "socks5" ||
      upstream.direct === true;
    // HTTP(S) proxies: a keep-alive connection of the pool when one is idle (SOCKS: a tunnel);
    // an intercepted request's: a TLS connection to its target through the same upstream.
    this.poolKey = targetTls
      ? `${upstreamPoolKey(upstream)} ${this.plan.target.authority}`
      : this.tunnel
      ? undefined
      : upstreamPoolKey(upstream);
    const requestHead = this.requestHead();
    this.plan.capture?.attempt(upstream, requestHead);
    this.buffer = this.session.ctx.pool.take();
    const { head, framing } = this.plan;
    this.staleResend = RETRYABLE_METHODS.has(head.method) && framing.kind === BodyKind.none;
    return requestHead;
  }

  /**
   * Whether a failure before any answer byte was a pooled leg the upstream had closed
   * meanwhile, for a request that may be sent once more: the leg is then dropped.
   */
  dropStaleLeg(reused: boolean, error: unknown): boolean {
    const session = this.session;
    const leg = this.leg!;
    const stale = reused && this.staleResend && !this.answerStarted && !leg.timedOut &&
      error instanceof UpstreamFirstByteError && !session.cancelled &&
      !session.client.closed;
    if (!stale) return false;
    this.staleResend = false;
    session.attach(undefined);
    leg.close();
    this.leg = undefined;
    session.ctx.logger.debug("Pooled upstream connection was closed; retrying on a new one", {
      error,
    });
    return true;
  }

  /** The head sent upstream, built in the session's scratch buffer. */
  requestHead(): Uint8Array {
    const tunnel = this.tunnel;
    const upstream = this.allocation.upstream;
    const proxyAuthorization = !tunnel && upstream.username !== null
      ? basicProxyAuthorization({ username: upstream.username, password: upstream.password ?? "" })
      : undefined;
    const { target, dialTarget } = this.plan;
    return encodeUpstreamRequestHead(this.plan.head, target, {
      form: tunnel ? "origin" : "absolute",
      // The address the guard checked, when the gateway resolves destinations (Host unchanged).
      uriAuthority: dialTarget === target
        ? undefined
        : formatAuthority(dialTarget.host, dialTarget.port),
      proxyAuthorization,
      keepAlive: !tunnel || this.targetTls,
      strip: this.session.strippedHeaders,
    }, this.session.scratch);
  }

  /** Phase 1: true when the leg came from the pool (at once), false once a new one is up. */
  takeOrDialLeg(): MaybePromise<boolean> {
    const poolKey = this.poolKey;
    this.phase = Phase.leg;
    // A request that cannot be sent again takes only a leg used lately (io/upstream-pool.ts).
    const pooled = poolKey === undefined
      ? undefined
      : this.staleResend
      ? this.session.ctx.upstreams.take(poolKey)
      : this.session.ctx.upstreams.take(poolKey, UPSTREAM_POOL_UNRETRIED_IDLE_MS);
    if (pooled === undefined) return this.dialLeg();
    this.useLeg(pooled);
    return true;
  }

  async dialLeg(): Promise<false> {
    const session = this.session;
    const ctx = session.ctx;
    const dialStartedMs = performance.now();
    const link = await dialUpstream({
      upstream: this.allocation.upstream,
      target: this.plan.dialTarget,
      tunnel: this.tunnel,
      timeoutMs: this.connectTimeoutMs,
      maxHeadBytes: ctx.limits.maxHeaderBytes,
      signal: session.signal,
      buffer: this.buffer,
    });
    ctx.metrics.upstreamConnected(performance.now() - dialStartedMs);
    if (!this.targetTls || ctx.mitm === undefined) {
      this.useLeg(link.leg);
      return false;
    }
    // Attached while the handshake runs, so cancelling the session reaches it.
    this.useLeg(link.leg);
    const tls = await startTargetTls({
      leg: link.leg,
      leftover: link.leftover,
      host: this.plan.target.host,
      timeoutMs: this.connectTimeoutMs,
      mitm: ctx.mitm,
    });
    this.useLeg(tls);
    return false;
  }

  /** The leg of this exchange; attached, so cancelling the session and idle checks reach it. */
  useLeg(leg: Leg): void {
    this.leg = leg;
    this.session.attach(leg);
  }

  /**
   * Phase 2: the head, and the body as the client frames it (which spends the request: it
   * cannot be sent again).
   */
  sendRequest(requestHead: Uint8Array): Promise<void> {
    const leg = this.leg!;
    const { framing } = this.plan;
    this.phase = Phase.request;
    this.sentBytes = requestHead.length;
    if (framing.kind === BodyKind.none) return writeUpstream(leg, requestHead);
    return this.sendRequestWithBody(leg, framing, requestHead);
  }

  async sendRequestWithBody(
    leg: Leg,
    framing: RequestFraming,
    requestHead: Uint8Array,
  ): Promise<void> {
    const session = this.session;
    const judging = this.plan.judging;
    const resend = (this.plan.turn ?? 1) > 1 && judging?.keptBody !== undefined;
    if (resend) {
      // The body a judged attempt sent, as the client sent it, read again ahead of what follows.
      const after = session.takePending();
      session.setPending(concatParts([...judging!.keptBody!, after]));
    } else if (this.plan.expectsContinue) await writeClient(session, CONTINUE_100);
    session.idleWatch = true;
    const keep = judging !== undefined && judging.keptBody !== undefined && !resend
      ? judging
      : undefined;
    this.sentBytes += await sendRequestBody(
      session,
      leg,
      framing,
      requestHead,
      this.buffer!,
      keep,
    );
  }

  /**
   * Phase 3: reads until a final (non-1xx) answer head; interim answers are dropped. Waiting
   * for it, the connect timeout bounds it, not the idle check.
   */
  async readAnswerHead(): Promise<AnswerHead> {
    const session = this.session;
    const leg = this.leg!;
    const buffer = this.buffer!;
    // The request went out whole.
    session.ctx.metrics.countBytes(this.sentBytes, 0);
    this.phase = Phase.answerHead;
    this.answerStarted = false;
    session.idleWatch = false;
    leg.setDeadline(this.connectTimeoutMs);
    const reader = responseHeadReader(session.ctx.limits.maxHeaderBytes);
    let chunk: Uint8Array = EMPTY_BYTES;
    for (;;) {
      if (chunk.length === 0) {
        let count: number | null;
        try {
          count = await leg.read(buffer);
        } catch (error) {
          throw new UpstreamFirstByteError(
            leg.timedOut ? "Upstream answer timed out" : "Upstream connection failed",
            { timedOut: leg.timedOut, cause: error },
          );
        }
        if (count === null) {
          throw new UpstreamFirstByteError(
            "Upstream proxy closed the connection without answering",
          );
        }
        if (count > 0) this.answerStarted = true;
        this.receivedBytes += count;
        chunk = buffer.subarray(0, count);
      }
      const parsed = reader.push(chunk);
      if (!parsed) {
        chunk = EMPTY_BYTES;
        continue;
      }
      chunk = chunk.subarray(parsed.consumed);
      if (parsed.head.status >= 100 && parsed.head.status < 200) {
        if (parsed.head.status === 101) {
          throw new UpstreamFirstByteError("Upstream switched protocols unasked");
        }
        continue;
      }
      leg.clearDeadline();
      // An HTTP proxy's 407 to a forwarded request is its refusal of our credential for it,
      // not the client's to answer: a failed attempt, as a 407 to CONNECT is.
      if (parsed.head.status === 407 && !this.tunnel) {
        throw new UpstreamHandshakeError(
          HandshakeProtocol.http,
          HandshakeFailure.authRequired,
          "Proxy answered 407 Proxy Authentication Required",
          { status: 407 },
        );
      }
      return { response: parsed.head, leftover: chunk };
    }
  }

  /** Phase 4: the upstream answered. */
  begin(response: ResponseHead): void {
    const ctx = this.session.ctx;
    this.allocation.commit();
    const latencyMs = Date.now() - this.startedMs;
    this.latencyMs = latencyMs;
    this.status = response.status;
    this.phase = Phase.begun;
    const hooks = ctx.hooks;
    const plan = this.plan;
    const capture = plan.capture;
    capture?.answered(response.headers);
    if (hooks === undefined) {
      if (capture !== undefined) this.#countSent(capture.meter(undefined));
      return;
    }
    const answering = this.leg!;
    const begun = safely(() =>
      hooks.begin({
        kind: "http",
        client: plan.client,
        target: plan.target,
        upstream: this.allocation.upstream,
        latencyMs,
        // The answer stops short; the client's connection closes after it (nothing answerable).
        interrupt: () => {
          this.interrupted = true;
          answering.close();
        },
      })
    );
    this.#countSent(capture === undefined ? begun : capture.meter(begun));
  }

  /** The transfer's meter, told the request bytes sent before it began. */
  #countSent(meter: TransferMeter | undefined): void {
    this.meter = meter;
    const sent = this.sentBytes;
    if (meter && sent > 0) safely(() => meter.bytes(sent, 0));
  }

  /**
   * Phase 5: the answer's head and body to the client. Resolves whether the body ended exactly
   * where its framing says.
   */
  relayAnswer(answer: AnswerHead): Promise<boolean> {
    const session = this.session;
    const head = this.plan.head;
    const { response } = answer;
    const bodyFraming = responseFraming(response, head.method);
    // An HTTP/1.0 client knows no chunked coding (RFC 9112 section 6.1): it gets the content
    // only, ended by closing its connection.
    const dechunk = bodyFraming.kind === ResponseBody.chunked && head.version === "1.0";
    this.keepAlive = this.plan.clientKeeps && bodyFraming.kind !== ResponseBody.close &&
      !dechunk;
    this.bodyFraming = bodyFraming;
    const listed = connectionTokens(response.headers);
    this.answerListed = listed;
    const responseHead = encodeClientResponseHead(
      response,
      head.version,
      this.keepAlive,
      session.scratch,
      dechunk,
      listed,
      this.plan.judging === undefined ? "" : judgedFields(this.plan, this.verdict, response.status),
    );
    session.idleWatch = true;
    this.phase = Phase.relay;
    return sendResponse(
      session,
      this.leg!,
      bodyFraming,
      responseHead,
      answer.leftover,
      this.buffer!,
      this.meter,
      dechunk,
    );
  }

  /** The answer was relayed: the outcome, and whether the leg goes back to the pool. */
  served(response: ResponseHead, clean: boolean): AttemptServed<boolean> {
    const session = this.session;
    const leg = this.leg!;
    // Back to the pool only when the answer ended exactly where its framing says, on a
    // persistent HTTP/1.1 connection the upstream did not ask to close.
    const reusable = clean && this.bodyFraming!.kind !== ResponseBody.close &&
      response.version === "1.1" && this.plan.head.version === "1.1" &&
      !this.answerListed.has("close") && !leg.closed &&
      !session.cancelled;
    this.keepIn = reusable ? this.poolKey : undefined;
    attemptServed(session, this.hold, this.meter, this.latencyMs, response.status);
    return { kind: "served", value: this.keepAlive, status: this.status };
  }

  /** A phase failed (or the interrupt action stopped the answer): what follows. */
  failed(caught: unknown): AttemptOutcome<boolean> {
    return attemptFailed(this.session, {
      head: this.plan.head,
      hold: this.hold,
      startedMs: this.startedMs,
      latencyMs: this.latencyMs,
      status: this.status,
      meter: this.meter,
      interrupted: this.interrupted,
      began: this.phase >= Phase.begun,
      relaying: this.phase >= Phase.relay,
      spent: this.plan.framing.kind !== BodyKind.none && this.phase >= Phase.request,
    }, caught);
  }

  /** Phase 6, on every path. */
  settle(): void {
    const session = this.session;
    // Every path above releases; this one is for a throw inside them.
    this.hold.settle();
    session.idleWatch = false;
    session.attach(undefined);
    const leg = this.leg;
    if (this.keepIn !== undefined && leg !== undefined) {
      session.ctx.upstreams.give(this.keepIn, leg);
    } else {
      leg?.close();
    }
    // Every read on the leg was awaited (closed, or pooled with a read of its own): the buffer
    // is free again.
    if (this.buffer) session.ctx.pool.give(this.buffer);
  }
}

async function writeUpstream(leg: Leg, bytes: Uint8Array): Promise<void> {
  try {
    await leg.write(bytes);
  } catch (error) {
    throw new UpstreamFirstByteError("Upstream proxy closed the connection before the request", {
      timedOut: leg.timedOut,
      cause: error,
    });
  }
}

/**
 * Sends the request head and its body as the client frames it, the head and the first body
 * bytes in one write. Bytes past the body's end are kept for the next request.
 */
async function sendRequestBody(
  session: HttpSession,
  leg: Leg,
  framing: RequestFraming,
  requestHead: Uint8Array,
  buffer: Uint8Array,
  keep?: Judging,
): Promise<number> {
  const scanner = framing.kind === BodyKind.chunked
    ? new ChunkedScanner({ maxTrailerBytes: session.ctx.limits.maxHeaderBytes })
    : undefined;
  let remaining = framing.lengthBytes;
  let sent = 0;
  let prefix: Uint8Array | undefined = requestHead;
  let chunk = session.takePending();
  for (;;) {
    if (chunk.length === 0) chunk = await readClient(session, buffer);
    let take: number;
    if (scanner) {
      let end: number;
      try {
        end = scanner.push(chunk);
      } catch (error) {
        throw new ClientBodyError(error instanceof ChunkedError ? error.message : "Bad body");
      }
      take = end < 0 ? chunk.length : end;
    } else {
      take = Math.min(chunk.length, remaining);
      remaining -= take;
    }
    const body = chunk.subarray(0, take);
    if (keep?.keptBody !== undefined) {
      keep.keptBytes += body.length;
      // Past the bound the body is not kept: the request is not sent again.
      if (keep.keptBytes > RETRY_BODY_MAX_BYTES) keep.keptBody = undefined;
      else keep.keptBody.push(body.slice());
    }
    let out = body;
    if (prefix) {
      out = joinHeadAndBody(prefix, body, session.scratch);
      prefix = undefined;
    }
    await writeUpstream(leg, out);
    sent += body.length;
    const finished = scanner ? scanner.done : remaining === 0;
    if (finished) {
      // A pipelined request's bytes: copied when they sit in the pooled buffer.
      const rest = chunk.subarray(take);
      if (rest.length > 0) session.setPending(rest.buffer === buffer.buffer ? rest.slice() : rest);
      return sent;
    }
    chunk = EMPTY_BYTES;
  }
}

/**
 * Writes the response head and relays its body; the head goes out with the first bytes (a
 * chunked body without its framing when `dechunk`). Resolves true when the body ended by its
 * framing with no byte past it (the connection can serve another request), false when it ended
 * with the upstream's close or with bytes left.
 */
async function sendResponse(
  session: HttpSession,
  leg: Leg,
  framing: ResponseFraming,
  responseHead: Uint8Array,
  leftover: Uint8Array,
  buffer: Uint8Array,
  meter: TransferMeter | undefined,
  dechunk: boolean,
): Promise<boolean> {
  const metrics = session.ctx.metrics;
  const scanner = framing.kind === ResponseBody.chunked
    ? new ChunkedScanner({ lenient: true, maxTrailerBytes: session.ctx.limits.maxHeaderBytes })
    : undefined;
  let remaining = framing.lengthBytes;
  let prefix: Uint8Array | undefined = responseHead;
  let chunk = leftover;
  let finished = framing.kind === ResponseBody.none;
  let surplus = finished ? chunk.length : 0;
  for (;;) {
    let body: Uint8Array = EMPTY_BYTES;
    if (!finished && chunk.length > 0) {
      if (framing.kind === ResponseBody.length) {
        const take = Math.min(chunk.length, remaining);
        remaining -= take;
        body = chunk.subarray(0, take);
        finished = remaining === 0;
        if (finished) surplus = chunk.length - take;
      } else if (scanner) {
        let end: number;
        try {
          if (dechunk) {
            const decoded = scanner.decode(chunk);
            end = decoded.end;
            body = chunk.subarray(0, decoded.dataBytes);
          } else {
            end = scanner.push(chunk);
            body = end < 0 ? chunk : chunk.subarray(0, end);
          }
        } catch (error) {
          throw new UpstreamIdleError(
            error instanceof Error ? error.message : "Bad chunked body from upstream",
          );
        }
        finished = end >= 0;
        if (finished) surplus = chunk.length - end;
      } else {
        body = chunk;
      }
    }
    let out = body;
    if (prefix) {
      out = joinHeadAndBody(prefix, body, session.scratch);
      prefix = undefined;
    }
    if (out.length > 0) {
      metrics.countBytes(0, out.length);
      if (meter) safely(() => meter.bytes(0, out.length));
      await writeClient(session, out);
    }
    if (finished) return surplus === 0;
    let count: number | null;
    try {
      count = await leg.read(buffer);
    } catch (error) {
      throw new UpstreamIdleError("Upstream connection failed mid-answer", {
        timedOut: session.idleFired,
        cause: error,
      });
    }
    if (count === null) {
      if (framing.kind === ResponseBody.close) return false;
      throw new UpstreamIdleError("Upstream closed the connection mid-answer");
    }
    chunk = buffer.subarray(0, count);
  }
}
