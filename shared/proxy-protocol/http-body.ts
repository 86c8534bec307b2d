/**
 * Reads an HTTP/1.1 response body after its head: Content-Length, chunked, or until close,
 * keeping at most `maxBytes` of it. Enough for health checks; not a general client.
 */
import { EMPTY_BYTES } from "./bytes.ts";
import { HandshakeFailure, HandshakeProtocol, UpstreamHandshakeError } from "./errors.ts";
import { headerValue, type ResponseHead } from "./http-head.ts";

export const BodyFraming = {
  none: "none",
  length: "length",
  chunked: "chunked",
  close: "close",
} as const;
export type BodyFraming = (typeof BodyFraming)[keyof typeof BodyFraming];

/** How the body of this response is delimited (RFC 9112 section 6.3). */
export function bodyFraming(head: ResponseHead, requestMethod = "GET"): BodyFraming {
  const status = head.status;
  if (
    requestMethod === "HEAD" || (status >= 100 && status < 200) || status === 204 ||
    status === 304
  ) {
    return BodyFraming.none;
  }
  const encoding = headerValue(head, "transfer-encoding");
  if (encoding !== undefined) {
    return /(^|,)\s*chunked\s*$/i.test(encoding) ? BodyFraming.chunked : BodyFraming.close;
  }
  const length = headerValue(head, "content-length");
  if (length !== undefined) {
    if (!/^[0-9]{1,15}$/.test(length)) {
      throw new UpstreamHandshakeError(
        HandshakeProtocol.http,
        HandshakeFailure.badReply,
        "Bad Content-Length from upstream",
      );
    }
    return Number(length) === 0 ? BodyFraming.none : BodyFraming.length;
  }
  return BodyFraming.close;
}

// Chunked decoding states.
const SIZE = 0;
const EXTENSION = 1;
const SIZE_LF = 2;
const DATA = 3;
const DATA_CR = 4;
const DATA_LF = 5;
const TRAILER = 6;
const TRAILER_LF = 7;
const DONE = 8;

function badChunk(): UpstreamHandshakeError {
  return new UpstreamHandshakeError(
    HandshakeProtocol.http,
    HandshakeFailure.badReply,
    "Bad chunked encoding from upstream",
  );
}

export class ResponseBodyReader {
  readonly framing: BodyFraming;
  readonly maxBytes: number;
  #chunks: Uint8Array[] = [];
  #kept = 0;
  #truncated = false;
  #complete: boolean;
  #remaining = 0;
  #chunkState = SIZE;
  #chunkSize = 0;
  #sizeDigits = 0;
  #trailerLineLength = 0;

  constructor(head: ResponseHead, options: { maxBytes: number; requestMethod?: string }) {
    this.framing = bodyFraming(head, options.requestMethod);
    this.maxBytes = options.maxBytes;
    this.#complete = this.framing === BodyFraming.none;
    if (this.framing === BodyFraming.length) {
      this.#remaining = Number(headerValue(head, "content-length"));
    }
  }

  /** The whole body was read, or `maxBytes` of it (then `truncated`). */
  get complete(): boolean {
    return this.#complete;
  }

  get truncated(): boolean {
    return this.#truncated;
  }

