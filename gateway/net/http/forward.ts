/**
 * Plain HTTP through the gateway: an absolute-URI request from the client goes to one upstream
 * (absolute form with the upstream's credential for http/https proxies, origin form inside a
 * tunnel for SOCKS ones), its answer comes back with hop-by-hop fields stripped and the body
 * relayed byte for byte (Content-Length, chunked, or until close). Seed 001 section 7.2: a GET
 * or HEAD without a body is tried on distinct proxies while nothing reached the client, one
 * and then as many more as its project's max_retries (gateway/net/session/limits.ts); other
 * methods are tried once. The retry loop is the request path's one (session/attempts.ts); each
 * attempt is an exchange (exchange.ts).
 *
 * Connections to http and https proxies are kept between requests (gateway/net/io/upstream-pool.ts):
 * one goes back to the pool after a cleanly framed HTTP/1.1 answer read to its end.
 *
 * `Expect: 100-continue` is answered by the gateway itself once an upstream is connected (and
 * not sent on); any other expectation gets 417.
 */
import { rulesForHost } from "../../../shared/blocking/judge.ts";
import type { CompiledBlocking } from "../../../shared/blocking/rules.ts";
import { siteOf } from "../../../shared/blocking/domain.ts";
import { FailurePhase } from "../../../shared/routing/contract.ts";
import { RequestKind, RequestOutcome } from "../../base/metrics.ts";
import { type Tried, tryUpstreams } from "../session/attempts.ts";
import { safely } from "../../base/transfer-hooks.ts";
import { CaptureDraft } from "../tls/capture.ts";
import type { HttpSession, InnerTunnel } from "../session/contract.ts";
import { attemptsFor } from "../session/limits.ts";
import { exchange, RETRYABLE_METHODS } from "./exchange.ts";
import type { ForwardPlan } from "./forward-plan.ts";
import { browserExchange } from "./browser-exchange.ts";
import { personaFor } from "../tls/impersonation.ts";
import {
  BodyKind,
  clientKeepsAlive,
  type ForwardTarget,
  HeadError,
  headerValue,
  parseAbsoluteTarget,
  parseInnerTarget,
  type RequestFraming,
  requestFraming,
  type RequestHead,
} from "./parse.ts";

/** Handles one forward request; resolves whether the client's connection serves another. */
export function handleForward(session: HttpSession, head: RequestHead): Promise<boolean> {
  return readAndForward(session, head, () => parseAbsoluteTarget(head.target));
}

/**
 * A request inside an intercepted tunnel (gateway/net/tls/intercept.ts): it goes to the tunnel's
 * target over the gateway's own TLS, and is otherwise a forward request (admitted with the
 * tunnel's credentials, routed, retried, metered, limited).
 */
export function handleInner(
  session: HttpSession,
  head: RequestHead,
  tunnel: InnerTunnel,
): Promise<boolean> {
  return readAndForward(session, head, () => {
    if (head.method === "CONNECT") throw new HeadError(400, "CONNECT inside an intercepted tunnel");
    return parseInnerTarget(head.target, tunnel.target, tunnel.authority);
  });
}

/** Reads the target and framing (a malformed one: 400 and the connection closes), then forwards. */
async function readAndForward(
  session: HttpSession,
  head: RequestHead,
  readTarget: () => ForwardTarget,
): Promise<boolean> {
  let target: ForwardTarget;
  let framing: RequestFraming;
  try {
    target = readTarget();
    framing = requestFraming(head);
  } catch (error) {
    const status = error instanceof HeadError ? error.status : 400;
    const reason = error instanceof Error ? error.message : "Bad request";
    await session.answer(
      { status, proxyStatus: "http_request_error", reason },
      { keepAlive: false, kind: RequestKind.http, method: head.method },
    );
    return false;
  }
  return forwardRequest(session, head, target, framing);
}

