/**
 * A tunnel through an upstream, as CONNECT (connect.ts) and SOCKS5 (socks5-session.ts) open
 * it (to the target as the client named it, or to the address the guard checked for it when the
 * gateway resolves destinations): `dialTunnel` runs the request path's retry loop (session/attempts.ts) over dials (TCP,
 * TLS, the proxy's handshake), trying another proxy while the tunnel is not up (seed 001
 * section 7.2: as many as the project's max_retries); `runTunnel` commits, tells the client its
 * tunnel is up and relays both ways until it ends. Once the client heard that, a failure only
 * ends the tunnel.
 */
import { siteOf } from "../../../shared/blocking/domain.ts";
import { UpstreamIdleError } from "../../../shared/proxy-protocol/errors.ts";
import {
  type Allocation,
  type Client,
  FailurePhase,
  type Outcome,
  type Target,
} from "../../../shared/routing/contract.ts";
import { dialUpstream, type UpstreamLink } from "../io/dial.ts";
import { type RequestKind, RequestOutcome } from "../../base/metrics.ts";
import {
  AfterFailure,
  type AttemptOutcome,
  type AttemptPlan,
  NOTHING_ANSWERED,
  type Tried,
  tryUpstreams,
} from "../session/attempts.ts";
import type { TunnelSession } from "../session/contract.ts";
import { ClientGoneError, describeFailure, failureNote, tunnelLine } from "../session/failures.ts";
import {
  type FailureNote,
  type RequestProtocol,
  safely,
  type TransferMeter,
} from "../../base/transfer-hooks.ts";
import { attemptsFor, connectTimeoutFor } from "../session/limits.ts";
import { relay, RelayEnd, type RelayResult } from "./relay.ts";

/** A tunnel that is up: its allocation (reserved, not committed), the link, when it began. */
export interface TunnelUp {
  allocation: Allocation;
  link: UpstreamLink;
  startedMs: number;
}

interface TunnelPlan extends AttemptPlan {
  protocol: RequestProtocol;
}

/**
 * Acquires an upstream and opens the tunnel through it, trying another proxy while the tunnel
 * is not up (at most `attemptsFor(client)` distinct ones). Every attempt that failed is
 * released here, and told to metering with the answer the dial ends with (the tunnel's 200, the
 * last failure's answer, nothing when the client left); a `served` result hands its allocation
 * (reserved, not committed) to the caller.
 */
export function dialTunnel(
  session: TunnelSession,
  client: Client,
  target: Target,
  protocol: RequestProtocol,
  dialTarget: Target = target,
): Promise<Tried<TunnelUp>> {
  const plan: TunnelPlan = {
    client,
    target,
    dialTarget,
    attempts: attemptsFor(client),
    label: "CONNECT",
    protocol,
    // Set before each attempt; here so the plan keeps one shape.
    turn: 0,
  };
  // A project that judges answers: the exits a site blocked lately are passed over for it (a
  // sticky session keeps its exit unless the project lets it move).
  const blocking = client.blocking;
  if (
    blocking !== undefined &&
    (client.options.sessionId === undefined || blocking.retry.rebind_sticky)
  ) {
    plan.site = siteOf(target.host);
  }
  return tryUpstreams(session, plan, dialAttempt);
}

/** One dial through the allocated upstream; released here when it fails. */
async function dialAttempt(
  session: TunnelSession,
  plan: TunnelPlan,
  allocation: Allocation,
): Promise<AttemptOutcome<TunnelUp>> {
  const ctx = session.ctx;
  const startedMs = Date.now();
  let link: UpstreamLink;
  // Every read into it is awaited by the dial, which has settled when it goes back.
  const buffer = ctx.pool.take();
  const dialStartedMs = performance.now();
  try {
    link = await dialUpstream({
      upstream: allocation.upstream,
      target: plan.dialTarget,
      tunnel: true,
      timeoutMs: connectTimeoutFor(ctx.limits, plan.client),
      maxHeadBytes: ctx.limits.maxHeaderBytes,
      signal: session.signal,
      buffer,
    });
  } catch (error) {
    const failure = describeFailure(error);
    releaseOnce(session, allocation, { ok: false, phase: failure.phase });
    const note = failureNote(failure, error, {
      protocol: plan.protocol,
      line: tunnelLine(plan.target),
      upstream: allocation.upstream,
    }, NOTHING_ANSWERED);
    return {
      kind: "failed",
      failure,
      error,
      note,
      began: false,
      status: 0,
      elapsedMs: Date.now() - startedMs,
      then: session.cancelled || session.client.closed ? AfterFailure.end : AfterFailure.retry,
    };
  } finally {
    ctx.pool.give(buffer);
  }
  ctx.metrics.upstreamConnected(performance.now() - dialStartedMs);
  return { kind: "served", value: { allocation, link, startedMs }, status: 200 };
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
  up: TunnelUp;
  /** What tells the client its tunnel is up (`200 Connection established`, a SOCKS5 reply). */
  established: Uint8Array;
  kind: RequestKind;
  /**
   * Given when the client was told already and its request counted (an intercepted tunnel whose
   * bytes were not TLS, relayed raw after all): the bytes it sent so far.
   */
  clientLeftover?: Uint8Array;
}

