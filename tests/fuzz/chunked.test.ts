/**
 * Properties of the chunked body scanner (gateway/net/http/chunked.ts), strict (client bodies)
 * and lenient (upstream answers): any bytes end the body, wait for more or throw a
 * ChunkedError with a message; a body encoded from chunks decodes to their content and ends
 * where it was written to end; and the answer is the same however the bytes are cut into reads.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ChunkedError, ChunkedScanner } from "../../gateway/net/http/chunked.ts";
import { fieldValue, token } from "./grammar.ts";
import {
  check,
  cutAt,
  cutOffsets,
  cuts,
  joinBytes,
  latin1,
  mutatedBytes,
  outcome,
} from "./runs.ts";

interface BodySpec {
  chunks: { data: Uint8Array; extension: string; upperHex: boolean; zeros: number }[];
  trailers: { name: string; value: string }[];
  lastExtension: string;
  /** Bytes of the next message after the body. */
  after: Uint8Array;
  bareLf: boolean;
}

const extension = fc.oneof(
  fc.constant(""),
  fc.tuple(token, fc.option(token, { nil: undefined })).map(([name, value]) =>
    value === undefined ? `;${name}` : `;${name}=${value}`
  ),
  fc.constant(" ;x=1"),
);

const bodySpec: fc.Arbitrary<BodySpec> = fc.record({
  chunks: fc.array(
    fc.record({
      data: fc.uint8Array({ minLength: 1, maxLength: 40 }),
      extension,
      upperHex: fc.boolean(),
      zeros: fc.nat(3),
    }),
    { maxLength: 5 },
  ),
  trailers: fc.array(fc.record({ name: token, value: fieldValue }), { maxLength: 3 }),
  lastExtension: extension,
  after: fc.uint8Array({ maxLength: 12 }),
  bareLf: fc.boolean(),
});

function encodeBody(spec: BodySpec, bareLf: boolean): { body: Uint8Array; content: Uint8Array } {
  const eol = bareLf ? "\n" : "\r\n";
  const parts: Uint8Array[] = [];
  for (const chunk of spec.chunks) {
    let size = chunk.data.length.toString(16);
    if (chunk.upperHex) size = size.toUpperCase();
    parts.push(latin1(`${"0".repeat(chunk.zeros)}${size}${chunk.extension}${eol}`));
    parts.push(chunk.data, latin1(eol));
  }
  let last = `0${spec.lastExtension}${eol}`;
  for (const trailer of spec.trailers) last += `${trailer.name}: ${trailer.value}${eol}`;
  parts.push(latin1(last + eol));
  return { body: joinBytes(parts), content: joinBytes(spec.chunks.map((chunk) => chunk.data)) };
}

const validStream = bodySpec.map((spec) =>
  joinBytes([encodeBody(spec, spec.bareLf).body, spec.after])
);

type Scan =
  | { ended: number; content: number[] }
  | { waiting: true; content: number[] }
  | { refused: string };

/** Decodes `chunks` as one body: where it ended in the whole input, and its content so far. */
function scan(chunks: readonly Uint8Array[], lenient: boolean, decode: boolean): Scan {
  const scanner = new ChunkedScanner({ lenient, maxTrailerBytes: 64 });
  const content: number[] = [];
  let base = 0;
  for (const chunk of chunks) {
    const read = outcome(() => {
      if (!decode) return { end: scanner.push(chunk), dataBytes: 0 };
      return scanner.decode(chunk);
    }, (error) => error instanceof ChunkedError);
    if (!read.ok) return { refused: read.error.message };
    content.push(...chunk.subarray(0, read.value.dataBytes));
    if (read.value.end >= 0) {
      expect(scanner.done).toBe(true);
      return { ended: base + read.value.end, content };
    }
    base += chunk.length;
  }
  return { waiting: true, content };
}

describe("chunked bodies (property)", () => {
  it("a body encoded from chunks decodes to their content and ends where it was written to", () => {
    check(
      fc.property(bodySpec, fc.boolean(), (spec, lenient) => {
        // Bare LF line ends only where the scanner is lenient.
        const { body, content } = encodeBody(spec, lenient && spec.bareLf);
        const input = joinBytes([body, spec.after]);
        // The bound counts each trailer line through its CR (or its bare LF).
        const trailerBytes = spec.trailers.reduce(
          (sum, trailer) => sum + trailer.name.length + trailer.value.length + 3,
          0,
        );
        const result = scan([input], lenient, true);
        if (trailerBytes > 64) {
          expect(result).toEqual({ refused: "Trailer too large" });
          return;
        }
        expect(result).toEqual({ ended: body.length, content: [...content] });
      }),
      2,
    );
  });

  it("any bytes: an end, a wait, or a ChunkedError that says what is wrong", () => {
    check(
      fc.property(mutatedBytes(validStream), fc.boolean(), (bytes, lenient) => {
        const result = scan([bytes.slice()], lenient, true);
        if ("ended" in result) expect(result.ended).toBeLessThanOrEqual(bytes.length);
      }),
      4,
    );
  });

  it("the same end, content and refusal whole or cut into reads at any bytes", () => {
    check(
      fc.property(
        mutatedBytes(validStream),
        cuts,
        fc.boolean(),
        fc.boolean(),
        (bytes, fractions, lenient, decode) => {
          const whole = scan([bytes.slice()], lenient, decode);
          const split = scan(cutAt(bytes, cutOffsets(bytes.length, fractions)), lenient, decode);
          expect(split).toEqual(whole);
        },
      ),
      4,
    );
  });
});
