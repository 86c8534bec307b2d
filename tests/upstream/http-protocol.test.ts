import { describe, expect, it } from "vitest";
import {
  basicProxyAuthorization,
  encodeConnectRequest,
  encodeForwardRequestHead,
} from "../../shared/proxy-protocol/http-request.ts";
import {
  headerValue,
  MAX_HEAD_BYTES,
  parseResponseHead,
  ResponseHeadParser,
} from "../../shared/proxy-protocol/http-head.ts";
import { BodyFraming, ResponseBodyReader } from "../../shared/proxy-protocol/http-body.ts";
import { HandshakeFailure, UpstreamHandshakeError } from "../../shared/proxy-protocol/errors.ts";
import { ErrorCode } from "../../shared/errors.ts";
import { base64Encode } from "../../shared/proxy-protocol/bytes.ts";

const text = (bytes: Uint8Array) => Buffer.from(bytes).toString("latin1");
const bytes = (value: string) => new Uint8Array(Buffer.from(value, "latin1"));

function expectHandshakeError(fn: () => unknown, reason: string): UpstreamHandshakeError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(UpstreamHandshakeError);
    expect((error as UpstreamHandshakeError).reason).toBe(reason);
    expect((error as UpstreamHandshakeError).code).toBe(ErrorCode.upstreamHandshake);
    return error as UpstreamHandshakeError;
  }
  throw new Error("expected a handshake error");
}

describe("Basic proxy credentials", () => {
  it("matches RFC 7617's examples, UTF-8 included", () => {
    expect(basicProxyAuthorization({ username: "Aladdin", password: "open sesame" })).toBe(
      "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==",
    );
    expect(basicProxyAuthorization({ username: "test", password: "123\u00a3" })).toBe(
      "Basic dGVzdDoxMjPCow==",
    );
  });

  it("base64 matches Node's for every length remainder", () => {
    for (let length = 0; length < 20; length++) {
      const input = new Uint8Array(length).map((_, index) => (index * 37 + 11) & 0xff);
      expect(base64Encode(input)).toBe(Buffer.from(input).toString("base64"));
    }
  });
});

