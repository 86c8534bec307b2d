/**
 * OpenVPN devices and the install's OpenVPN settings as the API answers them: certificates are
 * public and answered; no key ever is (a device's profile, `GET …/config`, is the one place its
 * key and the tls-crypt key are shown, and the CA's key is never shown at all).
 */
import * as v from "valibot";
import { count, id, nullableTimestamp, timestamp } from "./common.ts";
import { DeviceUsageAnswer } from "./wireguard.ts";

export const OpenvpnSettingsAnswer = v.strictObject({
  /** The install's CA certificate (PEM): what every device trusts. */
  ca_certificate: v.string(),
  /** The gateways' server certificate (PEM), signed by the CA. */
  server_certificate: v.string(),
  /** The devices' IPv4 block. */
  subnet: v.string(),
  /** The subnet's first host: the gateways' tunnel address, and the devices' DNS. */
  gateway_address: v.string(),
  transport: v.picklist(["udp", "tcp"]),
  listen_port: count,
  /** The host devices dial; null until an admin sets it (device profiles wait for it). */
  endpoint_host: v.nullable(v.string()),
  mtu: count,
  keepalive_interval_seconds: count,
  keepalive_timeout_seconds: count,
  updated_at: timestamp,
});
export type OpenvpnSettings = v.InferOutput<typeof OpenvpnSettingsAnswer>;

/** The words an identity rotation is logged with; the CLI and the dashboard say them too. */
export const OPENVPN_IDENTITY_ROTATED =
  "OpenVPN identity rotated; every device profile is now invalid";

export const OpenvpnDeviceAnswer = v.strictObject({
  id,
  project_id: id,
  protocol: v.literal("openvpn"),
  name: v.string(),
  /** The device's tunnel address, which the gateways push to it. */
  address: v.string(),
  enabled: v.boolean(),
  /** Its client certificate (PEM); its common name is the device's id. */
  certificate: v.string(),
  /** The certificate's serial (hex): a gateway admits only the serial on record. */
  certificate_serial: v.string(),
  country: v.nullable(v.string()),
  state: v.nullable(v.string()),
  city: v.nullable(v.string()),
  session_id: v.nullable(v.string()),
  /** When a gateway last saw it connected, as tunnel_last_seen moved it (every 10 s). */
  last_seen_at: nullableTimestamp,
  /** Whether a gateway saw it connected within the last 3 minutes. */
  online: v.boolean(),
  /** What its connections carried, all-time (`GET …/metrics/history` for over time). */
  usage: DeviceUsageAnswer,
  created_at: timestamp,
  updated_at: timestamp,
});
export type OpenvpnDevice = v.InferOutput<typeof OpenvpnDeviceAnswer>;

export const OpenvpnDeviceListAnswer = v.array(OpenvpnDeviceAnswer);
