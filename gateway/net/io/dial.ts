/**
 * Opens the upstream leg of one attempt: TCP to the proxy (TLS on top for an https proxy),
 * then, for a tunnel, the proxy's handshake (shared/proxy-protocol drives it; this loop only
 * moves its bytes). The whole of it runs under one deadline (OCTOPROX_CONNECT_TIMEOUT), and
 * every failure comes out as the shared upstream error of its phase.
 */
import { EMPTY_BYTES } from "../../../shared/proxy-protocol/bytes.ts";
import {
  HandshakeFailure,
  UpstreamConnectError,
  UpstreamError,
  UpstreamHandshakeError,
  UpstreamRefusedError,
} from "../../../shared/proxy-protocol/errors.ts";
import {
  createClientHandshake,
  handshakeProtocol,
} from "../../../shared/proxy-protocol/handshake.ts";
import type { UpstreamProxy } from "../../../shared/proxy-protocol/types.ts";
import type { Target, UpstreamChoice } from "../../../shared/routing/contract.ts";
import { watchDeadline } from "./deadlines.ts";
import { parseIp } from "../../../shared/net/ip.ts";
import { Leg, tuneTcp } from "./leg.ts";

export interface DialRequest {
  upstream: UpstreamChoice;
  target: Target;
  /**
   * Open a tunnel to the target (CONNECT, or any SOCKS use); otherwise only connect, for a
   * forward request to an HTTP proxy.
   */
  tunnel: boolean;
  timeoutMs: number;
  /** Bound on an HTTP proxy's CONNECT answer head. */
  maxHeadBytes: number;
  /** The client's session ending (or the gateway stopping) gives the attempt up. */
  signal?: AbortSignal;
  /**
   * Where a tunnel's handshake answer is read (a pooled buffer, free again once the dial
   * settled); without it the dial allocates one.
   */
  buffer?: Uint8Array;
}

export interface UpstreamLink {
  leg: Leg;
  /** Bytes that came after the proxy's reply: the target's first bytes (a copy). */
  leftover: Uint8Array;
}

function asProxy(choice: UpstreamChoice): UpstreamProxy {
  return {
    scheme: choice.scheme,
    host: choice.host,
    port: choice.port,
    ...(choice.username !== null ? { username: choice.username } : {}),
    ...(choice.password !== null ? { password: choice.password } : {}),
  };
}

// Deno takes IPv6 literals in brackets.
function dialHost(host: string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}

const HANDSHAKE_BUFFER_BYTES = 4096;

export async function dialUpstream(request: DialRequest): Promise<UpstreamLink> {
  if (request.upstream.direct === true) return await dialDirect(request);
  const { upstream, signal } = request;
  const controller = new AbortController();
  let leg: Leg | undefined;
  let expired = false;
  const abort = () => {
    controller.abort();
    leg?.close();
  };
  const deadline = watchDeadline(request.timeoutMs, () => {
    expired = true;
    abort();
  });
  signal?.addEventListener("abort", abort, { once: true });
  const timeoutError = (cause?: unknown) =>
    new UpstreamConnectError("Connection to upstream proxy timed out", { timedOut: true, cause });
  try {
    if (signal?.aborted) throw new UpstreamConnectError("Attempt cancelled");
    let conn: Deno.TcpConn;
    try {
      conn = await Deno.connect({
        hostname: dialHost(upstream.host),
        port: upstream.port,
        signal: controller.signal,
      });
    } catch (error) {
      if (expired) throw timeoutError(error);
      if (error instanceof Deno.errors.ConnectionRefused) {
        throw new UpstreamRefusedError("Upstream proxy refused the connection", { cause: error });
      }
      throw new UpstreamConnectError("Could not connect to the upstream proxy", { cause: error });
    }
    tuneTcp(conn);
    if (expired || signal?.aborted) {
      conn.close();
      throw expired ? timeoutError() : new UpstreamConnectError("Attempt cancelled");
    }
    if (upstream.scheme === "https") {
      let tls: Deno.TlsConn;
      try {
        tls = await Deno.startTls(conn, { hostname: upstream.host });
      } catch (error) {
        try {
          conn.close();
        } catch {
          // Consumed by the failed upgrade.
        }
        throw new UpstreamConnectError("TLS to the upstream proxy failed", { cause: error });
      }
      leg = new Leg(tls);
      try {
        await tls.handshake();
      } catch (error) {
        if (expired) throw timeoutError(error);
        throw new UpstreamConnectError("TLS handshake with the upstream proxy failed", {
          cause: error,
        });
      }
    } else {
      leg = new Leg(conn);
    }
    if (!request.tunnel) return { leg, leftover: EMPTY_BYTES };
    const leftover = await runHandshake(leg, request, () => expired);
    return { leg, leftover };
  } catch (error) {
    leg?.close();
    if (error instanceof UpstreamError) throw error;
    if (expired) throw timeoutError(error);
    throw new UpstreamConnectError("Could not reach the upstream proxy", { cause: error });
  } finally {
    deadline.cancel();
    signal?.removeEventListener("abort", abort);
  }
}

