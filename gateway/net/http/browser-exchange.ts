/**
 * One attempt of a request inside an intercepted tunnel of a browser-grade project (`match_ua`,
 * `override_ua`): the browser-grade engine (tls/impersonation.ts) sends it to the tunnel's target
 * through the attempt's exit, with the request's persona's ClientHello and HTTP/2 settings, and
 * its answer comes back to the client over HTTP/1.1. The retry loop, admission, metering and the
 * Inspector are the forward exchange's (exchange.ts): only the wire towards the target differs.
 *
 * - Sent on: the client's fields but hop-by-hop ones, Host (the engine names the target), the
 *   framing (the engine frames the body it is streamed) and those admission consumed; under a
 *   persona that replaces the User-Agent, the client's User-Agent and client hints too, so the
 *   browser's own go out. The body streams from the client as it comes (never held whole).
 * - Back: the status and fields; the engine decodes a compressed body (as a browser does), so
 *   Content-Encoding and Content-Length go with it, and the body reaches an HTTP/1.1 client
 *   chunked (an HTTP/1.0 one: until close). An uncompressed answer with a length keeps it.
 * - Redirects are the client's to follow; cookies are the client's (the engine keeps none).
 * - A failure before the answer began goes to another exit as the forward exchange's do: the
 *   exit refused, failed its handshake or timed out; a target whose certificate fails is
 *   answered 502 naming why, on no other exit.
 * - A project's block rules judge the answer before it is sent (docs/blocking.md): its first
 *   bytes, decoded by the engine, are read when a rule looks there and sent before the rest; a
 *   blocked answer is held for the retry loop as the forward exchange holds one. A body is not
 *   kept here: a blocked request with one goes to no other exit.
 */
import { concatParts } from "../../../shared/proxy-protocol/bytes.ts";
import {
  HandshakeFailure,
  HandshakeProtocol,
  ImpersonationUnavailableError,
  TargetTlsError,
  UpstreamConnectError,
  UpstreamFirstByteError,
  UpstreamHandshakeError,
  UpstreamIdleError,
} from "../../../shared/proxy-protocol/errors.ts";
import type { Allocation } from "../../../shared/routing/contract.ts";
import { safely, type TransferMeter } from "../../base/transfer-hooks.ts";
import type { AttemptJudged, AttemptOutcome } from "../session/attempts.ts";
import { type Finding, judge, needsBody } from "../../../shared/blocking/judge.ts";
import type { ForwardPlan, Judging } from "./forward-plan.ts";
import { applyJudgement, judgedFields, tallyBlocked, tallyGood } from "./judging.ts";
import type { AttachedUpstream, HttpSession } from "../session/contract.ts";
import { ClientBodyError, ClientGoneError } from "../session/failures.ts";
import { connectTimeoutFor } from "../session/limits.ts";
import type { EngineResponse, Persona } from "../tls/impersonation.ts";
import { CONTINUE_100 } from "./answers.ts";
import {
  AllocationHold,
  attemptFailed,
  attemptServed,
  readClient,
  writeClient,
} from "./attempt-end.ts";
import { ChunkedError, ChunkedScanner } from "./chunked.ts";
import { connectionTokens, isHopByHop, latin1Encode } from "./heads.ts";
import { BodyKind, type HeaderField, NO_TOKENS } from "./parse.ts";

/** The client's fields the engine must not be handed: it writes its own. */
const ENGINE_WRITES: ReadonlySet<string> = new Set([
  "host",
  "content-length",
  "transfer-encoding",
  "trailer",
]);

/** Fields that name the client's browser: replaced with the persona's own User-Agent. */
function namesBrowser(lower: string): boolean {
  return lower === "user-agent" || lower.startsWith("sec-ch-ua");
}

/** Fields of the answer that stop here: the body comes decoded, framed anew. */
const ANSWER_REFRAMED: ReadonlySet<string> = new Set([
  "content-length",
  "transfer-encoding",
  "trailer",
  "content-encoding",
]);

/**
 * The engine's errors by name (impit's classes; matched by name so this module does not load
 * the engine): the ones that say the deadline passed.
 */
const TIMEOUTS: ReadonlySet<string> = new Set([
  "TimeoutError",
  "ConnectTimeout",
  "ReadTimeout",
  "WriteTimeout",
  "PoolTimeout",
]);

/** A request body's reads, each. */
const BODY_BUFFER_BYTES = 16 * 1024;

const CRLF = latin1Encode("\r\n");
const PREFIX_DECODER = new TextDecoder("utf-8", { fatal: false });
const LAST_CHUNK = latin1Encode("0\r\n\r\n");