describe("CONNECT request", () => {
  it("is byte-exact, with Host and optional Proxy-Authorization", () => {
    expect(text(encodeConnectRequest({ host: "example.com", port: 443 }))).toBe(
      "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    );
    expect(
      text(
        encodeConnectRequest(
          { host: "2001:db8::1", port: 8443 },
          { credentials: { username: "Aladdin", password: "open sesame" } },
        ),
      ),
    ).toBe(
      "CONNECT [2001:db8::1]:8443 HTTP/1.1\r\nHost: [2001:db8::1]:8443\r\n" +
        "Proxy-Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==\r\n\r\n",
    );
  });

  it("refuses hosts and headers that would inject lines", () => {
    expectHandshakeError(
      () => encodeConnectRequest({ host: "a.com\r\nX-Evil: 1", port: 443 }),
      HandshakeFailure.invalidRequest,
    );
    expectHandshakeError(
      () => encodeConnectRequest({ host: "a.com", port: 0 }),
      HandshakeFailure.invalidRequest,
    );
    expectHandshakeError(
      () => encodeConnectRequest({ host: "a.com", port: 443 }, { headers: [["X-A", "b\r\nc"]] }),
      HandshakeFailure.invalidRequest,
    );
  });

  it("never puts credentials in an error message", () => {
    const error = expectHandshakeError(
      () =>
        encodeConnectRequest({ host: "bad host", port: 1 }, {
          credentials: { username: "user", password: "hunter2" },
        }),
      HandshakeFailure.invalidRequest,
    );
    expect(error.message).not.toContain("hunter2");
  });
});

describe("forward request head", () => {
  it("uses the absolute form, adds Host, auth and extra headers", () => {
    expect(
      text(
        encodeForwardRequestHead({
          method: "GET",
          url: "http://example.com:8080/a/b?c=d#frag",
          credentials: { username: "u", password: "p" },
          headers: [["Accept", "*/*"]],
        }),
      ),
    ).toBe(
      "GET http://example.com:8080/a/b?c=d HTTP/1.1\r\nHost: example.com:8080\r\n" +
        "Proxy-Authorization: Basic dTpw\r\nAccept: */*\r\n\r\n",
    );
  });

  it("takes only http URLs", () => {
    expectHandshakeError(
      () => encodeForwardRequestHead({ method: "GET", url: "https://example.com/" }),
      HandshakeFailure.invalidRequest,
    );
  });
});

describe("response head parser", () => {
  const head = "HTTP/1.1 200 Connection established\r\nX-A: 1\r\nX-B:  two \r\n\r\n";

  it("parses a head in one chunk and reports what it consumed", () => {
    const parser = new ResponseHeadParser();
    const chunk = bytes(`${head}LEFTOVER`);
    const parsed = parser.push(chunk)!;
    expect(parsed.head.status).toBe(200);
    expect(parsed.head.reason).toBe("Connection established");
    expect(parsed.head.version).toBe("1.1");
    expect(headerValue(parsed.head, "x-b")).toBe("two");
    expect(text(chunk.subarray(parsed.consumed))).toBe("LEFTOVER");
  });

  it("parses a head split at every byte boundary", () => {
    const all = bytes(`${head}rest`);
    for (let split = 1; split < head.length; split++) {
      const parser = new ResponseHeadParser();
      expect(parser.push(all.subarray(0, split))).toBeUndefined();
      const parsed = parser.push(all.subarray(split))!;
      expect(parsed.head.status).toBe(200);
      expect(text(all.subarray(split).subarray(parsed.consumed))).toBe("rest");
    }
  });

  it("parses one byte at a time, bare LF line ends, and folded lines", () => {
    const parser = new ResponseHeadParser();
    const all = bytes("HTTP/1.0 407 Proxy Authentication Required\nA: 1\n  more\n\n");
    let parsed;
    for (let index = 0; index < all.length; index++) {
      parsed = parser.push(all.subarray(index, index + 1));
      if (index < all.length - 1) expect(parsed).toBeUndefined();
    }
    expect(parsed!.head.status).toBe(407);
    expect(parsed!.head.version).toBe("1.0");
    expect(headerValue(parsed!.head, "a")).toBe("1 more");
    expect(parsed!.consumed).toBe(1);
  });

  it("refuses a head over the bound, in one chunk or many", () => {
    const big = bytes(`HTTP/1.1 200 OK\r\nX: ${"a".repeat(MAX_HEAD_BYTES)}\r\n\r\n`);
    expectHandshakeError(() => new ResponseHeadParser().push(big), HandshakeFailure.headTooLarge);
    const parser = new ResponseHeadParser(1024);
    expectHandshakeError(() => {
      for (let offset = 0; offset < big.length; offset += 100) {
        parser.push(big.subarray(offset, offset + 100));
      }
    }, HandshakeFailure.headTooLarge);
    // Exactly at the bound is fine.
    const exact = bytes(`HTTP/1.1 200 OK\r\nX: ${"a".repeat(1024 - 24)}\r\n\r\n`);
    expect(exact.length).toBe(1024);
    expect(new ResponseHeadParser(1024).push(exact)?.head.status).toBe(200);
    const over = bytes(`HTTP/1.1 200 OK\r\nX: ${"a".repeat(1024 - 23)}\r\n\r\n`);
    expectHandshakeError(() => new ResponseHeadParser(1024).push(over), "head_too_large");
  });

  it("refuses what is not HTTP", () => {
    expectHandshakeError(() => parseResponseHead(bytes("SSH-2.0-OpenSSH\r\n\r\n")), "bad_reply");
    expectHandshakeError(() => parseResponseHead(bytes("HTTP/1.1 2000 OK\r\n\r\n")), "bad_reply");
    expectHandshakeError(
      () => parseResponseHead(bytes("HTTP/1.1 200 OK\r\nno colon\r\n\r\n")),
      "bad_reply",
    );
  });
});

describe("response body reader", () => {
  const headOf = (raw: string) => parseResponseHead(bytes(raw));

  it("reads a Content-Length body across chunks and ignores bytes after it", () => {
    const reader = new ResponseBodyReader(headOf("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"), {
      maxBytes: 100,
    });
    expect(reader.framing).toBe(BodyFraming.length);
    expect(reader.push(bytes("he"))).toBe(false);
    expect(reader.push(bytes("lloEXTRA"))).toBe(true);
    expect(text(reader.body())).toBe("hello");
  });

  it("decodes chunked bodies split anywhere, with extensions and trailers", () => {
    const wire = "5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nTrailer: x\r\n\r\n";
    for (let split = 0; split <= wire.length; split++) {
      const reader = new ResponseBodyReader(
        headOf("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
        { maxBytes: 100 },
      );
      reader.push(bytes(wire.slice(0, split)));
      expect(reader.push(bytes(wire.slice(split)))).toBe(true);
      expect(text(reader.body())).toBe("hello world");
    }
  });

  it("refuses a bad chunk size", () => {
    const reader = new ResponseBodyReader(
      headOf("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
      { maxBytes: 100 },
    );
    expectHandshakeError(() => reader.push(bytes("zz\r\n")), "bad_reply");
  });

  it("reads to close, and keeps at most maxBytes", () => {
    const reader = new ResponseBodyReader(headOf("HTTP/1.1 200 OK\r\n\r\n"), { maxBytes: 4 });
    expect(reader.push(bytes("ab"))).toBe(false);
    expect(reader.push(bytes("cdef"))).toBe(true);
    expect(reader.truncated).toBe(true);
    expect(text(reader.body())).toBe("abcd");
    const untilClose = new ResponseBodyReader(headOf("HTTP/1.0 200 OK\r\n\r\n"), { maxBytes: 10 });
    untilClose.push(bytes("abc"));
    expect(untilClose.end()).toBe(true);
    expect(untilClose.truncated).toBe(false);
  });

  it("knows bodiless answers", () => {
    for (
      const raw of [
        "HTTP/1.1 204 No Content\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
      ]
    ) {
      expect(new ResponseBodyReader(headOf(raw), { maxBytes: 10 }).complete).toBe(true);
    }
    const length = new ResponseBodyReader(headOf("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"), {
      maxBytes: 10,
    });
    expect(length.end()).toBe(false);
  });
});
