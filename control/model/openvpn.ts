/**
 * OpenVPN devices and the install's OpenVPN settings: the bodies the api reads. The subnet, the
 * host devices dial and a device's fixed options are read as WireGuard's are (wireguard.ts).
 */
import * as v from "valibot";
import { booleanField, integerField, nameField, readOnly } from "./common.ts";
import { DEVICE_OPTION_FIELDS, endpointHostField, MTU_MAX, subnetField } from "./wireguard.ts";

export const DEFAULT_OPENVPN_SUBNET = "10.67.0.0/16";

/** One transport per install: every device's profile names it. */
export const OPENVPN_TRANSPORTS = ["udp", "tcp"] as const;
export type OpenvpnTransport = (typeof OPENVPN_TRANSPORTS)[number];

/** OpenVPN refuses a tun MTU under 576 (IPv4's least datagram). */
export const OPENVPN_MTU_MIN = 576;
export const KEEPALIVE_INTERVAL_MAX_SECONDS = 600;
export const KEEPALIVE_TIMEOUT_MAX_SECONDS = 3600;

export const OpenvpnSettingsBody = v.pipe(
  v.strictObject({
    subnet: v.optional(subnetField),
    transport: v.optional(
      v.picklist(OPENVPN_TRANSPORTS, `must be one of ${OPENVPN_TRANSPORTS.join(", ")}`),
    ),
    listen_port: v.optional(integerField(1, 65_535)),
    /** null: none yet (device profiles are refused until one is set). */
    endpoint_host: v.optional(endpointHostField),
    mtu: v.optional(integerField(OPENVPN_MTU_MIN, MTU_MAX)),
    keepalive_interval_seconds: v.optional(integerField(1, KEEPALIVE_INTERVAL_MAX_SECONDS)),
    keepalive_timeout_seconds: v.optional(integerField(2, KEEPALIVE_TIMEOUT_MAX_SECONDS)),
    ca_certificate: readOnly(
      "is made by the server: POST /api/v1/openvpn/settings/rotate-identity",
    ),
    server_certificate: readOnly(
      "is made by the server: POST /api/v1/openvpn/settings/rotate-identity",
    ),
    gateway_address: readOnly("is the subnet's first host"),
    updated_at: readOnly(),
  }),
);

const serverFields = {
  id: readOnly(),
  project_id: readOnly(),
  protocol: readOnly(),
  address: readOnly("is given by the server: the next free address of the subnet"),
  certificate: readOnly("is made by the server: POST …/rotate-certificate"),
  certificate_serial: readOnly(),
  private_key: readOnly("is made by the server and only ever in the device's profile"),
  last_seen_at: readOnly(),
  online: readOnly(),
  created_at: readOnly(),
  updated_at: readOnly(),
};

export const CreateOpenvpnPeerBody = v.strictObject({
  name: nameField(),
  enabled: v.optional(booleanField),
  ...DEVICE_OPTION_FIELDS,
  ...serverFields,
});

export const UpdateOpenvpnPeerBody = v.strictObject({
  name: v.optional(nameField()),
  enabled: v.optional(booleanField),
  ...DEVICE_OPTION_FIELDS,
  ...serverFields,
});
