/**
 * The few DER pieces a host certificate is assembled from on the connection path. `@peculiar/x509`
 * builds the CA and every part of a host certificate that never changes, once per load; its
 * generator parses each extension, the key and both names again and re-reads the result on every
 * call, about a millisecond and a half a certificate under Deno against the 2 ms p99 budget
 * (`npm run bench -- tls-ca`). What varies per host (serial, validity, subject, subjectAltName)
 * is small enough to write here, and the parts are concatenated around one signature.
 */
import { concatParts } from "../proxy-protocol/bytes.ts";

/** Bytes over an ArrayBuffer, the type web crypto takes (never a SharedArrayBuffer). */
export type Bytes = Uint8Array<ArrayBuffer>;

export const Tag = {
  integer: 0x02,
  bitString: 0x03,
  octetString: 0x04,
  oid: 0x06,
  utf8String: 0x0c,
  sequence: 0x30,
  set: 0x31,
  utcTime: 0x17,
  generalizedTime: 0x18,
  /** [0] and [3] EXPLICIT, constructed: a certificate's version and extensions. */
  context0: 0xa0,
  context3: 0xa3,
  /** [2] and [7] IMPLICIT, primitive: a GeneralName's dNSName and iPAddress. */
  dnsName: 0x82,
  ipAddress: 0x87,
} as const;

/** One TLV: `tag`, the definite length of the parts, the parts. */
export function tlv(tag: number, ...parts: readonly Uint8Array[]): Bytes {
  let length = 0;
  for (const part of parts) length += part.length;
  const head = length < 0x80
    ? [tag, length]
    : length < 0x100
    ? [tag, 0x81, length]
    : length < 0x10000
    ? [tag, 0x82, length >> 8, length & 0xff]
    : [tag, 0x83, length >> 16, (length >> 8) & 0xff, length & 0xff];
  return concatParts([new Uint8Array(head), ...parts]);
}

/** A non-negative INTEGER from its big-endian magnitude: minimal, with a 0 before a high bit. */
export function unsignedInteger(magnitude: Uint8Array): Bytes {
  let start = 0;
  while (start < magnitude.length - 1 && magnitude[start] === 0) start++;
  const body = magnitude.subarray(start);
  return (body[0] & 0x80) !== 0
    ? tlv(Tag.integer, new Uint8Array([0]), body)
    : tlv(Tag.integer, body);
}

const text = new TextEncoder();

const two = (n: number) => String(n).padStart(2, "0");

/** RFC 5280's Time: UTCTime through 2049, GeneralizedTime from 2050, to the second, in UTC. */
export function time(date: Date): Bytes {
  const year = date.getUTCFullYear();
  const rest = `${two(date.getUTCMonth() + 1)}${two(date.getUTCDate())}${two(date.getUTCHours())}${
    two(date.getUTCMinutes())
  }${two(date.getUTCSeconds())}Z`;
  return year < 2050
    ? tlv(Tag.utcTime, text.encode(`${two(year % 100)}${rest}`))
    : tlv(Tag.generalizedTime, text.encode(`${year}${rest}`));
}

export function utf8(value: string): Bytes {
  return tlv(Tag.utf8String, text.encode(value));
}

/**
 * An ECDSA signature as web crypto makes it (r and s side by side, IEEE P1363) in the form X.509
 * carries it: SEQUENCE { INTEGER r, INTEGER s }.
 */
export function ecdsaSignatureDer(raw: Uint8Array): Bytes {
  const half = raw.length / 2;
  return tlv(
    Tag.sequence,
    unsignedInteger(raw.subarray(0, half)),
    unsignedInteger(raw.subarray(half)),
  );
}

/** One element read: its tag, and where its whole TLV and its contents lie in the input. */
export interface Element {
  tag: number;
  start: number;
  contentStart: number;
  end: number;
}

/** The element at `offset` of `der`; throws on a truncated or indefinite length. */
export function readElement(der: Uint8Array, offset: number): Element {
  const tag = der[offset];
  let length = der[offset + 1];
  let contentStart = offset + 2;
  if (length === undefined) throw new RangeError("DER truncated");
  if (length >= 0x80) {
    const count = length & 0x7f;
    if (count === 0 || count > 3) throw new RangeError("DER length not supported");
    length = 0;
    for (let i = 0; i < count; i++) length = (length << 8) | der[contentStart + i];
    contentStart += count;
  }
  const end = contentStart + length;
  if (end > der.length) throw new RangeError("DER truncated");
  return { tag, start: offset, contentStart, end };
}

/** The elements inside a constructed one, in order. */
export function children(der: Uint8Array, parent: Element): Element[] {
  const out: Element[] = [];
  for (let offset = parent.contentStart; offset < parent.end;) {
    const element = readElement(der, offset);
    out.push(element);
    offset = element.end;
  }
  return out;
}
