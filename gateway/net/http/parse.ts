/**
 * The client side of HTTP/1.x: an incremental request-head reader, the request's body framing
 * (RFC 9112 section 6) and the two request-target forms a proxy takes (absolute-form for
 * forwarding, authority-form for CONNECT). Strict where leniency lets requests be smuggled:
 * obsolete line folding, whitespace before a colon, a control character in a value,
 * Content-Length beside Transfer-Encoding, a Transfer-Encoding other than a lone `chunked` and
 * conflicting lengths are refused with 400. Bare LF line ends are read as line ends (RFC 9112
 * section 2.2): the head sent on is written anew with CRLF, so no one downstream reads it
 * otherwise.
 */
import { hostKind, isValidPort } from "../../../shared/proxy-protocol/address.ts";
import { latin1Decode } from "../../../shared/proxy-protocol/bytes.ts";
import {
  eachHeaderLine,
  lineBounds,
  scanHeadEnd,
} from "../../../shared/proxy-protocol/http-head.ts";
import type { Target } from "../../../shared/routing/contract.ts";
import type { HeaderField } from "../../base/admission.ts";
import { HeadError } from "../../../shared/errors.ts";

export { HeadError };

export type { HeaderField };

export interface RequestHead {
  readonly method: string;
  readonly target: string;
  readonly version: "1.0" | "1.1";
  readonly headers: readonly HeaderField[];
}

/** More header fields than any real client sends: a head with more is refused (431). */
export const MAX_HEADER_FIELDS = 256;

const LF = 10;
const CR = 13;
const SPACE = 32;
const TAB = 9;
const DEL = 0x7f;

/** RFC 9110 token characters, by code (ASCII only). */
const TOKEN_CHARS: readonly boolean[] = (() => {
  const table = new Array<boolean>(128).fill(false);
  const mark = (code: number) => (table[code] = true);
  for (const char of "!#$%&'*+-.^_`|~") mark(char.charCodeAt(0));
  for (let code = 48; code <= 57; code++) mark(code);
  for (let code = 65; code <= 90; code++) mark(code);
  for (let code = 97; code <= 122; code++) mark(code);
  return table;
})();

/** Whether `text[start, end)` is a non-empty token. */
export function isTokenRange(text: string, start: number, end: number): boolean {
  if (start >= end) return false;
  for (let index = start; index < end; index++) {
    const code = text.charCodeAt(index);
    if (code >= 128 || !TOKEN_CHARS[code]) return false;
  }
  return true;
}

/**
 * Whether `text[start, end)` is non-empty and holds no white space or control character: a
 * request-target is visible characters (RFC 9112 section 3.2), and it goes on in the upstream's
 * request line, where servers read a NUL or a DEL each in their own way. Bytes past ASCII
 * (raw UTF-8 paths) pass, but for the no-break space, which some servers read as white space.
 */
function isVisibleRange(text: string, start: number, end: number): boolean {
  if (start >= end) return false;
  for (let index = start; index < end; index++) {
    const code = text.charCodeAt(index);
    if (code <= SPACE || code === DEL || code === 0xa0) return false;
  }
  return true;
}

/**
 * A field's value without the white space around it (RFC 9110 OWS: spaces and tabs only), or
 * undefined when it holds a control character (CR, NUL, a vertical tab...): a recipient that
 * read such a byte as white space would frame the message differently from us.
 */
function fieldValue(text: string, start: number, end: number): string | undefined {
  while (start < end && (text.charCodeAt(start) === SPACE || text.charCodeAt(start) === TAB)) {
    start++;
  }
  while (end > start && (text.charCodeAt(end - 1) === SPACE || text.charCodeAt(end - 1) === TAB)) {
    end--;
  }
  for (let index = start; index < end; index++) {
    const code = text.charCodeAt(index);
    if ((code < SPACE && code !== TAB) || code === DEL) return undefined;
  }
  return text.slice(start, end);
}

function bad(message: string): HeadError {
  return new HeadError(400, message);
}

/**
 * Parses a complete head (request line through the empty line). Throws HeadError. One pass
 * over the decoded head, by index: every request comes through here.
 */
