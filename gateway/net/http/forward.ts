/**
 * Plain HTTP through the gateway: an absolute-URI request from the client goes to one upstream
 * (absolute form with the upstream's credential for http/https proxies, origin form inside a
 * tunnel for SOCKS ones), its answer comes back with hop-by-hop fields stripped and the body
 * relayed byte for byte (Content-Length, chunked, or until close). Seed 001 section 7.2: a GET
 * or HEAD without a body is tried on distinct proxies while nothing reached the client, one
 * and then as many more as its project's max_retries (gateway/net/session/limits.ts); other methods are
 * tried once.
 *
 * Connections to http and https proxies are kept between requests (gateway/net/io/upstream-pool.ts):
 * one goes back to the pool after a cleanly framed HTTP/1.1 answer read to its end. A GET or
 * HEAD without a body whose pooled connection closes before any answer byte is sent once more
 * on a new connection to the same proxy (not counted as a retry: the proxy did nothing wrong).
 *
 * `Expect: 100-continue` is answered by the gateway itself once an upstream is connected (and
 * not sent on); any other expectation gets 417.
 */
import { EMPTY_BYTES } from "../../../shared/proxy-protocol/bytes.ts";
import { basicProxyAuthorization } from "../../../shared/proxy-protocol/http-request.ts";
import {
  UpstreamFirstByteError,
  UpstreamIdleError,
} from "../../../shared/proxy-protocol/errors.ts";
import {
  type Allocation,
  type Client,
  FailurePhase,
  isRefusal,
  NOTHING_TRIED,
  type Outcome,
} from "../../core/contract.ts";
import { CONTINUE_100 } from "./answers.ts";
import { ChunkedError, ChunkedScanner } from "./chunked.ts";
import {
  ClientBodyError,
  ClientGoneError,
  describeFailure,
  type Failure,
  failureNote,
} from "../session/failures.ts";
import {
  connectionTokens,
  encodeClientResponseHead,
  encodeUpstreamRequestHead,
  joinHeadAndBody,
} from "./heads.ts";
import {
  type FailedAttempt,
  type FailureNote,
  reportFailedAttempts,
  safely,
  type TransferMeter,
} from "../session/hooks.ts";
import {
  BodyKind,
  clientKeepsAlive,
  type ForwardTarget,
  HeadError,
  headerValue,
  parseAbsoluteTarget,
  type RequestFraming,
  requestFraming,
  type RequestHead,
} from "./parse.ts";
import {
  ResponseBody,
  type ResponseFraming,
  responseFraming,
  type ResponseHead,
  responseHeadReader,
} from "./response.ts";
import type { Leg } from "../io/leg.ts";
import { RequestKind, RequestOutcome } from "../process/metrics.ts";
import { attemptsFor, connectTimeoutFor } from "../session/limits.ts";
import type { ClientSession } from "../session/client-session.ts";
import { dialUpstream } from "../io/dial.ts";
import { upstreamPoolKey } from "../io/upstream-pool.ts";

const RETRYABLE_METHODS = new Set(["GET", "HEAD"]);

/** The answer recorded for a request that ended with nothing more to tell its client. */
const NOTHING_ANSWERED = { status: 0, proxyStatus: "" };

