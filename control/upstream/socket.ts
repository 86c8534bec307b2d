/** Opening the TCP (or TLS, for https proxies) connection to an upstream proxy. */
import net from "node:net";
import tls from "node:tls";
import {
  UpstreamConnectError,
  type UpstreamError,
  UpstreamRefusedError,
} from "../../shared/proxy-protocol/errors.ts";
import { HostKind, hostKind } from "../../shared/proxy-protocol/address.ts";
import { type UpstreamProxy, UpstreamScheme } from "../../shared/proxy-protocol/types.ts";

/** TCP keepalive probes start after this long idle (the spec's 60 s). */
export const KEEPALIVE_IDLE_MS = 60_000;

export interface UpstreamTlsOptions {
  /** Trusted CA certificates (PEM), in place of the system's. */
  ca?: string | Buffer | Array<string | Buffer>;
  /** Verify the peer's certificate (default true). */
  rejectUnauthorized?: boolean;
}

/** The SNI name for a host: names only (RFC 6066 forbids IP literals there). */
export function serverName(host: string): string | undefined {
  return hostKind(host) === HostKind.name ? host : undefined;
}

/** Starts connecting to the proxy; listen for `connectEvent(proxy)` to know it is up. */
export function connectToProxy(proxy: UpstreamProxy, tlsOptions?: UpstreamTlsOptions): net.Socket {
  const host = proxy.host.startsWith("[") ? proxy.host.slice(1, -1) : proxy.host;
  const socket = proxy.scheme === UpstreamScheme.https
    ? tls.connect({
      host,
      port: proxy.port,
      servername: serverName(host),
      ca: tlsOptions?.ca,
      rejectUnauthorized: tlsOptions?.rejectUnauthorized ?? true,
    })
    : net.connect({ host, port: proxy.port });
  socket.setNoDelay(true);
  socket.setKeepAlive(true, KEEPALIVE_IDLE_MS);
  return socket;
}

/** The event that says the connection to this proxy is ready for the handshake. */
export function connectEvent(proxy: UpstreamProxy): "connect" | "secureConnect" {
  return proxy.scheme === UpstreamScheme.https ? "secureConnect" : "connect";
}

/** Maps a failure to connect (socket error) to its catalogue error, cause kept. */
export function connectErrorFrom(error: unknown, proxy: UpstreamProxy): UpstreamError {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const where = `${proxy.host}:${proxy.port}`;
  if (code === "ECONNREFUSED") {
    return new UpstreamRefusedError(`Proxy ${where} refused the connection`, { cause: error });
  }
  const what = proxy.scheme === UpstreamScheme.https ? "TCP/TLS" : "TCP";
  return new UpstreamConnectError(
    `${what} connection to proxy ${where} failed${code ? ` (${code})` : ""}`,
    { cause: error },
  );
}