  /** Feeds body bytes; answers `complete`. Bytes past the body's end are ignored. */
  push(chunk: Uint8Array): boolean {
    if (this.#complete) return true;
    switch (this.framing) {
      case BodyFraming.length: {
        const take = Math.min(chunk.length, this.#remaining);
        this.#keep(chunk.subarray(0, take));
        this.#remaining -= take;
        if (this.#remaining === 0) this.#complete = true;
        break;
      }
      case BodyFraming.chunked:
        this.#pushChunked(chunk);
        break;
      case BodyFraming.close:
        this.#keep(chunk);
        break;
    }
    return this.#complete;
  }

  /** The connection ended: answers whether the body was complete (close-delimited ends here). */
  end(): boolean {
    if (this.framing === BodyFraming.close) this.#complete = true;
    return this.#complete;
  }

  /** The kept body bytes (at most `maxBytes`). */
  body(): Uint8Array {
    if (this.#chunks.length === 0) return EMPTY_BYTES;
    if (this.#chunks.length === 1) return this.#chunks[0];
    const joined = new Uint8Array(this.#kept);
    let offset = 0;
    for (const chunk of this.#chunks) {
      joined.set(chunk, offset);
      offset += chunk.length;
    }
    this.#chunks = [joined];
    return joined;
  }

  #keep(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    const room = this.maxBytes - this.#kept;
    if (bytes.length > room) {
      // More than we keep: stop here rather than read what we would drop.
      if (room > 0) this.#chunks.push(bytes.slice(0, room));
      this.#kept = this.maxBytes;
      this.#truncated = true;
      this.#complete = true;
      return;
    }
    // Copied: the caller's read buffer may be reused.
    this.#chunks.push(bytes.slice());
    this.#kept += bytes.length;
  }

  #pushChunked(chunk: Uint8Array): void {
    let index = 0;
    while (index < chunk.length && !this.#complete) {
      const byte = chunk[index];
      switch (this.#chunkState) {
        case SIZE: {
          const digit = hexValue(byte);
          if (digit >= 0) {
            if (++this.#sizeDigits > 12) throw badChunk();
            this.#chunkSize = this.#chunkSize * 16 + digit;
          } else if (this.#sizeDigits === 0) {
            throw badChunk();
          } else if (byte === 0x3b || byte === 0x20 || byte === 0x09) {
            this.#chunkState = EXTENSION;
          } else if (byte === 0x0d) {
            this.#chunkState = SIZE_LF;
          } else if (byte === 0x0a) {
            this.#endSizeLine();
          } else {
            throw badChunk();
          }
          index++;
          break;
        }
        case EXTENSION:
          if (byte === 0x0d) this.#chunkState = SIZE_LF;
          else if (byte === 0x0a) this.#endSizeLine();
          index++;
          break;
        case SIZE_LF:
          if (byte !== 0x0a) throw badChunk();
          this.#endSizeLine();
          index++;
          break;
        case DATA: {
          const take = Math.min(chunk.length - index, this.#remaining);
          this.#keep(chunk.subarray(index, index + take));
          index += take;
          this.#remaining -= take;
          if (this.#remaining === 0) this.#chunkState = DATA_CR;
          break;
        }
        case DATA_CR:
          if (byte === 0x0d) this.#chunkState = DATA_LF;
          else if (byte === 0x0a) this.#chunkState = SIZE;
          else throw badChunk();
          index++;
          break;
        case DATA_LF:
          if (byte !== 0x0a) throw badChunk();
          this.#chunkState = SIZE;
          index++;
          break;
        case TRAILER:
          // Trailer lines until an empty one.
          if (byte === 0x0d) {
            this.#chunkState = TRAILER_LF;
          } else if (byte === 0x0a) {
            this.#endTrailerLine();
          } else {
            this.#trailerLineLength++;
          }
          index++;
          break;
        case TRAILER_LF:
          if (byte !== 0x0a) throw badChunk();
          this.#endTrailerLine();
          index++;
          break;
        default:
          return;
      }
    }
  }

  #endSizeLine(): void {
    this.#remaining = this.#chunkSize;
    this.#chunkSize = 0;
    this.#sizeDigits = 0;
    this.#chunkState = this.#remaining === 0 ? TRAILER : DATA;
    this.#trailerLineLength = 0;
  }

  #endTrailerLine(): void {
    if (this.#trailerLineLength === 0) {
      this.#chunkState = DONE;
      this.#complete = true;
    } else {
      this.#trailerLineLength = 0;
      this.#chunkState = TRAILER;
    }
  }
}

function hexValue(byte: number): number {
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  if (byte >= 0x61 && byte <= 0x66) return byte - 0x57;
  if (byte >= 0x41 && byte <= 0x46) return byte - 0x37;
  return -1;
}
