/**
 * CONNECT tunnels: authenticate, guard, acquire, dial the upstream and run its handshake; on
 * success commit, answer `200 Connection established` and relay both ways until the tunnel
 * ends. Seed 001 section 7.2: another proxy may be tried only before the tunnel is up (as many
 * as the project's max_retries, gateway/net/session/limits.ts); once the client heard 200, a failure
 * only ends the tunnel. The SOCKS5 listener opens its tunnels with the same `dialTunnel` and
 * `runTunnel`.
 */
import {
  type Allocation,
  type Client,
  FailurePhase,
  isRefusal,
  NOTHING_TRIED,
  type Outcome,
  type Refusal,
  type Target,
} from "../../core/contract.ts";
import { CONNECTION_ESTABLISHED } from "../http/answers.ts";
import {
  ClientGoneError,
  describeFailure,
  type Failure,
  failureNote,
  tunnelLine,
} from "../session/failures.ts";
import {
  type FailedAttempt,
  type FailureNote,
  reportFailedAttempts,
  type RequestProtocol,
  safely,
  type TransferMeter,
} from "../session/hooks.ts";
import {
  clientKeepsAlive,
  HeadError,
  parseConnectTarget,
  type RequestHead,
} from "../http/parse.ts";
import { relay, RelayEnd } from "./relay.ts";
import { UpstreamIdleError } from "../../../shared/proxy-protocol/errors.ts";
import { RequestKind, RequestOutcome } from "../process/metrics.ts";
import type { Leg } from "../io/leg.ts";
import { attemptsFor, connectTimeoutFor } from "../session/limits.ts";
import type { ClientSession, NetContext } from "../session/client-session.ts";
import { dialUpstream, type UpstreamLink } from "../io/dial.ts";

/** Handles one CONNECT; resolves whether the client's connection serves another request. */
export async function handleConnect(session: ClientSession, head: RequestHead): Promise<boolean> {
  const kind = RequestKind.connect;
  const method = head.method;
  let target: Target;
  try {
    target = parseConnectTarget(head.target);
  } catch (error) {
    const reason = error instanceof HeadError ? error.message : "Bad CONNECT target";
    await session.answer(
      { status: 400, proxyStatus: "http_request_error", reason },
      { keepAlive: false, kind, method },
    );
    return false;
  }
  // A CONNECT has no body: a refused one leaves the connection usable.
  const keepAfterRefusal = clientKeepsAlive(head);
  let client = session.admit(head, kind, keepAfterRefusal, target);
  if (client instanceof Promise) client = await client;
  if (client === undefined) return keepAfterRefusal;

  const dial = await dialTunnel(session, client, target, kind);
  switch (dial.kind) {
    case "refused":
      await session.refuse(
        dial.refusal,
        { keepAlive: keepAfterRefusal, kind, method },
        client,
        target,
      );
      return keepAfterRefusal;
    case "gone":
      return false;
    case "failed":
      await session.answer(dial.failure.answer, { keepAlive: keepAfterRefusal, kind, method });
      return keepAfterRefusal && !session.client.closed;
    case "up":
      await runTunnel(session, {
        client,
        target,
        allocation: dial.allocation,
        link: dial.link,
        startedMs: dial.startedMs,
        established: CONNECTION_ESTABLISHED,
        kind,
      });
      return false;
  }
}

/**
 * What a tunnel needs of the client's session: the HTTP session's CONNECT and the SOCKS5
 * session share the dialing and the relay below.
 */
export interface TunnelSession {
  readonly ctx: NetContext;
  readonly client: Leg;
  /** Aborted when the session is cancelled (the gateway stopping). */
  readonly signal: AbortSignal;
  /** The client's bytes read past its request (they are the target's). */
  takePending(): Uint8Array;
  /** The upstream leg under way, so cancelling the session reaches it. */
  attach(leg: Leg | undefined): void;
}

