/**
 * An answer's first body bytes as the block rules read them (shared/blocking/judge.ts): the
 * chunked framing taken off, the content coding undone (gzip, deflate, br; others are not read,
 * so rules with markers do not match them), decoded as UTF-8 and lowered. `limit` is what was
 * read of the body (its first `block_body_bytes` as sent); what it decompresses to is bounded at
 * four times that. Works on a copy: the held bytes go to the client unchanged.
 *
 * A prefix is a cut through a compressed stream: the decompressors flush what they have instead
 * of asking for the end.
 */
import {
  brotliDecompressSync,
  constants as zlib,
  gunzipSync,
  inflateRawSync,
  inflateSync,
} from "node:zlib";
import { ChunkedScanner } from "./chunked.ts";
import { type HeaderField, headerValues } from "./parse.ts";
import { ResponseBody, type ResponseFraming } from "./response.ts";

const decoder = new TextDecoder("utf-8", { fatal: false });

/** The body's content in `raw` (the body's first bytes as they came), framing taken off. */
function content(raw: Uint8Array, framing: ResponseFraming): Uint8Array {
  if (framing.kind !== ResponseBody.chunked) {
    return framing.kind === ResponseBody.length && raw.length > framing.lengthBytes
      ? raw.subarray(0, framing.lengthBytes)
      : raw;
  }
  const copy = raw.slice();
  try {
    const { dataBytes } = new ChunkedScanner({ lenient: true }).decode(copy);
    return copy.subarray(0, dataBytes);
  } catch {
    // A malformed chunk: what came before it is still the body's.
    return new Uint8Array(0);
  }
}

/** The content coding undone; undefined for one not read here. */
function decoded(bytes: Uint8Array, headers: readonly HeaderField[], limit: number) {
  const codings = headerValues(headers, "content-encoding").join(",").split(",")
    .map((coding) => coding.trim().toLowerCase()).filter((coding) => coding !== "");
  if (codings.length === 0 || (codings.length === 1 && codings[0] === "identity")) return bytes;
  if (codings.length > 1) return undefined;
  // Bounded: a prefix of a compressed body may not grow past what is judged.
  const bounded = { maxOutputLength: limit * 4 };
  try {
    switch (codings[0]) {
      case "gzip":
      case "x-gzip":
        return gunzipSync(bytes, { ...bounded, finishFlush: zlib.Z_SYNC_FLUSH });
      case "deflate":
        try {
          return inflateSync(bytes, { ...bounded, finishFlush: zlib.Z_SYNC_FLUSH });
        } catch {
          // Some servers send raw deflate under this name.
          return inflateRawSync(bytes, { ...bounded, finishFlush: zlib.Z_SYNC_FLUSH });
        }
      case "br":
        return brotliDecompressSync(bytes, {
          ...bounded,
          finishFlush: zlib.BROTLI_OPERATION_FLUSH,
        });
      default:
        return undefined;
    }
  } catch {
    return undefined;
  }
}

/**
 * The text the markers are looked for in, or undefined when the body cannot be read (a coding
 * not handled here, or bytes that do not decompress).
 */
export function bodyPrefixText(
  raw: Uint8Array,
  framing: ResponseFraming,
  headers: readonly HeaderField[],
  limit: number,
): string | undefined {
  const bytes = decoded(content(raw, framing), headers, limit);
  if (bytes === undefined) return undefined;
  return decoder.decode(bytes).toLowerCase();
}
