/**
 * What the failure log is told of a failure: the one mapping from an attempt's error to its
 * phase, answer, failure kind and the upstream's own status (gateway/net/session/failures.ts), and the
 * message, scrubbed of the proxy's credentials and of URL queries (gateway/base/scrub.ts).
 */
import { describe, expect, it } from "vitest";
import { REDACTED, scrubText } from "../../gateway/base/scrub.ts";
import {
  ClientBodyError,
  ClientGoneError,
  describeFailure,
  failureNote,
  tunnelLine,
} from "../../gateway/net/session/failures.ts";
import { AttemptFailureKind, isFailureKind } from "../../shared/failure-kinds.ts";
import {
  HandshakeFailure,
  HandshakeProtocol,
  TargetTlsError,
  UpstreamConnectError,
  UpstreamFirstByteError,
  UpstreamHandshakeError,
  UpstreamIdleError,
  UpstreamRefusedError,
} from "../../shared/proxy-protocol/errors.ts";

const handshake = (reason: HandshakeFailure, extra: { status?: number; replyCode?: number } = {}) =>
  new UpstreamHandshakeError(HandshakeProtocol.http, reason, "Proxy said no", extra);

describe("describeFailure", () => {
  it("gives every error its failure kind and the upstream's own status", () => {
    const cases: [unknown, string, number | null][] = [
      [new UpstreamRefusedError("refused"), "upstream_unreachable", null],
      [new UpstreamConnectError("no route"), "upstream_unreachable", null],
      [new UpstreamConnectError("slow", { timedOut: true }), "upstream_timeout", null],
      [handshake(HandshakeFailure.timeout), "upstream_timeout", null],
      [handshake(HandshakeFailure.status, { status: 403 }), "upstream_refused", 403],
      [
        new UpstreamHandshakeError(HandshakeProtocol.socks5, HandshakeFailure.rejected, "no", {
          replyCode: 5,
        }),
        "upstream_refused",
        5,
      ],
      [handshake(HandshakeFailure.authRequired, { status: 407 }), "upstream_auth_failed", 407],
      [handshake(HandshakeFailure.authFailed, { replyCode: 1 }), "upstream_auth_failed", 1],
      [handshake(HandshakeFailure.noAcceptableMethod), "upstream_auth_failed", null],
      [handshake(HandshakeFailure.badReply), "upstream_protocol_error", null],
      [handshake(HandshakeFailure.headTooLarge), "upstream_protocol_error", null],
      [handshake(HandshakeFailure.closed), "upstream_closed", null],
      [handshake(HandshakeFailure.invalidRequest), "upstream_refused", null],
      [new UpstreamFirstByteError("closed"), "upstream_closed", null],
      [new UpstreamFirstByteError("slow", { timedOut: true }), "first_byte_timeout", null],
      [new UpstreamIdleError("cut"), "transfer_broken", null],
      [new UpstreamIdleError("idle", { timedOut: true }), "transfer_broken", null],
      [new TargetTlsError("UnknownIssuer"), "target_certificate", null],
      [new ClientGoneError(), "client_gone", null],
      [new ClientBodyError("Bad chunk"), "client_gone", null],
      [new TypeError("a bug"), "gateway_error", null],
    ];
    for (const [error, kind, status] of cases) {
      const failure = describeFailure(error);
      expect([failure.kind, failure.vendorStatus], String(error)).toEqual([kind, status]);
      expect(isFailureKind(failure.kind)).toBe(true);
    }
    // Every attempt kind is reachable from some error.
    const reached = new Set(cases.map(([error]) => describeFailure(error).kind));
    expect([...reached].sort()).toEqual([...Object.values(AttemptFailureKind)].sort());
  });
});

describe("a failure's message", () => {
  const upstream = {
    proxyId: "x1",
    connectorId: "c1",
    scheme: "http" as const,
    host: "10.0.0.5",
    port: 3128,
    username: "vendor user",
    password: "p@ss:word",
  };

  it("quotes the request and the error chain, scrubbed", () => {
    const error = new UpstreamHandshakeError(
      HandshakeProtocol.http,
      HandshakeFailure.status,
      "Proxy answered CONNECT with 403 Refused for vendor user:p@ss:word",
      { status: 403, cause: new Error("see http://vendor%20user:p%40ss%3Aword@10.0.0.5/x?k=1") },
    );
    const note = failureNote(describeFailure(error), error, {
      protocol: "connect",
      line: tunnelLine({ host: "2001:db8::1", port: 443 }),
      upstream,
    }, { status: 502, proxyStatus: "connection_refused" });
    expect(note).toEqual({
      kind: "upstream_refused",
      protocol: "connect",
      clientStatus: 502,
      proxyStatus: "connection_refused",
      vendorStatus: 403,
      message: `CONNECT [2001:db8::1]:443: Proxy answered CONNECT with 403 Refused for ` +
        `${REDACTED}:${REDACTED}: see http://10.0.0.5/x`,
    });
  });

  it("keeps what ends a sentence after a URL whose query it drops", () => {
    expect(scrubText("GET http://shop.example/cart?token=abc: refused")).toBe(
      "GET http://shop.example/cart: refused",
    );
    expect(scrubText('"https://a.example/p#frag", then (socks5://u:p@b.example:1080?x).')).toBe(
      '"https://a.example/p", then (socks5://b.example:1080).',
    );
    // A Basic value of the credentials, and the credentials URL-encoded, go too.
    const basic = Buffer.from("vendor user:p@ss:word").toString("base64");
    expect(scrubText(`Proxy-Authorization: Basic ${basic} for vendor%20user`, upstream)).toBe(
      `Proxy-Authorization: Basic ${REDACTED} for ${REDACTED}`,
    );
    // Nothing to scrub: the text as it was.
    expect(scrubText("Upstream proxy refused the connection", upstream)).toBe(
      "Upstream proxy refused the connection",
    );
  });
});
