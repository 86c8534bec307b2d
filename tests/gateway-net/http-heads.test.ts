/**
 * The gateway's HTTP/1.x head parsers: what a client may send (strict, so nothing can be
 * smuggled past the gateway) and what an upstream may answer (lenient where old servers are).
 */
import { describe, expect, it } from "vitest";
import { HeadError, MAX_HEADER_FIELDS, parseRequestHead } from "../../gateway/net/http/parse.ts";
import { parseResponseHead } from "../../gateway/net/http/response.ts";
import { UpstreamHandshakeError } from "../../shared/proxy-protocol/errors.ts";

const bytes = (text: string) => Uint8Array.from(text, (char) => char.charCodeAt(0));

function refusal(text: string): { status: number; message: string } {
  try {
    parseRequestHead(bytes(text));
  } catch (error) {
    if (error instanceof HeadError) return { status: error.status, message: error.message };
    throw error;
  }
  throw new Error("accepted");
}

describe("request heads", () => {
  it("reads the request line and every field, names kept as sent", () => {
    const head = parseRequestHead(
      bytes(
        "GET http://example.com/a?b=1 HTTP/1.1\r\nHost: example.com\r\n" +
          "Proxy-Authorization:  Basic abc= \r\nX-Empty:\r\n\r\n",
      ),
    );
    expect(head).toEqual({
      method: "GET",
      target: "http://example.com/a?b=1",
      version: "1.1",
      headers: [
        { name: "Host", lower: "host", value: "example.com" },
        { name: "Proxy-Authorization", lower: "proxy-authorization", value: "Basic abc=" },
        { name: "X-Empty", lower: "x-empty", value: "" },
      ],
    });
  });

  it("takes bare LF line ends, HTTP/1.0 and a head with no fields", () => {
    expect(parseRequestHead(bytes("CONNECT a.b:443 HTTP/1.0\n\n"))).toEqual({
      method: "CONNECT",
      target: "a.b:443",
      version: "1.0",
      headers: [],
    });
    const mixed = parseRequestHead(bytes("GET http://x/ HTTP/1.1\nA: 1\r\nB: 2\n\r\n"));
    expect(mixed.headers.map((field) => field.value)).toEqual(["1", "2"]);
  });

  it("keeps octets 0x80 to 0xff as they came", () => {
    const head = parseRequestHead(bytes("GET http://x/ HTTP/1.1\r\nX-Name: caf\xe9 \x85\r\n\r\n"));
    expect(head.headers[0].value).toBe("caf\xe9 \x85");
  });

  it.each([
    ["GET  http://x/ HTTP/1.1\r\n\r\n", "Malformed request line"],
    ["GET http://x/ HTTP/1.1 \r\n\r\n", "Malformed request line"],
    ["GET http://x/ HTTP/2.0\r\n\r\n", "Malformed request line"],
    ["GET http://x/\r\n\r\n", "Malformed request line"],
    ["G(T http://x/ HTTP/1.1\r\n\r\n", "Malformed request line"],
    ["GET http://x/\xa0 HTTP/1.1\r\n\r\n", "Malformed request line"],
    [
      "GET http://x/ HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
      "Folded header lines are not accepted",
    ],
    ["GET http://x/ HTTP/1.1\r\nHost : x\r\n\r\n", "Malformed header name"],
    ["GET http://x/ HTTP/1.1\r\nNo colon\r\n\r\n", "Malformed header line"],
    ["GET http://x/ HTTP/1.1\r\n: x\r\n\r\n", "Malformed header line"],
    ["GET http://x/ HTTP/1.1\r\nX: a\0b\r\n\r\n", "Malformed header value"],
    ["GET http://x/ HTTP/1.1\r\nX: a\rb\r\n\r\n", "Malformed header value"],
  ])("refuses %j with 400", (text, message) => {
    expect(refusal(text)).toEqual({ status: 400, message });
  });

  it("refuses more than MAX_HEADER_FIELDS fields with 431", () => {
    const fields = (count: number) => Array.from({ length: count }, (_, i) => `X-${i}: v\r\n`);
    const ok = parseRequestHead(
      bytes(`GET http://x/ HTTP/1.1\r\n${fields(MAX_HEADER_FIELDS).join("")}\r\n`),
    );
    expect(ok.headers).toHaveLength(MAX_HEADER_FIELDS);
    expect(refusal(`GET http://x/ HTTP/1.1\r\n${fields(MAX_HEADER_FIELDS + 1).join("")}\r\n`))
      .toEqual({ status: 431, message: "Too many header fields" });
  });
});

describe("response heads from an upstream", () => {
  it("reads the status line, with or without a reason", () => {
    expect(parseResponseHead(bytes("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n"))).toEqual({
      version: "1.1",
      status: 200,
      reason: "OK",
      headers: [{ name: "Content-Length", lower: "content-length", value: "3" }],
    });
    expect(parseResponseHead(bytes("HTTP/1.0 404\r\n\r\n"))).toMatchObject({
      version: "1.0",
      status: 404,
      reason: "",
    });
    expect(parseResponseHead(bytes("HTTP/1.1 503 Service  Unavailable\n\n")).reason).toBe(
      "Service  Unavailable",
    );
  });

  it("joins folded lines and tolerates white space before a colon", () => {
    const head = parseResponseHead(
      bytes("HTTP/1.1 200 OK\r\nX-Long: one\r\n  two\r\n\tthree\r\nServer : old\r\n\r\n"),
    );
    expect(head.headers).toEqual([
      { name: "X-Long", lower: "x-long", value: "one two three" },
      { name: "Server", lower: "server", value: "old" },
    ]);
  });

  it.each([
    "SSH-2.0-OpenSSH\r\n\r\n",
    "HTTP/1.1 2000 OK\r\n\r\n",
    "HTTP/1.1 20 OK\r\n\r\n",
    "HTTP/1.2 200 OK\r\n\r\n",
    "HTTP/1.1 200OK\r\n\r\n",
    "HTTP/1.1 200 O\rK\r\n\r\n",
    "HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n",
    "HTTP/1.1 200 OK\r\n folded first\r\n\r\n",
    "HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n",
  ])("answers %j as a bad reply", (text) => {
    let caught: unknown;
    try {
      parseResponseHead(bytes(text));
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(UpstreamHandshakeError);
    expect((caught as UpstreamHandshakeError).reason).toBe("bad_reply");
  });
});
