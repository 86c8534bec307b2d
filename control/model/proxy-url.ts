/**
 * The one reading of a proxy address, `scheme://[user:pass@]host:port`, for the single-proxy
 * routes and the upload alike, and the identity the upload deduplicates on (the same columns as
 * the `proxies_identity_key` unique index: scheme, lower-cased host, port, username).
 */
import { isIP } from "node:net";
import { PROXY_SCHEMES, type ProxyScheme } from "../../shared/roles.ts";
import { COUNTRY_HINT, normaliseCountry } from "../../shared/countries.ts";

export interface ProxyAddress {
  scheme: ProxyScheme;
  /** Lower-cased; an IPv6 address without its brackets. */
  host: string;
  port: number;
  username: string | null;
  password: string | null;
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string };

/**
 * A proxy's username or password, in UTF-8 bytes: the username is part of the proxies' unique
 * index, whose entries Postgres keeps under 2704 bytes, and so must stay well below that.
 */
const MAX_CREDENTIAL_BYTES = 1024;
const HOST_LABEL = /^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/;
const SCHEME_LIST = PROXY_SCHEMES.join(", ");

function fail<T>(reason: string): Parsed<T> {
  return { ok: false, reason };
}

const encoder = new TextEncoder();

function utf8Length(text: string): number {
  return encoder.encode(text).length;
}

function decode(part: string, what: string): Parsed<string> {
  try {
    // Most lists carry no escapes; skip the decoder for them (an upload reads 100,000 lines).
    const value = part.includes("%") ? decodeURIComponent(part) : part;
    // Each character is 1 to 3 bytes (4 for a pair that is 2 characters): count only when
    // the characters alone leave it in doubt.
    if (
      value.length > MAX_CREDENTIAL_BYTES ||
      (value.length * 3 > MAX_CREDENTIAL_BYTES && utf8Length(value) > MAX_CREDENTIAL_BYTES)
    ) {
      return fail(`the ${what} is longer than ${MAX_CREDENTIAL_BYTES} bytes (in UTF-8)`);
    }
    // Control characters would end up in a Proxy-Authorization header or a SOCKS handshake.
    // deno-lint-ignore no-control-regex
    if (/[\u0000-\u001f\u007f]/.test(value)) return fail(`the ${what} holds control characters`);
    return { ok: true, value };
  } catch {
    return fail(`the ${what} has invalid percent-encoding`);
  }
}

/** A host name, an IPv4 address or an IPv6 address in brackets, lower-cased (brackets dropped). */
export function parseHost(text: string): Parsed<string> {
  if (text.startsWith("[")) {
    if (!text.endsWith("]")) return fail("the IPv6 address lacks its closing bracket");
    const address = text.slice(1, -1).toLowerCase();
    return isIP(address) === 6 ? { ok: true, value: address } : fail("invalid IPv6 address");
  }
  const host = text.toLowerCase().replace(/\.$/, "");
  if (host === "") return fail("the host is missing");
  if (host.includes(":")) return fail("an IPv6 address must be written in brackets, [::1]");
  if (/^[0-9.]+$/.test(host)) {
    return isIP(host) === 4 ? { ok: true, value: host } : fail("invalid IPv4 address");
  }
  if (host.length > 253 || !host.split(".").every((label) => HOST_LABEL.test(label))) {
    return fail("invalid host name");
  }
  return { ok: true, value: host };
}

/** Reads `scheme://[user:pass@]host:port`; the port is required. */
export function parseProxyUrl(input: string): Parsed<ProxyAddress> {
  const text = input.trim();
  const schemeEnd = text.indexOf("://");
  if (schemeEnd <= 0) return fail(`expected scheme://host:port with a scheme of ${SCHEME_LIST}`);
  const scheme = text.slice(0, schemeEnd).toLowerCase();
  if (!(PROXY_SCHEMES as readonly string[]).includes(scheme)) {
    return fail(`unsupported scheme "${scheme}"; use one of ${SCHEME_LIST}`);
  }
  let rest = text.slice(schemeEnd + 3);
  if (/\s/.test(rest)) return fail("a proxy address has no spaces (percent-encode them)");

  // The last @ ends the credentials: passwords in proxy lists often carry an unencoded @.
  const at = rest.lastIndexOf("@");
  let username: string | null = null;
  let password: string | null = null;
  if (at >= 0) {
    const userinfo = rest.slice(0, at);
    rest = rest.slice(at + 1);
    const colon = userinfo.indexOf(":");
    const user = decode(colon >= 0 ? userinfo.slice(0, colon) : userinfo, "username");
    if (!user.ok) return user;
    if (colon >= 0) {
      const pass = decode(userinfo.slice(colon + 1), "password");
      if (!pass.ok) return pass;
      password = pass.value === "" ? null : pass.value;
    }
    username = user.value === "" ? null : user.value;
    if (username === null && password !== null) return fail("a password needs a username");
  }

  if (rest.endsWith("/")) rest = rest.slice(0, -1);
  if (/[/?#]/.test(rest)) return fail("a proxy address has no path or query");
  const portMatch = /:(\d+)$/.exec(rest);
  if (!portMatch) return fail("the port is missing (host:port)");
  const port = Number(portMatch[1]);
  if (port < 1 || port > 65535) return fail("the port must be from 1 to 65535");
  const host = parseHost(rest.slice(0, portMatch.index));
  if (!host.ok) return host;
  return {
    ok: true,
    value: { scheme: scheme as ProxyScheme, host: host.value, port, username, password },
  };
}

/** Reads `host:port` (an IPv6 host in brackets), such as a destination; the port is required. */
export function parseHostPort(input: string): Parsed<{ host: string; port: number }> {
  const text = input.trim();
  const portMatch = /:(\d+)$/.exec(text);
  if (!portMatch) return fail("the port is missing (host:port)");
  const port = Number(portMatch[1]);
  if (port < 1 || port > 65535) return fail("the port must be from 1 to 65535");
  const host = parseHost(text.slice(0, portMatch.index));
  if (!host.ok) return host;
  return { ok: true, value: { host: host.value, port } };
}

/** The address as a URL without its password, for answers and logs. */
export function formatProxyUrl(address: Omit<ProxyAddress, "password">): string {
  const host = address.host.includes(":") ? `[${address.host}]` : address.host;
  const user = address.username === null ? "" : `${encodeURIComponent(address.username)}@`;
  return `${address.scheme}://${user}${host}:${address.port}`;
}

/** What makes two proxies of one connector the same row (see the unique index). */
export function proxyIdentity(
  address: { scheme: string; host: string; port: number; username: string | null },
): string {
  return `${address.scheme}\u0000${address.host.toLowerCase()}\u0000${address.port}\u0000${
    address.username ?? ""
  }`;
}

export interface ProxyLine {
  address: ProxyAddress;
  country: string | null;
}

/**
 * One line of an upload: the address, then optionally whitespace and a country code. Undefined
 * for a line to skip (blank, or a `#` comment).
 */
export function parseProxyLine(line: string): Parsed<ProxyLine> | undefined {
  const text = line.trim();
  if (text === "" || text.startsWith("#")) return undefined;
  const parts = text.split(/\s+/);
  if (parts.length > 2) return fail("unexpected text after the country code");
  const address = parseProxyUrl(parts[0]);
  if (!address.ok) return address;
  let country: string | null = null;
  if (parts.length === 2) {
    const code = normaliseCountry(parts[1]);
    if (code === undefined) return fail(`country "${parts[1]}" ${COUNTRY_HINT}`);
    country = code;
  }
  return { ok: true, value: { address: address.value, country } };
}
