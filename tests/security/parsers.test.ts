/**
 * What the security corpus found in the gateway's readers, held in place at the unit level (the
 * e2e corpus, e2e/security/gateway.test.ts, shows the same through a running gateway): a control
 * character in a header value is refused rather than read as white space, a Transfer-Encoding is
 * `chunked` alone or refused, and a session id holds no control character.
 */
import { describe, expect, test } from "vitest";
import { HeadError, parseRequestHead, requestFraming } from "../../gateway/net/http/parse.ts";
import { parseUsername, UsernameMessage } from "../../shared/username.ts";

const head = (fields: string) =>
  parseRequestHead(new TextEncoder().encode(`POST http://a.test/ HTTP/1.1\r\n${fields}\r\n`));

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    if (error instanceof HeadError) return `${error.status} ${error.message}`;
    throw error;
  }
  return "accepted";
}

describe("request heads", () => {
  test.each([
    ["a vertical tab", "Transfer-Encoding:\x0bchunked\r\n"],
    ["a form feed", "Transfer-Encoding: chunked\x0c\r\n"],
    ["an escape", "X-Note: a\x1b[31m\r\n"],
    ["a DEL", "X-Note: a\x7f\r\n"],
  ])("a value with %s is 400", (_, fields) => {
    expect(refusal(() => head(fields))).toBe("400 Malformed header value");
  });

  test("spaces and tabs around a value are white space; inside it they stay", () => {
    expect(head("X-Note: \t a \t b \t\r\n").headers[0].value).toBe("a \t b");
  });

  test.each(["identity, chunked", "chunked, identity", "gzip, chunked", "chunked, chunked"])(
    "Transfer-Encoding: %s is 400",
    (value) => {
      expect(refusal(() => requestFraming(head(`Transfer-Encoding: ${value}\r\n`)))).toBe(
        "400 A request body's Transfer-Encoding must be chunked alone",
      );
    },
  );

  test("Transfer-Encoding: chunked, in any case, frames a chunked body", () => {
    expect(requestFraming(head("Transfer-Encoding: Chunked\r\n")).kind).toBe("chunked");
  });
});

describe("usernames", () => {
  test.each(["a\r\nX-Injected: 1", "a\x00b", "a\x1b[31m", "a\x7f"])(
    "a session id with control characters (%j) is refused",
    (id) => {
      expect(parseUsername(`user-sessid-${id}`)).toEqual({
        ok: false,
        message: UsernameMessage.sessionId,
      });
    },
  );

  test("a session id of visible characters, non-ASCII too, is taken", () => {
    expect(parseUsername("user-sessid-abc_123.é")).toMatchObject({
      ok: true,
      options: { sessionId: "abc_123.é" },
    });
  });
});
