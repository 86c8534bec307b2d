import { describe, expect, it } from "vitest";
import {
  encodeSocks5Connect,
  encodeSocks5Greeting,
  encodeSocks5UserPassAuth,
  parseSocks5AuthReply,
  parseSocks5MethodSelection,
  parseSocks5Reply,
  socks5ReplyReason,
} from "../../shared/proxy-protocol/socks5.ts";
import { encodeSocks4Connect, parseSocks4Reply } from "../../shared/proxy-protocol/socks4.ts";
import { HandshakeFailure, UpstreamHandshakeError } from "../../shared/proxy-protocol/errors.ts";
import { formatIPv6, parseIPv4, parseIPv6 } from "../../shared/proxy-protocol/address.ts";

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");
const from = (value: string) => new Uint8Array(Buffer.from(value.replace(/\s+/g, ""), "hex"));

function catchHandshake(fn: () => unknown): UpstreamHandshakeError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(UpstreamHandshakeError);
    return error as UpstreamHandshakeError;
  }
  throw new Error("expected a handshake error");
}

describe("IP literals", () => {
  it("parses and formats", () => {
    expect([...parseIPv4("192.168.0.1")!]).toEqual([192, 168, 0, 1]);
    expect(parseIPv4("256.1.1.1")).toBeUndefined();
    expect(parseIPv4("01.1.1.1")).toBeUndefined();
    expect(hex(parseIPv6("2001:db8::1")!)).toBe("20010db8000000000000000000000001");
    expect(hex(parseIPv6("[::ffff:1.2.3.4]")!)).toBe("00000000000000000000ffff01020304");
    expect(hex(parseIPv6("::")!)).toBe("0".repeat(32));
    expect(parseIPv6("1::2::3")).toBeUndefined();
    expect(parseIPv6("fe80::1%eth0")).toBeUndefined();
    expect(formatIPv6(parseIPv6("2001:0db8:0:0:1:0:0:1")!)).toBe("2001:db8::1:0:0:1");
  });
});

