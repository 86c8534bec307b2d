/**
 * The upstream side of a forwarded exchange: its response head (names kept in their case, to
 * pass them on as sent) and how its body is delimited (RFC 9112 section 6.3). A malformed
 * answer is an UpstreamHandshakeError (bad_reply), like a malformed CONNECT answer.
 */
import { latin1Decode } from "../../../shared/proxy-protocol/bytes.ts";
import {
  HandshakeFailure,
  HandshakeProtocol,
  UpstreamHandshakeError,
} from "../../../shared/proxy-protocol/errors.ts";
import { eachHeaderLine, lineBounds } from "../../../shared/proxy-protocol/http-head.ts";
import { type HeaderField, headerValues, HeadReader, isTokenRange } from "./parse.ts";

export interface ResponseHead {
  readonly version: "1.0" | "1.1";
  readonly status: number;
  readonly reason: string;
  readonly headers: HeaderField[];
}

function badReply(message: string): UpstreamHandshakeError {
  return new UpstreamHandshakeError(HandshakeProtocol.http, HandshakeFailure.badReply, message);
}

/** Reads `HTTP/1.x NNN[ reason]`; undefined when the line is anything else. */
function parseStatusLine(
  text: string,
  end: number,
): { version: "1.0" | "1.1"; status: number; reason: string } | undefined {
  if (end < 12 || !text.startsWith("HTTP/1.") || text.charCodeAt(8) !== 32) return undefined;
  const minor = text.charCodeAt(7);
  if (minor !== 48 && minor !== 49) return undefined;
  let status = 0;
  for (let index = 9; index < 12; index++) {
    const digit = text.charCodeAt(index) - 48;
    if (digit < 0 || digit > 9) return undefined;
    status = status * 10 + digit;
  }
  if (end > 12 && text.charCodeAt(12) !== 32) return undefined;
  const reason = end > 12 ? text.slice(13, end) : "";
  // A CR inside would split the status line the client reads.
  if (reason.includes("\r")) return undefined;
  return { version: minor === 48 ? "1.0" : "1.1", status, reason };
}

/** Parses a complete head (status line through the empty line), by index in one pass. */
export function parseResponseHead(bytes: Uint8Array): ResponseHead {
  const text = latin1Decode(bytes);
  const [lineEnd, afterLine] = lineBounds(text, 0);
  const statusLine = parseStatusLine(text, lineEnd);
  if (!statusLine) throw badReply("Bad HTTP status line from upstream");
  const headers: HeaderField[] = [];
  eachHeaderLine(text, afterLine, (start, end, continued) => {
    if (continued && headers.length > 0) {
      // Obsolete folding, joined with one space and sent on as one line.
      const last = headers[headers.length - 1];
      const more = text.slice(start, end).trim();
      headers[headers.length - 1] = { ...last, value: `${last.value} ${more}` };
      return;
    }
    const colon = text.indexOf(":", start);
    let nameEnd = colon > start && colon < end ? colon : start;
    // White space before the colon is tolerated from an upstream (not from a client).
    while (nameEnd > start) {
      const code = text.charCodeAt(nameEnd - 1);
      if (code !== 32 && code !== 9) break;
      nameEnd--;
    }
    if (!isTokenRange(text, start, nameEnd)) throw badReply("Bad HTTP header line from upstream");
    const value = text.slice(colon + 1, end).trim();
    if (value.includes("\r") || value.includes("\0")) throw badReply("Bad HTTP header value");
    const name = text.slice(start, nameEnd);
    headers.push({ name, lower: name.toLowerCase(), value });
  });
  return { ...statusLine, headers };
}

export function responseHeadReader(maxBytes: number): HeadReader<ResponseHead> {
  return new HeadReader(
    maxBytes,
    parseResponseHead,
    () =>
      new UpstreamHandshakeError(
        HandshakeProtocol.http,
        HandshakeFailure.headTooLarge,
        `Upstream response head exceeds ${maxBytes} bytes`,
      ),
  );
}

export const ResponseBody = {
  none: "none",
  length: "length",
  chunked: "chunked",
  /** Until the upstream closes: the client's connection closes after it too. */
  close: "close",
} as const;
export type ResponseBody = (typeof ResponseBody)[keyof typeof ResponseBody];

export interface ResponseFraming {
  kind: ResponseBody;
  lengthBytes: number;
}

const NO_BODY: ResponseFraming = Object.freeze({ kind: ResponseBody.none, lengthBytes: 0 });

/** 1 to 15 digits alone: their number; -1 for anything else (read the long way). */
function plainLength(text: string): number {
  if (text.length === 0 || text.length > 15) return -1;
  let value = 0;
  for (let index = 0; index < text.length; index++) {
    const digit = text.charCodeAt(index) - 48;
    if (digit < 0 || digit > 9) return -1;
    value = value * 10 + digit;
  }
  return value;
}

export function responseFraming(head: ResponseHead, requestMethod: string): ResponseFraming {
  const status = head.status;
  if (requestMethod === "HEAD" || status < 200 || status === 204 || status === 304) {
    return { kind: ResponseBody.none, lengthBytes: 0 };
  }
  const encodings = headerValues(head.headers, "transfer-encoding");
  if (encodings.length > 0) {
    const codings = encodings.join(",").split(",").map((part) => part.trim().toLowerCase());
    const chunked = codings[codings.length - 1] === "chunked";
    return { kind: chunked ? ResponseBody.chunked : ResponseBody.close, lengthBytes: 0 };
  }
  const lengths = headerValues(head.headers, "content-length");
  // One plain number, as nearly every answer has: read without splitting.
  if (lengths.length === 1) {
    const length = plainLength(lengths[0]);
    if (length === 0) return NO_BODY;
    if (length > 0) return { kind: ResponseBody.length, lengthBytes: length };
  }
  if (lengths.length === 0) return { kind: ResponseBody.close, lengthBytes: 0 };
  let length: number | undefined;
  for (const part of lengths.join(",").split(",")) {
    const text = part.trim();
    if (!/^[0-9]{1,15}$/.test(text)) throw badReply("Bad Content-Length from upstream");
    const parsed = Number(text);
    if (length !== undefined && parsed !== length) throw badReply("Conflicting Content-Length");
    length = parsed;
  }
  return length === 0
    ? { kind: ResponseBody.none, lengthBytes: 0 }
    : { kind: ResponseBody.length, lengthBytes: length! };
}