/** How dialing a tunnel ended: up, refused by the router, every attempt failed, or the client left. */
export type TunnelDial =
  | { kind: "up"; allocation: Allocation; link: UpstreamLink; startedMs: number }
  | { kind: "refused"; refusal: Refusal }
  | { kind: "failed"; failure: Failure; error: unknown }
  | { kind: "gone" };

/** What a tunnel's failed attempts are recorded as having answered, by how the dial ended. */
const TUNNEL_UP = { status: 200, proxyStatus: "" };
const NOTHING_ANSWERED = { status: 0, proxyStatus: "" };

/**
 * Acquires an upstream and opens the tunnel through it, trying another proxy while the tunnel
 * is not up (at most `attemptsFor(client)` distinct ones). Every attempt that failed is
 * released here, and told to metering with the answer the dial ends with (the tunnel's 200, the
 * last failure's answer, nothing when the client left); an `up` result hands its allocation
 * (reserved, not committed) to the caller.
 */
export async function dialTunnel(
  session: TunnelSession,
  client: Client,
  target: Target,
  protocol: RequestProtocol,
): Promise<TunnelDial> {
  const ctx = session.ctx;
  // Built only for a second attempt: most requests are served by their first.
  let exclude: Set<string> | undefined;
  let failure: Failure | undefined;
  let lastError: unknown;
  // Built on failure only.
  let failed: FailedAttempt[] | undefined;
  const attempts = attemptsFor(client);
  for (let attempt = 0; attempt < attempts; attempt++) {
    let acquired = ctx.router.acquire(client, target, exclude ?? NOTHING_TRIED);
    if (acquired instanceof Promise) acquired = await acquired;
    if (isRefusal(acquired)) {
      if (failure) break;
      return { kind: "refused", refusal: acquired };
    }
    if (attempt + 1 < attempts) (exclude ??= new Set()).add(acquired.upstream.proxyId);
    if (attempt > 0) ctx.metrics.retries++;
    const startedMs = Date.now();
    let link: UpstreamLink;
    // Every read into it is awaited by the dial, which has settled when it goes back.
    const buffer = ctx.pool.take();
    const dialStartedMs = performance.now();
    try {
      link = await dialUpstream({
        upstream: acquired.upstream,
        target,
        tunnel: true,
        timeoutMs: connectTimeoutFor(ctx.limits, client),
        maxHeadBytes: ctx.limits.maxHeaderBytes,
        signal: session.signal,
        buffer,
      });
    } catch (error) {
      failure = describeFailure(error);
      lastError = error;
      releaseOnce(session, acquired, { ok: false, phase: failure.phase });
      ctx.metrics.upstreamFailure(failure.phase);
      const note = failureNote(failure, error, {
        protocol,
        line: tunnelLine(target),
        upstream: acquired.upstream,
      }, NOTHING_ANSWERED);
      (failed ??= []).push({
        client,
        target,
        upstream: acquired.upstream,
        elapsedMs: Date.now() - startedMs,
        note,
      });
      // The message, not the error: it is scrubbed of the proxy's credentials.
      ctx.logger.debug("CONNECT attempt failed", {
        kind: note.kind,
        phase: failure.phase,
        failure: note.message,
      });
      if (session.signal.aborted || session.client.closed) {
        reportFailedAttempts(ctx.hooks, failed, NOTHING_ANSWERED);
        return { kind: "gone" };
      }
      continue;
    } finally {
      ctx.pool.give(buffer);
    }
    ctx.metrics.upstreamConnected(performance.now() - dialStartedMs);
    reportFailedAttempts(ctx.hooks, failed, TUNNEL_UP);
    return { kind: "up", allocation: acquired, link, startedMs };
  }
  reportFailedAttempts(ctx.hooks, failed, failure!.answer);
  return { kind: "failed", failure: failure!, error: lastError };
}

