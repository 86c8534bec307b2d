/**
 * An intercepted tunnel, from the moment the client is told its tunnel is up: the client's first
 * bytes are read (the ClientHello, whole), a certificate for the tunnel's host is taken from the
 * cache or minted, and the handshake is fed the bytes already read; the decrypted connection is
 * then served as requests (session/client-session.ts, the way a forward request is), each one
 * admitted, routed, retried, metered and limited on its own.
 *
 * The order is the spec's: nothing past the ClientHello is read before the handshake owns the
 * connection (its reads are the only ones from then on), so no byte the handshake needs can go
 * to another reader. Bytes that are not TLS are refused on a TLS port and relayed raw elsewhere.
 */
import { TLSSocket } from "node:tls";
import { normaliseHost } from "../../../shared/net/host.ts";
import { formatAuthority } from "../../../shared/proxy-protocol/address.ts";
import { EMPTY_BYTES } from "../../../shared/proxy-protocol/bytes.ts";
import type { Client, Target } from "../../../shared/routing/contract.ts";
import type { RequestKind } from "../../base/metrics.ts";
import type { InnerTunnel, InterceptSession } from "../session/contract.ts";
import { dialTunnel, runTunnel } from "../tunnel/tunnel.ts";
import { type ClientHello, scanClientHello } from "./client-hello.ts";
import { InterceptEnd, type Interceptor, TLS_PORTS } from "./interceptor.ts";
import { legDuplex, PeerEnd, StreamConn } from "./stream-conn.ts";
import { alertName } from "./intercept-alerts.ts";
import { fingerprints } from "./fingerprints.ts";

/** How long the client has for its ClientHello and then the handshake. */
const HANDSHAKE_TIMEOUT_MS = 10_000;
/** How long a handshake whose client left is waited on for what it sent last (an alert). */
const TRANSPORT_END_GRACE_MS = 20;

export interface InterceptRequest {
  client: Client;
  target: Target;
  /** Where the tunnel goes when it is relayed raw after all (the guard's address, or target). */
  dialTarget: Target;
  /** The tunnel's own credentials, which every request inside is admitted with. */
  credentials: string | null;
  /** What tells the client its tunnel is up (`200 Connection established`, a SOCKS5 reply). */
  established: Uint8Array;
  kind: RequestKind;
}

/**
 * Runs the tunnel until it ends; never rejects. The caller checked `Interceptor.intercepts` and
 * the session's `ctx.mitm`.
 */
export function interceptTunnel(
  session: InterceptSession,
  mitm: Interceptor,
  request: InterceptRequest,
): Promise<void> {
  return run(session, mitm, request).catch((error) => {
    session.ctx.logger.error("Intercepted tunnel failed", { error });
  });
}

async function run(
  session: InterceptSession,
  mitm: Interceptor,
  request: InterceptRequest,
): Promise<void> {
  const ctx = session.ctx;
  try {
    await session.client.write(request.established);
  } catch {
    return;
  }
  ctx.metrics.request(request.kind, "relayed", 200);
  const first = await readHello(session, session.takeForTunnel());
  if (first.kind === "closed") return;
  if (first.kind === "not_tls") {
    if (TLS_PORTS.has(request.target.port)) {
      mitm.count(InterceptEnd.notTls);
      return;
    }
    mitm.count(InterceptEnd.notTlsRelayed);
    return relayRaw(session, request, first.bytes);
  }
  if (first.kind === "malformed") {
    mitm.count(InterceptEnd.badHello);
    session.ctx.logger.debug("Intercepted tunnel sent a malformed ClientHello", {
      reason: first.reason,
    });
    return;
  }
  // The CONNECT's host, which the guard checked, in the form the CA names it (the cache's key).
  let context = mitm.certificates.context(normaliseHost(request.target.host));
  if (context instanceof Promise) context = await context;
  const conn = session.client.conn;
  const peerEnd = new PeerEnd();
  const socket = new TLSSocket(
    legDuplex(session.client, first.bytes, peerEnd),
    {
      isServer: true,
      secureContext: context,
      // HTTP/1.1 towards clients (the design card's choice); HTTP/2 is not offered.
      ALPNProtocols: ["http/1.1"],
    },
  );
  const handshake = await handshakeOf(socket, peerEnd);
  if (handshake !== undefined) {
    socket.destroy();
    if (handshake.alert !== undefined) mitm.count(InterceptEnd.clientRejected, handshake.alert);
    else mitm.count(InterceptEnd.handshakeFailed);
    ctx.logger.debug("Intercepted tunnel's handshake failed", { error: handshake.error });
    return;
  }
  mitm.intercepted++;
  // The CONNECT's own hold (a connection slot) ends: each request inside is admitted itself.
  session.releaseAdmission();
  const inner: InnerTunnel = {
    target: request.target,
    authority: formatAuthority(request.target.host, request.target.port),
    credentials: request.credentials,
    clientAddress: session.clientAddress,
    hello: first.hello,
    fingerprints: fingerprints(first.hello),
  };
  const decrypted = new StreamConn(
    socket,
    conn.remoteAddr as Deno.NetAddr,
    conn.localAddr as Deno.NetAddr,
    peerEnd,
  );
  try {
    await session.serveInner(decrypted as unknown as Deno.Conn, inner);
  } finally {
    decrypted.close();
  }
}

