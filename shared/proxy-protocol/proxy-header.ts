/**
 * The server side of HAProxy's PROXY protocol (versions 1 and 2): the header a load balancer
 * sends first on a connection to say whom it carries. Runtime-neutral, no I/O.
 *
 * Version 1 is one text line of at most 107 bytes, CRLF included:
 * `PROXY TCP4 <src> <dst> <sport> <dport>\r\n`, `PROXY TCP6 …`, or `PROXY UNKNOWN…\r\n` (whatever
 * follows UNKNOWN is ignored). Version 2 is binary: a 12-byte signature, a version-and-command
 * byte (0x20 LOCAL, 0x21 PROXY), a family-and-transport byte (0x11 TCP over IPv4, 0x21 TCP over
 * IPv6, 0x00 unspecified, 0x31 a UNIX stream, 0x12/0x22/0x32 datagrams), a 16-bit length, then
 * that many bytes: the addresses (12 for IPv4, 36 for IPv6, 216 for UNIX) and any TLVs, which
 * are skipped.
 *
 * `readProxyHeader` takes the bytes a connection sent so far. It answers `incomplete` while they
 * may still become a header, `absent` once they cannot begin one, a header with the bytes it
 * spans, or throws `ProxyHeaderError` when they begin one that can never be valid. A header
 * saying "local" (v2 LOCAL, v1 UNKNOWN, v2 unspecified or UNIX addresses) carries no client
 * address: the connection's own peer is the client. Datagram families are refused: the
 * listeners speak TCP.
 */
import { dottedQuadValue, formatIPv4, formatIPv6, parseIPv6 } from "./address.ts";
import { ProxyHeaderError } from "../errors.ts";

/** `\r\n\r\n\0\r\nQUIT\n`: what begins every version 2 header. */
export const PROXY_V2_SIGNATURE: Uint8Array = Uint8Array.of(
  0x0d,
  0x0a,
  0x0d,
  0x0a,
  0x00,
  0x0d,
  0x0a,
  0x51,
  0x55,
  0x49,
  0x54,
  0x0a,
);
/** `PROXY `: what begins every version 1 header. */
const V1_PREFIX: Uint8Array = Uint8Array.of(0x50, 0x52, 0x4f, 0x58, 0x59, 0x20);
/** The longest version 1 line, CRLF included (the specification's bound). */
export const PROXY_V1_MAX_BYTES = 107;
/**
 * The longest version 2 header taken: the fixed part, IPv6 or UNIX addresses and room for the
 * TLVs a balancer adds (a unique id, TLS details). A longer one is refused rather than read.
 */
export const PROXY_V2_MAX_BYTES = 1024;
const V2_FIXED_BYTES = 16;

export { ProxyHeaderError };

export interface ProxyEndpoint {
  /** An IP literal (IPv6 without brackets). */
  readonly address: string;
  readonly port: number;
  readonly family: 4 | 6;
}

export const ProxyHeaderKind = {
  /** Too few bytes to tell yet. */
  incomplete: "incomplete",
  /** The bytes do not begin a PROXY header (a client speaking directly). */
  absent: "absent",
  /** A header without a client address: the connection's peer is the client. */
  local: "local",
  /** A header naming the client (`source`) and the address it connected to. */
  proxied: "proxied",
} as const;

export type ProxyHeaderRead =
  | { readonly kind: typeof ProxyHeaderKind.incomplete }
  | { readonly kind: typeof ProxyHeaderKind.absent }
  | {
    readonly kind: typeof ProxyHeaderKind.local;
    readonly version: 1 | 2;
    readonly consumed: number;
  }
  | {
    readonly kind: typeof ProxyHeaderKind.proxied;
    readonly version: 1 | 2;
    /** The bytes the header spans; what follows is the client's own. */
    readonly consumed: number;
    readonly source: ProxyEndpoint;
    readonly destination: ProxyEndpoint;
  };

const INCOMPLETE: ProxyHeaderRead = Object.freeze({ kind: ProxyHeaderKind.incomplete });
const ABSENT: ProxyHeaderRead = Object.freeze({ kind: ProxyHeaderKind.absent });

/** How `bytes` compare with `prefix`: all of it there, a part of it so far, or not it. */
function prefixMatch(bytes: Uint8Array, prefix: Uint8Array): "full" | "partial" | "no" {
  const n = Math.min(bytes.length, prefix.length);
  for (let i = 0; i < n; i++) if (bytes[i] !== prefix[i]) return "no";
  return n === prefix.length ? "full" : "partial";
}

/**
 * Whether the bytes begin a PROXY header of either version, however the rest of it reads:
 * undefined while too few have come to tell. What a listener refuses from an untrusted peer.
 */
export function startsProxyHeader(bytes: Uint8Array): boolean | undefined {
  if (bytes.length === 0) return undefined;
  const v2 = prefixMatch(bytes, PROXY_V2_SIGNATURE);
  const v1 = prefixMatch(bytes, V1_PREFIX);
  if (v2 === "full" || v1 === "full") return true;
  return v2 === "partial" || v1 === "partial" ? undefined : false;
}