function releaseOnce(session: TunnelSession, allocation: Allocation, outcome: Outcome): void {
  try {
    allocation.release(outcome);
  } catch (error) {
    session.ctx.logger.error("Allocation release failed", { error });
  }
}

export interface TunnelRequest {
  client: Client;
  target: Target;
  allocation: Allocation;
  link: UpstreamLink;
  startedMs: number;
  /** What tells the client its tunnel is up (`200 Connection established`, a SOCKS5 reply). */
  established: Uint8Array;
  kind: RequestKind;
}

/** The tunnel is up: commit, tell the client, relay. Releases the allocation exactly once. */
export async function runTunnel(session: TunnelSession, request: TunnelRequest): Promise<void> {
  const ctx = session.ctx;
  const { allocation, link } = request;
  const latencyMs = Date.now() - request.startedMs;
  let outcome: Outcome = { ok: true, latencyMs };
  /** How the tunnel failed, for its meter (built on failure only). */
  let failedAs: { error: unknown; answered: number } | undefined;
  let meter: TransferMeter | undefined;
  /** Stopped by the interrupt traffic action: policy, not the upstream's failure. */
  let interrupted = false;
  session.attach(link.leg);
  try {
    allocation.commit();
    meter = safely(() =>
      ctx.hooks?.begin({
        kind: "connect",
        client: request.client,
        target: request.target,
        upstream: allocation.upstream,
        latencyMs,
        interrupt: () => {
          interrupted = true;
          link.leg.close();
        },
      })
    );
    try {
      await session.client.write(request.established);
    } catch (error) {
      outcome = { ok: false, phase: FailurePhase.client, latencyMs };
      failedAs = {
        error: new ClientGoneError("Client left before its tunnel was up", { cause: error }),
        answered: 0,
      };
      ctx.metrics.request(request.kind, RequestOutcome.broken, 200);
      return;
    }
    ctx.metrics.request(request.kind, RequestOutcome.relayed, 200);
    ctx.metrics.tunnelsOpen++;
    try {
      const result = await relay(session.client, link.leg, {
        pool: ctx.pool,
        small: ctx.small,
        clientLeftover: session.takePending(),
        upstreamLeftover: link.leftover,
        // No signal: cancelling the session closes both legs (the upstream one is attached).
        onBytes: (toUpstreamBytes, toClientBytes) => {
          ctx.metrics.countBytes(toUpstreamBytes, toClientBytes);
          if (meter) meter.bytes(toUpstreamBytes, toClientBytes);
        },
      });
      // Legs closed by a cancelled session (the gateway stopping) are not the upstream's fault.
      if (result.end === RelayEnd.upstream && !session.signal.aborted && !interrupted) {
        outcome = { ok: false, phase: FailurePhase.idle, latencyMs };
        failedAs = {
          error: new UpstreamIdleError("The tunnel's upstream leg failed"),
          answered: 200,
        };
        ctx.metrics.upstreamFailure(FailurePhase.idle);
      }
    } finally {
      ctx.metrics.tunnelsOpen--;
    }
  } catch (error) {
    ctx.logger.error("Tunnel failed", { error });
    outcome = { ok: false, phase: FailurePhase.client, latencyMs };
    failedAs = { error, answered: 200 };
  } finally {
    session.attach(undefined);
    link.leg.close();
    releaseOnce(session, allocation, outcome);
    if (meter) {
      const finished = meter;
      const note = failedAs === undefined ? undefined : tunnelFailure(request, failedAs);
      safely(() => finished.finish(outcome, note));
    }
  }
}

/** A tunnel that was up and failed, as its meter tells the failure log. */
function tunnelFailure(
  request: TunnelRequest,
  failedAs: { error: unknown; answered: number },
): FailureNote {
  return failureNote(describeFailure(failedAs.error), failedAs.error, {
    protocol: request.kind,
    line: tunnelLine(request.target),
    upstream: request.allocation.upstream,
  }, { status: failedAs.answered, proxyStatus: "" });
}
