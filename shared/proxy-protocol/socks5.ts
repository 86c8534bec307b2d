/**
 * The client side of SOCKS5 (RFC 1928) with username/password auth (RFC 1929). Parsers take
 * the bytes received so far and answer undefined while a reply is incomplete.
 */
import {
  formatIPv4,
  formatIPv6,
  HostKind,
  hostKind,
  isValidPort,
  parseIPv4,
  parseIPv6,
} from "./address.ts";
import { latin1Decode, utf8Encode } from "./bytes.ts";
import { HandshakeFailure, HandshakeProtocol, UpstreamHandshakeError } from "./errors.ts";
import type { ProxyCredentials, TunnelTarget } from "./types.ts";

export const SOCKS5_VERSION = 0x05;
const AUTH_VERSION = 0x01;

export const Socks5Method = {
  noAuth: 0x00,
  gssapi: 0x01,
  userPass: 0x02,
  noAcceptable: 0xff,
} as const;

export const Socks5Command = { connect: 0x01, bind: 0x02, udpAssociate: 0x03 } as const;

export const Socks5AddressType = { ipv4: 0x01, domain: 0x03, ipv6: 0x04 } as const;

export const Socks5Reply = {
  succeeded: 0x00,
  generalFailure: 0x01,
  notAllowed: 0x02,
  networkUnreachable: 0x03,
  hostUnreachable: 0x04,
  connectionRefused: 0x05,
  ttlExpired: 0x06,
  commandNotSupported: 0x07,
  addressTypeNotSupported: 0x08,
} as const;

const REPLY_REASONS: readonly string[] = [
  "succeeded",
  "general_failure",
  "not_allowed_by_ruleset",
  "network_unreachable",
  "host_unreachable",
  "connection_refused",
  "ttl_expired",
  "command_not_supported",
  "address_type_not_supported",
];

/** A SOCKS5 reply code's name, such as `connection_refused`. */
export function socks5ReplyReason(code: number): string {
  return REPLY_REASONS[code] ?? `unassigned_${code}`;
}

function failure(
  reason: (typeof HandshakeFailure)[keyof typeof HandshakeFailure],
  message: string,
  replyCode?: number,
): UpstreamHandshakeError {
  return new UpstreamHandshakeError(HandshakeProtocol.socks5, reason, message, { replyCode });
}

/** VER NMETHODS METHODS...: offers username/password too when there are credentials. */
export function encodeSocks5Greeting(withCredentials: boolean): Uint8Array {
  return withCredentials
    ? Uint8Array.of(SOCKS5_VERSION, 2, Socks5Method.noAuth, Socks5Method.userPass)
    : Uint8Array.of(SOCKS5_VERSION, 1, Socks5Method.noAuth);
}

export interface Socks5MethodSelection {
  method: number;
  consumed: number;
}

/** The server's VER METHOD. Throws when it accepts no offered method. */
export function parseSocks5MethodSelection(
  bytes: Uint8Array,
  offeredCredentials: boolean,
): Socks5MethodSelection | undefined {
  if (bytes.length < 2) return undefined;
  if (bytes[0] !== SOCKS5_VERSION) throw failure(HandshakeFailure.badReply, "Not a SOCKS5 reply");
  const method = bytes[1];
  if (method === Socks5Method.noAcceptable) {
    throw failure(
      offeredCredentials ? HandshakeFailure.noAcceptableMethod : HandshakeFailure.authFailed,
      offeredCredentials
        ? "SOCKS5 proxy accepts none of the offered auth methods"
        : "SOCKS5 proxy requires authentication",
      method,
    );
  }
  if (method !== Socks5Method.noAuth && !(offeredCredentials && method === Socks5Method.userPass)) {
    throw failure(HandshakeFailure.badReply, `SOCKS5 proxy chose a method not offered (${method})`);
  }
  return { method, consumed: 2 };
}

/** VER ULEN UNAME PLEN PASSWD (RFC 1929), UTF-8; each field at most 255 bytes. */
export function encodeSocks5UserPassAuth(credentials: ProxyCredentials): Uint8Array {
  const username = utf8Encode(credentials.username);
  const password = utf8Encode(credentials.password);
  if (username.length === 0 || username.length > 255 || password.length > 255) {
    throw failure(
      HandshakeFailure.invalidRequest,
      "SOCKS5 username and password must be 1-255 and 0-255 bytes",
    );
  }
  const bytes = new Uint8Array(3 + username.length + password.length);
  bytes[0] = AUTH_VERSION;
  bytes[1] = username.length;
  bytes.set(username, 2);
  bytes[2 + username.length] = password.length;
  bytes.set(password, 3 + username.length);
  return bytes;
}