/** Reads the PROXY header the bytes begin with (either version), as far as they go. */
export function readProxyHeader(bytes: Uint8Array): ProxyHeaderRead {
  const starts = startsProxyHeader(bytes);
  if (starts === undefined) return INCOMPLETE;
  if (!starts) return ABSENT;
  return bytes[0] === CR ? readV2(bytes) : readV1(bytes);
}

// ---------------------------------------------------------------------------------------------
// Version 1

const CR = 0x0d;
const LF = 0x0a;

function readV1(bytes: Uint8Array): ProxyHeaderRead {
  // The CR may be at most the line's last byte but one.
  const limit = Math.min(bytes.length, PROXY_V1_MAX_BYTES - 1);
  let end = -1;
  for (let i = V1_PREFIX.length; i < limit; i++) {
    const byte = bytes[i];
    if (byte === CR) {
      if (i + 1 >= bytes.length) return INCOMPLETE;
      if (bytes[i + 1] !== LF) throw new ProxyHeaderError("PROXY v1 line has a CR without LF");
      end = i;
      break;
    }
    // Printable US-ASCII only: a line is text, and a LF alone does not end it.
    if (byte < 0x20 || byte > 0x7e) throw new ProxyHeaderError("PROXY v1 line is not text");
  }
  if (end === -1) {
    if (bytes.length >= PROXY_V1_MAX_BYTES - 1) {
      throw new ProxyHeaderError(`PROXY v1 line longer than ${PROXY_V1_MAX_BYTES} bytes`);
    }
    return INCOMPLETE;
  }
  const consumed = end + 2;
  let line = "";
  for (let i = V1_PREFIX.length; i < end; i++) line += String.fromCharCode(bytes[i]);
  if (line === "UNKNOWN" || line.startsWith("UNKNOWN ")) {
    return { kind: ProxyHeaderKind.local, version: 1, consumed };
  }
  const parts = line.split(" ");
  if (parts.length !== 5) {
    throw new ProxyHeaderError("PROXY v1 line must be PROXY TCP4|TCP6 <src> <dst> <sport> <dport>");
  }
  const [protocol, sourceText, destinationText, sourcePort, destinationPort] = parts;
  let family: 4 | 6;
  if (protocol === "TCP4") family = 4;
  else if (protocol === "TCP6") family = 6;
  else throw new ProxyHeaderError("PROXY v1 protocol must be TCP4, TCP6 or UNKNOWN");
  return {
    kind: ProxyHeaderKind.proxied,
    version: 1,
    consumed,
    source: { address: v1Address(sourceText, family), port: v1Port(sourcePort), family },
    destination: {
      address: v1Address(destinationText, family),
      port: v1Port(destinationPort),
      family,
    },
  };
}

function v1Address(text: string, family: 4 | 6): string {
  if (family === 4) {
    const value = dottedQuadValue(text);
    if (value === undefined) throw new ProxyHeaderError("PROXY v1 TCP4 address is not IPv4");
    return formatIPv4(
      Uint8Array.of(value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255),
    );
  }
  const bytes = parseIPv6(text);
  if (bytes === undefined) throw new ProxyHeaderError("PROXY v1 TCP6 address is not IPv6");
  return formatIPv6(bytes);
}

function v1Port(text: string): number {
  // Decimal, without leading zeros, 0-65535.
  if (!/^(0|[1-9][0-9]{0,4})$/.test(text) || Number(text) > 65535) {
    throw new ProxyHeaderError("PROXY v1 port must be a number from 0 to 65535");
  }
  return Number(text);
}

// ---------------------------------------------------------------------------------------------
// Version 2

const V2_COMMAND_LOCAL = 0x0;
const V2_COMMAND_PROXY = 0x1;
const FAMILY_UNSPEC = 0x00;
const TCP4 = 0x11;
const UDP4 = 0x12;
const TCP6 = 0x21;
const UDP6 = 0x22;
const UNIX_STREAM = 0x31;
const UNIX_DGRAM = 0x32;
const IPV4_BLOCK_BYTES = 12;
const IPV6_BLOCK_BYTES = 36;
const UNIX_BLOCK_BYTES = 216;

