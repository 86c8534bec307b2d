/**
 * The server side of SOCKS5 (shared/proxy-protocol/socks5-server.ts): incremental parsing of
 * what a client sends, the replies, and the reply code each of the gateway's answers maps to
 * (gateway/net/tunnel/socks5-replies.ts). The client side's encoders talk to the server's parsers.
 */
import { describe, expect, it } from "vitest";
import {
  encodeSocks5Connect,
  encodeSocks5Greeting,
  encodeSocks5UserPassAuth,
  parseSocks5Reply,
  Socks5Reply,
} from "../../shared/proxy-protocol/socks5.ts";
import {
  encodeSocks5AuthStatus,
  encodeSocks5MethodSelection,
  encodeSocks5Reply,
  offersUserPass,
  parseSocks5Greeting,
  parseSocks5Request,
  parseSocks5UserPass,
  Socks5ServerError,
} from "../../shared/proxy-protocol/socks5-server.ts";
import {
  HandshakeFailure,
  HandshakeProtocol,
  UpstreamConnectError,
  UpstreamHandshakeError,
  UpstreamRefusedError,
} from "../../shared/proxy-protocol/errors.ts";
import { describeFailure } from "../../gateway/net/session/failures.ts";
import {
  socksReplyForFailure,
  socksReplyForRefusal,
} from "../../gateway/net/tunnel/socks5-replies.ts";

const from = (value: string) => new Uint8Array(Buffer.from(value.replace(/\s+/g, ""), "hex"));
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

function serverError(fn: () => unknown): Socks5ServerError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(Socks5ServerError);
    return error as Socks5ServerError;
  }
  throw new Error("expected a Socks5ServerError");
}

/** Every prefix of a complete message parses to undefined (more bytes needed). */
function expectIncompleteUntilWhole<T>(bytes: Uint8Array, parse: (b: Uint8Array) => T): T {
  for (let length = 0; length < bytes.length; length++) {
    expect(parse(bytes.subarray(0, length))).toBeUndefined();
  }
  return parse(bytes);
}

describe("SOCKS5 server parsing", () => {
  it("reads a greeting byte by byte and tells whether username/password is offered", () => {
    const greeting = expectIncompleteUntilWhole(encodeSocks5Greeting(true), parseSocks5Greeting)!;
    expect(greeting).toEqual({ methods: [0, 2], consumed: 4 });
    expect(offersUserPass(greeting)).toBe(true);
    expect(offersUserPass(parseSocks5Greeting(encodeSocks5Greeting(false))!)).toBe(false);
    expect(serverError(() => parseSocks5Greeting(from("04 01"))).reply).toBeUndefined();
    serverError(() => parseSocks5Greeting(from("05 00")));
    expect(hex(encodeSocks5MethodSelection(0xff))).toBe("05ff");
  });

  it("reads the username and password as raw bytes", () => {
    const message = encodeSocks5UserPassAuth({ username: "acme-cc-de", password: "pä:ss" });
    const parsed = expectIncompleteUntilWhole(message, parseSocks5UserPass)!;
    expect(Buffer.from(parsed.usernameBytes).toString()).toBe("acme-cc-de");
    expect(Buffer.from(parsed.passwordBytes).toString()).toBe("pä:ss");
    expect(parsed.consumed).toBe(message.length);
    // An empty password is allowed by RFC 1929.
    expect(parseSocks5UserPass(from("01 01 61 00"))?.passwordBytes.length).toBe(0);
    serverError(() => parseSocks5UserPass(from("05 01 61 00")));
    expect(hex(encodeSocks5AuthStatus(true))).toBe("0100");
    expect(hex(encodeSocks5AuthStatus(false))).toBe("0101");
  });

  it("reads CONNECT requests for names, IPv4 and IPv6", () => {
    const name = expectIncompleteUntilWhole(
      encodeSocks5Connect({ host: "example.com", port: 443 }),
      parseSocks5Request,
    );
    expect(name).toMatchObject({
      command: 1,
      addressType: 3,
      target: { host: "example.com", port: 443 },
    });
    expect(parseSocks5Request(encodeSocks5Connect({ host: "10.0.0.1", port: 80 }))?.target)
      .toEqual({ host: "10.0.0.1", port: 80 });
    expect(parseSocks5Request(encodeSocks5Connect({ host: "2001:db8::1", port: 8443 }))?.target)
      .toEqual({ host: "2001:db8::1", port: 8443 });
    // A literal sent as a name becomes that literal; brackets are dropped.
    expect(parseSocks5Request(from("05 01 00 03 09 31 32 37 2e 30 2e 30 2e 31 00 50"))?.target)
      .toEqual({ host: "127.0.0.1", port: 80 });
    expect(parseSocks5Request(from("05 01 00 03 05 5b 3a 3a 31 5d 00 50"))?.target)
      .toEqual({ host: "::1", port: 80 });
    // Other commands parse (the session answers them); what follows the request is left.
    const bind = parseSocks5Request(from("05 02 00 01 7f 00 00 01 00 50 ff ff"));
    expect(bind).toMatchObject({ command: 2, consumed: 10 });
  });

  it("refuses what can never be a request, with the reply to send", () => {
    expect(serverError(() => parseSocks5Request(from("05 01 00 09 00 00"))).reply).toBe(
      Socks5Reply.addressTypeNotSupported,
    );
    // A name that could smuggle bytes into an upstream's request line.
    const smuggle = Buffer.from("a b\r\nX: y");
    expect(
      serverError(() =>
        parseSocks5Request(
          new Uint8Array(
            Buffer.concat([
              from("05 01 00 03"),
              Buffer.from([smuggle.length]),
              smuggle,
              from("00 50"),
            ]),
          ),
        )
      ).reply,
    ).toBe(Socks5Reply.generalFailure);
    expect(serverError(() => parseSocks5Request(from("05 01 00 01 01 02 03 04 00 00"))).reply)
      .toBe(Socks5Reply.generalFailure);
    expect(serverError(() => parseSocks5Request(from("04 01 00 01"))).reply).toBeUndefined();
  });

  it("encodes replies the client side reads back", () => {
    expect(hex(encodeSocks5Reply(0))).toBe("05000001000000000000");
    expect(parseSocks5Reply(encodeSocks5Reply(0, { host: "2001:db8::1", port: 1080 }))?.bound)
      .toEqual({ host: "2001:db8::1", port: 1080 });
    expect(hex(encodeSocks5Reply(Socks5Reply.commandNotSupported))).toBe("05070001000000000000");
  });
});