/**
 * The tunnel is up: commit, tell the client, relay. Releases the allocation exactly once. Never
 * rejects. No frame of it waits while the tunnel runs: each step is a callback of the one
 * before, and the promise is settled by the last, so an idle tunnel holds little.
 */
export function runTunnel(session: TunnelSession, request: TunnelRequest): Promise<void> {
  return new Promise((resolve) => new OpenTunnel(session, request, resolve).start());
}

/** One tunnel from its commit to its end: what its end tells the allocation and the meter. */
class OpenTunnel {
  readonly #session: TunnelSession;
  readonly #request: TunnelRequest;
  readonly #latencyMs: number;
  readonly #ended: () => void;
  #outcome: Outcome;
  /** How the tunnel failed, for its meter (built on failure only). */
  #failedAs: { error: unknown; answered: number } | undefined;
  #meter: TransferMeter | undefined;
  /** Stopped by the interrupt traffic action: policy, not the upstream's failure. */
  #interrupted = false;

  constructor(session: TunnelSession, request: TunnelRequest, ended: () => void) {
    this.#session = session;
    this.#request = request;
    this.#ended = ended;
    this.#latencyMs = Date.now() - request.up.startedMs;
    this.#outcome = { ok: true, latencyMs: this.#latencyMs };
  }

  /** Commits, begins the meter and tells the client; the relay starts once that is written. */
  start(): void {
    const session = this.#session;
    const request = this.#request;
    const ctx = session.ctx;
    const { allocation, link } = request.up;
    session.attach(link.leg);
    try {
      allocation.commit();
      this.#meter = safely(() =>
        ctx.hooks?.begin({
          kind: "connect",
          client: request.client,
          target: request.target,
          upstream: allocation.upstream,
          latencyMs: this.#latencyMs,
          interrupt: () => {
            this.#interrupted = true;
            link.leg.close();
          },
        })
      );
      session.client.write(request.established).then(
        () => this.#established(),
        (error) => this.#clientGone(error),
      );
    } catch (error) {
      this.#failed(error);
      this.#end();
    }
  }

  #clientGone(error: unknown): void {
    this.#outcome = { ok: false, phase: FailurePhase.client, latencyMs: this.#latencyMs };
    this.#failedAs = {
      error: new ClientGoneError("Client left before its tunnel was up", { cause: error }),
      answered: 0,
    };
    this.#session.ctx.metrics.request(this.#request.kind, RequestOutcome.broken, 200);
    this.#end();
  }

  #established(): void {
    const session = this.#session;
    const request = this.#request;
    const ctx = session.ctx;
    try {
      if (request.clientLeftover === undefined) {
        ctx.metrics.request(request.kind, RequestOutcome.relayed, 200);
      }
      const meter = this.#meter;
      const options = {
        pool: ctx.pool,
        small: ctx.tunnelStart,
        clientLeftover: request.clientLeftover ?? session.takeForTunnel(),
        upstreamLeftover: request.up.link.leftover,
        // No signal: cancelling the session closes both legs (the upstream one is attached).
        onBytes: (toUpstreamBytes: number, toClientBytes: number) => {
          ctx.metrics.countBytes(toUpstreamBytes, toClientBytes);
          if (meter) meter.bytes(toUpstreamBytes, toClientBytes);
        },
      };
      relay(session.client, request.up.link.leg, options, (result) => this.#relayed(result));
      // Counted once the relay runs; its end is always called back later, never from here.
      ctx.metrics.tunnelsOpen++;
    } catch (error) {
      this.#failed(error);
      this.#end();
    }
  }

  #relayed(result: RelayResult): void {
    const session = this.#session;
    const ctx = session.ctx;
    ctx.metrics.tunnelsOpen--;
    try {
      // Legs closed by a cancelled session (the gateway stopping) are not the upstream's fault.
      if (result.end === RelayEnd.upstream && !session.cancelled && !this.#interrupted) {
        this.#outcome = { ok: false, phase: FailurePhase.idle, latencyMs: this.#latencyMs };
        this.#failedAs = {
          error: new UpstreamIdleError("The tunnel's upstream leg failed"),
          answered: 200,
        };
        ctx.metrics.upstreamFailure(FailurePhase.idle);
      }
    } catch (error) {
      this.#failed(error);
    }
    this.#end();
  }

  #failed(error: unknown): void {
    this.#session.ctx.logger.error("Tunnel failed", { error });
    this.#outcome = { ok: false, phase: FailurePhase.client, latencyMs: this.#latencyMs };
    this.#failedAs = { error, answered: 200 };
  }

  /** The tunnel ended: every step runs, whatever the one before did, then the promise settles. */
  #end(): void {
    const session = this.#session;
    const request = this.#request;
    try {
      session.attach(undefined);
      request.up.link.leg.close();
      releaseOnce(session, request.up.allocation, this.#outcome);
      const meter = this.#meter;
      if (meter) {
        const failedAs = this.#failedAs;
        const note = failedAs === undefined ? undefined : tunnelFailure(request, failedAs);
        safely(() => meter.finish(this.#outcome, note));
      }
    } finally {
      this.#ended();
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
    upstream: request.up.allocation.upstream,
  }, { status: failedAs.answered, proxyStatus: "" });
}