/** The auth reply VER STATUS; throws auth_failed on a non-zero status. */
export function parseSocks5AuthReply(bytes: Uint8Array): { consumed: number } | undefined {
  if (bytes.length < 2) return undefined;
  // Some servers answer the auth sub-negotiation with version 5; accept it as well.
  if (bytes[0] !== AUTH_VERSION && bytes[0] !== SOCKS5_VERSION) {
    throw failure(HandshakeFailure.badReply, "Not a SOCKS5 auth reply");
  }
  if (bytes[1] !== 0) {
    throw failure(HandshakeFailure.authFailed, "SOCKS5 proxy rejected the credentials", bytes[1]);
  }
  return { consumed: 2 };
}

/**
 * VER CMD RSV ATYP DST.ADDR DST.PORT for CONNECT. IP literals go as ATYP 1 or 4; a name goes
 * as ATYP 3, unresolved, so the proxy resolves it from its own network.
 */
export function encodeSocks5Connect(target: TunnelTarget): Uint8Array {
  if (!isValidPort(target.port)) throw failure(HandshakeFailure.invalidRequest, "Invalid port");
  const kind = hostKind(target.host);
  let address: Uint8Array;
  let type: number;
  if (kind === HostKind.ipv4) {
    address = parseIPv4(target.host)!;
    type = Socks5AddressType.ipv4;
  } else if (kind === HostKind.ipv6) {
    address = parseIPv6(target.host)!;
    type = Socks5AddressType.ipv6;
  } else if (kind === HostKind.name) {
    const name = utf8Encode(target.host);
    address = new Uint8Array(1 + name.length);
    address[0] = name.length;
    address.set(name, 1);
    type = Socks5AddressType.domain;
  } else {
    throw failure(HandshakeFailure.invalidRequest, "Invalid target host");
  }
  const bytes = new Uint8Array(6 + address.length);
  bytes[0] = SOCKS5_VERSION;
  bytes[1] = Socks5Command.connect;
  bytes[2] = 0;
  bytes[3] = type;
  bytes.set(address, 4);
  bytes[4 + address.length] = target.port >> 8;
  bytes[5 + address.length] = target.port & 0xff;
  return bytes;
}

export interface Socks5ConnectReply {
  /** The address the proxy connected from (BND.ADDR/BND.PORT); often zeros. */
  bound: TunnelTarget;
  consumed: number;
}

/** The CONNECT reply. Throws `rejected` with the reply code when it is not success. */
export function parseSocks5Reply(bytes: Uint8Array): Socks5ConnectReply | undefined {
  if (bytes.length < 2) return undefined;
  if (bytes[0] !== SOCKS5_VERSION) throw failure(HandshakeFailure.badReply, "Not a SOCKS5 reply");
  const code = bytes[1];
  if (code !== Socks5Reply.succeeded) {
    throw failure(
      HandshakeFailure.rejected,
      `SOCKS5 proxy refused the connection: ${socks5ReplyReason(code)} (${code})`,
      code,
    );
  }
  if (bytes.length < 5) return undefined;
  let addressLength: number;
  switch (bytes[3]) {
    case Socks5AddressType.ipv4:
      addressLength = 4;
      break;
    case Socks5AddressType.ipv6:
      addressLength = 16;
      break;
    case Socks5AddressType.domain:
      addressLength = 1 + bytes[4];
      break;
    default:
      throw failure(HandshakeFailure.badReply, "Bad address type in SOCKS5 reply");
  }
  const consumed = 4 + addressLength + 2;
  if (bytes.length < consumed) return undefined;
  const address = bytes.subarray(4, 4 + addressLength);
  const host = bytes[3] === Socks5AddressType.ipv4
    ? formatIPv4(address)
    : bytes[3] === Socks5AddressType.ipv6
    ? formatIPv6(address)
    : latin1Decode(address.subarray(1));
  const port = (bytes[4 + addressLength] << 8) | bytes[5 + addressLength];
  return { bound: { host, port }, consumed };
}