describe("SOCKS5 reply codes for the gateway's answers", () => {
  it("maps refusals", () => {
    const reply = (status: number, proxyStatus: string) =>
      socksReplyForRefusal({ status: status as 400, proxyStatus });
    expect(reply(403, "destination_ip_prohibited")).toBe(Socks5Reply.notAllowed);
    expect(reply(400, "http_request_error")).toBe(Socks5Reply.notAllowed);
    expect(reply(502, "destination_unavailable")).toBe(Socks5Reply.networkUnreachable);
    expect(reply(503, "destination_unavailable")).toBe(Socks5Reply.networkUnreachable);
    expect(reply(503, "connection_limit_reached")).toBe(Socks5Reply.generalFailure);
    expect(reply(429, "connection_limit_reached")).toBe(Socks5Reply.generalFailure);
    expect(reply(509, "bandwidth_limit_exceeded")).toBe(Socks5Reply.notAllowed);
    expect(reply(429, "bandwidth_limit_exceeded")).toBe(Socks5Reply.notAllowed);
    expect(reply(504, "connection_timeout")).toBe(Socks5Reply.ttlExpired);
  });

  it("maps upstream failures, passing a SOCKS5 upstream's own reply on", () => {
    const reply = (error: unknown) => socksReplyForFailure(describeFailure(error), error);
    expect(reply(new UpstreamRefusedError("refused"))).toBe(Socks5Reply.connectionRefused);
    expect(reply(new UpstreamConnectError("slow", { timedOut: true }))).toBe(
      Socks5Reply.ttlExpired,
    );
    expect(reply(new UpstreamConnectError("tls"))).toBe(Socks5Reply.connectionRefused);
    const socks = (code: number) =>
      new UpstreamHandshakeError(HandshakeProtocol.socks5, HandshakeFailure.rejected, "no", {
        replyCode: code,
      });
    expect(reply(socks(Socks5Reply.hostUnreachable))).toBe(Socks5Reply.hostUnreachable);
    expect(reply(socks(Socks5Reply.connectionRefused))).toBe(Socks5Reply.connectionRefused);
    const http = (status: number) =>
      new UpstreamHandshakeError(HandshakeProtocol.http, HandshakeFailure.status, "no", { status });
    expect(reply(http(502))).toBe(Socks5Reply.hostUnreachable);
    expect(reply(http(504))).toBe(Socks5Reply.ttlExpired);
    expect(reply(http(403))).toBe(Socks5Reply.notAllowed);
    expect(
      reply(new UpstreamHandshakeError(HandshakeProtocol.http, HandshakeFailure.timeout, "slow")),
    ).toBe(Socks5Reply.ttlExpired);
    expect(
      reply(new UpstreamHandshakeError(HandshakeProtocol.http, HandshakeFailure.closed, "gone")),
    ).toBe(Socks5Reply.generalFailure);
  });
});
