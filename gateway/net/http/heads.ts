/**
 * What crosses the gateway of a forwarded exchange's heads. Hop-by-hop fields (RFC 9110
 * section 7.6.1) and every `Proxy-*` field stop here in both directions, as do the names a
 * `Connection` field lists; the framing fields (Content-Length, Transfer-Encoding, Trailer)
 * always pass, so a `Connection` list cannot unframe a body. The only Proxy-Authorization that
 * leaves is the upstream's own credential.
 */
import { type HeaderField, headerTokens, type RequestHead } from "./parse.ts";
import type { ResponseHead } from "./response.ts";

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "te",
  "upgrade",
]);

const FRAMING = new Set(["content-length", "transfer-encoding", "trailer"]);

/** The names a message's Connection fields list, lower case. */
export function connectionTokens(headers: readonly HeaderField[]): ReadonlySet<string> {
  return headerTokens(headers, "connection");
}

/** Whether a field stops at the gateway. */
export function isHopByHop(lower: string, listed: ReadonlySet<string>): boolean {
  if (FRAMING.has(lower)) return false;
  return HOP_BY_HOP.has(lower) || lower.startsWith("proxy-") || listed.has(lower);
}

const encoder = new TextEncoder();
const NON_ASCII = /[\u0080-\uffff]/;

/**
 * Bytes of a string of code points 0-255 (heads are decoded one byte to one code point). With
 * `into` large enough they are written there and the answer is a view of its start: a typed
 * array costs the runtime far more to allocate than to fill, and heads go out per request.
 */
export function latin1Encode(text: string, into?: Uint8Array): Uint8Array {
  const bytes = into !== undefined && into.length >= text.length
    ? into.subarray(0, text.length)
    : new Uint8Array(text.length);
  // ASCII (nearly every head) is the same bytes in UTF-8, which the runtime encodes natively.
  if (!NON_ASCII.test(text)) {
    encoder.encodeInto(text, bytes);
    return bytes;
  }
  for (let index = 0; index < text.length; index++) bytes[index] = text.charCodeAt(index) & 0xff;
  return bytes;
}

/**
 * `head` followed by `body` in one array for one write: in `scratch` when `head` is a view of
 * its start (as `latin1Encode` writes it) and both fit, else in a new array.
 */
export function joinHeadAndBody(
  head: Uint8Array,
  body: Uint8Array,
  scratch: Uint8Array | undefined,
): Uint8Array {
  if (body.length === 0) return head;
  const total = head.length + body.length;
  if (
    scratch !== undefined && head.buffer === scratch.buffer &&
    head.byteOffset === scratch.byteOffset && total <= scratch.length
  ) {
    scratch.set(body, head.length);
    return scratch.subarray(0, total);
  }
  const out = new Uint8Array(total);
  out.set(head, 0);
  out.set(body, head.length);
  return out;
}

export interface UpstreamRequestOptions {
  /** `absolute` for an HTTP proxy, `origin` inside a tunnel (SOCKS upstreams). */
  form: "absolute" | "origin";
  /**
   * The absolute form's authority when it is not the target's own: the address the guard
   * checked (`203.0.113.7:80`, `[2001:db8::7]:80`), when the gateway resolves destinations. The
   * Host field keeps the target's authority as the client wrote it.
   */
  uriAuthority?: string;
  /** The upstream's `Proxy-Authorization` value (absolute form only). */
  proxyAuthorization?: string;
  /**
   * `Connection: keep-alive` (a pooled connection to an HTTP proxy) rather than
   * `Connection: close` (a tunnel serving this one exchange).
   */
  keepAlive?: boolean;
  /** Client fields (lower-case names) that stop here too: options admission consumed. */
  strip?: ReadonlySet<string>;
}

/**
 * The head sent upstream: the client's method and fields minus hop-by-hop ones, Host from the
 * client's URL (RFC 9112 section 3.2.2: a proxy ignores the client's Host for absolute-form), Expect
 * dropped (the gateway answers 100-continue itself), as are the fields `strip` names, and our
 * own Connection field:
 * `keep-alive` for an HTTP proxy (gateway/net/io/upstream-pool.ts keeps the connection), `close`
 * inside a SOCKS tunnel, which serves this one exchange.
 */
export function encodeUpstreamRequestHead(
  head: RequestHead,
  target: { authority: string; path: string },
  options: UpstreamRequestOptions,
  into?: Uint8Array,
): Uint8Array {
  const listed = connectionTokens(head.headers);
  const requestTarget = options.form === "absolute"
    ? `http://${options.uriAuthority ?? target.authority}${target.path}`
    : target.path;
  let text =
    `${head.method} ${requestTarget} HTTP/${head.version}\r\nHost: ${target.authority}\r\n`;
  if (options.form === "absolute" && options.proxyAuthorization) {
    text += `Proxy-Authorization: ${options.proxyAuthorization}\r\n`;
  }
  const strip = options.strip;
  for (const field of head.headers) {
    if (field.lower === "host" || field.lower === "expect") continue;
    if (isHopByHop(field.lower, listed)) continue;
    if (strip !== undefined && strip.has(field.lower)) continue;
    text += `${field.name}: ${field.value}\r\n`;
  }
  text += options.keepAlive === true
    ? "Connection: keep-alive\r\n\r\n"
    : "Connection: close\r\n\r\n";
  return latin1Encode(text, into);
}

/** A Transfer-Encoding list without its chunked coding ("" when nothing else is left). */
function withoutChunked(value: string): string {
  return value.split(",").map((coding) => coding.trim())
    .filter((coding) => coding !== "" && coding.toLowerCase() !== "chunked").join(", ");
}

/**
 * The head sent to the client: the upstream's status and fields minus hop-by-hop ones, and
 * our own Connection field for the client's connection. `dechunked`: the body goes out with
 * its chunked framing taken out (an HTTP/1.0 client), so the framing fields go too.
 */
export function encodeClientResponseHead(
  head: ResponseHead,
  clientVersion: "1.0" | "1.1",
  keepAlive: boolean,
  into?: Uint8Array,
  dechunked = false,
  listed: ReadonlySet<string> = connectionTokens(head.headers),
  /** Whole header lines the gateway adds (each ending CRLF). */
  added = "",
): Uint8Array {
  const reason = head.reason === "" ? "" : ` ${head.reason}`;
  let text = `HTTP/1.1 ${head.status}${reason}\r\n`;
  for (const field of head.headers) {
    if (isHopByHop(field.lower, listed)) continue;
    if (dechunked) {
      // The body goes out decoded and ends with the connection: no chunked framing, and no
      // trailers (they are dropped with it).
      if (field.lower === "trailer") continue;
      if (field.lower === "transfer-encoding") {
        const rest = withoutChunked(field.value);
        if (rest !== "") text += `${field.name}: ${rest}\r\n`;
        continue;
      }
    }
    text += `${field.name}: ${field.value}\r\n`;
  }
  text += added;
  if (!keepAlive) text += "Connection: close\r\n";
  else if (clientVersion === "1.0") text += "Connection: keep-alive\r\n";
  text += "\r\n";
  return latin1Encode(text, into);
}
