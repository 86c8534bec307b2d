/**
 * The tunnel plane's fake-IP range: the IPv4 block its resolver answers A queries from. Each
 * address stands for one name while the name holds it; an address is named by its offset in
 * the block. The block's network and broadcast addresses are never handed out, so a /15 holds
 * 131,070 names.
 */
import { formatIPv4, parseCidr } from "./ip.ts";

/** Blocks from a /8 (16 million names) to a /30 (two). */
const MIN_BITS = 8;
const MAX_BITS = 30;

export interface FakeIpRange {
  /** The block as configured, normalised (`198.18.0.0/15`): it names the shared mapping. */
  readonly cidr: string;
  /** The block's network address as a 32-bit number. */
  readonly base: number;
  /** The first and last offsets handed out (1 and size - 2). */
  readonly firstOffset: number;
  readonly lastOffset: number;
  /** How many names the block holds at once. */
  readonly capacity: number;
}

/** Reads a fake-IP block; throws with the reason when it is not an IPv4 block of /8 to /30. */
export function parseFakeIpRange(text: string): FakeIpRange {
  let cidr;
  try {
    cidr = parseCidr(text);
  } catch {
    throw new Error(`${text} is not a CIDR block`);
  }
  if (cidr.family !== 4) throw new Error(`${text} is not an IPv4 block`);
  if (!text.includes("/") || cidr.bits < MIN_BITS || cidr.bits > MAX_BITS) {
    throw new Error(`${text} must be an IPv4 block from /${MIN_BITS} to /${MAX_BITS}`);
  }
  const size = 2 ** (32 - cidr.bits);
  const base = cidr.value - (cidr.value % size);
  return {
    cidr: `${formatIPv4(base)}/${cidr.bits}`,
    base,
    firstOffset: 1,
    lastOffset: size - 2,
    capacity: size - 2,
  };
}

/** The address at `offset` in the block. */
export function fakeIpAt(range: FakeIpRange, offset: number): number {
  return range.base + offset;
}

/** The offset of `address` in the block, when it is one the block hands out. */
export function fakeIpOffset(range: FakeIpRange, address: number): number | undefined {
  const offset = address - range.base;
  return offset >= range.firstOffset && offset <= range.lastOffset ? offset : undefined;
}
