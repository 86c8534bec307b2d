/**
 * WireGuard devices and the install's WireGuard settings: the bodies and queries the api reads,
 * and the vocabulary the services and the feed share (a key's form, the device subnet and its
 * addresses, the host devices dial). A device's fixed options are read by the username grammar
 * (shared/username.ts), so a device asks for a place in the very words a client's username does.
 */
import * as v from "valibot";
import type { FieldIssue } from "../../shared/errors.ts";
import { dottedQuadValue } from "../../shared/proxy-protocol/address.ts";
import { formatIPv4, parseCidr, parseIPv6 } from "../../shared/net/ip.ts";
import { CITY_MAX_CHARS, readOptions, UsernameMessage } from "../../shared/username.ts";
import { booleanField, integerField, nameField, readOnly, textField } from "./common.ts";

/** The protocols a device may speak. */
export const TUNNEL_PROTOCOLS = ["wireguard", "openvpn"] as const;
export type TunnelProtocol = (typeof TUNNEL_PROTOCOLS)[number];

// ---------------------------------------------------------------------------------------------
// Keys

const KEY_HINT = "must be a WireGuard key: 44 characters of base64 that decode to 32 bytes, " +
  "as `wg pubkey` writes it";

/** A WireGuard key as `wg` writes it: base64 of 32 bytes, 44 characters with its one `=`. */
export function isWireguardKey(text: string): boolean {
  if (!/^[A-Za-z0-9+/]{43}=$/.test(text)) return false;
  const bytes = Buffer.from(text, "base64");
  // The last character holds 4 bits of padding: only the canonical spelling is one key.
  return bytes.length === 32 && bytes.toString("base64") === text;
}

const keyField = v.pipe(v.string("must be text"), v.trim(), v.check(isWireguardKey, KEY_HINT));

// ---------------------------------------------------------------------------------------------
// The subnet

/** Device blocks from a /8 to a /29 (the gateway's address and five devices). */
export const SUBNET_MIN_BITS = 8;
export const SUBNET_MAX_BITS = 29;
export const DEFAULT_SUBNET = "10.66.0.0/16";

export interface Subnet {
  /** Normalised, `10.66.0.0/16`. */
  readonly cidr: string;
  readonly base: number;
  readonly bits: number;
  /** The first host: the gateways' tunnel address, and the devices' DNS. */
  readonly gateway: number;
  /** The first and last addresses a device may have. */
  readonly firstDevice: number;
  readonly lastDevice: number;
}

const SUBNET_HINT = `must be an IPv4 block from /${SUBNET_MIN_BITS} to /${SUBNET_MAX_BITS}, ` +
  "such as 10.66.0.0/16";

/** Reads a device block; its host bits are dropped (`10.66.1.0/16` is `10.66.0.0/16`). */
export function readSubnet(text: string): Subnet | undefined {
  if (!/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/.test(text)) return undefined;
  let cidr;
  try {
    cidr = parseCidr(text);
  } catch {
    return undefined;
  }
  if (cidr.family !== 4 || cidr.bits < SUBNET_MIN_BITS || cidr.bits > SUBNET_MAX_BITS) {
    return undefined;
  }
  const size = 2 ** (32 - cidr.bits);
  const base = cidr.value - (cidr.value % size);
  return {
    cidr: `${formatIPv4(base)}/${cidr.bits}`,
    base,
    bits: cidr.bits,
    gateway: base + 1,
    firstDevice: base + 2,
    lastDevice: base + size - 2,
  };
}

/** A stored subnet, read back (the default if a row ever held another form). */
export function storedSubnet(text: string): Subnet {
  return readSubnet(text) ?? readSubnet(DEFAULT_SUBNET)!;
}

/** An address's number, dotted quad only; undefined for anything else. */
export function ipv4Value(text: string): number | undefined {
  return dottedQuadValue(text);
}

/** Whether `address` is one a device of `subnet` may have. */
export function isDeviceAddress(subnet: Subnet, address: string): boolean {
  const value = ipv4Value(address);
  return value !== undefined && value >= subnet.firstDevice && value <= subnet.lastDevice;
}

export const gatewayAddress = (subnet: Subnet) => formatIPv4(subnet.gateway);

export const subnetField = v.pipe(
  textField(64),
  v.trim(),
  v.rawTransform(({ dataset, addIssue, NEVER }) => {
    const subnet = readSubnet(dataset.value);
    if (subnet) return subnet.cidr;
    addIssue({ message: SUBNET_HINT });
    return NEVER;
  }),
);

// ---------------------------------------------------------------------------------------------
// The host devices dial

const HOST_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const HOST_HINT = "must be a host name or an IP address, such as vpn.example.com or 203.0.113.5";

/** The endpoint host as stored: a host name lower-cased, or an address (IPv6 without brackets). */
export function readEndpointHost(text: string): string | undefined {
  const lower = text.toLowerCase().replace(/\.$/, "");
  const bare = lower.startsWith("[") && lower.endsWith("]") ? lower.slice(1, -1) : lower;
  if (bare.includes(":")) return parseIPv6(bare) === undefined ? undefined : bare;
  if (/^[\d.]+$/.test(bare)) return dottedQuadValue(bare) === undefined ? undefined : bare;
  const labels = bare.split(".");
  if (bare.length > 253 || !labels.every((label) => HOST_LABEL.test(label))) return undefined;
  // A last label of digits alone would be read as an address by some resolvers.
  return /^\d+$/.test(labels[labels.length - 1]) ? undefined : bare;
}

