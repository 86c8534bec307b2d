/**
 * WireGuard devices of a project (`/projects/{id}/wireguard/peers`) with their usage, and the
 * install's WireGuard settings (`/wireguard/settings`). Viewers read; editors write devices;
 * admins write the settings. No answer carries a private or preshared key but a device's config,
 * which only editors and admins read (the keys in it open the tunnel, as a project's password
 * opens the proxy).
 */
import { isOnline } from "../../../shared/tunnel-status.ts";
import QRCode from "qrcode";
import { UserRole } from "../../../shared/roles.ts";
import {
  CreatePeerBody,
  gatewayAddress,
  PeerConfigQuery,
  RotatePeerKeysBody,
  storedSubnet,
  UpdatePeerBody,
  WireguardSettingsBody,
} from "../../model/wireguard.ts";
import { SECRET_MASK } from "../../model/secrets.ts";
import { deviceHistory, type DeviceUsage, withUsage } from "../../services/device-usage.ts";
import {
  createDevice,
  deleteDevice,
  deviceConfig,
  type DeviceRow,
  getDevice,
  listDevices,
  rotateDeviceKeys,
  updateDevice,
  WIREGUARD,
} from "../../services/tunnel-devices.ts";
import {
  ensureWireguardSettings,
  rotateServerKey,
  updateWireguardSettings,
  type WireguardSettingsRow,
} from "../../services/wireguard-settings.ts";
import type { ApiDeps } from "../deps.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import { deviceHistoryRoute, usageReaderOf } from "./metrics.ts";
import {
  configFileName,
  type Device,
  DeviceAnswer,
  DeviceListAnswer,
  SERVER_KEY_ROTATED,
  type WireguardSettings,
  WireguardSettingsAnswer,
} from "../answers/wireguard.ts";

const SETTINGS = "/api/v1/wireguard/settings";
const PEERS = "/api/v1/projects/:id/wireguard/peers";

/** Beside the answers, for the CLI and the dashboard to say and name them as the route does. */
export { configFileName, SERVER_KEY_ROTATED };

const KEY_NOTE = "Answers never carry a private or preshared key: `private_key` and " +
  "`preshared_key` show the mask, `has_private_key` whether the server keeps the device's " +
  "private key (not for a supplied public key). `GET …/{peer}/config` is the one place they " +
  "are shown.";

const USAGE_NOTE = "`usage` is what the device's connections carried, all-time (kept past " +
  "the history's retention), and `encrypted_dns_closed` how many of them gateways closed as " +
  "encrypted DNS, with what gateways counted since the last flush added; its " +
  "`live_included` is false when Redis did not answer (the flushed totals alone).";

const OPTIONS_NOTE = "`country`, `state`, `city` and `session_id` are the device's fixed " +
  "options, read by the username grammar (a state or city needs a country; country upper " +
  'case, `uk` as GB; state the subdivision code; city a slug); "" or null clears one.';

function presentSettings(row: WireguardSettingsRow): WireguardSettings {
  return {
    public_key: row.publicKey,
    subnet: row.subnet,
    gateway_address: gatewayAddress(storedSubnet(row.subnet)),
    listen_port: row.listenPort,
    endpoint_host: row.endpointHost,
    mtu: row.mtu,
    persistent_keepalive_seconds: row.persistentKeepaliveSeconds,
    updated_at: row.updatedAt.toISOString(),
  };
}

function presentDevice(row: DeviceRow, usage: DeviceUsage): Device {
  const hasPrivateKey = row.privateKeySealed !== null;
  const hasPresharedKey = row.presharedKeySealed !== null;
  return {
    id: row.id,
    project_id: row.projectId,
    protocol: row.protocol,
    name: row.name,
    address: row.address,
    enabled: row.enabled,
    public_key: row.publicKey,
    private_key: hasPrivateKey ? SECRET_MASK : null,
    has_private_key: hasPrivateKey,
    preshared_key: hasPresharedKey ? SECRET_MASK : null,
    has_preshared_key: hasPresharedKey,
    country: row.country,
    state: row.state,
    city: row.city,
    session_id: row.sessionId,
    last_seen_at: row.lastSeenAt?.toISOString() ?? null,
    online: isOnline(row.lastSeenAt),
    usage,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  };
}

