/**
 * Client address rules: CIDR blocks as the gateway matches a client's address against them (a
 * project's allowed and password-less blocks, OCTOPROX_TRUSTED_PROXIES), and what the api checks
 * of such lists. Runtime-neutral.
 *
 * An IPv4 client is compared as IPv4 however it arrived: `::ffff:a.b.c.d` (a dual-stack socket's
 * form) is read as `a.b.c.d`, and an IPv6 block inside `::ffff:0:0/96` is read as the IPv4
 * block it names (`::ffff:10.0.0.0/104` is `10.0.0.0/8`). Any other IPv6 block, `::/0`
 * included, covers IPv6 clients only: a list of `10.0.0.0/8, ::/0` does not let every IPv4
 * address in.
 *
 * A `CidrTable` keeps its blocks by prefix length, so a lookup costs one map probe per distinct
 * length in the table (a handful), whatever the number of blocks.
 */
import { type Cidr, formatIPv4, type IpAddress, parseCidr, parseIp } from "./ip.ts";
import { formatIPv6 } from "../proxy-protocol/address.ts";

/** `::ffff:0:0`, the first six words of an IPv4-mapped address. */
function isMapped(words: readonly number[]): boolean {
  return words[0] === 0 && words[1] === 0 && words[2] === 0 && words[3] === 0 &&
    words[4] === 0 && words[5] === 0xffff;
}

/** The address as rules compare it: an IPv4-mapped IPv6 address as its IPv4 one. */
export function canonicalAddress(ip: IpAddress): IpAddress {
  if (ip.family === 6 && isMapped(ip.words)) {
    return { family: 4, value: ip.words[6] * 65536 + ip.words[7] };
  }
  return ip;
}

/** A client's address (an IP literal, as a socket gives it) as rules compare it. */
export function clientIp(text: string): IpAddress | undefined {
  const ip = parseIp(text);
  return ip === undefined ? undefined : canonicalAddress(ip);
}

/** The block as rules compare it: one inside `::ffff:0:0/96` as the IPv4 block it names. */
export function canonicalCidr(cidr: Cidr): Cidr {
  if (cidr.family === 6 && cidr.bits >= 96 && isMapped(cidr.words)) {
    return { family: 4, value: cidr.words[6] * 65536 + cidr.words[7], bits: cidr.bits - 96 };
  }
  return cidr;
}

/** Parses a list of blocks (canonical); a text that is no block goes to `bad` and is left out. */
export function parseCidrs(texts: readonly string[], bad?: (text: string) => void): Cidr[] {
  const cidrs: Cidr[] = [];
  for (const text of texts) {
    try {
      cidrs.push(canonicalCidr(parseCidr(text)));
    } catch {
      bad?.(text);
    }
  }
  return cidrs;
}

function v4Prefix(value: number, bits: number): number {
  return bits === 0 ? 0 : value >>> (32 - bits);
}

function v6Prefix(words: readonly number[], bits: number): string {
  let key = "";
  let left = bits;
  for (let i = 0; i < 8 && left > 0; i++, left -= 16) {
    const take = left < 16 ? left : 16;
    const word = take === 16 ? words[i] : words[i] >> (16 - take);
    key += i === 0 ? word.toString(16) : `:${word.toString(16)}`;
  }
  return key;
}

/**
 * The network a block names, canonical and masked: equal networks give equal text
 * (`10.1.2.3/8` and `::ffff:10.0.0.0/104` are both `10.0.0.0/8`).
 */
export function formatCidr(cidr: Cidr): string {
  const c = canonicalCidr(cidr);
  if (c.family === 4) {
    const value = c.bits === 0 ? 0 : (v4Prefix(c.value, c.bits) * 2 ** (32 - c.bits));
    return `${formatIPv4(value)}/${c.bits}`;
  }
  const bytes = new Uint8Array(16);
  let left = c.bits;
  for (let i = 0; i < 8; i++, left -= 16) {
    const take = left <= 0 ? 0 : left < 16 ? left : 16;
    const word = take === 0 ? 0 : c.words[i] & ((0xffff << (16 - take)) & 0xffff);
    bytes[i * 2] = word >> 8;
    bytes[i * 2 + 1] = word & 0xff;
  }
  return `${formatIPv6(bytes)}/${c.bits}`;
}

/** The most specific block holding an address, and the values listed under it. */
export interface CidrMatch<T> {
  /** The block's prefix length (IPv4 blocks count IPv4 bits). */
  readonly bits: number;
  readonly values: readonly T[];
}