/** Where an exchange is: each phase starts where the last ended. */
const Phase = { request: 0, begun: 1, relay: 2 } as const;
type Phase = (typeof Phase)[keyof typeof Phase];

/** One attempt through the engine. Releases the allocation exactly once, on every path. */
export function browserExchange(
  session: HttpSession,
  plan: ForwardPlan,
  allocation: Allocation,
): Promise<AttemptOutcome<boolean>> {
  return new BrowserExchange(session, plan, allocation).run();
}

/** The engine's transfer as the session's cancel and idle checks reach it. */
class EngineTransfer implements AttachedUpstream {
  readonly controller = new AbortController();
  lastActivityMs = Date.now();
  body: ReadableStreamDefaultReader<Uint8Array> | undefined;

  moved(): void {
    this.lastActivityMs = Date.now();
  }

  close(): void {
    this.controller.abort();
    this.body?.cancel().catch(() => {});
  }

  keepAlive(): void {
    // No socket of ours: the engine keeps its own connections.
  }
}

class BrowserExchange {
  readonly session: HttpSession;
  readonly plan: ForwardPlan;
  readonly persona: Persona;
  readonly allocation: Allocation;
  readonly startedMs = Date.now();
  readonly connectTimeoutMs: number;
  readonly transfer = new EngineTransfer();
  phase: Phase = Phase.request;
  /** The client's body was read (some of it or all): the request cannot go again. */
  spent = false;
  sentBytes = 0;
  latencyMs: number | undefined;
  status = 0;
  meter: TransferMeter | undefined;
  interrupted = false;
  readonly hold: AllocationHold;
  keepAlive = false;
  /** The connect timeout passed before the answer's head. */
  timedOut = false;
  /** The client's body is read into this (its own: the engine pulls while the answer relays). */
  #bodyBuffer: Uint8Array | undefined;
  /** Bytes written to the client (the head, the body as framed). */
  relayedBytes = 0;
  /** The answer's reader, once judging read its first bytes. */
  reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  /** The body's first chunks judging read, sent before the rest; `prefixEnded`: the whole body. */
  prefix: Uint8Array[] = [];
  prefixBytes = 0;
  prefixEnded = false;
  /** The verdict a block rule gave the answer (acted on), if any. */
  verdict: Finding | undefined;
  /** The answer is held for the retry loop: settled by its deliver or drop, not by run. */
  held = false;

  constructor(session: HttpSession, plan: ForwardPlan, allocation: Allocation) {
    this.session = session;
    this.plan = plan;
    this.persona = plan.persona!;
    this.allocation = allocation;
    this.hold = new AllocationHold(session, allocation);
    this.connectTimeoutMs = connectTimeoutFor(session.ctx.limits, plan.client);
  }

  async run(): Promise<AttemptOutcome<boolean>> {
    const session = this.session;
    session.attach(this.transfer);
    // A judged answer that goes on: its bytes count for what its site's good answers cost.
    let judgedGood = false;
    try {
      const response = await this.send();
      if (this.plan.judging !== undefined) {
        const judged = await this.judge(this.plan.judging, response);
        if (judged !== undefined) return judged;
        judgedGood = true;
      }
      return await this.answer(response);
    } catch (error) {
      return this.failed(error);
    } finally {
      if (judgedGood) {
        tallyGood(
          this.session,
          this.plan,
          this.allocation.upstream,
          this.sentBytes + this.relayedBytes,
        );
      }
      if (!this.held) this.settle();
    }
  }

  /** The answer to the client: the meter begins, the answer is relayed, the attempt served. */
  async answer(response: EngineResponse): Promise<AttemptOutcome<boolean>> {
    this.begin(response);
    const clean = await this.relay(response);
    return this.served(clean);
  }

