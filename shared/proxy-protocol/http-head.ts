/** An incremental parser of an HTTP/1.x response head (a proxy's answer, or a target's). */
import { latin1Decode } from "./bytes.ts";
import { HandshakeFailure, HandshakeProtocol, UpstreamHandshakeError } from "./errors.ts";

/** The bound on a response head: a proxy that sends more is not speaking HTTP to us. */
export const MAX_HEAD_BYTES = 16 * 1024;

export interface ResponseHead {
  /** "1.0" or "1.1". */
  version: string;
  status: number;
  reason: string;
  /** In order, names lower-cased, values trimmed. */
  headers: Array<[name: string, value: string]>;
}

export interface ParsedHead {
  head: ResponseHead;
  /** How many bytes of the chunk just pushed belong to the head; the rest follow it. */
  consumed: number;
}

/** The first value of a header (name in lower case), or undefined. */
export function headerValue(head: ResponseHead, name: string): string | undefined {
  for (const [key, value] of head.headers) if (key === name) return value;
  return undefined;
}

const LF = 10;
const CR = 13;

/**
 * Finds the end of an HTTP head (the blank line, CRLF CRLF or a bare LF LF) in
 * `chunk[start, limit)`, carrying `state` across chunks: 0 mid-line, 1 after a line's LF, 2 after
 * a CR that followed it. Answers the index just past the head's last byte (-1 when not there yet)
 * and the state to carry into the next chunk. One scanner for request and response heads alike.
 */
export function scanHeadEnd(
  chunk: Uint8Array,
  start: number,
  limit: number,
  state: number,
): { end: number; state: number } {
  for (let index = start; index < limit; index++) {
    const byte = chunk[index];
    if (byte === LF) {
      if (state !== 0) return { end: index + 1, state };
      state = 1;
    } else if (byte === CR) {
      state = state === 1 ? 2 : 0;
    } else {
      state = 0;
    }
  }
  return { end: -1, state };
}
const STATUS_LINE = /^HTTP\/(1\.[01]) ([0-9]{3})(?: (.*))?$/;

function badReply(message: string): UpstreamHandshakeError {
  return new UpstreamHandshakeError(HandshakeProtocol.http, HandshakeFailure.badReply, message);
}

/** Where the line starting at `from` ends, without its LF and a CR before it: [end, next]. */
export function lineBounds(text: string, from: number): [end: number, next: number] {
  let next = text.indexOf("\n", from);
  if (next < 0) next = text.length;
  const end = next > from && text.charCodeAt(next - 1) === CR ? next - 1 : next;
  return [end, next + 1];
}

/**
 * Calls `line` for each header line of a head's text, from `from` up to the empty line that
 * ends it, with the line's bounds (its LF and a CR before it left out). A line that starts with
 * a space or a tab continues the one before (obsolete folding): `continued` says so. One walk
 * over header lines for every head parser; each decides what it accepts.
 */
export function eachHeaderLine(
  text: string,
  from: number,
  line: (start: number, end: number, continued: boolean) => void,
): void {
  const length = text.length;
  let position = from;
  while (position < length) {
    // lineBounds, inline: no pair allocated per line of every head.
    let next = text.indexOf("\n", position);
    if (next < 0) next = length;
    const end = next > position && text.charCodeAt(next - 1) === CR ? next - 1 : next;
    if (end === position) return;
    const first = text.charCodeAt(position);
    line(position, end, first === 32 || first === 9);
    position = next + 1;
  }
}

/** Parses a complete head (status line through the empty line), by index in one pass. */
export function parseResponseHead(bytes: Uint8Array): ResponseHead {
  const text = latin1Decode(bytes);
  const [lineEnd, afterLine] = lineBounds(text, 0);
  const match = STATUS_LINE.exec(text.slice(0, lineEnd));
  if (!match) throw badReply("Bad HTTP status line from upstream");
  const headers: Array<[string, string]> = [];
  eachHeaderLine(text, afterLine, (start, end, continued) => {
    if (continued && headers.length > 0) {
      const last = headers[headers.length - 1];
      last[1] = `${last[1]} ${text.slice(start, end).trim()}`;
      return;
    }
    const colon = text.indexOf(":", start);
    if (colon <= start || colon >= end) throw badReply("Bad HTTP header line from upstream");
    headers.push([
      text.slice(start, colon).trim().toLowerCase(),
      text.slice(colon + 1, end).trim(),
    ]);
  });
  return { version: match[1], status: Number(match[2]), reason: match[3] ?? "", headers };
}

/**
 * Feed it chunks as they arrive; it answers the head once the empty line is seen, with how
 * much of the last chunk it used. Only a head split across chunks is copied, and never more
 * than `maxBytes`. Lines may end in CRLF or a bare LF.
 */
export class ResponseHeadParser {
  readonly maxBytes: number;
  #buffer: Uint8Array | undefined;
  #length = 0;
  // 0: inside a line; 1: just after LF; 2: after LF then CR.
  #state = 0;

  constructor(maxBytes: number = MAX_HEAD_BYTES) {
    this.maxBytes = maxBytes;
  }

  /** Bytes held from earlier chunks. */
  get bufferedBytes(): number {
    return this.#length;
  }

  /**
   * Scans `chunk`; answers the parsed head once complete, else undefined (push more).
   * Throws UpstreamHandshakeError (head_too_large, bad_reply).
   */
  push(chunk: Uint8Array): ParsedHead | undefined {
    const room = this.maxBytes - this.#length;
    const limit = Math.min(chunk.length, room);
    const { end, state } = scanHeadEnd(chunk, 0, limit, this.#state);
    if (end < 0) {
      if (chunk.length >= room) {
        throw new UpstreamHandshakeError(
          HandshakeProtocol.http,
          HandshakeFailure.headTooLarge,
          `Upstream response head exceeds ${this.maxBytes} bytes`,
        );
      }
      this.#state = state;
      this.#append(chunk);
      return undefined;
    }
    let headBytes: Uint8Array;
    if (this.#length === 0) {
      headBytes = chunk.subarray(0, end);
    } else {
      this.#append(chunk.subarray(0, end));
      headBytes = this.#buffer!.subarray(0, this.#length);
    }
    const head = parseResponseHead(headBytes);
    this.reset();
    return { head, consumed: end };
  }

  /** Forgets everything, to parse another head (after a 1xx, or on a reused connection). */
  reset(): void {
    this.#buffer = undefined;
    this.#length = 0;
    this.#state = 0;
  }

  #append(bytes: Uint8Array): void {
    const needed = this.#length + bytes.length;
    if (!this.#buffer || this.#buffer.length < needed) {
      const grown = new Uint8Array(Math.min(this.maxBytes, Math.max(needed, 1024, needed * 2)));
      if (this.#buffer) grown.set(this.#buffer.subarray(0, this.#length));
      this.#buffer = grown;
    }
    this.#buffer.set(bytes, this.#length);
    this.#length = needed;
  }
}