/** `host:port` as a WireGuard `Endpoint` writes it (an IPv6 address in brackets). */
export function endpointOf(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

export const endpointHostField = v.nullable(
  v.pipe(
    textField(255),
    v.trim(),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      const host = readEndpointHost(dataset.value);
      if (host !== undefined) return host;
      addIssue({ message: HOST_HINT });
      return NEVER;
    }),
  ),
);

// ---------------------------------------------------------------------------------------------
// The settings

/** WireGuard's own default; 1280 is the least IPv6 carries, 1500 an Ethernet frame's payload. */
export const MTU_MIN = 1280;
export const MTU_MAX = 1500;
export const KEEPALIVE_MAX_SECONDS = 3600;

export const WireguardSettingsBody = v.strictObject({
  subnet: v.optional(subnetField),
  listen_port: v.optional(integerField(1, 65_535)),
  /** null: none yet (device configs are refused until one is set). */
  endpoint_host: v.optional(endpointHostField),
  mtu: v.optional(integerField(MTU_MIN, MTU_MAX)),
  /** 0: no keepalive. */
  persistent_keepalive_seconds: v.optional(integerField(0, KEEPALIVE_MAX_SECONDS)),
  public_key: readOnly("is made by the server: POST /api/v1/wireguard/settings/rotate-key"),
  private_key: readOnly("is made by the server and never shown"),
  gateway_address: readOnly("is the subnet's first host"),
  updated_at: readOnly(),
});

// ---------------------------------------------------------------------------------------------
// Devices

/** A device's fixed options as stored (null: not set), normalised by the username grammar. */
export interface DeviceOptions {
  country: string | null;
  state: string | null;
  city: string | null;
  session_id: string | null;
}
export type DeviceOptionField = keyof DeviceOptions;

/** Option text: trimmed, "" read as not set (null). The grammar's own checks follow. */
function optionField(max: number) {
  return v.nullable(
    v.pipe(
      textField(max),
      v.trim(),
      v.transform((text) => (text === "" ? null : text)),
    ),
  );
}

export const DEVICE_OPTION_FIELDS = {
  country: v.optional(optionField(100)),
  state: v.optional(optionField(100)),
  city: v.optional(optionField(CITY_MAX_CHARS)),
  session_id: v.optional(optionField(200)),
};

/** Which field a refusal of the username grammar is about. */
function optionAtFault(
  message: string,
  options: DeviceOptions,
  touched: ReadonlySet<string>,
): DeviceOptionField {
  switch (message) {
    case UsernameMessage.country:
      return "country";
    case UsernameMessage.state:
      return "state";
    case UsernameMessage.city:
      return "city";
    case UsernameMessage.sessionId:
      return "session_id";
    default:
      // A place without a country: the country an edit cleared, else the place given.
      if (touched.has("country") && !touched.has("state") && !touched.has("city")) {
        return "country";
      }
      return options.state !== null ? "state" : "city";
  }
}

/**
 * A device's options read by the username grammar: country upper case (`uk` is GB), state the
 * subdivision code, city a slug, and a state or city without a country refused with the words a
 * client's username gets, naming the body field. `touched`: the fields the request sent.
 */
export function readDeviceOptions(
  options: DeviceOptions,
  touched: ReadonlySet<string> = new Set(),
): { ok: true; options: DeviceOptions } | { ok: false; issue: FieldIssue } {
  const read = readOptions({
    country: options.country ?? undefined,
    state: options.state ?? undefined,
    city: options.city ?? undefined,
    sessionId: options.session_id ?? undefined,
  }, UsernameMessage);
  if (!read.ok) {
    const field = optionAtFault(read.message, options, touched);
    return { ok: false, issue: { field: `body.${field}`, message: read.message } };
  }
  return {
    ok: true,
    options: {
      country: read.options.country ?? null,
      state: read.options.state ?? null,
      city: read.options.city ?? null,
      session_id: read.options.sessionId ?? null,
    },
  };
}

const serverFields = {
  id: readOnly(),
  project_id: readOnly(),
  protocol: readOnly(),
  address: readOnly("is given by the server: the next free address of the subnet"),
  private_key: readOnly("is never taken: send the public_key of a pair you made, or none"),
  preshared_key: readOnly("is made by the server"),
  has_private_key: readOnly(),
  has_preshared_key: readOnly(),
  last_seen_at: readOnly(),
  created_at: readOnly(),
  updated_at: readOnly(),
};

export const CreatePeerBody = v.strictObject({
  name: nameField(),
  enabled: v.optional(booleanField),
  ...DEVICE_OPTION_FIELDS,
  /** A public key the device made (its private key never leaves it); absent: the server makes the pair. */
  public_key: v.optional(keyField),
  ...serverFields,
});

export const UpdatePeerBody = v.strictObject({
  name: v.optional(nameField()),
  enabled: v.optional(booleanField),
  ...DEVICE_OPTION_FIELDS,
  public_key: readOnly("is changed by POST …/rotate-keys"),
  ...serverFields,
});

/** A new generated pair (no body), or the device's own new public key. */
export const RotatePeerKeysBody = v.strictObject({
  public_key: v.optional(keyField),
});

export const PEER_CONFIG_FORMATS = ["conf", "qr"] as const;

export const PeerConfigQuery = v.object({
  format: v.optional(
    v.picklist(PEER_CONFIG_FORMATS, `must be one of ${PEER_CONFIG_FORMATS.join(", ")}`),
    "conf",
  ),
});
