/**
 * Sealing a secret at rest: AES-256-GCM under a key drawn from OCTOPROX_INTERNAL_SECRET by
 * HKDF-SHA256 with a label of its own (one key per use, none equal to a feed key), a fresh
 * 12-byte nonce each, and what the value belongs to as associated data (a sealed value copied to
 * another row does not open). The text is base64 of version, nonce, body and tag.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";

const SALT = "octoprox internal secret";
const VERSION = 1;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** The 32-byte key of `label` under the install's internal secret. */
export function deriveSealKey(internalSecret: string, label: string): Buffer {
  if (internalSecret.length === 0) throw new Error("The internal secret must not be empty");
  return Buffer.from(hkdfSync("sha256", internalSecret, SALT, label, 32));
}

const derived = new Map<string, Buffer>();

/**
 * `deriveSealKey`, once per label and secret in the process: a key sealing row after row (a
 * device's keys, a channel's secret) is derived on first use and kept.
 */
export function sealKeyOf(internalSecret: string, label: string): Buffer {
  const name = `${label}\u0000${internalSecret}`;
  let key = derived.get(name);
  if (key === undefined) {
    key = deriveSealKey(internalSecret, label);
    derived.set(name, key);
  }
  return key;
}

/** AES-256-GCM of `plain` under `key`, `boundTo` as associated data. */
export function sealWith(key: Buffer, boundTo: string, plain: string): string {
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, nonce);
  cipher.setAAD(Buffer.from(boundTo, "utf8"));
  const body = Buffer.concat([cipher.update(Buffer.from(plain, "utf8")), cipher.final()]);
  return Buffer.concat([Buffer.of(VERSION), nonce, body, cipher.getAuthTag()]).toString("base64");
}

/** What `sealWith` sealed; throws naming `what`, never the text. */
export function openWith(key: Buffer, boundTo: string, sealed: string, what: string): string {
  const bytes = Buffer.from(sealed, "base64");
  if (bytes.length < 1 + NONCE_BYTES + TAG_BYTES || bytes[0] !== VERSION) {
    throw new Error(`${what} (sealed) are not of a known form`);
  }
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, bytes.subarray(1, 1 + NONCE_BYTES));
    decipher.setAAD(Buffer.from(boundTo, "utf8"));
    decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
    return Buffer.concat([
      decipher.update(bytes.subarray(1 + NONCE_BYTES, bytes.length - TAG_BYTES)),
      decipher.final(),
    ]).toString("utf8");
  } catch (error) {
    throw new Error(`${what} do not open under this install's secret`, { cause: error });
  }
}
