/**
 * Reads a TLS ClientHello off the first bytes of an intercepted tunnel, without consuming them
 * (the handshake is fed the same bytes): whether the client speaks TLS at all, the name it
 * asks for (SNI), the protocols it offers (ALPN), and the fields its JA3 and JA4 fingerprints
 * are made of (gateway/net/tls/fingerprints.ts).
 */

/** A TLS record carrying a handshake message starts with this byte (RFC 8446 section 5.1). */
const HANDSHAKE_RECORD = 0x16;
const CLIENT_HELLO = 1;
const RECORD_HEADER_BYTES = 5;
/** No real ClientHello comes near this (post-quantum key shares make one about 2 KiB). */
export const MAX_CLIENT_HELLO_BYTES = 32 * 1024;

export interface ClientHello {
  /** The legacy version field (0x0303 for TLS 1.2 and 1.3 alike). */
  version: number;
  /** The highest of supported_versions when offered, else `version`. */
  maxVersion: number;
  ciphers: number[];
  /** Extension types in the order sent. */
  extensions: number[];
  groups: number[];
  pointFormats: number[];
  signatureAlgorithms: number[];
  supportedVersions: number[];
  /** The server name asked for (lower case), if any. */
  serverName: string | undefined;
  alpn: string[];
}

/** What the bytes read so far are. */
export type HelloScan =
  | { kind: "more" }
  | { kind: "not_tls" }
  | { kind: "malformed"; reason: string }
  | { kind: "hello"; hello: ClientHello };

/** Whether the first byte could start a TLS handshake (one byte tells, before the rest came). */
export function startsLikeTls(bytes: Uint8Array): boolean {
  return bytes.length > 0 && bytes[0] === HANDSHAKE_RECORD;
}

/**
 * Scans `bytes` (the tunnel's first bytes, as they came): `more` until the whole ClientHello is
 * there (it may span records), then the hello; `not_tls` when they are not a TLS handshake.
 */
export function scanClientHello(bytes: Uint8Array): HelloScan {
  if (bytes.length === 0) return { kind: "more" };
  if (!startsLikeTls(bytes)) return { kind: "not_tls" };
  // The handshake message, gathered across records.
  const message: Uint8Array[] = [];
  let gathered = 0;
  let offset = 0;
  let needed = -1;
  while (needed < 0 || gathered < needed) {
    if (bytes.length < offset + RECORD_HEADER_BYTES) return more(bytes);
    if (bytes[offset] !== HANDSHAKE_RECORD || bytes[offset + 1] !== 3) {
      return offset === 0 ? { kind: "not_tls" } : malformed("a record between hello records");
    }
    const length = (bytes[offset + 3] << 8) | bytes[offset + 4];
    if (length === 0) return malformed("an empty record");
    const end = offset + RECORD_HEADER_BYTES + length;
    if (bytes.length < end) return more(bytes);
    const fragment = bytes.subarray(offset + RECORD_HEADER_BYTES, end);
    message.push(fragment);
    gathered += fragment.length;
    offset = end;
    if (needed < 0 && gathered >= 4) {
      const head = concat(message, 4);
      if (head[0] !== CLIENT_HELLO) {
        return malformed("the first handshake message is not a ClientHello");
      }
      needed = 4 + ((head[1] << 16) | (head[2] << 8) | head[3]);
      if (needed > MAX_CLIENT_HELLO_BYTES) return malformed("the ClientHello is too large");
    }
  }
  try {
    return { kind: "hello", hello: parseHello(concat(message, needed).subarray(4)) };
  } catch (error) {
    return malformed(error instanceof Error ? error.message : "unreadable");
  }
}

function more(bytes: Uint8Array): HelloScan {
  return bytes.length > MAX_CLIENT_HELLO_BYTES + 1024
    ? malformed("the ClientHello is too large")
    : { kind: "more" };
}

function malformed(reason: string): HelloScan {
  return { kind: "malformed", reason };
}

