/**
 * Password hashing for the admin API's users: scrypt from node:crypto, with its salt and cost
 * parameters kept in the hash string (`scrypt$N$r$p$salt$hash`), so the cost can rise later
 * without breaking the hashes already stored. Compared in constant time.
 */
import { randomBytes, scrypt, type ScryptOptions, timingSafeEqual } from "node:crypto";

const PREFIX = "scrypt";
const KEY_BYTES = 64;
const SALT_BYTES = 16;
/** 2^15 costs about 90 ms on a 2-core box; maxmem must exceed 128 * N * r. */
export const DEFAULT_COST = { N: 1 << 15, r: 8, p: 1 } as const;
export const MAX_MEMORY_BYTES = 128 * 1024 * 1024;

/** scrypt of a secret (NFC-normalised, so the same text typed anywhere gives the same key). */
export function scryptKey(
  secret: string,
  salt: Buffer,
  keyBytes: number,
  options: ScryptOptions,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(secret.normalize("NFC"), salt, keyBytes, options, (error, key) => {
      if (error) reject(error);
      else resolve(key);
    });
  });
}

function derive(password: string, salt: Buffer, options: ScryptOptions): Promise<Buffer> {
  return scryptKey(password, salt, KEY_BYTES, options);
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const { N, r, p } = DEFAULT_COST;
  const key = await derive(password, salt, { N, r, p, maxmem: MAX_MEMORY_BYTES });
  return [PREFIX, N, r, p, salt.toString("base64url"), key.toString("base64url")].join("$");
}

/** True when the password matches the stored hash; false for a hash it cannot read. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split("$");
  if (parts.length !== 6 || parts[0] !== PREFIX) return false;
  const [N, r, p] = parts.slice(1, 4).map(Number);
  if (![N, r, p].every((n) => Number.isInteger(n) && n > 0)) return false;
  const salt = Buffer.from(parts[4], "base64url");
  const expected = Buffer.from(parts[5], "base64url");
  if (expected.length !== KEY_BYTES) return false;
  const key = await derive(password, salt, { N, r, p, maxmem: MAX_MEMORY_BYTES });
  return timingSafeEqual(key, expected);
}

/** A hash no password matches, verified against when a username is unknown so both take as long. */
let decoy: Promise<string> | undefined;
export function decoyHash(): Promise<string> {
  decoy ??= hashPassword(randomBytes(16).toString("hex"));
  return decoy;
}

/** A password for a person to type once and change: 24 characters of base64url. */
export function generatePassword(): string {
  return randomBytes(18).toString("base64url");
}