export function parseRequestHead(bytes: Uint8Array): RequestHead {
  const text = latin1Decode(bytes);
  // Request line: method SP target SP HTTP/1.x, nothing else.
  const [lineEnd, afterLine] = lineBounds(text, 0);
  const firstSpace = text.indexOf(" ");
  const secondSpace = firstSpace < 0 ? -1 : text.indexOf(" ", firstSpace + 1);
  if (
    firstSpace < 0 || secondSpace < 0 || secondSpace >= lineEnd ||
    !isTokenRange(text, 0, firstSpace) || !isVisibleRange(text, firstSpace + 1, secondSpace)
  ) {
    throw bad("Malformed request line");
  }
  const version = text.slice(secondSpace + 1, lineEnd);
  if (version !== "HTTP/1.1" && version !== "HTTP/1.0") throw bad("Malformed request line");
  const headers: HeaderField[] = [];
  eachHeaderLine(text, afterLine, (start, end, continued) => {
    if (continued) throw bad("Folded header lines are not accepted");
    const colon = text.indexOf(":", start);
    if (colon <= start || colon >= end) throw bad("Malformed header line");
    if (!isTokenRange(text, start, colon)) throw bad("Malformed header name");
    const value = fieldValue(text, colon + 1, end);
    if (value === undefined) throw bad("Malformed header value");
    if (headers.length >= MAX_HEADER_FIELDS) {
      throw new HeadError(431, "Too many header fields");
    }
    const name = text.slice(start, colon);
    headers.push({ name, lower: name.toLowerCase(), value });
  });
  return {
    method: text.slice(0, firstSpace),
    target: text.slice(firstSpace + 1, secondSpace),
    version: version === "HTTP/1.0" ? "1.0" : "1.1",
    headers,
  };
}

/**
 * Feed it bytes as they arrive; it answers the head once the empty line is seen. Only a head
 * split across reads is copied, never more than `maxBytes` of it. Lines may end in CRLF or LF.
 */
export class HeadReader<T> {
  readonly maxBytes: number;
  readonly #parse: (bytes: Uint8Array) => T;
  readonly #tooLarge: () => Error;
  #buffer: Uint8Array | undefined;
  #length = 0;
  // 0: inside a line; 1: just after LF; 2: after LF then CR.
  #state = 0;
  // Still before the first line: empty lines there are skipped (RFC 9112 section 2.2).
  #atStart = true;

  constructor(maxBytes: number, parse: (bytes: Uint8Array) => T, tooLarge: () => Error) {
    this.maxBytes = maxBytes;
    this.#parse = parse;
    this.#tooLarge = tooLarge;
  }

  /** Whether anything of a head has arrived (a clean end of stream is one between messages). */
  get started(): boolean {
    return !this.#atStart || this.#length > 0;
  }

