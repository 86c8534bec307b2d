/**
 * What the block rules' markers are looked for in: the body's first bytes with the chunked
 * framing taken off and the content coding undone, even when the prefix cuts a compressed stream.
 */
import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { bodyPrefixText } from "../../gateway/net/http/body-prefix.ts";
import { ResponseBody } from "../../gateway/net/http/response.ts";

/** A page that does not compress to nothing: half its gzip still holds its first kilobytes. */
const FILLER = Array.from({ length: 4000 }, (_, i) => ((i * 7919) % 100_003).toString(36)).join(
  " ",
);
const PAGE = `<html><title>Attention Required</title>${FILLER}<div class="G-Recaptcha">`;
const field = (name: string, value: string) => ({ name, lower: name.toLowerCase(), value });
const close = { kind: ResponseBody.close, lengthBytes: 0 };

describe("a body prefix", () => {
  it("is read as it came when it has no coding, lowered", () => {
    const raw = new TextEncoder().encode("<TITLE>Hello</TITLE>");
    expect(bodyPrefixText(raw, close, [], 8192)).toBe("<title>hello</title>");
  });

  it("is dechunked", () => {
    const raw = new TextEncoder().encode("5\r\nAcces\r\n8\r\ns Denied\r\n0\r\n\r\n");
    expect(bodyPrefixText(raw, { kind: ResponseBody.chunked, lengthBytes: 0 }, [], 8192)).toBe(
      "access denied",
    );
  });

  it("is decompressed from gzip, deflate and br, even cut short", () => {
    for (
      const [coding, bytes] of [
        ["gzip", gzipSync(PAGE)],
        ["deflate", deflateSync(PAGE)],
        ["br", brotliCompressSync(PAGE)],
      ] as const
    ) {
      const whole = bodyPrefixText(bytes, close, [field("Content-Encoding", coding)], 65_536);
      expect(whole, coding).toContain("g-recaptcha");
      // The first bytes alone still give the page's start.
      const cut = bodyPrefixText(
        bytes.subarray(0, Math.floor(bytes.length / 2)),
        close,
        [field("content-encoding", coding)],
        65_536,
      );
      expect(cut, coding).toMatch(/^<html><title>attention required/);
    }
  });

  it("is not read in a coding it does not know, or one that does not decompress", () => {
    const raw = new TextEncoder().encode("plain text");
    expect(bodyPrefixText(raw, close, [field("content-encoding", "zstd")], 8192)).toBeUndefined();
    expect(bodyPrefixText(raw, close, [field("content-encoding", "gzip")], 8192)).toBeUndefined();
  });
});