/** Handles one forward request; resolves whether the client's connection serves another. */
export async function handleForward(session: ClientSession, head: RequestHead): Promise<boolean> {
  const kind = RequestKind.http;
  const method = head.method;
  let target: ForwardTarget;
  let framing: RequestFraming;
  try {
    target = parseAbsoluteTarget(head.target);
    framing = requestFraming(head);
  } catch (error) {
    const status = error instanceof HeadError ? error.status : 400;
    const reason = error instanceof Error ? error.message : "Bad request";
    await session.answer(
      { status, proxyStatus: "http_request_error", reason },
      { keepAlive: false, kind, method },
    );
    return false;
  }
  const hasBody = framing.kind !== BodyKind.none;
  const expect = headerValue(head, "expect");
  const expectsContinue = expect !== null && expect.trim().toLowerCase() === "100-continue";
  if (expect !== null && !expectsContinue) {
    await session.answer(
      { status: 417, proxyStatus: "http_request_error", reason: "Unsupported expectation" },
      { keepAlive: false, kind, method },
    );
    return false;
  }
  // A refusal leaves the body unread: the connection serves another request only without one.
  const clientKeeps = clientKeepsAlive(head);
  const keepAfterRefusal = clientKeeps && !hasBody;
  let client = session.admit(head, kind, keepAfterRefusal, target);
  if (client instanceof Promise) client = await client;
  if (client === undefined) return keepAfterRefusal;
  const ctx = session.ctx;

  const attempts = RETRYABLE_METHODS.has(method) && !hasBody ? attemptsFor(client) : 1;
  // Built only for a second attempt: most requests are served by their first.
  let exclude: Set<string> | undefined;
  let failure: Failure | undefined;
  // The attempts that failed before a transfer began, told to metering once the request ends
  // (built on failure only).
  let failed: FailedAttempt[] | undefined;
  for (let attempt = 0; attempt < attempts; attempt++) {
    let acquired = ctx.router.acquire(client, target, exclude ?? NOTHING_TRIED);
    if (acquired instanceof Promise) acquired = await acquired;
    if (isRefusal(acquired)) {
      if (failure) break;
      await session.refuse(acquired, { keepAlive: keepAfterRefusal, kind, method }, client, target);
      return keepAfterRefusal;
    }
    if (attempt + 1 < attempts) (exclude ??= new Set()).add(acquired.upstream.proxyId);
    if (attempt > 0) ctx.metrics.retries++;
    const result = await exchange(session, {
      head,
      clientKeeps,
      target,
      framing,
      client,
      allocation: acquired,
      expectsContinue,
    });
    if (result.ok) {
      // Only after a failed attempt: a request served at once builds nothing here.
      if (failed !== undefined) {
        reportFailedAttempts(ctx.hooks, failed, { status: result.status, proxyStatus: "" });
      }
      return result.keepAlive;
    }
    if (result.interrupted) {
      reportFailedAttempts(ctx.hooks, failed, { status: result.clientStatus, proxyStatus: "" });
      ctx.metrics.request(kind, RequestOutcome.broken, 0);
      return false;
    }
    failure = result.failure;
    if (failure.phase !== FailurePhase.client) ctx.metrics.upstreamFailure(failure.phase);
    // The message, not the error: it is scrubbed of the proxy's credentials and URL queries.
    const fields = { kind: result.note.kind, phase: failure.phase, failure: result.note.message };
    if (failure.internal) ctx.logger.error("Forward attempt failed", fields);
    else ctx.logger.debug("Forward attempt failed", fields);
    if (!result.began) {
      (failed ??= []).push({
        client,
        target,
        upstream: acquired.upstream,
        elapsedMs: result.elapsedMs,
        note: result.note,
      });
    }
    if (!result.answerable) {
      // A transfer that began told its own meter; the client got the upstream's answer.
      reportFailedAttempts(
        ctx.hooks,
        failed,
        result.began ? { status: result.clientStatus, proxyStatus: "" } : NOTHING_ANSWERED,
      );
      ctx.metrics.request(kind, RequestOutcome.broken, 0);
      return false;
    }
    // Retrying waits out another deadline: a proxy that timed out answering is not retried.
    if (!result.retryable || session.signal.aborted) break;
  }
  const answer = failure!.answer;
  reportFailedAttempts(ctx.hooks, failed, answer);
  await session.answer(answer, {
    keepAlive: keepAfterRefusal && failure!.phase !== FailurePhase.client,
    kind,
    method,
  });
  return keepAfterRefusal && !session.client.closed;
}

interface ExchangeRequest {
  head: RequestHead;
  /** The client asked to keep its connection (its Connection fields and version). */
  clientKeeps: boolean;
  target: ForwardTarget;
  framing: RequestFraming;
  client: Client;
  allocation: Allocation;
  expectsContinue: boolean;
}

type ExchangeResult =
  | { ok: true; keepAlive: boolean; /** The upstream's status, relayed. */ status: number }
  | {
    ok: false;
    failure: Failure;
    /** The failure as the failure log keeps it (its answer filled in once the request ends). */
    note: FailureNote;
    /** Nothing final reached the client: an answer of ours can still be sent. */
    answerable: boolean;
    /** And nothing of the request was consumed, so another proxy may get it. */
    retryable: boolean;
    /** The transfer began (the upstream answered): its meter was told of the failure. */
    began: boolean;
    /** The upstream's status the client got, once the transfer began (else 0). */
    clientStatus: number;
    /** From the attempt's start to its failure. */
    elapsedMs: number;
    /** Stopped by the interrupt traffic action (the upstream did not fail). */
    interrupted?: boolean;
  };