function concat(parts: readonly Uint8Array[], length: number): Uint8Array {
  if (parts.length === 1) return parts[0].subarray(0, length);
  const out = new Uint8Array(length);
  let at = 0;
  for (const part of parts) {
    if (at >= length) break;
    const take = Math.min(part.length, length - at);
    out.set(part.subarray(0, take), at);
    at += take;
  }
  return out;
}

/** A cursor over the hello's body; every read past its end throws. */
class Reader {
  readonly bytes: Uint8Array;
  at: number;
  readonly end: number;
  constructor(bytes: Uint8Array, at = 0, end = bytes.length) {
    this.bytes = bytes;
    this.at = at;
    this.end = end;
  }
  #need(count: number): void {
    if (this.at + count > this.end) throw new Error("the ClientHello is cut short");
  }
  u8(): number {
    this.#need(1);
    return this.bytes[this.at++];
  }
  u16(): number {
    this.#need(2);
    const value = (this.bytes[this.at] << 8) | this.bytes[this.at + 1];
    this.at += 2;
    return value;
  }
  /** A sub-reader over the next `length` bytes, skipped here. */
  take(length: number): Reader {
    this.#need(length);
    const sub = new Reader(this.bytes, this.at, this.at + length);
    this.at += length;
    return sub;
  }
  get left(): number {
    return this.end - this.at;
  }
  u16List(): number[] {
    const list: number[] = [];
    while (this.left >= 2) list.push(this.u16());
    return list;
  }
}

const EXT_SERVER_NAME = 0;
const EXT_GROUPS = 10;
const EXT_POINT_FORMATS = 11;
const EXT_SIGNATURE_ALGORITHMS = 13;
const EXT_ALPN = 16;
const EXT_SUPPORTED_VERSIONS = 43;

const latin1 = new TextDecoder("latin1");

function parseHello(body: Uint8Array): ClientHello {
  const r = new Reader(body);
  const version = r.u16();
  r.take(32); // random
  r.take(r.u8()); // legacy session id
  const ciphers = r.take(r.u16()).u16List();
  r.take(r.u8()); // compression methods
  const hello: ClientHello = {
    version,
    maxVersion: version,
    ciphers,
    extensions: [],
    groups: [],
    pointFormats: [],
    signatureAlgorithms: [],
    supportedVersions: [],
    serverName: undefined,
    alpn: [],
  };
  if (r.left === 0) return hello;
  const extensions = r.take(r.u16());
  while (extensions.left > 0) {
    const type = extensions.u16();
    const data = extensions.take(extensions.u16());
    hello.extensions.push(type);
    switch (type) {
      case EXT_SERVER_NAME: {
        const list = data.take(data.u16());
        while (list.left > 0) {
          const nameType = list.u8();
          const name = list.take(list.u16());
          if (nameType === 0 && hello.serverName === undefined) {
            hello.serverName = latin1.decode(name.bytes.subarray(name.at, name.end)).toLowerCase();
          }
        }
        break;
      }
      case EXT_GROUPS:
        hello.groups = data.take(data.u16()).u16List();
        break;
      case EXT_POINT_FORMATS: {
        const list = data.take(data.u8());
        while (list.left > 0) hello.pointFormats.push(list.u8());
        break;
      }
      case EXT_SIGNATURE_ALGORITHMS:
        hello.signatureAlgorithms = data.take(data.u16()).u16List();
        break;
      case EXT_ALPN: {
        const list = data.take(data.u16());
        while (list.left > 0) {
          const name = list.take(list.u8());
          hello.alpn.push(latin1.decode(name.bytes.subarray(name.at, name.end)));
        }
        break;
      }
      case EXT_SUPPORTED_VERSIONS: {
        const list = data.take(data.u8());
        while (list.left >= 2) hello.supportedVersions.push(list.u16());
        break;
      }
    }
  }
  const real = hello.supportedVersions.filter((v) => !isGrease(v));
  if (real.length > 0) hello.maxVersion = Math.max(...real);
  return hello;
}

/** RFC 8701's reserved values (0x0a0a, 0x1a1a, ... 0xfafa), left out of fingerprints. */
export function isGrease(value: number): boolean {
  return (value & 0x0f0f) === 0x0a0a && (value >> 8) === (value & 0xff);
}