  /** Answers the head and how much of `chunk` it took, or undefined (push more). */
  push(chunk: Uint8Array): { head: T; consumed: number } | undefined {
    let start = 0;
    if (this.#atStart) {
      while (start < chunk.length && (chunk[start] === CR || chunk[start] === LF)) start++;
      if (start === chunk.length) return undefined;
      this.#atStart = false;
    }
    const room = this.maxBytes - this.#length;
    const limit = Math.min(chunk.length, start + room);
    const { end, state } = scanHeadEnd(chunk, start, limit, this.#state);
    if (end < 0) {
      if (chunk.length - start >= room) throw this.#tooLarge();
      this.#state = state;
      this.#append(chunk.subarray(start));
      return undefined;
    }
    let headBytes: Uint8Array;
    if (this.#length === 0) {
      headBytes = chunk.subarray(start, end);
    } else {
      this.#append(chunk.subarray(start, end));
      headBytes = this.#buffer!.subarray(0, this.#length);
    }
    const head = this.#parse(headBytes);
    this.reset();
    return { head, consumed: end };
  }

  /** Forgets everything, for the next message on the connection. */
  reset(): void {
    this.#buffer = undefined;
    this.#length = 0;
    this.#state = 0;
    this.#atStart = true;
  }

  #append(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    const needed = this.#length + bytes.length;
    if (!this.#buffer || this.#buffer.length < needed) {
      const grown = new Uint8Array(Math.min(this.maxBytes, Math.max(needed * 2, 1024)));
      if (this.#buffer) grown.set(this.#buffer.subarray(0, this.#length));
      this.#buffer = grown;
    }
    this.#buffer.set(bytes, this.#length);
    this.#length = needed;
  }
}

/** The client's request heads, bounded by OCTOPROX_MAX_HEADER_BYTES (431 beyond). */
export function requestHeadReader(maxBytes: number): HeadReader<RequestHead> {
  return new HeadReader(
    maxBytes,
    parseRequestHead,
    () => new HeadError(431, `Request head larger than ${maxBytes} bytes`),
  );
}

/** Every value of a header (name in lower case), in order. */
export function headerValues(headers: readonly HeaderField[], lower: string): readonly string[] {
  let values: string[] | undefined;
  for (const field of headers) if (field.lower === lower) (values ??= []).push(field.value);
  return values ?? NO_VALUES;
}

const NO_VALUES: readonly string[] = Object.freeze([]);

/** The first value of a header (name in lower case), or null. */
export function headerValue(head: RequestHead, lower: string): string | null {
  for (const field of head.headers) if (field.lower === lower) return field.value;
  return null;
}

/** No token: what a message without the field gets, shared. */
export const NO_TOKENS: ReadonlySet<string> = new Set();

/**
 * The comma-separated tokens of every value of a header (name in lower case), lower case. Most
 * messages have no such field: they get one shared empty set, nothing built per request.
 */
export function headerTokens(headers: readonly HeaderField[], lower: string): ReadonlySet<string> {
  let tokens: Set<string> | undefined;
  for (const field of headers) {
    if (field.lower !== lower) continue;
    for (const part of field.value.split(",")) {
      const token = part.trim().toLowerCase();
      if (token !== "") (tokens ??= new Set()).add(token);
    }
  }
  return tokens ?? NO_TOKENS;
}

export const BodyKind = { none: "none", length: "length", chunked: "chunked" } as const;
export type BodyKind = (typeof BodyKind)[keyof typeof BodyKind];

export interface RequestFraming {
  kind: BodyKind;
  /** Bytes of a `length` body. */
  lengthBytes: number;
}

const NO_BODY: RequestFraming = Object.freeze({ kind: BodyKind.none, lengthBytes: 0 });
const CHUNKED: RequestFraming = Object.freeze({ kind: BodyKind.chunked, lengthBytes: 0 });

/** How the request's body is delimited. Throws HeadError (400) where it is ambiguous. */
export function requestFraming(head: RequestHead): RequestFraming {
  const encodings = headerValues(head.headers, "transfer-encoding");
  const lengths = headerValues(head.headers, "content-length");
  if (encodings.length > 0) {
    if (head.version === "1.0") throw bad("Transfer-Encoding is not allowed in HTTP/1.0");
    if (lengths.length > 0) throw bad("Content-Length and Transfer-Encoding together");
    // Only `chunked`, alone: any other list (`identity, chunked`, `gzip, chunked`) is one some
    // upstream may frame differently, and no client needs it.
    const codings = encodings.join(",").split(",").map((part) => part.trim().toLowerCase());
    if (codings.length !== 1 || codings[0] !== "chunked") {
      throw bad("A request body's Transfer-Encoding must be chunked alone");
    }
    return CHUNKED;
  }
  if (lengths.length === 0) return NO_BODY;
  let length: number | undefined;
  for (const value of lengths.join(",").split(",")) {
    const text = value.trim();
    if (!/^[0-9]{1,15}$/.test(text)) throw bad("Malformed Content-Length");
    const parsed = Number(text);
    if (length !== undefined && parsed !== length) throw bad("Conflicting Content-Length values");
    length = parsed;
  }
  return length === 0 ? NO_BODY : { kind: BodyKind.length, lengthBytes: length! };
}

/** Whether the client wants the connection kept after this exchange. */
export function clientKeepsAlive(head: RequestHead): boolean {
  const tokens = headerTokens(head.headers, "connection");
  const proxyTokens = headerTokens(head.headers, "proxy-connection");
  if (tokens.has("close") || proxyTokens.has("close")) return false;
  if (head.version === "1.1") return true;
  return tokens.has("keep-alive") || proxyTokens.has("keep-alive");
}

export interface ForwardTarget extends Target {
  /** The authority as the client wrote it, for the Host header and the absolute-form line. */
  authority: string;
  /** The origin-form target: path and query, never empty, no fragment. */
  path: string;
  /** A request inside an intercepted tunnel: the gateway speaks TLS to the target itself. */
  tls?: true;
}

/** Splits `host[:port]` or `[v6][:port]`; the host comes back without brackets. */
function parseAuthority(authority: string, defaultPort: number): Target {
  let host: string;
  let portText: string | undefined;
  if (authority.startsWith("[")) {
    const close = authority.indexOf("]");
    if (close < 0) throw bad("Malformed IPv6 address in the request target");
    host = authority.slice(1, close);
    const rest = authority.slice(close + 1);
    if (rest !== "") {
      if (!rest.startsWith(":")) throw bad("Malformed request target");
      portText = rest.slice(1);
    }
    if (!host.includes(":") || hostKind(host) !== "ipv6") throw bad("Malformed IPv6 address");
  } else {
    const colon = authority.indexOf(":");
    if (colon >= 0) {
      host = authority.slice(0, colon);
      portText = authority.slice(colon + 1);
    } else {
      host = authority;
    }
    const kind = hostKind(host);
    if (kind === undefined || kind === "ipv6") throw bad("Malformed host in the request target");
  }
  let port = defaultPort;
  if (portText !== undefined && portText !== "") {
    if (!/^[0-9]{1,5}$/.test(portText)) throw bad("Malformed port in the request target");
    port = Number(portText);
  }
  if (!isValidPort(port)) throw bad("Port out of range in the request target");
  return { host, port };
}

/** Reads `http://authority/path?query` (absolute-form). Throws HeadError (400). */
export function parseAbsoluteTarget(target: string): ForwardTarget {
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(target);
  if (!scheme) {
    throw bad("A proxy request needs an absolute URL (http://host/path) or CONNECT");
  }
  const name = scheme[1].toLowerCase();
  if (name === "https") throw bad("Use CONNECT for https:// URLs");
  if (name !== "http") throw bad(`Unsupported URL scheme ${name}`);
  const rest = target.slice(scheme[0].length);
  let end = rest.length;
  for (const stop of ["/", "?", "#"]) {
    const at = rest.indexOf(stop);
    if (at >= 0 && at < end) end = at;
  }
  const authority = rest.slice(0, end);
  if (authority.includes("@")) throw bad("Credentials in the URL are not accepted");
  if (authority === "") throw bad("The URL has no host");
  const { host, port } = parseAuthority(authority, 80);
  let path = rest.slice(end);
  const fragment = path.indexOf("#");
  if (fragment >= 0) path = path.slice(0, fragment);
  if (path === "") path = "/";
  else if (path[0] === "?") path = `/${path}`;
  return { host, port, authority, path };
}

/**
 * The target of a request inside an intercepted tunnel: origin form (`/path?query`), or the
 * absolute form naming the tunnel's own authority. Every request inside goes to the tunnel's
 * target, whatever its Host says. Throws HeadError (400).
 */
export function parseInnerTarget(
  target: string,
  tunnel: Target,
  /** The tunnel's `host:port`, formatted once per tunnel. */
  authority: string,
): ForwardTarget {
  let path = target;
  if (!target.startsWith("/")) {
    const prefix = /^https:\/\/([^/?#]*)/i.exec(target);
    if (prefix === null) {
      throw bad("A request inside the tunnel needs an origin-form target (/path)");
    }
    if (
      prefix[1].toLowerCase() !== authority.toLowerCase() &&
      prefix[1].toLowerCase() !== tunnel.host.toLowerCase()
    ) {
      throw bad("A request inside the tunnel may only name the tunnel's own host");
    }
    path = target.slice(prefix[0].length);
    if (path === "" || path[0] !== "/") path = `/${path}`;
  }
  const fragment = path.indexOf("#");
  if (fragment >= 0) path = path.slice(0, fragment);
  return { host: tunnel.host, port: tunnel.port, authority, path, tls: true };
}

/** Reads CONNECT's `host:port` (authority-form; 443 when no port). Throws HeadError (400). */
export function parseConnectTarget(target: string): Target {
  if (target.includes("/") || target.includes("@")) {
    throw bad("CONNECT takes host:port");
  }
  return parseAuthority(target, 443);
}
