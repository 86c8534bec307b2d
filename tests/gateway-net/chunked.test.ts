/**
 * The chunked scanner's decode: the content of a chunked body with its framing taken out, in
 * place, however the body is cut into reads (extensions, trailers and bytes past the end kept
 * out of the content).
 */
import { describe, expect, it } from "vitest";
import { ChunkedError, ChunkedScanner } from "../../gateway/net/http/chunked.ts";

const BODY = "5;ext=1\r\nhello\r\n" + "7\r\n chunky\r\n" + "1a\r\n" +
  "abcdefghijklmnopqrstuvwxyz\r\n" +
  "0\r\nX-Sum: 12\r\n\r\n";
const CONTENT = "hello chunky" + "abcdefghijklmnopqrstuvwxyz";
const AFTER = "HTTP/1.1 200 OK\r\n";

const bytes = (text: string) => new TextEncoder().encode(text);
const text = (view: Uint8Array) => new TextDecoder().decode(view);

/** Decodes `input` cut at `cuts`; the content, and the offset in `input` where the body ended. */
function decodeIn(input: string, cuts: number[]): { content: string; end: number } {
  const scanner = new ChunkedScanner({ lenient: true });
  const all = bytes(input);
  let content = "";
  let from = 0;
  for (const to of [...cuts, all.length]) {
    // A copy per read, as each read lands in a buffer of its own.
    const piece = all.slice(from, to);
    const { end, dataBytes } = scanner.decode(piece);
    content += text(piece.subarray(0, dataBytes));
    if (end >= 0) return { content, end: from + end };
    from = to;
  }
  return { content, end: -1 };
}

describe("ChunkedScanner.decode", () => {
  it("gives the content whole in one read, and says where the body ended", () => {
    expect(decodeIn(BODY + AFTER, [])).toEqual({ content: CONTENT, end: BODY.length });
  });

  it("gives the same content however the body is cut into two or three reads", () => {
    const input = BODY + AFTER;
    for (let a = 1; a < input.length; a++) {
      expect(decodeIn(input, [a])).toEqual({ content: CONTENT, end: BODY.length });
      for (let b = a + 1; b < input.length; b += 7) {
        expect(decodeIn(input, [a, b])).toEqual({ content: CONTENT, end: BODY.length });
      }
    }
  });

  it("scans as push does: the same end, and the same errors", () => {
    const plain = new ChunkedScanner();
    expect(plain.push(bytes(BODY + AFTER))).toBe(BODY.length);
    expect(() => new ChunkedScanner().decode(bytes("zz\r\n"))).toThrow(ChunkedError);
    expect(() => new ChunkedScanner().decode(bytes("3\r\nabcX"))).toThrow(ChunkedError);
  });
});
