/**
 * Properties of the two readers of an upstream's HTTP/1.x response head: the gateway's, for
 * forwarded answers (gateway/net/http/response.ts), and the handshakes', for a proxy's answer to
 * CONNECT (shared/proxy-protocol/http-head.ts). Whatever an upstream sends, the only thing
 * thrown is an UpstreamHandshakeError (bad_reply or head_too_large) with a message; a valid head
 * reads back as written; and the answer is the same however the bytes are cut into reads.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  parseResponseHead,
  responseFraming,
  type ResponseHead,
  responseHeadReader,
} from "../../gateway/net/http/response.ts";
import { encodeClientResponseHead } from "../../gateway/net/http/heads.ts";
import { ResponseHeadParser } from "../../shared/proxy-protocol/http-head.ts";
import { HandshakeFailure, UpstreamHandshakeError } from "../../shared/proxy-protocol/errors.ts";
import { fieldValue, lineEnd, token } from "./grammar.ts";
import { check, cutAt, cutOffsets, cuts, latin1, mutatedBytes, outcome } from "./runs.ts";

const isRefusal = (error: unknown) =>
  error instanceof UpstreamHandshakeError &&
  (error.reason === HandshakeFailure.badReply || error.reason === HandshakeFailure.headTooLarge);

interface HeadSpec {
  version: "1.0" | "1.1";
  status: number;
  reason: string;
  headers: { name: string; value: string; space: string; end: string }[];
  lineEnd: string;
  finalEnd: string;
}

const headSpec: fc.Arbitrary<HeadSpec> = fc.record({
  version: fc.constantFrom("1.0" as const, "1.1" as const),
  status: fc.integer({ min: 100, max: 999 }),
  reason: fc.oneof(fc.constantFrom("", "OK", "Not Found", "Connection established"), fieldValue),
  headers: fc.array(
    fc.record({
      name: fc.oneof(
        fc.constantFrom("Content-Length", "Transfer-Encoding", "Connection", "Set-Cookie"),
        token,
      ),
      value: fieldValue,
      space: fc.constantFrom("", " ", "\t"),
      end: lineEnd,
    }),
    { maxLength: 8 },
  ),
  lineEnd,
  finalEnd: lineEnd,
});

function formatHead(spec: HeadSpec): string {
  const reason = spec.reason === "" ? "" : ` ${spec.reason}`;
  let text = `HTTP/${spec.version} ${String(spec.status).padStart(3, "0")}${reason}${spec.lineEnd}`;
  for (const field of spec.headers) {
    text += `${field.name}:${field.space}${field.value}${field.end}`;
  }
  return text + spec.finalEnd;
}

const validHeadBytes = headSpec.map((spec) => latin1(formatHead(spec)));

/** What a reader made of a stream: where its head ended and the head, or its refusal. */
type Read =
  | { head: unknown; end: number }
  | { refused: string; reason: string }
  | { waiting: true };

interface Reader {
  push(chunk: Uint8Array): { head: unknown; consumed: number } | undefined;
}

const READERS: { name: string; make: (maxBytes: number) => Reader }[] = [
  { name: "gateway (forwarded answers)", make: (maxBytes) => responseHeadReader(maxBytes) },
  { name: "handshakes (CONNECT answers)", make: (maxBytes) => new ResponseHeadParser(maxBytes) },
];

function read(
  make: (maxBytes: number) => Reader,
  chunks: readonly Uint8Array[],
  max: number,
): Read {
  const reader = make(max);
  let base = 0;
  for (const chunk of chunks) {
    const result = outcome(() => reader.push(chunk), isRefusal);
    if (!result.ok) {
      return {
        refused: result.error.message,
        reason: (result.error as UpstreamHandshakeError).reason,
      };
    }
    if (result.value !== undefined) {
      return { head: result.value.head, end: base + result.value.consumed };
    }
    base += chunk.length;
  }
  return { waiting: true };
}

