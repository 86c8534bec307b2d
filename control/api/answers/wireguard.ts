/**
 * WireGuard devices and the install's WireGuard settings as the API answers them: never a
 * private or preshared key (a device's config, `GET …/config`, is the one place they are shown).
 * A device's secret keys are answered as the mask, with `has_<key>` saying whether one is kept.
 */
import * as v from "valibot";
import { SECRET_MASK } from "../../model/secrets.ts";
import { count, DeviceCountsAnswer, id, nullableTimestamp, timestamp } from "./common.ts";

export const WireguardSettingsAnswer = v.strictObject({
  /** The server's public key (base64), what every device trusts. */
  public_key: v.string(),
  /** The devices' IPv4 block. */
  subnet: v.string(),
  /** The subnet's first host: the gateways' tunnel address, and the devices' DNS. */
  gateway_address: v.string(),
  listen_port: count,
  /** The host devices dial; null until an admin sets it (device configs wait for it). */
  endpoint_host: v.nullable(v.string()),
  mtu: count,
  persistent_keepalive_seconds: count,
  updated_at: timestamp,
});
export type WireguardSettings = v.InferOutput<typeof WireguardSettingsAnswer>;

/**
 * The words a server key rotation is logged with, for operators and their alerts to match; the
 * CLI and the dashboard say them too.
 */
export const SERVER_KEY_ROTATED =
  "WireGuard server key rotated; every device config is now invalid";

/**
 * The name a device's config is answered as (`Content-Disposition`), which WireGuard apps take
 * as the tunnel's name: the device's name with every character but letters, digits and `_=+.-`
 * made `_`. The dashboard saves its download under the same name.
 */
export function configFileName(name: string, extension: string): string {
  return `${name.replace(/[^A-Za-z0-9_=+.-]/g, "_")}.${extension}`;
}

const mask = v.literal(SECRET_MASK);

/** A device's all-time usage: its running totals (past the history's retention), live added. */
export const DeviceUsageAnswer = v.strictObject({
  ...DeviceCountsAnswer.entries,
  /** Whether the live window was added (false: Redis did not answer). */
  live_included: v.boolean(),
});

export const DeviceAnswer = v.strictObject({
  id,
  project_id: id,
  protocol: v.string(),
  name: v.string(),
  /** The device's tunnel address. */
  address: v.string(),
  enabled: v.boolean(),
  public_key: v.nullable(v.string()),
  /** Masked when the server made the pair and keeps its private key; null for a supplied key. */
  private_key: v.nullable(mask),
  has_private_key: v.boolean(),
  preshared_key: v.nullable(mask),
  has_preshared_key: v.boolean(),
  country: v.nullable(v.string()),
  state: v.nullable(v.string()),
  city: v.nullable(v.string()),
  session_id: v.nullable(v.string()),
  /**
   * The device's latest handshake any gateway saw, as tunnel_last_seen last moved it forward
   * (every 10 s); null when none has.
   */
  last_seen_at: nullableTimestamp,
  /** Whether it handshook within the last 3 minutes (WireGuard renews every 2). */
  online: v.boolean(),
  /** What its connections carried, all-time (`GET …/metrics/history` for over time). */
  usage: DeviceUsageAnswer,
  created_at: timestamp,
  updated_at: timestamp,
});
export type Device = v.InferOutput<typeof DeviceAnswer>;

export const DeviceListAnswer = v.array(DeviceAnswer);