function readV2(bytes: Uint8Array): ProxyHeaderRead {
  if (bytes.length < V2_FIXED_BYTES) return INCOMPLETE;
  const versionCommand = bytes[12];
  if (versionCommand >> 4 !== 2) throw new ProxyHeaderError("PROXY v2 header of another version");
  const command = versionCommand & 0x0f;
  if (command !== V2_COMMAND_LOCAL && command !== V2_COMMAND_PROXY) {
    throw new ProxyHeaderError("PROXY v2 command must be LOCAL or PROXY");
  }
  const familyTransport = bytes[13];
  const length = (bytes[14] << 8) | bytes[15];
  const consumed = V2_FIXED_BYTES + length;
  if (consumed > PROXY_V2_MAX_BYTES) {
    throw new ProxyHeaderError(`PROXY v2 header longer than ${PROXY_V2_MAX_BYTES} bytes`);
  }
  // LOCAL (a balancer's own health check): its block, family included, is to be ignored.
  if (command === V2_COMMAND_LOCAL) {
    return bytes.length < consumed
      ? INCOMPLETE
      : { kind: ProxyHeaderKind.local, version: 2, consumed };
  }
  // The family is checked before the whole header is in: a bad one is refused at once.
  let block: number;
  switch (familyTransport) {
    case FAMILY_UNSPEC:
      block = 0;
      break;
    case TCP4:
      block = IPV4_BLOCK_BYTES;
      break;
    case TCP6:
      block = IPV6_BLOCK_BYTES;
      break;
    case UNIX_STREAM:
      block = UNIX_BLOCK_BYTES;
      break;
    case UDP4:
    case UDP6:
    case UNIX_DGRAM:
      throw new ProxyHeaderError("PROXY v2 header names a datagram transport");
    default:
      throw new ProxyHeaderError("PROXY v2 address family or transport is unknown");
  }
  if (length < block) {
    throw new ProxyHeaderError("PROXY v2 address block is shorter than its family's");
  }
  if (bytes.length < consumed) return INCOMPLETE;
  // Addresses that are no IP (unspecified, a UNIX socket): the peer is the client.
  if (familyTransport === FAMILY_UNSPEC || familyTransport === UNIX_STREAM) {
    return { kind: ProxyHeaderKind.local, version: 2, consumed };
  }
  const at = V2_FIXED_BYTES;
  if (familyTransport === TCP4) {
    return {
      kind: ProxyHeaderKind.proxied,
      version: 2,
      consumed,
      source: {
        address: formatIPv4(bytes.subarray(at, at + 4)),
        port: port(bytes, at + 8),
        family: 4,
      },
      destination: {
        address: formatIPv4(bytes.subarray(at + 4, at + 8)),
        port: port(bytes, at + 10),
        family: 4,
      },
    };
  }
  return {
    kind: ProxyHeaderKind.proxied,
    version: 2,
    consumed,
    source: {
      address: formatIPv6(bytes.subarray(at, at + 16)),
      port: port(bytes, at + 32),
      family: 6,
    },
    destination: {
      address: formatIPv6(bytes.subarray(at + 16, at + 32)),
      port: port(bytes, at + 34),
      family: 6,
    },
  };
}

function port(bytes: Uint8Array, at: number): number {
  return (bytes[at] << 8) | bytes[at + 1];
}

// ---------------------------------------------------------------------------------------------
// Encoding, for the balancers of tests and tools.

/** A version 1 line for these endpoints (both of one family), or `PROXY UNKNOWN`. */
export function encodeProxyV1(
  source?: ProxyEndpoint,
  destination?: ProxyEndpoint,
): Uint8Array {
  const line = source === undefined || destination === undefined
    ? "PROXY UNKNOWN\r\n"
    : `PROXY TCP${source.family} ${source.address} ${destination.address} ${source.port} ${destination.port}\r\n`;
  return Uint8Array.from(line, (c) => c.charCodeAt(0));
}

/** A version 2 header: PROXY for these endpoints (both of one family), LOCAL without them. */
export function encodeProxyV2(
  source?: ProxyEndpoint,
  destination?: ProxyEndpoint,
  tlvs: Uint8Array = new Uint8Array(0),
): Uint8Array {
  const proxied = source !== undefined && destination !== undefined;
  const family = source?.family ?? 4;
  const block = !proxied ? 0 : family === 4 ? IPV4_BLOCK_BYTES : IPV6_BLOCK_BYTES;
  const length = block + tlvs.length;
  const header = new Uint8Array(V2_FIXED_BYTES + length);
  header.set(PROXY_V2_SIGNATURE, 0);
  header[12] = proxied ? 0x21 : 0x20;
  header[13] = !proxied ? FAMILY_UNSPEC : family === 4 ? TCP4 : TCP6;
  header[14] = length >> 8;
  header[15] = length & 0xff;
  if (proxied) {
    const size = family === 4 ? 4 : 16;
    header.set(addressBytes(source.address, family), V2_FIXED_BYTES);
    header.set(addressBytes(destination.address, family), V2_FIXED_BYTES + size);
    const ports = V2_FIXED_BYTES + 2 * size;
    header[ports] = source.port >> 8;
    header[ports + 1] = source.port & 0xff;
    header[ports + 2] = destination.port >> 8;
    header[ports + 3] = destination.port & 0xff;
  }
  header.set(tlvs, V2_FIXED_BYTES + block);
  return header;
}

function addressBytes(address: string, family: 4 | 6): Uint8Array {
  if (family === 6) {
    const bytes = parseIPv6(address);
    if (bytes === undefined) throw new Error(`Not an IPv6 address: ${address}`);
    return bytes;
  }
  const value = dottedQuadValue(address);
  if (value === undefined) throw new Error(`Not an IPv4 address: ${address}`);
  return Uint8Array.of(value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255);
}
