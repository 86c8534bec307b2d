/**
 * Slot seconds: each periodic key is published at the epoch seconds whose remainder by the
 * period is its slot, so a kind's keys spread evenly over the period, the same on every process.
 */
import { createHash } from "node:crypto";

/** A stable fraction in [0, 1) for a string: the first 8 bytes of its BLAKE2b digest. */
export function stableJitter(key: string): number {
  const digest = createHash("blake2b512").update(key).digest();
  return Number(digest.readBigUInt64BE(0) >> 11n) / 2 ** 53;
}

/** A key's slot second within a period of `periodSeconds`. */
export function slotSecond(kind: string, key: string, periodSeconds: number): number {
  return Math.floor(stableJitter(`${kind}:${key}`) * periodSeconds);
}