/** One attempt through one upstream. Releases the allocation exactly once, on every path. */
async function exchange(session: ClientSession, request: ExchangeRequest): Promise<ExchangeResult> {
  const ctx = session.ctx;
  const { head, target, framing, allocation } = request;
  const upstream = allocation.upstream;
  const connectTimeoutMs = connectTimeoutFor(ctx.limits, request.client);
  const startedMs = Date.now();
  let released = false;
  const release = (outcome: Outcome) => {
    if (released) return;
    released = true;
    try {
      allocation.release(outcome);
    } catch (error) {
      ctx.logger.error("Allocation release failed", { error });
    }
  };
  let meter: TransferMeter | undefined;
  let leg: Leg | undefined;
  let buffer: Uint8Array | undefined;
  let answered = false;
  /** Stopped by the interrupt traffic action: policy, not the upstream's failure. */
  let interrupted = false;
  let bodyRead = false;
  let latencyMs: number | undefined;
  /** The upstream's status, once it answered: what the client is relayed. */
  let status = 0;
  /** The pool the leg goes back to once the answer ended cleanly (undefined: it closes). */
  let keepIn: string | undefined;
  try {
    const tunnel = upstream.scheme === "socks4" || upstream.scheme === "socks5";
    // HTTP(S) proxies: a keep-alive connection of the pool when one is idle (SOCKS: a tunnel).
    const poolKey = tunnel ? undefined : upstreamPoolKey(upstream);
    const proxyAuthorization = !tunnel && upstream.username !== null
      ? basicProxyAuthorization({ username: upstream.username, password: upstream.password ?? "" })
      : undefined;
    // In the session's scratch, left alone until the request is sent (a stale retry resends it).
    const requestHead = encodeUpstreamRequestHead(head, target, {
      form: tunnel ? "origin" : "absolute",
      proxyAuthorization,
      keepAlive: !tunnel,
    }, session.scratch);
    buffer = session.pool.take();
    // A pooled leg the upstream closed meanwhile fails before any answer byte: a GET or HEAD
    // without a body then goes once more, on a fresh connection; nothing else is sent twice.
    let staleRetry = RETRYABLE_METHODS.has(head.method) && framing.kind === BodyKind.none;
    let sent = 0;
    let response: ResponseHead;
    let leftover: Uint8Array;
    for (;;) {
      let reused = false;
      leg = poolKey !== undefined ? ctx.upstreams.take(poolKey) : undefined;
      if (leg !== undefined) {
        reused = true;
      } else {
        const dialStartedMs = performance.now();
        const link = await dialUpstream({
          upstream,
          target,
          tunnel,
          timeoutMs: connectTimeoutMs,
          maxHeadBytes: ctx.limits.maxHeaderBytes,
          signal: session.signal,
          buffer,
        });
        ctx.metrics.upstreamConnected(performance.now() - dialStartedMs);
        leg = link.leg;
      }
      session.attach(leg);
      const progress = { received: false };
      try {
        sent = requestHead.length;
        if (framing.kind === BodyKind.none) {
          await writeUpstream(leg, requestHead);
        } else {
          if (request.expectsContinue) await writeClient(session, CONTINUE_100);
          bodyRead = true;
          session.idleWatch = true;
          sent += await sendRequestBody(session, leg, framing, requestHead, buffer);
        }
        ctx.metrics.countBytes(sent, 0);

        // Waiting for the answer: the connect timeout bounds it, not the idle check.
        session.idleWatch = false;
        leg.setDeadline(connectTimeoutMs);
        ({ response, leftover } = await readResponseHead(
          leg,
          buffer,
          ctx.limits.maxHeaderBytes,
          progress,
        ));
        leg.clearDeadline();
        break;
      } catch (error) {
        const stale = reused && staleRetry && !progress.received && !leg.timedOut &&
          error instanceof UpstreamFirstByteError && !session.signal.aborted &&
          !session.client.closed;
        if (!stale) throw error;
        staleRetry = false;
        session.attach(undefined);
        leg.close();
        leg = undefined;
        ctx.logger.debug("Pooled upstream connection was closed; retrying on a new one", {
          error,
        });
      }
    }
    allocation.commit();
    latencyMs = Date.now() - startedMs;
    status = response.status;
    const answering = leg;
    meter = safely(() =>
      ctx.hooks?.begin({
        kind: "http",
        client: request.client,
        target,
        upstream,
        latencyMs: latencyMs!,
        // The answer stops short; the client's connection closes after it (not answerable).
        interrupt: () => {
          interrupted = true;
          answering.close();
        },
      })
    );
    if (meter && sent > 0) safely(() => meter!.bytes(sent, 0));

    const bodyFraming = responseFraming(response, head.method);
    // An HTTP/1.0 client knows no chunked coding (RFC 9112 section 6.1): it gets the content
    // only, ended by closing its connection.
    const dechunk = bodyFraming.kind === ResponseBody.chunked && head.version === "1.0";
    const keepAlive = request.clientKeeps && bodyFraming.kind !== ResponseBody.close && !dechunk;
    const responseHead = encodeClientResponseHead(
      response,
      head.version,
      keepAlive,
      session.scratch,
      dechunk,
    );
    session.idleWatch = true;
    answered = true;
    const clean = await sendResponse(
      session,
      leg,
      bodyFraming,
      responseHead,
      leftover,
      buffer,
      meter,
      dechunk,
    );
    // Back to the pool only when the answer ended exactly where its framing says, on a
    // persistent HTTP/1.1 connection the upstream did not ask to close.
    const reusable = clean && bodyFraming.kind !== ResponseBody.close &&
      response.version === "1.1" && head.version === "1.1" &&
      !connectionTokens(response.headers).has("close") && !leg.closed &&
      !session.signal.aborted;
    keepIn = reusable ? poolKey : undefined;
    const outcome: Outcome = { ok: true, latencyMs };
    release(outcome);
    if (meter) safely(() => meter!.finish(outcome));
    ctx.metrics.request(RequestKind.http, RequestOutcome.relayed, response.status);
    return { ok: true, keepAlive, status };
  } catch (caught) {
    let error = caught;
    if (session.idleFired && answered) {
      error = new UpstreamIdleError("Transfer idle", { timedOut: true, cause: caught });
    }
    const failure = describeFailure(error);
    const outcome: Outcome = interrupted
      ? { ok: true, latencyMs }
      : { ok: false, phase: failure.phase, latencyMs };
    release(outcome);
    const began = latencyMs !== undefined;
    // Once the upstream answered, the client got its status; before, the request's final
    // answer is filled in by the caller.
    const note = failureNote(
      failure,
      error,
      { protocol: RequestKind.http, line: `${head.method} ${head.target}`, upstream },
      began ? { status, proxyStatus: "" } : NOTHING_ANSWERED,
    );
    if (meter) safely(() => meter!.finish(outcome, interrupted ? undefined : note));
    const elapsedMs = Date.now() - startedMs;
    if (interrupted) {
      return {
        ok: false,
        failure,
        note,
        answerable: false,
        retryable: false,
        began,
        clientStatus: status,
        elapsedMs,
        interrupted,
      };
    }
    const answerable = !answered && !session.client.closed;
    const retryable = answerable && !bodyRead &&
      !(failure.phase === FailurePhase.firstByte && failure.timedOut) &&
      failure.phase !== FailurePhase.client;
    return {
      ok: false,
      failure,
      note,
      answerable,
      retryable,
      began,
      clientStatus: status,
      elapsedMs,
    };
  } finally {
    // Every path: a failure above may skip the release only if it threw inside release.
    if (!released) release({ ok: false, phase: FailurePhase.client });
    session.idleWatch = false;
    session.attach(undefined);
    if (keepIn !== undefined && leg !== undefined) {
      session.ctx.upstreams.give(keepIn, leg);
    } else {
      leg?.close();
    }
    // Every read on the leg was awaited (closed, or pooled with a read of its own): the buffer
    // is free again.
    if (buffer) session.pool.give(buffer);
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

async function writeClient(session: ClientSession, bytes: Uint8Array): Promise<void> {
  try {
    await session.client.write(bytes);
  } catch (error) {
    throw new ClientGoneError("Client closed the connection", { cause: error });
  }
}

async function readClient(session: ClientSession, buffer: Uint8Array): Promise<Uint8Array> {
  let count: number | null;
  try {
    count = await session.client.read(buffer);
  } catch (error) {
    throw new ClientGoneError("Client connection failed mid-request", { cause: error });
  }
  if (count === null) throw new ClientGoneError("Client closed the connection mid-request");
  return buffer.subarray(0, count);
}

/**
 * Sends the request head and its body as the client frames it, the head and the first body
 * bytes in one write. Bytes past the body's end are kept for the next request.
 */
async function sendRequestBody(
  session: ClientSession,
  leg: Leg,
  framing: RequestFraming,
  requestHead: Uint8Array,
  buffer: Uint8Array,
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

/** Reads until a final (non-1xx) response head; interim answers are dropped. */
async function readResponseHead(
  leg: Leg,
  buffer: Uint8Array,
  maxHeadBytes: number,
  progress: { received: boolean },
): Promise<{ response: ResponseHead; leftover: Uint8Array }> {
  const reader = responseHeadReader(maxHeadBytes);
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
        throw new UpstreamFirstByteError("Upstream proxy closed the connection without answering");
      }
      if (count > 0) progress.received = true;
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
    return { response: parsed.head, leftover: chunk };
  }
}

/**
 * Writes the response head and relays its body; the head goes out with the first bytes (a
 * chunked body without its framing when `dechunk`). Resolves true when the body ended by its
 * framing with no byte past it (the connection can serve another request), false when it ended
 * with the upstream's close or with bytes left.
 */
async function sendResponse(
  session: ClientSession,
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