export function wireguardRoutes(deps: ApiDeps): Route[] {
  const usage = usageReaderOf(deps);
  const present = (rows: readonly DeviceRow[]) => withUsage(usage, rows, presentDevice);
  const presentOne = async (row: DeviceRow): Promise<Device> => (await present([row]))[0];
  return [
    defineRoute({
      method: "get",
      path: SETTINGS,
      tag: "wireguard",
      summary: "The install's WireGuard settings",
      description: "The server's public key, the device subnet (its first host, " +
        "`gateway_address`, is the gateways' tunnel address and every device's DNS), the port " +
        "and host devices dial, the MTU and keepalive their configs carry. Never the private key.",
      access: UserRole.viewer,
      responses: { 200: answer("The settings", WireguardSettingsAnswer) },
      async handler({ c }) {
        return c.json(presentSettings(await ensureWireguardSettings(deps)));
      },
    }),
    defineRoute({
      method: "put",
      path: SETTINGS,
      tag: "wireguard",
      summary: "Change the WireGuard settings",
      description: "`subnet`: an IPv4 block from /8 to /29 (host bits dropped); a block that " +
        "would strand a device (its address outside the block, or the block's network, first " +
        "host or broadcast) is a 422 on `body.subnet`. `listen_port` 1-65535, `mtu` 1280-1500, " +
        "`persistent_keepalive_seconds` 0-3600 (0: none), `endpoint_host` a host name or an IP " +
        "address (null: none; device configs are refused until one is set). Fields left out " +
        "keep their values. Devices' configs already handed out keep the old values: download " +
        "them again.",
      access: UserRole.admin,
      body: WireguardSettingsBody,
      responses: { 200: answer("The settings", WireguardSettingsAnswer) },
      async handler({ c, body }) {
        const row = await updateWireguardSettings(deps, {
          subnet: body.subnet,
          listenPort: body.listen_port,
          endpointHost: body.endpoint_host,
          mtu: body.mtu,
          persistentKeepaliveSeconds: body.persistent_keepalive_seconds,
        });
        return c.json(presentSettings(row));
      },
    }),
    defineRoute({
      method: "post",
      path: `${SETTINGS}/rotate-key`,
      tag: "wireguard",
      summary: "Make a new server key pair",
      description: "Every device's config names the server's public key: after a rotation " +
        "every one is invalid until downloaded again. Logged as a warning.",
      access: UserRole.admin,
      responses: { 200: answer("The settings, with the new public key", WireguardSettingsAnswer) },
      async handler({ c }) {
        const row = await rotateServerKey(deps);
        deps.logger.warn({ public_key: row.publicKey }, SERVER_KEY_ROTATED);
        return c.json(presentSettings(row));
      },
    }),
    defineRoute({
      method: "get",
      path: PEERS,
      tag: "wireguard",
      summary: "List a project's WireGuard devices",
      description: `In creation order. ${KEY_NOTE} ${USAGE_NOTE}`,
      access: UserRole.viewer,
      responses: { 200: answer("The devices", DeviceListAnswer) },
      async handler({ c, params }) {
        return c.json(await present(await listDevices(deps, params.id)));
      },
    }),
    defineRoute({
      method: "post",
      path: PEERS,
      tag: "wireguard",
      summary: "Add a WireGuard device",
      description: "`name` (unique in the project, any case). Without `public_key` the server " +
        "makes the device's key pair and keeps its private key for the config; with one (44 " +
        "characters of base64, 32 bytes, as `wg pubkey` writes it) the device keeps its own. " +
        "The server makes a preshared key either way. The device gets the lowest free address " +
        "of the subnet from its second host on (409 when none is left). " +
        `${OPTIONS_NOTE} ${KEY_NOTE}`,
      access: UserRole.editor,
      body: CreatePeerBody,
      responses: {
        201: answer("The device", DeviceAnswer),
        400: "A device of the project already has this name, or one has this public key",
        409: "The subnet has no free address left",
      },
      async handler({ c, body, params }) {
        const row = await createDevice(deps, params.id, {
          name: body.name,
          enabled: body.enabled,
          country: body.country,
          state: body.state,
          city: body.city,
          session_id: body.session_id,
          publicKey: body.public_key,
        });
        return c.json(await presentOne(row), 201);
      },
    }),
    defineRoute({
      method: "get",
      path: `${PEERS}/:peer`,
      tag: "wireguard",
      summary: "Read a WireGuard device",
      description: `${KEY_NOTE} ${USAGE_NOTE}`,
      access: UserRole.viewer,
      responses: { 200: answer("The device", DeviceAnswer) },
      async handler({ c, params }) {
        return c.json(await presentOne(await getDevice(deps, params.id, params.peer)));
      },
    }),
    deviceHistoryRoute({
      path: `${PEERS}/:peer/metrics/history`,
      tag: "wireguard",
      summary: "A WireGuard device's usage over time",
      about: "What the device's connections carried, read as a project's history is, and " +
        "how many of them were closed as encrypted DNS (`encrypted_dns_closed`).",
      series: (params, window) =>
        deviceHistory(
          deps,
          usage,
          { projectId: params.id, deviceId: params.peer, protocol: WIREGUARD },
          window,
        ),
    }),
    defineRoute({
      method: "patch",
      path: `${PEERS}/:peer`,
      tag: "wireguard",
      summary: "Edit a device's name, whether it may connect, or its options",
      description: "A disabled device stays in the feed and every gateway refuses it. The " +
        "options are checked as the edit would leave them. Keys change through " +
        `\`…/rotate-keys\`, the address never. ${OPTIONS_NOTE}`,
      access: UserRole.editor,
      body: UpdatePeerBody,
      responses: {
        200: answer("The device", DeviceAnswer),
        400: "A device of the project already has this name",
      },
      async handler({ c, body, params }) {
        const row = await updateDevice(deps, params.id, params.peer, {
          name: body.name,
          enabled: body.enabled,
          country: body.country,
          state: body.state,
          city: body.city,
          session_id: body.session_id,
        });
        return c.json(await presentOne(row));
      },
    }),
    defineRoute({
      method: "delete",
      path: `${PEERS}/:peer`,
      tag: "wireguard",
      summary: "Delete a WireGuard device",
      description: "Its address is free for the next device.",
      access: UserRole.editor,
      responses: { 204: "Deleted" },
      async handler({ c, params }) {
        await deleteDevice(deps, params.id, params.peer);
        return c.body(null, 204);
      },
    }),
    defineRoute({
      method: "post",
      path: `${PEERS}/:peer/rotate-keys`,
      tag: "wireguard",
      summary: "Give a device new keys",
      description: "A new preshared key, and a new key pair made by the server (no body), or " +
        "the device's own new `public_key` (then no private key is kept). Its config handed out " +
        `before stops working. ${KEY_NOTE}`,
      access: UserRole.editor,
      body: RotatePeerKeysBody,
      bodyOptional: true,
      responses: {
        200: answer("The device", DeviceAnswer),
        400: "Another device has this public key",
      },
      async handler({ c, body, params }) {
        const row = await rotateDeviceKeys(deps, params.id, params.peer, body.public_key);
        return c.json(await presentOne(row));
      },
    }),
    defineRoute({
      method: "get",
      path: `${PEERS}/:peer/config`,
      tag: "wireguard",
      summary: "A device's WireGuard config, as a file or a QR code",
      description: "The `wg-quick` file a WireGuard app imports (`text/plain`, as an " +
        "attachment named after the device): `[Interface]` PrivateKey, Address (`/32`), DNS " +
        "(the subnet's first host), MTU; `[Peer]` the server's PublicKey, PresharedKey, " +
        "AllowedIPs `0.0.0.0/0, ::/0`, Endpoint (`endpoint_host:listen_port`), " +
        "PersistentKeepalive. A device whose public key was supplied gets a comment in place " +
        "of its PrivateKey line, to put its own key there. `?format=qr`: the same text as a " +
        "QR code (`image/svg+xml`) for a phone's app to scan. It holds the device's keys: " +
        "editors and admins only, never cached.",
      access: UserRole.editor,
      query: PeerConfigQuery,
      responses: {
        200: "The config (`text/plain`), or its QR code (`image/svg+xml`)",
        409: "No endpoint host is set yet (an admin sets it in the WireGuard settings), or " +
          "the device's keys do not open under this install's secret",
      },
      async handler({ c, params, query }) {
        const config = await deviceConfig(deps, params.id, params.peer);
        c.header("Cache-Control", "no-store");
        if (query.format === "qr") {
          const svg = await QRCode.toString(config.text, {
            type: "svg",
            errorCorrectionLevel: "M",
          });
          c.header("Content-Type", "image/svg+xml");
          c.header(
            "Content-Disposition",
            `inline; filename="${configFileName(config.name, "svg")}"`,
          );
          return c.body(svg);
        }
        c.header("Content-Type", "text/plain; charset=utf-8");
        c.header(
          "Content-Disposition",
          `attachment; filename="${configFileName(config.name, "conf")}"`,
        );
        return c.body(config.text);
      },
    }),
  ];
}
