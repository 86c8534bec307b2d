/**
 * An intercepting gateway's own TLS towards the target, over the tunnel an upstream opened to it
 * (`plain` mode): the target's certificate is verified against the runtime's roots and
 * OCTOPROX_UPSTREAM_CA_FILE's, for the name the client asked for; there is no switch that turns
 * verification off. A certificate that fails is the target's fault (TargetTlsError: answered
 * 502 naming why, no other proxy tried); the connection failing under the handshake is the
 * proxy's (tried on another).
 *
 * Over a TCP leg (an HTTP or SOCKS proxy) Deno's own TLS client runs (Deno.startTls); over an
 * https proxy's TLS leg, TLS inside TLS goes through `node:tls`, which Deno cannot start on a
 * TLS connection.
 */
import { connect as nodeTlsConnect } from "node:tls";
import {
  HandshakeFailure,
  HandshakeProtocol,
  TargetTlsError,
  UpstreamHandshakeError,
} from "../../../shared/proxy-protocol/errors.ts";
import { parseIp } from "../../../shared/net/ip.ts";
import { Leg } from "../io/leg.ts";
import { watchDeadline } from "../io/deadlines.ts";
import type { Interceptor } from "./interceptor.ts";
import { legDuplex, PeerEnd, StreamConn } from "./stream-conn.ts";

export interface TargetTlsRequest {
  /** The leg through the upstream's tunnel to the target (consumed: the TLS leg replaces it). */
  leg: Leg;
  /** Bytes the upstream sent past its handshake (a TLS server speaks second: normally none). */
  leftover: Uint8Array;
  /** The name the certificate must cover (the CONNECT's host). */
  host: string;
  timeoutMs: number;
  mitm: Interceptor;
}

/** Engine words that mean the certificate, not the connection, failed. */
const CERTIFICATE_FAILURE =
  /certificate|cert_|issuer|self[ -]signed|expired|altname|hostname|not valid for name|UnknownIssuer|NotValidForName/i;

function handshakeFailed(error: unknown, timedOut: boolean): Error {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown } | undefined)?.code;
  if (
    !timedOut &&
    (CERTIFICATE_FAILURE.test(message) ||
      (typeof code === "string" && CERTIFICATE_FAILURE.test(code)))
  ) {
    return new TargetTlsError(certificateReason(message, code), { cause: error });
  }
  return new UpstreamHandshakeError(
    HandshakeProtocol.http,
    timedOut ? HandshakeFailure.timeout : HandshakeFailure.closed,
    timedOut ? "TLS handshake with the target timed out" : "TLS handshake with the target failed",
    { timedOut, cause: error },
  );
}

/** The engine's reason, without its prefixes ("invalid peer certificate: UnknownIssuer"). */
function certificateReason(message: string, code: unknown): string {
  const text = message.replace(/^.*?invalid peer certificate:\s*/i, "").split("\n")[0].trim();
  return typeof code === "string" && code !== "" && !text.includes(code)
    ? `${text} (${code})`
    : text;
}

export async function startTargetTls(request: TargetTlsRequest): Promise<Leg> {
  const { leg, host } = request;
  let expired = false;
  let tls: Deno.TlsConn | undefined;
  const deadline = watchDeadline(request.timeoutMs, () => {
    expired = true;
    leg.close();
    try {
      tls?.close();
    } catch {
      // Closed by its own failure.
    }
  });
  try {
    const conn = leg.conn;
    if (request.leftover.length === 0 && isTcp(conn)) {
      try {
        tls = await Deno.startTls(conn, {
          hostname: host,
          caCerts: request.mitm.upstreamCaCerts,
          alpnProtocols: ["http/1.1"],
        });
        await tls.handshake();
      } catch (error) {
        leg.close();
        try {
          tls?.close();
        } catch {
          // Consumed by the failed handshake.
        }
        throw handshakeFailed(error, expired);
      }
      return new Leg(tls);
    }
    return await nodeTls(leg, request, () => expired);
  } finally {
    deadline.cancel();
  }
}

function isTcp(conn: Deno.Conn): conn is Deno.TcpConn {
  return typeof (conn as Partial<Deno.TcpConn>).setNoDelay === "function" &&
    !("handshake" in conn);
}

function nodeTls(leg: Leg, request: TargetTlsRequest, expired: () => boolean): Promise<Leg> {
  const conn = leg.conn;
  const host = request.host;
  return new Promise((resolve, reject) => {
    const peerEnd = new PeerEnd();
    const socket = nodeTlsConnect({
      socket: legDuplex(leg, request.leftover, peerEnd),
      host,
      // An IP target is checked against the certificate's addresses; SNI carries names only.
      ...(parseIp(host) !== undefined ? {} : { servername: host }),
      ...(request.mitm.nodeContext === undefined
        ? {}
        : { secureContext: request.mitm.nodeContext }),
      ALPNProtocols: ["http/1.1"],
      rejectUnauthorized: true,
    });
    const onError = (error: unknown) => {
      socket.destroy();
      leg.close();
      reject(handshakeFailed(error, expired()));
    };
    socket.once("error", onError);
    socket.once("secureConnect", () => {
      socket.off("error", onError);
      const stream = new StreamConn(
        socket,
        conn.remoteAddr as Deno.NetAddr,
        conn.localAddr as Deno.NetAddr,
        peerEnd,
      );
      resolve(new Leg(stream as unknown as Deno.Conn));
    });
  });
}
