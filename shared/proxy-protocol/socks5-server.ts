/**
 * The server side of SOCKS5 (RFC 1928) with username/password auth (RFC 1929): parsers for what
 * a client sends and encoders for what a server answers. Runtime-neutral, no I/O. Parsers take
 * the bytes received so far and answer undefined while a message is incomplete; a message that
 * can never be valid throws `Socks5ServerError`, whose `reply` (when set) is the reply code to
 * send before closing.
 */
import { formatIPv4, formatIPv6, HostKind, hostKind, parseIPv4, parseIPv6 } from "./address.ts";
import { utf8Decode } from "./bytes.ts";
import type { TunnelTarget } from "./types.ts";
import { SOCKS5_VERSION, Socks5AddressType, Socks5Method, Socks5Reply } from "./socks5.ts";
import { Socks5ServerError } from "../errors.ts";

/** The username/password sub-negotiation's own version byte (RFC 1929). */
export const SOCKS5_AUTH_VERSION = 0x01;
export const Socks5AuthStatus = { success: 0x00, failure: 0x01 } as const;

/** The longest message a client sends before its tunnel: VER ULEN UNAME(255) PLEN PASSWD(255). */
export const SOCKS5_MAX_CLIENT_MESSAGE_BYTES = 513;

export { Socks5ServerError };

export interface Socks5Greeting {
  /** The methods the client offers. */
  methods: readonly number[];
  consumed: number;
}

/** VER NMETHODS METHODS... */
export function parseSocks5Greeting(bytes: Uint8Array): Socks5Greeting | undefined {
  if (bytes.length < 1) return undefined;
  if (bytes[0] !== SOCKS5_VERSION) throw new Socks5ServerError("Not a SOCKS5 greeting");
  if (bytes.length < 2) return undefined;
  const count = bytes[1];
  if (count === 0) throw new Socks5ServerError("SOCKS5 greeting offers no method");
  if (bytes.length < 2 + count) return undefined;
  return { methods: Array.from(bytes.subarray(2, 2 + count)), consumed: 2 + count };
}

/** VER METHOD: the method the server chose, or `Socks5Method.noAcceptable`. */
export function encodeSocks5MethodSelection(method: number): Uint8Array {
  return Uint8Array.of(SOCKS5_VERSION, method);
}

export interface Socks5Credentials {
  /** The raw bytes as sent (RFC 1929 leaves their encoding open). */
  usernameBytes: Uint8Array;
  passwordBytes: Uint8Array;
  consumed: number;
}

/** VER ULEN UNAME PLEN PASSWD. The fields are views of `bytes`: copy them to keep them. */
export function parseSocks5UserPass(bytes: Uint8Array): Socks5Credentials | undefined {
  if (bytes.length < 1) return undefined;
  if (bytes[0] !== SOCKS5_AUTH_VERSION) {
    throw new Socks5ServerError("Not a SOCKS5 username/password request");
  }
  if (bytes.length < 2) return undefined;
  const usernameLength = bytes[1];
  if (bytes.length < 3 + usernameLength) return undefined;
  const passwordLength = bytes[2 + usernameLength];
  const consumed = 3 + usernameLength + passwordLength;
  if (bytes.length < consumed) return undefined;
  return {
    usernameBytes: bytes.subarray(2, 2 + usernameLength),
    passwordBytes: bytes.subarray(3 + usernameLength, consumed),
    consumed,
  };
}

/** VER STATUS of the sub-negotiation (a failure obliges the server to close). */
export function encodeSocks5AuthStatus(ok: boolean): Uint8Array {
  return Uint8Array.of(
    SOCKS5_AUTH_VERSION,
    ok ? Socks5AuthStatus.success : Socks5AuthStatus.failure,
  );
}

export interface Socks5Request {
  command: number;
  addressType: number;
  /** A name as sent (unresolved), or an IP literal in its plain form (IPv6 without brackets). */
  target: TunnelTarget;
  consumed: number;
}

/**
 * VER CMD RSV ATYP DST.ADDR DST.PORT. The command is returned whatever it is (the caller
 * answers the unsupported ones); an unknown address type, a name that is no host name or a
 * zero port throws with the reply to send.
 */
