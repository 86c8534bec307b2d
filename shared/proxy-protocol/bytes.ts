/** Byte helpers the handshakes share (web-standard APIs only). */

const encoder = new TextEncoder();
const utf8Decoder = new TextDecoder();

export const EMPTY_BYTES: Uint8Array = new Uint8Array(0);

export function utf8Encode(text: string): Uint8Array {
  return encoder.encode(text);
}

export function utf8Decode(bytes: Uint8Array): string {
  return utf8Decoder.decode(bytes);
}

/**
 * Decodes bytes one to one into code points 0-255. HTTP heads are octets; TextDecoder's
 * "latin1" is really windows-1252, which remaps 0x80-0x9f.
 */
export function latin1Decode(bytes: Uint8Array): string {
  // ASCII, as nearly every head is, reads the same in UTF-8, which the runtime decodes natively.
  let ascii = true;
  for (let index = 0; index < bytes.length; index++) {
    if (bytes[index] >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return utf8Decoder.decode(bytes);
  let text = "";
  for (let offset = 0; offset < bytes.length; offset += 4096) {
    text += String.fromCharCode.apply(
      null,
      bytes.subarray(offset, Math.min(offset + 4096, bytes.length)) as unknown as number[],
    );
  }
  return text;
}

const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/** Standard base64 with padding (RFC 4648), over bytes rather than btoa's Latin-1 strings. */
export function base64Encode(bytes: Uint8Array): string {
  let out = "";
  let index = 0;
  for (; index + 2 < bytes.length; index += 3) {
    const n = (bytes[index] << 16) | (bytes[index + 1] << 8) | bytes[index + 2];
    out += BASE64[n >> 18] + BASE64[(n >> 12) & 63] + BASE64[(n >> 6) & 63] + BASE64[n & 63];
  }
  const rest = bytes.length - index;
  if (rest === 1) {
    const n = bytes[index] << 16;
    out += BASE64[n >> 18] + BASE64[(n >> 12) & 63] + "==";
  } else if (rest === 2) {
    const n = (bytes[index] << 16) | (bytes[index + 1] << 8);
    out += BASE64[n >> 18] + BASE64[(n >> 12) & 63] + BASE64[(n >> 6) & 63] + "=";
  }
  return out;
}

/** The parts one after the other, in a buffer of their own. */
export function concatParts(parts: readonly Uint8Array[]): Uint8Array<ArrayBuffer> {
  let length = 0;
  for (const part of parts) length += part.length;
  const joined = new Uint8Array(length);
  let offset = 0;
  for (const part of parts) {
    joined.set(part, offset);
    offset += part.length;
  }
  return joined;
}

export function concatBytes(first: Uint8Array, second: Uint8Array): Uint8Array {
  if (first.length === 0) return second;
  if (second.length === 0) return first;
  const joined = new Uint8Array(first.length + second.length);
  joined.set(first, 0);
  joined.set(second, first.length);
  return joined;
}

/**
 * Bytes a parser could not use yet. `join` hands back the pending bytes and a new chunk as one
 * view, copying only when something was pending, which is rare (replies come whole).
 */
export class PendingBytes {
  #pending: Uint8Array = EMPTY_BYTES;

  join(chunk: Uint8Array): Uint8Array {
    if (this.#pending.length === 0) return chunk;
    const joined = concatBytes(this.#pending, chunk);
    this.#pending = EMPTY_BYTES;
    return joined;
  }

  /** Keeps `view` from `offset` on for the next `join` (copied: the reader may reuse it). */
  keep(view: Uint8Array, offset: number): void {
    this.#pending = offset >= view.length ? EMPTY_BYTES : view.slice(offset);
  }

  get length(): number {
    return this.#pending.length;
  }
}
