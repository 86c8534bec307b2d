/**
 * The upstream side of a forwarded exchange: its response head (names kept in their case, to
 * pass them on as sent) and how its body is delimited (RFC 9112 section 6.3). A malformed
 * answer is an UpstreamHandshakeError (bad_reply), like a malformed CONNECT answer.
 */
import { latin1Decode } from "../../shared/proxy-protocol/bytes.ts";
import {
  HandshakeFailure,
  HandshakeProtocol,
  UpstreamHandshakeError,
} from "../../shared/proxy-protocol/errors.ts";
import { type HeaderField, HeadReader } from "./http-parse.ts";

export interface ResponseHead {
  readonly version: "1.0" | "1.1";
  readonly status: number;
  readonly reason: string;
  readonly headers: HeaderField[];
}

const STATUS_LINE = /^HTTP\/1\.([01]) ([0-9]{3})(?: (.*))?$/;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

function badReply(message: string): UpstreamHandshakeError {
  return new UpstreamHandshakeError(HandshakeProtocol.http, HandshakeFailure.badReply, message);
}

export function parseResponseHead(bytes: Uint8Array): ResponseHead {
  const lines = latin1Decode(bytes).split("\n");
  const trim = (line: string) => (line.endsWith("\r") ? line.slice(0, -1) : line);
  const match = STATUS_LINE.exec(trim(lines[0]));
  if (!match) throw badReply("Bad HTTP status line from upstream");
  const headers: HeaderField[] = [];
  for (let index = 1; index < lines.length; index++) {
    const line = trim(lines[index]);
    if (line === "") break;
    if ((line[0] === " " || line[0] === "\t") && headers.length > 0) {
      // Obsolete folding: the line continues the previous value (sent on as one line).
      const last = headers[headers.length - 1];
      headers[headers.length - 1] = { ...last, value: `${last.value} ${line.trim()}` };
      continue;
    }
    const colon = line.indexOf(":");
    const name = colon > 0 ? line.slice(0, colon).trimEnd() : "";
    if (!TOKEN.test(name)) throw badReply("Bad HTTP header line from upstream");
    const value = line.slice(colon + 1).trim();
    if (value.includes("\r") || value.includes("\0")) throw badReply("Bad HTTP header value");
    headers.push({ name, lower: name.toLowerCase(), value });
  }
  return {
    version: match[1] === "0" ? "1.0" : "1.1",
    status: Number(match[2]),
    reason: match[3] ?? "",
    headers,
  };
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

function values(head: ResponseHead, lower: string): string[] {
  const found: string[] = [];
  for (const field of head.headers) if (field.lower === lower) found.push(field.value);
  return found;
}

export function responseFraming(head: ResponseHead, requestMethod: string): ResponseFraming {
  const status = head.status;
  if (requestMethod === "HEAD" || status < 200 || status === 204 || status === 304) {
    return { kind: ResponseBody.none, lengthBytes: 0 };
  }
  const encodings = values(head, "transfer-encoding");
  if (encodings.length > 0) {
    const codings = encodings.join(",").split(",").map((part) => part.trim().toLowerCase());
    const chunked = codings[codings.length - 1] === "chunked";
    return { kind: chunked ? ResponseBody.chunked : ResponseBody.close, lengthBytes: 0 };
  }
  const lengths = values(head, "content-length");
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