type FirstBytes =
  | { kind: "closed" }
  | { kind: "not_tls"; bytes: Uint8Array }
  | { kind: "malformed"; reason: string }
  | { kind: "hello"; hello: ClientHello; bytes: Uint8Array };

/** Reads until the ClientHello is whole (or the bytes are not one), under the handshake's deadline. */
async function readHello(session: InterceptSession, pending: Uint8Array): Promise<FirstBytes> {
  let bytes = pending;
  const leg = session.client;
  leg.setDeadline(HANDSHAKE_TIMEOUT_MS);
  try {
    for (;;) {
      const scan = scanClientHello(bytes);
      switch (scan.kind) {
        case "hello":
          return { kind: "hello", hello: scan.hello, bytes };
        case "not_tls":
          return { kind: "not_tls", bytes };
        case "malformed":
          return scan;
      }
      const buffer = new Uint8Array(4096);
      let count: number | null;
      try {
        count = await leg.read(buffer);
      } catch {
        return { kind: "closed" };
      }
      if (count === null) return { kind: "closed" };
      const joined = new Uint8Array(bytes.length + count);
      joined.set(bytes, 0);
      joined.set(buffer.subarray(0, count), bytes.length);
      bytes = joined;
    }
  } finally {
    leg.clearDeadline();
  }
}

interface HandshakeFailure {
  error: unknown;
  /** The TLS alert the client sent, by its RFC 8446 name, when it sent one. */
  alert?: string;
}

/**
 * Resolves once the handshake is done (undefined) or failed; the socket is paused after. The
 * engine does not say when its transport ends mid-handshake: `peerEnd` ends the wait too.
 */
function handshakeOf(socket: TLSSocket, peerEnd: PeerEnd): Promise<HandshakeFailure | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(
      () => finish({ error: new Error("TLS handshake timed out") }),
      HANDSHAKE_TIMEOUT_MS,
    );
    const finish = (failure: HandshakeFailure | undefined) => {
      clearTimeout(timer);
      socket.off("secure", onSecure);
      socket.off("error", onError);
      socket.off("close", onClose);
      resolve(failure);
    };
    const onSecure = () => finish(undefined);
    const onError = (error: unknown) => finish({ error, alert: alertName(error) });
    const onClose = () => finish({ error: new Error("The client closed during the handshake") });
    socket.once("secure", onSecure);
    socket.once("error", onError);
    socket.once("close", onClose);
    // A moment later: an alert the client sent before leaving is read first, and named.
    peerEnd.onEnd(() => setTimeout(onClose, TRANSPORT_END_GRACE_MS));
  });
}

/** Not TLS, to a port that need not be: the tunnel is dialled now and relayed as it is. */
async function relayRaw(
  session: InterceptSession,
  request: InterceptRequest,
  bytes: Uint8Array,
): Promise<void> {
  const dial = await dialTunnel(
    session,
    request.client,
    request.target,
    request.kind,
    request.dialTarget,
  );
  if (dial.kind !== "served") return;
  await runTunnel(session, {
    client: request.client,
    target: request.target,
    up: dial.value,
    established: EMPTY_BYTES,
    kind: request.kind,
    clientLeftover: bytes,
  });
}