/** Blocks with values, looked up by address: the most specific block holding it wins. */
export class CidrTable<T> {
  readonly #v4 = new Map<number, Map<number, T[]>>();
  readonly #v6 = new Map<number, Map<string, T[]>>();
  /** The prefix lengths present, longest first. */
  #v4Lengths: number[] = [];
  #v6Lengths: number[] = [];
  #size = 0;

  /** Blocks added (a block added twice counts twice). */
  get size(): number {
    return this.#size;
  }

  add(cidr: Cidr, value: T): void {
    const c = canonicalCidr(cidr);
    this.#size++;
    if (c.family === 4) {
      let byPrefix = this.#v4.get(c.bits);
      if (byPrefix === undefined) {
        byPrefix = new Map();
        this.#v4.set(c.bits, byPrefix);
        this.#v4Lengths = [...this.#v4.keys()].sort((a, b) => b - a);
      }
      const key = v4Prefix(c.value, c.bits);
      const values = byPrefix.get(key);
      if (values === undefined) byPrefix.set(key, [value]);
      else if (!values.includes(value)) values.push(value);
      return;
    }
    let byPrefix = this.#v6.get(c.bits);
    if (byPrefix === undefined) {
      byPrefix = new Map();
      this.#v6.set(c.bits, byPrefix);
      this.#v6Lengths = [...this.#v6.keys()].sort((a, b) => b - a);
    }
    const key = v6Prefix(c.words, c.bits);
    const values = byPrefix.get(key);
    if (values === undefined) byPrefix.set(key, [value]);
    else if (!values.includes(value)) values.push(value);
  }

  /** The most specific block holding `ip` (canonical: see `clientIp`); undefined when none. */
  match(ip: IpAddress): CidrMatch<T> | undefined {
    if (ip.family === 4) {
      for (const bits of this.#v4Lengths) {
        const values = this.#v4.get(bits)!.get(v4Prefix(ip.value, bits));
        if (values !== undefined) return { bits, values };
      }
      return undefined;
    }
    for (const bits of this.#v6Lengths) {
      const values = this.#v6.get(bits)!.get(v6Prefix(ip.words, bits));
      if (values !== undefined) return { bits, values };
    }
    return undefined;
  }

  has(ip: IpAddress): boolean {
    return this.match(ip) !== undefined;
  }
}

/** A set of blocks: whether an address is in any of them. */
export class CidrSet {
  readonly #table = new CidrTable<true>();

  constructor(cidrs: readonly Cidr[]) {
    for (const cidr of cidrs) this.#table.add(cidr, true);
  }

  /** Parses the texts (each must be a block: a bad one throws, naming it). */
  static parse(texts: readonly string[]): CidrSet {
    return new CidrSet(texts.map((text) => parseCidr(text)));
  }

  get size(): number {
    return this.#table.size;
  }

  has(ip: IpAddress): boolean {
    return this.#table.has(ip);
  }
}

// ---------------------------------------------------------------------------------------------
// Coverage: whether blocks together hold every address of a family.

const V6_SPACE = 1n << 128n;

function v6Value(words: readonly number[]): bigint {
  let value = 0n;
  for (const word of words) value = (value << 16n) | BigInt(word);
  return value;
}

/** Whether the blocks together hold every address of `family` (canonical blocks compared). */
export function coversFamily(cidrs: readonly Cidr[], family: 4 | 6): boolean {
  const ranges: [bigint, bigint][] = [];
  for (const cidr of cidrs) {
    const c = canonicalCidr(cidr);
    if (c.family !== family) continue;
    const width = family === 4 ? 32 : 128;
    const size = 1n << BigInt(width - c.bits);
    const value = c.family === 4 ? BigInt(c.value) : v6Value(c.words);
    const start = value - (value % size);
    ranges.push([start, start + size]);
  }
  ranges.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const space = family === 4 ? 1n << 32n : V6_SPACE;
  let reached = 0n;
  for (const [start, end] of ranges) {
    if (start > reached) return false;
    if (end > reached) reached = end;
  }
  return reached >= space;
}

/**
 * Whether a project can be used without a password from any address: its password-less blocks
 * hold every IPv4 or every IPv6 address, and so do its allowed blocks (`undefined`: no allowed
 * list, every address allowed). What strict mode refuses (docs/gateway.md).
 */
export function openToAnyone(
  passwordless: readonly Cidr[],
  allowed: readonly Cidr[] | undefined,
): boolean {
  for (const family of [4, 6] as const) {
    if (
      coversFamily(passwordless, family) &&
      (allowed === undefined || coversFamily(allowed, family))
    ) {
      return true;
    }
  }
  return false;
}
