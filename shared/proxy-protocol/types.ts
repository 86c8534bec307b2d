/** What every upstream handshake needs to know about the proxy and the target behind it. */
import { ProxyScheme } from "../roles.ts";

/**
 * The schemes an upstream proxy speaks are the proxy schemes of the definitions (one list):
 * `https` is an HTTP proxy spoken over TLS to the proxy itself; `socks4` uses the 4a form for
 * host names.
 */
export const UpstreamScheme = ProxyScheme;
export type UpstreamScheme = ProxyScheme;

export interface UpstreamProxy {
  scheme: UpstreamScheme;
  host: string;
  port: number;
  /** Raw credentials: a URL's percent-encoding is undone where the URL is read. */
  username?: string;
  password?: string;
}

/** Where the tunnel leads. Host names are passed to the proxy unresolved. */
export interface TunnelTarget {
  host: string;
  port: number;
}

export interface ProxyCredentials {
  username: string;
  password: string;
}

/** The proxy's credentials when it has any (a username; the password may be empty). */
export function proxyCredentials(proxy: UpstreamProxy): ProxyCredentials | undefined {
  if (proxy.username === undefined || proxy.username === "") return undefined;
  return { username: proxy.username, password: proxy.password ?? "" };
}