export function parseSocks5Request(bytes: Uint8Array): Socks5Request | undefined {
  if (bytes.length < 1) return undefined;
  if (bytes[0] !== SOCKS5_VERSION) throw new Socks5ServerError("Not a SOCKS5 request");
  if (bytes.length < 5) return undefined;
  const command = bytes[1];
  const addressType = bytes[3];
  let addressStart = 4;
  let addressLength: number;
  switch (addressType) {
    case Socks5AddressType.ipv4:
      addressLength = 4;
      break;
    case Socks5AddressType.ipv6:
      addressLength = 16;
      break;
    case Socks5AddressType.domain:
      addressStart = 5;
      addressLength = bytes[4];
      break;
    default:
      throw new Socks5ServerError(
        `Unknown SOCKS5 address type ${addressType}`,
        Socks5Reply.addressTypeNotSupported,
      );
  }
  const consumed = addressStart + addressLength + 2;
  if (bytes.length < consumed) return undefined;
  const address = bytes.subarray(addressStart, addressStart + addressLength);
  const port = (bytes[consumed - 2] << 8) | bytes[consumed - 1];
  let host: string;
  if (addressType === Socks5AddressType.ipv4) host = formatIPv4(address);
  else if (addressType === Socks5AddressType.ipv6) host = formatIPv6(address);
  else host = domainHost(address);
  if (port === 0) {
    throw new Socks5ServerError("SOCKS5 request for port 0", Socks5Reply.generalFailure);
  }
  return { command, addressType, target: { host, port }, consumed };
}

/**
 * A name as the client sent it, passed on unresolved. A name that is an IP literal (some
 * clients send them as names) becomes that literal; anything that is no host name is refused,
 * so it cannot reach an upstream's request line.
 */
function domainHost(bytes: Uint8Array): string {
  // Bytes that are not UTF-8 decode to U+FFFD, which no host name holds.
  let name = utf8Decode(bytes);
  if (name.startsWith("[") && name.endsWith("]")) name = name.slice(1, -1);
  const kind = name.length === 0 ? undefined : hostKind(name);
  if (kind === HostKind.ipv4) return formatIPv4(parseIPv4(name)!);
  if (kind === HostKind.ipv6) return formatIPv6(parseIPv6(name)!);
  if (kind === HostKind.name) return name;
  throw new Socks5ServerError("SOCKS5 request names no valid host", Socks5Reply.generalFailure);
}

const ZERO_IPV4 = Uint8Array.of(0, 0, 0, 0);

/**
 * VER REP RSV ATYP BND.ADDR BND.PORT. The bound address is 0.0.0.0:0 unless given: the
 * gateway's exit is the upstream's, which it does not know, and clients ignore it for CONNECT.
 */
export function encodeSocks5Reply(reply: number, bound?: TunnelTarget): Uint8Array {
  let type: number = Socks5AddressType.ipv4;
  let address: Uint8Array = ZERO_IPV4;
  const port = bound?.port ?? 0;
  if (bound !== undefined) {
    const v4 = parseIPv4(bound.host);
    const v6 = v4 === undefined ? parseIPv6(bound.host) : undefined;
    if (v4 !== undefined) address = v4;
    else if (v6 !== undefined) {
      address = v6;
      type = Socks5AddressType.ipv6;
    }
  }
  const bytes = new Uint8Array(6 + address.length);
  bytes[0] = SOCKS5_VERSION;
  bytes[1] = reply;
  bytes[2] = 0;
  bytes[3] = type;
  bytes.set(address, 4);
  bytes[4 + address.length] = (port >> 8) & 0xff;
  bytes[5 + address.length] = port & 0xff;
  return bytes;
}

/** Whether the client's offer holds username/password: the only method the gateway accepts. */
export function offersUserPass(greeting: Socks5Greeting): boolean {
  return greeting.methods.includes(Socks5Method.userPass);
}

export function offersNoAuth(greeting: Socks5Greeting): boolean {
  return greeting.methods.includes(Socks5Method.noAuth);
}
