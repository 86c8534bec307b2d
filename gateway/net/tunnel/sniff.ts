/**
 * The name a connection's first bytes carry, for a tunnel device's connection to an address the
 * resolver did not give (transparent-session.ts): a TLS ClientHello's server name, or an HTTP
 * request's Host without its port. Runtime-neutral.
 */
import { headerValue, parseRequestHead } from "../http/parse.ts";
import { scanClientHello } from "../tls/client-hello.ts";

const HEAD_END = [13, 10, 13, 10];

/** A name in the first bytes, `more` while they may still make one, undefined when they hold none. */
export function nameIn(bytes: Uint8Array): string | undefined | "more" {
  if (bytes.length === 0) return "more";
  if (bytes[0] === 0x16) {
    const scan = scanClientHello(bytes);
    if (scan.kind === "more") return "more";
    return scan.kind === "hello" ? scan.hello.serverName : undefined;
  }
  const end = indexOf(bytes, HEAD_END);
  if (end === -1) return looksLikeHttp(bytes) ? "more" : undefined;
  try {
    const head = parseRequestHead(bytes.subarray(0, end + 4));
    const host = headerValue(head, "host");
    if (host === null) return undefined;
    return hostWithoutPort(host.trim().toLowerCase());
  } catch {
    return undefined;
  }
}

function hostWithoutPort(host: string): string | undefined {
  if (host.startsWith("[")) return undefined; // an IPv6 literal: the address serves
  const colon = host.indexOf(":");
  const name = colon === -1 ? host : host.slice(0, colon);
  return name === "" ? undefined : name;
}

/** A request line's method so far: letters up to the first space. */
function looksLikeHttp(bytes: Uint8Array): boolean {
  for (let i = 0; i < Math.min(bytes.length, 16); i++) {
    const byte = bytes[i];
    if (byte === 0x20) return i > 0;
    if (byte < 0x41 || byte > 0x5a) return false;
  }
  return bytes.length < 16;
}

function indexOf(bytes: Uint8Array, pattern: readonly number[]): number {
  outer: for (let i = 0; i + pattern.length <= bytes.length; i++) {
    for (let j = 0; j < pattern.length; j++) if (bytes[i + j] !== pattern[j]) continue outer;
    return i;
  }
  return -1;
}