describe("SOCKS5 (RFC 1928, RFC 1929)", () => {
  it("greets with no-auth, and username/password when it has credentials", () => {
    expect(hex(encodeSocks5Greeting(false))).toBe("050100");
    expect(hex(encodeSocks5Greeting(true))).toBe("05020002");
  });

  it("parses the method selection, partial and refused", () => {
    expect(parseSocks5MethodSelection(from("05"), false)).toBeUndefined();
    expect(parseSocks5MethodSelection(from("0500"), false)).toEqual({ method: 0, consumed: 2 });
    expect(parseSocks5MethodSelection(from("0502"), true)).toEqual({ method: 2, consumed: 2 });
    expect(catchHandshake(() => parseSocks5MethodSelection(from("05ff"), true)).reason).toBe(
      HandshakeFailure.noAcceptableMethod,
    );
    expect(catchHandshake(() => parseSocks5MethodSelection(from("05ff"), false)).reason).toBe(
      HandshakeFailure.authFailed,
    );
    // A method we did not offer, and a SOCKS4 reply, are bad replies.
    expect(catchHandshake(() => parseSocks5MethodSelection(from("0502"), false)).reason).toBe(
      HandshakeFailure.badReply,
    );
    expect(catchHandshake(() => parseSocks5MethodSelection(from("005a"), false)).reason).toBe(
      HandshakeFailure.badReply,
    );
  });

  it("encodes username/password auth and parses its reply", () => {
    expect(hex(encodeSocks5UserPassAuth({ username: "user", password: "pass" }))).toBe(
      "01" + "04" + hex(Buffer.from("user")) + "04" + hex(Buffer.from("pass")),
    );
    expect(parseSocks5AuthReply(from("01"))).toBeUndefined();
    expect(parseSocks5AuthReply(from("0100"))).toEqual({ consumed: 2 });
    const failed = catchHandshake(() => parseSocks5AuthReply(from("0101")));
    expect(failed.reason).toBe(HandshakeFailure.authFailed);
    expect(failed.replyCode).toBe(1);
    expect(
      catchHandshake(() =>
        encodeSocks5UserPassAuth({ username: "u".repeat(256), password: "secret-pw" })
      ).message,
    ).not.toContain("secret-pw");
  });

  it("sends names unresolved (ATYP 3) and IP literals as ATYP 1 and 4", () => {
    expect(hex(encodeSocks5Connect({ host: "example.com", port: 80 }))).toBe(
      "05010003" + "0b" + hex(Buffer.from("example.com")) + "0050",
    );
    expect(hex(encodeSocks5Connect({ host: "127.0.0.1", port: 443 }))).toBe(
      "05010001" + "7f000001" + "01bb",
    );
    expect(hex(encodeSocks5Connect({ host: "2001:db8::1", port: 8080 }))).toBe(
      "05010004" + "20010db8000000000000000000000001" + "1f90",
    );
    expect(catchHandshake(() => encodeSocks5Connect({ host: "a b", port: 1 })).reason).toBe(
      HandshakeFailure.invalidRequest,
    );
  });

  it("parses replies of every address type, partial until complete", () => {
    const v4 = from("05000001 0a000001 1f90");
    for (let length = 0; length < v4.length; length++) {
      expect(parseSocks5Reply(v4.subarray(0, length))).toBeUndefined();
    }
    expect(parseSocks5Reply(v4)).toEqual({ bound: { host: "10.0.0.1", port: 8080 }, consumed: 10 });
    const domain = from("05000003 03616263 0050 ffff");
    expect(parseSocks5Reply(domain)).toEqual({ bound: { host: "abc", port: 80 }, consumed: 10 });
    const v6 = from("05000004 20010db8000000000000000000000001 0050");
    expect(parseSocks5Reply(v6)?.bound).toEqual({ host: "2001:db8::1", port: 80 });
  });

  it("maps reply codes to named reasons, with the code on the error", () => {
    const refused = catchHandshake(() => parseSocks5Reply(from("0505000100000000 0000")));
    expect(refused.reason).toBe(HandshakeFailure.rejected);
    expect(refused.replyCode).toBe(5);
    expect(refused.message).toContain("connection_refused");
    expect(socks5ReplyReason(1)).toBe("general_failure");
    expect(socks5ReplyReason(2)).toBe("not_allowed_by_ruleset");
    expect(socks5ReplyReason(3)).toBe("network_unreachable");
    expect(socks5ReplyReason(4)).toBe("host_unreachable");
    expect(socks5ReplyReason(6)).toBe("ttl_expired");
    expect(socks5ReplyReason(7)).toBe("command_not_supported");
    expect(socks5ReplyReason(8)).toBe("address_type_not_supported");
    expect(socks5ReplyReason(42)).toBe("unassigned_42");
    expect(catchHandshake(() => parseSocks5Reply(from("04000001"))).reason).toBe("bad_reply");
    expect(catchHandshake(() => parseSocks5Reply(from("05000009 00"))).reason).toBe("bad_reply");
  });
});

describe("SOCKS4 and SOCKS4a", () => {
  it("encodes CONNECT to an IPv4 address with a user id (the protocol's example)", () => {
    // 66.102.7.99:80 as user "Fred".
    expect(hex(encodeSocks4Connect({ host: "66.102.7.99", port: 80 }, "Fred"))).toBe(
      "04010050426607634672656400",
    );
  });

  it("sends names in the 4a form (0.0.0.1 + name), unresolved", () => {
    expect(hex(encodeSocks4Connect({ host: "example.com", port: 443 }))).toBe(
      "040101bb00000001" + "00" + hex(Buffer.from("example.com")) + "00",
    );
    expect(hex(encodeSocks4Connect({ host: "example.com", port: 443 }, "u"))).toBe(
      "040101bb00000001" + "7500" + hex(Buffer.from("example.com")) + "00",
    );
  });

  it("cannot carry IPv6", () => {
    expect(catchHandshake(() => encodeSocks4Connect({ host: "::1", port: 80 })).reason).toBe(
      HandshakeFailure.invalidRequest,
    );
  });

  it("parses replies", () => {
    expect(parseSocks4Reply(from("005a0000000000"))).toBeUndefined();
    expect(parseSocks4Reply(from("005a000000000000"))).toEqual({ consumed: 8 });
    const rejected = catchHandshake(() => parseSocks4Reply(from("005b000000000000")));
    expect(rejected.reason).toBe(HandshakeFailure.rejected);
    expect(rejected.replyCode).toBe(91);
    expect(catchHandshake(() => parseSocks4Reply(from("005d000000000000"))).reason).toBe(
      HandshakeFailure.authFailed,
    );
    expect(catchHandshake(() => parseSocks4Reply(from("0500000000000000"))).reason).toBe(
      HandshakeFailure.badReply,
    );
  });
});