async function runHandshake(
  leg: Leg,
  request: DialRequest,
  expired: () => boolean,
): Promise<Uint8Array> {
  const protocol = handshakeProtocol(request.upstream.scheme);
  const handshake = createClientHandshake(asProxy(request.upstream), request.target, {
    maxHeadBytes: request.maxHeadBytes,
  });
  const failed = (cause: unknown) =>
    expired()
      ? new UpstreamHandshakeError(
        protocol,
        HandshakeFailure.timeout,
        "Upstream proxy handshake timed out",
        { timedOut: true, cause },
      )
      : new UpstreamHandshakeError(
        protocol,
        HandshakeFailure.closed,
        "Upstream proxy closed the connection during the handshake",
        { cause },
      );
  const buffer = request.buffer ?? new Uint8Array(HANDSHAKE_BUFFER_BYTES);
  try {
    await leg.write(handshake.start());
  } catch (error) {
    throw failed(error);
  }
  for (;;) {
    let count: number | null;
    try {
      count = await leg.read(buffer);
    } catch (error) {
      throw failed(error);
    }
    if (count === null) throw failed(undefined);
    const step = handshake.push(buffer.subarray(0, count));
    if (step.write) {
      try {
        await leg.write(step.write);
      } catch (error) {
        throw failed(error);
      }
    }
    // The leftover is a view of our buffer: copy it out.
    if (step.done) return step.leftover.length > 0 ? step.leftover.slice() : EMPTY_BYTES;
  }
}

/**
 * A per-domain rule's `direct`: the gateway's own connection to the target, no upstream. Only
 * to an IP address, which the destination guard checked: a literal target, or the address the
 * gateway pinned a name to (OCTOPROX_DESTINATION_RESOLUTION=gateway). A name the gateway did not
 * resolve is refused: whatever it resolved to now would not be what the guard saw.
 */
async function dialDirect(request: DialRequest): Promise<UpstreamLink> {
  const { target, signal } = request;
  if (parseIp(target.host) === undefined) {
    throw new UpstreamConnectError(
      "A direct request to a name needs the gateway to resolve destinations " +
        "(OCTOPROX_DESTINATION_RESOLUTION=gateway), so the address it connects to is checked",
    );
  }
  const controller = new AbortController();
  let expired = false;
  const deadline = watchDeadline(request.timeoutMs, () => {
    expired = true;
    controller.abort();
  });
  const abort = () => controller.abort();
  signal?.addEventListener("abort", abort, { once: true });
  try {
    if (signal?.aborted) throw new UpstreamConnectError("Attempt cancelled");
    let conn: Deno.TcpConn;
    try {
      conn = await Deno.connect({
        hostname: dialHost(target.host),
        port: target.port,
        signal: controller.signal,
      });
    } catch (error) {
      if (expired) {
        throw new UpstreamConnectError("Connection to the target timed out", {
          timedOut: true,
          cause: error,
        });
      }
      if (error instanceof Deno.errors.ConnectionRefused) {
        throw new UpstreamRefusedError("The target refused the connection", { cause: error });
      }
      throw new UpstreamConnectError("Could not connect to the target", { cause: error });
    }
    tuneTcp(conn);
    return { leg: new Leg(conn), leftover: EMPTY_BYTES };
  } finally {
    deadline.cancel();
    signal?.removeEventListener("abort", abort);
  }
}
