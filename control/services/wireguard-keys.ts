/**
 * WireGuard key material: Curve25519 (X25519) pairs made with Node's crypto, preshared keys of
 * 32 random bytes, each written as `wg` writes keys (base64 of 32 bytes). The secret ones are
 * sealed at rest (control/core/seal.ts) under a key of their own drawn from the install's
 * internal secret, each bound to its row and column, so a sealed key copied to another row or
 * column does not open. Restored into an install with another internal secret, they no longer
 * open: the feed leaves such a device (or the server identity) out, and a rotation makes new
 * ones.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { openWith, sealKeyOf, sealWith } from "../core/seal.ts";

const LABEL = "octoprox/wireguard/keys/v1";

export interface KeyPair {
  privateKey: string;
  publicKey: string;
}

/** base64url (a JWK's) as base64 with its padding, as `wg` writes keys. */
const base64 = (base64url: string) => Buffer.from(base64url, "base64url").toString("base64");

/** A new X25519 pair; the raw 32-byte keys are the JWK's `d` and `x`. */
export function newKeyPair(): KeyPair {
  const { privateKey } = generateKeyPairSync("x25519");
  const jwk = privateKey.export({ format: "jwk" });
  if (typeof jwk.d !== "string" || typeof jwk.x !== "string") {
    throw new Error("An X25519 key exported without its JWK fields");
  }
  return { privateKey: base64(jwk.d), publicKey: base64(jwk.x) };
}

/** A new preshared key: 32 random bytes. */
export function newPresharedKey(): string {
  return randomBytes(32).toString("base64");
}

/** Where a sealed key lives: what it is bound to. */
export const KeyPlace = {
  server: "wireguard_settings:1:private_key",
  devicePrivate: (id: string) => `tunnel_devices:${id}:private_key`,
  devicePreshared: (id: string) => `tunnel_devices:${id}:preshared_key`,
} as const;

const keyOf = (internalSecret: string) => sealKeyOf(internalSecret, LABEL);

export function sealWireguardKey(internalSecret: string, place: string, key: string): string {
  return sealWith(keyOf(internalSecret), place, key);
}

/** The key; throws (never naming it) when it does not open under this install's secret. */
export function openWireguardKey(internalSecret: string, place: string, sealed: string): string {
  return openWith(keyOf(internalSecret), place, sealed, "The sealed bytes of a WireGuard key");
}