describe("response heads (property)", () => {
  for (const { name, make } of READERS) {
    describe(name, () => {
      it("any bytes: a head, a wait, or a bad_reply/head_too_large refusal with a message", () => {
        check(
          fc.property(
            mutatedBytes(validHeadBytes),
            fc.constantFrom(48, 16 * 1024),
            (bytes, max) => {
              read(make, [bytes], max);
            },
          ),
          3,
        );
      });

      it("the same head, end or refusal whole or cut into reads at any bytes", () => {
        check(
          fc.property(
            mutatedBytes(validHeadBytes),
            cuts,
            fc.constantFrom(48, 16 * 1024),
            (bytes, fractions, max) => {
              const whole = read(make, [bytes], max);
              const split = read(make, cutAt(bytes, cutOffsets(bytes.length, fractions)), max);
              expect(split).toEqual(whole);
            },
          ),
          3,
        );
      });

      it("a valid head reads back: status, reason and every field in order", () => {
        check(
          fc.property(headSpec, fc.uint8Array({ maxLength: 8 }), (spec, after) => {
            const head = latin1(formatHead(spec));
            const bytes = new Uint8Array(head.length + after.length);
            bytes.set(head);
            bytes.set(after, head.length);
            const result = read(make, [bytes], 16 * 1024);
            expect(result).toMatchObject({ end: head.length });
            const parsed = (result as { head: Record<string, unknown> }).head;
            expect(parsed.status).toBe(spec.status);
            expect(parsed.reason).toBe(spec.reason);
            expect(parsed.version).toBe(spec.version);
            // The handshakes' reader gives [lower name, value] pairs, the gateway's fields.
            const headers = parsed
              .headers as ([string, string] | { lower: string; value: string })[];
            const fields = headers.map((field) =>
              Array.isArray(field)
                ? { lower: field[0], value: field[1] }
                : { lower: field.lower, value: field.value }
            );
            expect(fields).toEqual(
              spec.headers.map((field) => ({
                lower: field.name.toLowerCase(),
                value: field.value,
              })),
            );
          }),
          2,
        );
      });
    });
  }

  it("what the gateway sends a client reads back with the upstream's end-to-end fields", () => {
    check(
      fc.property(
        headSpec,
        fc.constantFrom("1.0" as const, "1.1" as const),
        fc.boolean(),
        fc.boolean(),
        (spec, clientVersion, keepAlive, dechunked) => {
          const head = parseResponseHead(latin1(formatHead(spec)));
          const sent = encodeClientResponseHead(
            head,
            clientVersion,
            keepAlive,
            undefined,
            dechunked,
          );
          const back = parseResponseHead(sent);
          expect(back.status).toBe(head.status);
          expect(back.reason).toBe(head.reason);
          for (const field of back.headers) {
            if (field.lower === "connection" || field.lower === "transfer-encoding") continue;
            expect(head.headers).toContainEqual(field);
          }
        },
      ),
    );
  });

  it("any framing fields: a framing, or a bad_reply refusal with a message", () => {
    const framingField = fc.record({
      name: fc.constantFrom("Content-Length", "Transfer-Encoding"),
      value: fc.oneof(
        fieldValue,
        fc.constantFrom("chunked", "gzip, chunked", "chunked, gzip", "0", "7", "5, 5", "5, 6"),
        fc.stringMatching(/^[0-9]{1,18}$/),
      ),
    });
    check(
      fc.property(
        fc.array(framingField, { maxLength: 3 }),
        fc.integer({ min: 100, max: 599 }),
        fc.constantFrom("GET", "HEAD", "POST"),
        (fields, status, method) => {
          const head: ResponseHead = {
            version: "1.1",
            status,
            reason: "",
            headers: fields.map(({ name, value }) => ({ name, lower: name.toLowerCase(), value })),
          };
          const framing = outcome(() => responseFraming(head, method), isRefusal);
          if (framing.ok && framing.value.kind === "length") {
            expect(Number.isSafeInteger(framing.value.lengthBytes)).toBe(true);
          }
        },
      ),
    );
  });
});
