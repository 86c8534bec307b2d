/**
 * IP literals and CIDR blocks, parsed by hand because neither runtime offers a neutral parser.
 * IPv4 is read as `inet_aton` reads it (`127.1`, `0x7f.1`, `2130706433`), since that is how the
 * upstream's resolver will read a host we pass on unresolved.
 */
import { dottedQuadValue } from "../proxy-protocol/address.ts";

/** An address: IPv4 as an unsigned 32-bit number, IPv6 as eight 16-bit words. */
export type IpAddress =
  | { readonly family: 4; readonly value: number }
  | { readonly family: 6; readonly words: readonly number[] };

export type Cidr =
  | { readonly family: 4; readonly value: number; readonly bits: number }
  | { readonly family: 6; readonly words: readonly number[]; readonly bits: number };

function parseNumberPart(part: string): number | undefined {
  if (/^0[xX][0-9a-fA-F]*$/.test(part)) return part.length === 2 ? 0 : parseInt(part.slice(2), 16);
  if (/^0[0-7]*$/.test(part)) return parseInt(part, 8);
  if (/^[1-9][0-9]*$/.test(part)) return Number(part);
  return undefined;
}

/** An IPv4 literal in any form `inet_aton` takes; undefined for anything else. */
export function parseIPv4(text: string): number | undefined {
  if (text === "" || text.length > 64) return undefined;
  // The common form first, read without patterns.
  const plain = dottedQuadValue(text);
  if (plain !== undefined) return plain;
  const parts = text.split(".");
  if (parts.length > 4) return undefined;
  const values: number[] = [];
  for (const part of parts) {
    const value = parseNumberPart(part);
    if (value === undefined || !Number.isFinite(value)) return undefined;
    values.push(value);
  }
  // The last part fills every byte the earlier ones leave.
  const last = values[values.length - 1];
  const lead = values.length - 1;
  if (last >= 2 ** (8 * (4 - lead))) return undefined;
  let result = 0;
  for (let i = 0; i < lead; i++) {
    if (values[i] > 255) return undefined;
    result += values[i] * 2 ** (8 * (3 - i));
  }
  return result + last;
}

/** Strict dotted quad, as it may end an IPv6 literal. */
function parseDottedQuad(text: string): number | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (m === null) return undefined;
  let value = 0;
  for (let i = 1; i <= 4; i++) {
    const byte = Number(m[i]);
    if (byte > 255) return undefined;
    value = value * 256 + byte;
  }
  return value;
}

function parseWords(text: string): number[] | undefined {
  if (text === "") return [];
  const words: number[] = [];
  const parts = text.split(":");
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i];
    if (i === parts.length - 1 && part.includes(".")) {
      const v4 = parseDottedQuad(part);
      if (v4 === undefined) return undefined;
      words.push(Math.floor(v4 / 65536), v4 % 65536);
    } else {
      if (!/^[0-9a-fA-F]{1,4}$/.test(part)) return undefined;
      words.push(parseInt(part, 16));
    }
  }
  return words;
}

/** An IPv6 literal (brackets and a zone id allowed); undefined for anything else. */
export function parseIPv6(text: string): number[] | undefined {
  let t = text;
  if (t.startsWith("[") && t.endsWith("]")) t = t.slice(1, -1);
  const zone = t.indexOf("%");
  if (zone !== -1) t = t.slice(0, zone);
  if (!t.includes(":") || t.length > 64) return undefined;
  const gap = t.indexOf("::");
  if (gap === -1) {
    const words = parseWords(t);
    return words !== undefined && words.length === 8 ? words : undefined;
  }
  if (t.indexOf("::", gap + 1) !== -1) return undefined;
  const head = parseWords(t.slice(0, gap));
  const tail = parseWords(t.slice(gap + 2));
  if (head === undefined || tail === undefined || head.length + tail.length > 7) return undefined;
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

export function parseIp(text: string): IpAddress | undefined {
  const words = parseIPv6(text);
  if (words !== undefined) return { family: 6, words };
  const value = parseIPv4(text);
  return value === undefined ? undefined : { family: 4, value };
}

/** A CIDR block (`127.0.0.0/8`, `fd00::/8`; a bare address is a host block); throws when bad. */
export function parseCidr(text: string): Cidr {
  const slash = text.indexOf("/");
  const addressText = (slash === -1 ? text : text.slice(0, slash)).trim();
  const bitsText = slash === -1 ? undefined : text.slice(slash + 1).trim();
  const v6 = parseIPv6(addressText);
  if (v6 !== undefined) {
    const bits = bitsText === undefined ? 128 : Number(bitsText);
    if (!/^\d{1,3}$/.test(bitsText ?? "128") || bits > 128) throw new Error(`Bad CIDR: ${text}`);
    return { family: 6, words: v6, bits };
  }
  const v4 = parseDottedQuad(addressText);
  if (v4 === undefined) throw new Error(`Bad CIDR: ${text}`);
  const bits = bitsText === undefined ? 32 : Number(bitsText);
  if (!/^\d{1,2}$/.test(bitsText ?? "32") || bits > 32) throw new Error(`Bad CIDR: ${text}`);
  return { family: 4, value: v4, bits };
}

export function v4InCidr(value: number, cidr: Cidr): boolean {
  if (cidr.family !== 4) return false;
  if (cidr.bits === 0) return true;
  const shift = 32 - cidr.bits;
  return Math.floor(value / 2 ** shift) === Math.floor(cidr.value / 2 ** shift);
}

export function v6InCidr(words: readonly number[], cidr: Cidr): boolean {
  if (cidr.family !== 6) return false;
  let bits = cidr.bits;
  for (let i = 0; i < 8 && bits > 0; i++, bits -= 16) {
    const take = Math.min(16, bits);
    const mask = (0xffff << (16 - take)) & 0xffff;
    if ((words[i] & mask) !== (cidr.words[i] & mask)) return false;
  }
  return true;
}

/**
 * The IPv4 address an IPv6 one carries and reaches: IPv4-mapped (`::ffff:a.b.c.d`), IPv4-
 * translated (`::ffff:0:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), NAT64 (`64:ff9b::/96`) and
 * 6to4 (`2002:AABB:CCDD::/16`).
 */
export function embeddedIPv4(words: readonly number[]): number | undefined {
  const [w0, w1, w2, w3, w4, w5, w6, w7] = words;
  const v4 = w6 * 65536 + w7;
  const zeroHead = w0 === 0 && w1 === 0 && w2 === 0 && w3 === 0;
  if (zeroHead && w4 === 0 && w5 === 0xffff) return v4;
  if (zeroHead && w4 === 0xffff && w5 === 0) return v4;
  if (zeroHead && w4 === 0 && w5 === 0 && v4 > 1) return v4;
  if (w0 === 0x64 && w1 === 0xff9b && w2 === 0 && w3 === 0 && w4 === 0 && w5 === 0) return v4;
  if (w0 === 0x2002) return w1 * 65536 + w2;
  return undefined;
}

export function formatIPv4(value: number): string {
  return [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255].join(".");
}