/** A request whose target and framing read: admission, then the attempts. */
async function forwardRequest(
  session: HttpSession,
  head: RequestHead,
  target: ForwardTarget,
  framing: RequestFraming,
): Promise<boolean> {
  const kind = RequestKind.http;
  const method = head.method;
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

  const plan: ForwardPlan = {
    client,
    target,
    dialTarget: session.dialTarget ?? target,
    attempts: RETRYABLE_METHODS.has(method) && !hasBody ? attemptsFor(client) : 1,
    label: "Forward",
    // Set before each attempt; here so the plan keeps one shape.
    turn: 0,
    head,
    framing,
    clientKeeps,
    expectsContinue,
  };
  const inner = session.inner;
  const hooks = session.ctx.hooks;
  if (inner !== undefined && hooks?.capturing?.(client.projectId) === true) {
    plan.capture = new CaptureDraft(head);
  }
  const interception = client.interception;
  if (inner !== undefined && interception !== undefined && interception.mode !== "plain") {
    plan.persona = personaFor(
      interception.mode,
      interception.browser,
      headerValue(head, "user-agent"),
    );
  }
  if (client.blocking !== undefined) {
    judgeAnswers(plan, client.blocking, hasBody);
  }
  const tried = await tryUpstreams(
    session,
    plan,
    plan.persona === undefined ? exchange : browserExchange,
  );
  if (plan.capture !== undefined) captured(session, plan, inner!, answerOf(tried));
  switch (tried.kind) {
    case "served":
      return tried.value;
    case "refused":
      await session.refuse(
        tried.refusal,
        { keepAlive: keepAfterRefusal, kind, method },
        client,
        target,
      );
      return keepAfterRefusal;
    case "ended":
      session.ctx.metrics.request(kind, RequestOutcome.broken, 0);
      return false;
    case "failed":
      await session.answer(tried.failure.answer, {
        keepAlive: keepAfterRefusal && tried.failure.phase !== FailurePhase.client,
        kind,
        method,
      });
      return keepAfterRefusal && !session.client.closed;
  }
}

/**
 * The plan's judging, when a rule of the project applies to the target's host: its answers are
 * judged, and one blocked goes again through another exit while the project's retry budget lasts
 * (a method it retries; a body only when kept whole; a sticky session only when it may move).
 */
function judgeAnswers(plan: ForwardPlan, blocking: CompiledBlocking, hasBody: boolean): void {
  const rules = rulesForHost(blocking, plan.target.host);
  if (rules === undefined) return;
  const retry = blocking.retry;
  const sticky = plan.client.options.sessionId !== undefined;
  const retried = blocking.retriedMethods.has(plan.head.method) &&
    (!sticky || retry.rebind_sticky);
  const site = siteOf(plan.target.host);
  plan.judging = {
    rules,
    readsBody: blocking.readsBody,
    bodyBytes: blocking.bodyBytes,
    site,
    // The browser-grade engine streams the body as it comes: kept by the gateway's own wire only.
    keptBody: hasBody && retried && plan.persona === undefined ? [] : undefined,
    keptBytes: 0,
  };
  // A sticky session that may not move keeps its exit, cooled down or not.
  if (!sticky || retry.rebind_sticky) plan.site = site;
  if (retried && retry.attempts > 1) {
    plan.verdictAttempts = retry.attempts;
    plan.verdictDeadlineMs = Date.now() + retry.max_total_seconds * 1000;
  }
}

/** What the client was finally answered: the target's status, or the gateway's own answer. */
function answerOf(tried: Tried<boolean>): { status: number; proxyStatus: string } {
  switch (tried.kind) {
    case "served":
      return { status: tried.status, proxyStatus: "" };
    case "refused":
      return { status: tried.refusal.status, proxyStatus: tried.refusal.proxyStatus };
    case "failed":
      return tried.began
        ? { status: tried.status, proxyStatus: "" }
        : { status: tried.failure.answer.status, proxyStatus: tried.failure.answer.proxyStatus };
    case "ended":
      return { status: 0, proxyStatus: "" };
  }
}

/** An intercepted request ended: its capture goes to the Inspector's writer. */
function captured(
  session: HttpSession,
  plan: ForwardPlan,
  inner: InnerTunnel,
  answer: { status: number; proxyStatus: string },
): void {
  const hooks = session.ctx.hooks;
  safely(() =>
    hooks?.captured?.(
      plan.client.projectId,
      plan.capture!.finish(
        plan.target,
        answer,
        { fingerprints: inner.fingerprints, sni: inner.hello.serverName },
        plan.persona === undefined ? { mode: "plain", http2: "" } : {
          mode: plan.client.interception?.mode ?? "plain",
          // The engine's HTTP/2 settings are its browser's: named by the browser.
          http2: plan.persona.engine,
        },
      ),
    )
  );
}
