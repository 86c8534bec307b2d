/**
 * The client side of SOCKS4 CONNECT, and SOCKS4a for host names: DSTIP 0.0.0.x with the name
 * after the user id, so the proxy resolves it rather than us.
 */
import { HostKind, hostKind, isValidPort, parseIPv4 } from "./address.ts";
import { utf8Encode } from "./bytes.ts";
import { HandshakeFailure, HandshakeProtocol, UpstreamHandshakeError } from "./errors.ts";
import type { TunnelTarget } from "./types.ts";

export const SOCKS4_VERSION = 0x04;
const CONNECT = 0x01;

export const Socks4Reply = {
  granted: 90,
  rejected: 91,
  /** The proxy could not reach our identd. */
  identdUnreachable: 92,
  /** Our identd disagreed with the user id. */
  identdMismatch: 93,
} as const;

const REPLY_REASONS: Readonly<Record<number, string>> = {
  90: "granted",
  91: "rejected_or_failed",
  92: "identd_unreachable",
  93: "identd_user_mismatch",
};

export function socks4ReplyReason(code: number): string {
  return REPLY_REASONS[code] ?? `unassigned_${code}`;
}

function failure(
  reason: (typeof HandshakeFailure)[keyof typeof HandshakeFailure],
  message: string,
  replyCode?: number,
): UpstreamHandshakeError {
  return new UpstreamHandshakeError(HandshakeProtocol.socks4, reason, message, { replyCode });
}

/**
 * VN CD DSTPORT DSTIP USERID NUL [HOSTNAME NUL]. An IPv4 literal goes as plain SOCKS4; a name
 * as 4a. SOCKS4 cannot carry IPv6.
 */
export function encodeSocks4Connect(target: TunnelTarget, userId = ""): Uint8Array {
  if (!isValidPort(target.port)) throw failure(HandshakeFailure.invalidRequest, "Invalid port");
  const kind = hostKind(target.host);
  if (kind === HostKind.ipv6) {
    throw failure(HandshakeFailure.invalidRequest, "SOCKS4 cannot connect to IPv6 addresses");
  }
  if (kind === undefined) throw failure(HandshakeFailure.invalidRequest, "Invalid target host");
  const user = utf8Encode(userId);
  if (user.includes(0)) throw failure(HandshakeFailure.invalidRequest, "Invalid SOCKS4 user id");
  const name = kind === HostKind.name ? utf8Encode(target.host) : undefined;
  const bytes = new Uint8Array(9 + user.length + (name ? name.length + 1 : 0));
  bytes[0] = SOCKS4_VERSION;
  bytes[1] = CONNECT;
  bytes[2] = target.port >> 8;
  bytes[3] = target.port & 0xff;
  if (name) {
    // 0.0.0.x with x non-zero: "the name follows" (SOCKS4a).
    bytes.set([0, 0, 0, 1], 4);
  } else {
    bytes.set(parseIPv4(target.host)!, 4);
  }
  bytes.set(user, 8);
  bytes[8 + user.length] = 0;
  if (name) {
    bytes.set(name, 9 + user.length);
    bytes[9 + user.length + name.length] = 0;
  }
  return bytes;
}

/** The 8-byte reply VN CD DSTPORT DSTIP. Throws on anything but 90 (granted). */
export function parseSocks4Reply(bytes: Uint8Array): { consumed: number } | undefined {
  if (bytes.length < 8) return undefined;
  // RFC-less protocol: VN should be 0, but some servers echo 4; both are taken.
  if (bytes[0] !== 0 && bytes[0] !== SOCKS4_VERSION) {
    throw failure(HandshakeFailure.badReply, "Not a SOCKS4 reply");
  }
  const code = bytes[1];
  if (code !== Socks4Reply.granted) {
    const reason = code === Socks4Reply.identdUnreachable || code === Socks4Reply.identdMismatch
      ? HandshakeFailure.authFailed
      : code === Socks4Reply.rejected
      ? HandshakeFailure.rejected
      : HandshakeFailure.badReply;
    throw failure(
      reason,
      `SOCKS4 proxy refused the connection: ${socks4ReplyReason(code)} (${code})`,
      code,
    );
  }
  return { consumed: 8 };
}
