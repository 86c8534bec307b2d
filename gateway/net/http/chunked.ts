/**
 * Finds where a chunked body ends without decoding it: the relay passes the bytes on as they
 * came (extensions and trailers included) and only needs to know when the message is over.
 * Chunk data is skipped by its size, so only the size lines are looked at byte by byte.
 * `decode` also takes the framing out, in place, for a client that cannot read it (HTTP/1.0).
 */
import { ChunkedError } from "../../../shared/errors.ts";

export { ChunkedError };

const SIZE_FIRST = 0;
const SIZE = 1;
const EXTENSION = 2;
const SIZE_LF = 3;
const DATA = 4;
const DATA_CR = 5;
const DATA_LF = 6;
const TRAILER_START = 7;
const TRAILER_LINE = 8;
const TRAILER_LF = 9;
const FINAL_LF = 10;
const DONE = 11;

// 13 hex digits: sizes up to 2^52, inside a double's exact integers.
const MAX_SIZE_DIGITS = 13;
const MAX_LINE_BYTES = 4096;

function hexValue(byte: number): number {
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  if (byte >= 0x61 && byte <= 0x66) return byte - 0x57;
  if (byte >= 0x41 && byte <= 0x46) return byte - 0x37;
  return -1;
}

export interface ChunkedScannerOptions {
  /** Accept a bare LF where CRLF belongs (upstream answers; client requests stay strict). */
  lenient?: boolean;
  /** Bound on the trailer section. */
  maxTrailerBytes?: number;
}

export class ChunkedScanner {
  readonly #lenient: boolean;
  readonly #maxTrailerBytes: number;
  #state = SIZE_FIRST;
  #remaining = 0;
  #digits = 0;
  #lineBytes = 0;
  #trailerBytes = 0;
  /** Inside `decode`: where the next chunk data byte goes. */
  #decodedBytes = -1;

  constructor(options: ChunkedScannerOptions = {}) {
    this.#lenient = options.lenient ?? false;
    this.#maxTrailerBytes = options.maxTrailerBytes ?? 32 * 1024;
  }

  get done(): boolean {
    return this.#state === DONE;
  }

  /**
   * As `push`, and moves the chunk data among `bytes` to their start, in order, leaving size
   * lines, extensions and trailers out: `dataBytes` of them are the body's content. (Data only
   * moves toward the start, over bytes already scanned, so nothing unread is overwritten.)
   */
  decode(bytes: Uint8Array): { end: number; dataBytes: number } {
    this.#decodedBytes = 0;
    try {
      const end = this.push(bytes);
      return { end, dataBytes: this.#decodedBytes };
    } finally {
      this.#decodedBytes = -1;
    }
  }

  /**
   * Scans the next bytes of the body. Answers the offset just past the body's last byte when
   * it ends inside `bytes`, else -1 (all of `bytes` belongs to the body). Throws ChunkedError.
   */
  push(bytes: Uint8Array): number {
    let index = 0;
    const length = bytes.length;
    while (index < length) {
      switch (this.#state) {
        case DATA: {
          const take = Math.min(length - index, this.#remaining);
          const into = this.#decodedBytes;
          if (into >= 0) {
            if (into !== index) bytes.copyWithin(into, index, index + take);
            this.#decodedBytes = into + take;
          }
          index += take;
          this.#remaining -= take;
          if (this.#remaining === 0) this.#state = DATA_CR;
          continue;
        }
        case SIZE_FIRST: {
          const digit = hexValue(bytes[index]);
          if (digit < 0) throw new ChunkedError("Malformed chunk size");
          this.#remaining = digit;
          this.#digits = 1;
          this.#lineBytes = 1;
          this.#state = SIZE;
          break;
        }
        case SIZE: {
          const byte = bytes[index];
          const digit = hexValue(byte);
          if (digit >= 0) {
            if (++this.#digits > MAX_SIZE_DIGITS) throw new ChunkedError("Chunk size too large");
            this.#remaining = this.#remaining * 16 + digit;
          } else if (byte === 0x3b || byte === 0x20 || byte === 0x09) {
            this.#state = EXTENSION;
          } else if (byte === 0x0d) {
            this.#state = SIZE_LF;
          } else if (byte === 0x0a && this.#lenient) {
            this.#endSizeLine();
          } else {
            throw new ChunkedError("Malformed chunk size");
          }
          this.#countLine();
          break;
        }
        case EXTENSION: {
          const byte = bytes[index];
          if (byte === 0x0d) this.#state = SIZE_LF;
          else if (byte === 0x0a && this.#lenient) this.#endSizeLine();
          else if (byte === 0x0a || byte === 0) throw new ChunkedError("Malformed chunk extension");
          this.#countLine();
          break;
        }
        case SIZE_LF:
          if (bytes[index] !== 0x0a) throw new ChunkedError("Malformed chunk size line");
          this.#endSizeLine();
          break;
        case DATA_CR: {
          const byte = bytes[index];
          if (byte === 0x0d) this.#state = DATA_LF;
          else if (byte === 0x0a && this.#lenient) this.#state = SIZE_FIRST;
          else throw new ChunkedError("Chunk data not followed by CRLF");
          break;
        }
        case DATA_LF:
          if (bytes[index] !== 0x0a) throw new ChunkedError("Chunk data not followed by CRLF");
          this.#state = SIZE_FIRST;
          break;
        case TRAILER_START: {
          const byte = bytes[index];
          if (byte === 0x0d) {
            this.#state = FINAL_LF;
          } else if (byte === 0x0a && this.#lenient) {
            this.#state = DONE;
            return index + 1;
          } else {
            this.#state = TRAILER_LINE;
            this.#countTrailer();
          }
          break;
        }
        case TRAILER_LINE: {
          const byte = bytes[index];
          if (byte === 0x0d) this.#state = TRAILER_LF;
          else if (byte === 0x0a && this.#lenient) this.#state = TRAILER_START;
          else if (byte === 0x0a || byte === 0) throw new ChunkedError("Malformed trailer");
          this.#countTrailer();
          break;
        }
        case TRAILER_LF:
          if (bytes[index] !== 0x0a) throw new ChunkedError("Malformed trailer");
          this.#state = TRAILER_START;
          break;
        case FINAL_LF:
          if (bytes[index] !== 0x0a) throw new ChunkedError("Malformed end of chunked body");
          this.#state = DONE;
          return index + 1;
        default:
          // DONE: nothing of these bytes is ours.
          return index;
      }
      index++;
    }
    return -1;
  }

  #endSizeLine(): void {
    this.#state = this.#remaining === 0 ? TRAILER_START : DATA;
  }

  #countLine(): void {
    if (++this.#lineBytes > MAX_LINE_BYTES) throw new ChunkedError("Chunk size line too long");
  }

  #countTrailer(): void {
    if (++this.#trailerBytes > this.#maxTrailerBytes) throw new ChunkedError("Trailer too large");
  }
}
