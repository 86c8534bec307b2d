/**
 * How a receiver knows a delivery is ours: HMAC-SHA256, hex, over `${timestamp}.${body}` with
 * the channel's secret, the timestamp (Unix seconds) sent beside it so a receiver can refuse an
 * old one replayed. docs/alerts.md shows a receiver's check.
 */
import { createHmac, randomBytes } from "node:crypto";

export const SIGNATURE_HEADER = "x-octoprox-signature";
export const TIMESTAMP_HEADER = "x-octoprox-timestamp";
export const DELIVERY_HEADER = "x-octoprox-delivery";

/** The hex HMAC-SHA256 of `${timestampSeconds}.${body}` under `secret`. */
export function signBody(secret: string, timestampSeconds: number, body: string): string {
  return createHmac("sha256", secret).update(`${timestampSeconds}.${body}`).digest("hex");
}

/** A channel's new signing secret: 32 random bytes, as `whsec_` and hex. */
export function newChannelSecret(): string {
  return `whsec_${randomBytes(32).toString("hex")}`;
}