  /**
   * The answer judged by the project's rules, its first bytes read (as the engine decoded them)
   * when a rule looks there; a blocked one is held for the retry loop.
   */
  async judge(
    judging: Judging,
    response: EngineResponse,
  ): Promise<AttemptJudged<boolean> | undefined> {
    const headers = fieldsOf(response.headers);
    let body: string | undefined;
    if (
      judging.readsBody && response.body !== null &&
      needsBody(judging.rules, response.status, headers)
    ) {
      body = await this.readPrefix(response.body, judging.bodyBytes);
    }
    const judgement = judge(judging.rules, response.status, headers, body);
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
      deliver: () => this.deliver(response),
      drop: () => this.drop(response),
    };
  }

  /** Reads the body's first `limit` bytes (or all of it); its text, lowered, for the markers. */
  async readPrefix(stream: ReadableStream<Uint8Array>, limit: number): Promise<string> {
    const reader = stream.getReader();
    this.reader = reader;
    this.transfer.body = reader;
    const timer = setTimeout(() => this.transfer.close(), this.connectTimeoutMs);
    try {
      while (this.prefixBytes < limit) {
        let read: ReadableStreamReadResult<Uint8Array>;
        try {
          read = await reader.read();
        } catch (error) {
          throw new UpstreamIdleError("Upstream connection failed mid-answer", { cause: error });
        }
        if (read.done) {
          this.prefixEnded = true;
          break;
        }
        this.prefix.push(read.value);
        this.prefixBytes += read.value.length;
        this.transfer.moved();
      }
    } finally {
      clearTimeout(timer);
    }
    return PREFIX_DECODER.decode(concatParts(this.prefix)).toLowerCase();
  }

  /** The held answer goes to the client after all (no other exit served). */
  async deliver(response: EngineResponse): Promise<AttemptOutcome<boolean>> {
    this.session.attach(this.transfer);
    try {
      return await this.answer(response);
    } catch (error) {
      return this.failed(error);
    } finally {
      tallyBlocked(
        this.session,
        this.plan,
        this.allocation.upstream,
        this.verdict,
        this.sentBytes + this.relayedBytes,
        false,
      );
      this.settle();
    }
  }

  /**
   * The held answer is not the client's: what was read of it is metered, the allocation ends as
   * a success (the site refused the exit; the proxy worked), the engine's transfer is let go. The
   * session may be on another attempt: its attached upstream is left alone.
   */
  drop(response: EngineResponse): void {
    try {
      this.begin(response);
      const meter = this.meter;
      const read = this.prefixBytes;
      if (meter !== undefined && read > 0) safely(() => meter.bytes(0, read));
      const outcome = { ok: true, latencyMs: this.latencyMs };
      this.hold.release(outcome);
      if (meter !== undefined) safely(() => meter.finish(outcome));
      tallyBlocked(
        this.session,
        this.plan,
        this.allocation.upstream,
        this.verdict,
        this.sentBytes + read,
        true,
      );
    } finally {
      this.hold.settle();
      this.transfer.close();
    }
  }

  /** The request through the engine, resolved once the answer's head came. */
  async send(): Promise<EngineResponse> {
    const { session, plan, persona, transfer } = this;
    const engine = session.ctx.mitm?.impersonation;
    if (engine === undefined) {
      throw new ImpersonationUnavailableError("This gateway intercepts no tunnel");
    }
    if (this.allocation.upstream.direct === true) {
      // The engine resolves names itself: what it connects to would not be what the guard saw.
      throw new UpstreamConnectError(
        "A direct request is not sent through the browser-grade engine: use plain interception",
      );
    }
    const client = await engine.client(this.allocation.upstream, persona.engine);
    const headers = this.requestHeaders();
    plan.capture?.attemptFields(this.allocation.upstream, headers);
    const body = plan.framing.kind === BodyKind.none ? undefined : this.bodyStream();
    // The connect timeout bounds the answer's head; the idle check takes over after.
    session.idleWatch = false;
    const timer = setTimeout(() => {
      this.timedOut = true;
      transfer.controller.abort();
    }, this.connectTimeoutMs);
    const signal = AbortSignal.any([session.signal, transfer.controller.signal]);
    engine.count(persona);
    try {
      return await client.fetch(`https://${plan.target.authority}${plan.target.path}`, {
        method: plan.head.method,
        headers,
        body,
        signal,
        redirect: "manual",
      });
    } catch (error) {
      throw this.sendFailure(error);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The fields sent on, as the engine takes them. */
  requestHeaders(): [string, string][] {
    const { head } = this.plan;
    const listed = connectionTokens(head.headers);
    const stripped = this.session.strippedHeaders;
    const replaceBrowser = this.persona.userAgent !== "keep";
    const fields: [string, string][] = [];
    let sent = 0;
    for (const field of head.headers) {
      const lower = field.lower;
      if (isHopByHop(lower, listed) || ENGINE_WRITES.has(lower)) continue;
      if (stripped?.has(lower) || lower === "expect") continue;
      if (replaceBrowser && namesBrowser(lower)) continue;
      fields.push([field.name, field.value]);
      sent += field.name.length + field.value.length + 4;
    }
    const userAgent = this.persona.userAgent;
    if (userAgent !== "keep" && userAgent !== "engine") {
      fields.push(["User-Agent", userAgent]);
      sent += userAgent.length + 14;
    }
    // What the request's head weighs as sent (the engine's own fields aside): for metering.
    this.sentBytes = head.method.length + this.plan.target.path.length + sent + 14;
    return fields;
  }

  /** The client's body as it comes, its framing taken off (the engine frames it anew). */
  bodyStream(): ReadableStream<Uint8Array> {
    const session = this.session;
    const { framing, expectsContinue } = this.plan;
    const scanner = framing.kind === BodyKind.chunked
      ? new ChunkedScanner({ maxTrailerBytes: session.ctx.limits.maxHeaderBytes })
      : undefined;
    let remaining = framing.lengthBytes;
    let asked = false;
    return new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        this.spent = true;
        if (expectsContinue && !asked) {
          asked = true;
          await writeClient(session, CONTINUE_100);
        }
        session.idleWatch = true;
        let chunk = session.takePending();
        if (chunk.length === 0) {
          chunk = await readClient(session, this.#bodyBuffer ??= new Uint8Array(BODY_BUFFER_BYTES));
        }
        let data: Uint8Array;
        let rest: Uint8Array;
        let done: boolean;
        if (scanner) {
          let decoded: { end: number; dataBytes: number };
          try {
            decoded = scanner.decode(chunk);
          } catch (error) {
            throw new ClientBodyError(error instanceof ChunkedError ? error.message : "Bad body");
          }
          data = chunk.slice(0, decoded.dataBytes);
          done = decoded.end >= 0;
          rest = done ? chunk.subarray(decoded.end) : chunk.subarray(chunk.length);
        } else {
          const take = Math.min(chunk.length, remaining);
          remaining -= take;
          data = chunk.slice(0, take);
          done = remaining === 0;
          rest = chunk.subarray(take);
        }
        // A pipelined request's bytes: copied, the buffer they sit in is read into again.
        if (rest.length > 0) session.setPending(rest.slice());
        this.sentBytes += data.length;
        this.transfer.moved();
        if (data.length > 0) controller.enqueue(data);
        if (done) controller.close();
      },
    });
  }

  /** A failure before the answer's head, in the catalogue's terms. */
  sendFailure(error: unknown): unknown {
    if (error instanceof ImpersonationUnavailableError) return error;
    if (error instanceof ClientGoneError || error instanceof ClientBodyError) return error;
    const name = error instanceof Error ? error.name : "";
    if (this.timedOut || TIMEOUTS.has(name)) {
      return new UpstreamFirstByteError("Upstream answer timed out", {
        timedOut: true,
        cause: error,
      });
    }
    // The target's certificate, refused by the engine (a connect error naming why).
    const text = error instanceof Error ? error.message : String(error);
    const certificate = /InvalidCertificate\(\s*(\w+)/.exec(text);
    if (certificate !== null) {
      // In rustls's words, as the plain mode's engine names them (UnknownIssuer, Expired...).
      return new TargetTlsError(certificate[1], { cause: error });
    }
    if (name === "ProxyAuthRequired") {
      return new UpstreamHandshakeError(
        HandshakeProtocol.http,
        HandshakeFailure.authRequired,
        "Proxy answered 407 Proxy Authentication Required",
        { status: 407, cause: error },
      );
    }
    if (name === "ProxyTunnelError") {
      const status = (error as { status?: number }).status;
      return new UpstreamHandshakeError(
        HandshakeProtocol.http,
        status === 407 ? HandshakeFailure.authRequired : HandshakeFailure.status,
        status === undefined ? "Proxy refused the tunnel" : `Proxy answered ${status}`,
        { status, cause: error },
      );
    }
    if (name === "ProxyError" || name === "ConnectError") {
      return new UpstreamConnectError("Connection to upstream proxy failed", { cause: error });
    }
    return new UpstreamFirstByteError("Upstream connection failed", { cause: error });
  }

  /** The target answered: the allocation commits and the meter starts. */
  begin(response: EngineResponse): void {
    const ctx = this.session.ctx;
    this.allocation.commit();
    const latencyMs = Date.now() - this.startedMs;
    this.latencyMs = latencyMs;
    this.status = response.status;
    this.phase = Phase.begun;
    this.transfer.moved();
    const plan = this.plan;
    const capture = plan.capture;
    capture?.answered(fieldsOf(response.headers));
    ctx.metrics.countBytes(this.sentBytes, 0);
    const hooks = ctx.hooks;
    let begun: TransferMeter | undefined;
    if (hooks !== undefined) {
      begun = safely(() =>
        hooks.begin({
          kind: "http",
          client: plan.client,
          target: plan.target,
          upstream: this.allocation.upstream,
          latencyMs,
          interrupt: () => {
            this.interrupted = true;
            this.transfer.close();
            this.session.client.close();
          },
        })
      );
    }
    const meter = capture === undefined ? begun : capture.meter(begun);
    this.meter = meter;
    if (meter && this.sentBytes > 0) safely(() => meter.bytes(this.sentBytes, 0));
  }

  /** The answer to the client: its head, then its body as the engine streams it. */
  async relay(response: EngineResponse): Promise<boolean> {
    const session = this.session;
    const head = this.plan.head;
    const status = response.status;
    const bodiless = head.method === "HEAD" || status === 204 || status === 304 ||
      (status >= 100 && status < 200);
    const encoded = response.headers.has("content-encoding");
    const lengthText = response.headers.get("content-length");
    const length = !encoded && lengthText !== null && /^\d+$/.test(lengthText)
      ? Number(lengthText)
      : undefined;
    // How the body goes to the client: as long as it is, chunked, or until the close.
    const chunked = !bodiless && length === undefined && head.version === "1.1";
    const untilClose = !bodiless && length === undefined && !chunked;
    this.keepAlive = this.plan.clientKeeps && !untilClose;
    let text = `HTTP/1.1 ${status}${response.statusText ? ` ${response.statusText}` : ""}\r\n`;
    for (const [name, value] of response.headers) {
      if (ANSWER_REFRAMED.has(name) || isHopByHop(name, NO_TOKENS)) continue;
      text += `${name}: ${value}\r\n`;
    }
    if (!bodiless) {
      if (length !== undefined) text += `content-length: ${length}\r\n`;
      else if (chunked) text += "transfer-encoding: chunked\r\n";
    } else if (head.method === "HEAD" && length !== undefined) {
      text += `content-length: ${length}\r\n`;
    }
    if (this.plan.judging !== undefined) text += judgedFields(this.plan, this.verdict, status);
    if (!this.keepAlive) text += "connection: close\r\n";
    else if (head.version === "1.0") text += "connection: keep-alive\r\n";
    text += "\r\n";
    session.idleWatch = true;
    this.phase = Phase.relay;
    await this.toClient(latin1Encode(text, session.scratch));
    if (bodiless || response.body === null) {
      if (this.reader !== undefined) await this.reader.cancel().catch(() => {});
      else await response.body?.cancel().catch(() => {});
      return true;
    }
    const reader = this.reader ?? response.body.getReader();
    this.transfer.body = reader;
    let relayed = 0;
    const send = async (chunk: Uint8Array) => {
      relayed += chunk.length;
      if (chunked) {
        await this.toClient(latin1Encode(`${chunk.length.toString(16)}\r\n`));
        await this.toClient(chunk);
        await this.toClient(CRLF);
      } else {
        await this.toClient(chunk);
      }
    };
    // What judging read first, then the rest.
    const prefix = this.prefix;
    this.prefix = [];
    for (const chunk of prefix) if (chunk.length > 0) await send(chunk);
    while (!this.prefixEnded) {
      let read: ReadableStreamReadResult<Uint8Array>;
      try {
        read = await reader.read();
      } catch (error) {
        throw new UpstreamIdleError("Upstream connection failed mid-answer", {
          timedOut: session.idleFired,
          cause: error,
        });
      }
      if (read.done) break;
      const chunk = read.value;
      if (chunk.length === 0) continue;
      this.transfer.moved();
      await send(chunk);
    }
    if (chunked) await this.toClient(LAST_CHUNK);
    // An answer shorter than its length leaves the client waiting: its connection closes.
    return length === undefined || relayed === length;
  }

  async toClient(bytes: Uint8Array): Promise<void> {
    this.relayedBytes += bytes.length;
    this.session.ctx.metrics.countBytes(0, bytes.length);
    const meter = this.meter;
    if (meter) safely(() => meter.bytes(0, bytes.length));
    await writeClient(this.session, bytes);
  }

  served(clean: boolean): AttemptOutcome<boolean> {
    attemptServed(this.session, this.hold, this.meter, this.latencyMs, this.status);
    return { kind: "served", value: this.keepAlive && clean, status: this.status };
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
      spent: this.spent,
    }, caught);
  }

  settle(): void {
    const session = this.session;
    this.hold.settle();
    session.idleWatch = false;
    session.attach(undefined);
    // A body not read to its end (a failure, the client gone): its stream is let go.
    this.transfer.body?.cancel().catch(() => {});
  }
}

/** The engine's answer fields as the capture takes them. */
function fieldsOf(headers: Headers): HeaderField[] {
  const fields: HeaderField[] = [];
  for (const [name, value] of headers) fields.push({ name, lower: name, value });
  return fields;
}
