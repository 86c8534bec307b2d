/** Request heads a client sends an HTTP proxy: CONNECT, and absolute-form forward requests. */
import { formatAuthority, hostKind, isValidPort } from "./address.ts";
import { BoundedMap } from "../bounded-map.ts";
import { base64Encode, utf8Encode } from "./bytes.ts";
import { HandshakeFailure, HandshakeProtocol, UpstreamHandshakeError } from "./errors.ts";
import type { ProxyCredentials, TunnelTarget } from "./types.ts";

export type HeaderEntry = readonly [name: string, value: string];

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// Field values may not carry CR, LF or NUL: they would end the line and inject headers.
const UNSAFE_VALUE = /[\r\n\0]/;

// Per credential pair and per whole CONNECT head: the same few go out tunnel after tunnel, and
// encoding allocates (typed arrays cost the runtime more than the rest of building a head).
const authorizations = new BoundedMap<string, string>(1024);
const connectHeads = new BoundedMap<string, Uint8Array>(4096);

function invalid(message: string): UpstreamHandshakeError {
  return new UpstreamHandshakeError(
    HandshakeProtocol.http,
    HandshakeFailure.invalidRequest,
    message,
  );
}

/**
 * The `Proxy-Authorization` value for Basic auth: `user:pass` as UTF-8 (RFC 7617), base64.
 * Takes raw credentials; a URL's percent-encoding is undone when the URL is parsed.
 */
export function basicProxyAuthorization(credentials: ProxyCredentials): string {
  return authorizations.getOrBuild(
    `${credentials.username}:${credentials.password}`,
    (pair) => `Basic ${base64Encode(utf8Encode(pair))}`,
  );
}

function appendHeaders(lines: string[], headers: readonly HeaderEntry[]): void {
  for (const [name, value] of headers) {
    if (!TOKEN.test(name)) throw invalid("Invalid header name");
    if (UNSAFE_VALUE.test(value)) throw invalid(`Invalid value for header ${name}`);
    lines.push(`${name}: ${value}`);
  }
}

export interface ConnectRequestOptions {
  credentials?: ProxyCredentials;
  /** Extra header lines, after Host and Proxy-Authorization. */
  headers?: readonly HeaderEntry[];
}

/** `CONNECT host:port HTTP/1.1` with Host and, given credentials, Proxy-Authorization. */
export function encodeConnectRequest(
  target: TunnelTarget,
  options: ConnectRequestOptions = {},
): Uint8Array {
  if (hostKind(target.host) === undefined) throw invalid("Invalid target host");
  if (!isValidPort(target.port)) throw invalid("Invalid target port");
  const authority = formatAuthority(target.host, target.port);
  const lines = [`CONNECT ${authority} HTTP/1.1`, `Host: ${authority}`];
  if (options.credentials) {
    lines.push(`Proxy-Authorization: ${basicProxyAuthorization(options.credentials)}`);
  }
  if (options.headers) appendHeaders(lines, options.headers);
  lines.push("", "");
  // Shared between writes, which only read it.
  return connectHeads.getOrBuild(lines.join("\r\n"), utf8Encode);
}

export interface ForwardRequestOptions {
  method: string;
  /** An absolute http:// URL; its fragment is dropped. */
  url: string | URL;
  credentials?: ProxyCredentials;
  /** Header lines after Host and Proxy-Authorization; a Host entry here replaces ours. */
  headers?: readonly HeaderEntry[];
}

/**
 * The head of a request sent to an HTTP proxy in absolute form (`GET http://host/path
 * HTTP/1.1`), for plain-http targets that need no tunnel. The body, if any, follows it.
 */
export function encodeForwardRequestHead(options: ForwardRequestOptions): Uint8Array {
  if (!TOKEN.test(options.method)) throw invalid("Invalid method");
  let url: URL;
  try {
    url = typeof options.url === "string" ? new URL(options.url) : options.url;
  } catch (error) {
    throw new UpstreamHandshakeError(
      HandshakeProtocol.http,
      HandshakeFailure.invalidRequest,
      "Invalid URL",
      { cause: error },
    );
  }
  if (url.protocol !== "http:") throw invalid("Forward requests take http:// URLs only");
  const target = `http://${url.host}${url.pathname}${url.search}`;
  if (/[\s]/.test(target)) throw invalid("Invalid URL");
  const lines = [`${options.method} ${target} HTTP/1.1`];
  const hasHost = options.headers?.some(([name]) => name.toLowerCase() === "host") ?? false;
  if (!hasHost) lines.push(`Host: ${url.host}`);
  if (options.credentials) {
    lines.push(`Proxy-Authorization: ${basicProxyAuthorization(options.credentials)}`);
  }
  if (options.headers) appendHeaders(lines, options.headers);
  lines.push("", "");
  return utf8Encode(lines.join("\r\n"));
}
