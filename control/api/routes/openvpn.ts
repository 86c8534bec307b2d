/**
 * OpenVPN devices of a project (`/projects/{id}/openvpn/peers`) and the install's OpenVPN
 * settings (`/openvpn/settings`). Viewers read; editors write devices; admins write the
 * settings. Certificates are answered; keys never are but in a device's profile, which only
 * editors and admins read (it opens the tunnel, as a project's password opens the proxy).
 */
import { isOnline } from "../../../shared/tunnel-status.ts";
import { UserRole } from "../../../shared/roles.ts";
import {
  CreateOpenvpnPeerBody,
  OpenvpnSettingsBody,
  UpdateOpenvpnPeerBody,
} from "../../model/openvpn.ts";
import { gatewayAddress, storedSubnet } from "../../model/wireguard.ts";
import {
  createOpenvpnDevice,
  openvpnProfile,
  reissueAllCertificates,
  rotateDeviceCertificate,
} from "../../services/openvpn-devices.ts";
import {
  ensureOpenvpnSettings,
  OPENVPN,
  type OpenvpnSettingsRow,
  rotateOpenvpnIdentity,
  updateOpenvpnSettings,
} from "../../services/openvpn-settings.ts";
import {
  deleteDevice,
  type DeviceRow,
  getDevice,
  listDevices,
  updateDevice,
} from "../../services/tunnel-devices.ts";
import { deviceHistory, type DeviceUsage, withUsage } from "../../services/device-usage.ts";
import type { ApiDeps } from "../deps.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import {
  OPENVPN_IDENTITY_ROTATED,
  type OpenvpnDevice,
  OpenvpnDeviceAnswer,
  OpenvpnDeviceListAnswer,
  type OpenvpnSettings,
  OpenvpnSettingsAnswer,
} from "../answers/openvpn.ts";
import { configFileName } from "../answers/wireguard.ts";
import { deviceHistoryRoute, usageReaderOf } from "./metrics.ts";

const SETTINGS = "/api/v1/openvpn/settings";
const PEERS = "/api/v1/projects/:id/openvpn/peers";

export { OPENVPN_IDENTITY_ROTATED };

const OPTIONS_NOTE = "`country`, `state`, `city` and `session_id` are the device's fixed " +
  "options, read by the username grammar (a state or city needs a country; country upper " +
  'case, `uk` as GB; state the subdivision code; city a slug); "" or null clears one.';

function presentSettings(row: OpenvpnSettingsRow): OpenvpnSettings {
  return {
    ca_certificate: row.caCertificate,
    server_certificate: row.serverCertificate,
    subnet: row.subnet,
    gateway_address: gatewayAddress(storedSubnet(row.subnet)),
    transport: row.transport === "tcp" ? "tcp" : "udp",
    listen_port: row.listenPort,
    endpoint_host: row.endpointHost,
    mtu: row.mtu,
    keepalive_interval_seconds: row.keepaliveIntervalSeconds,
    keepalive_timeout_seconds: row.keepaliveTimeoutSeconds,
    updated_at: row.updatedAt.toISOString(),
  };
}

const USAGE_NOTE = "`usage` is what the device's connections carried, all-time, and " +
  "`encrypted_dns_closed` how many of them gateways closed as encrypted DNS, with what " +
  "gateways counted since the last flush added (`live_included` false: Redis did not answer).";

function presentDevice(row: DeviceRow, usage: DeviceUsage): OpenvpnDevice {
  return {
    id: row.id,
    project_id: row.projectId,
    protocol: OPENVPN,
    name: row.name,
    address: row.address,
    enabled: row.enabled,
    certificate: row.certificate ?? "",
    certificate_serial: row.certificateSerial ?? "",
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

export function openvpnRoutes(deps: ApiDeps): Route[] {
  const usage = usageReaderOf(deps);
  const present = (rows: readonly DeviceRow[]) => withUsage(usage, rows, presentDevice);
  const presentOne = async (row: DeviceRow): Promise<OpenvpnDevice> => (await present([row]))[0];
  return [
    defineRoute({
      method: "get",
      path: SETTINGS,
      tag: "openvpn",
      summary: "The install's OpenVPN settings",
      description: "The CA and server certificates, the device subnet (its first host, " +
        "`gateway_address`, is the gateways' tunnel address and every device's DNS), the " +
        "transport, the port and host devices dial, the MTU and keepalive. Never a key.",
      access: UserRole.viewer,
      responses: { 200: answer("The settings", OpenvpnSettingsAnswer) },
      async handler({ c }) {
        return c.json(presentSettings(await ensureOpenvpnSettings(deps)));
      },
    }),
    defineRoute({
      method: "put",
      path: SETTINGS,
      tag: "openvpn",
      summary: "Change the OpenVPN settings",
      description: "`subnet`: an IPv4 block from /8 to /29 (host bits dropped) that must not " +
        "overlap the WireGuard subnet nor strand a device (422 on `body.subnet`). `transport` " +
        "`udp` or `tcp` (one per install), `listen_port` 1-65535, `mtu` 576-1500, " +
        "`keepalive_interval_seconds` 1-600 and `keepalive_timeout_seconds` 2-3600, the " +
        "timeout at least twice the interval. `endpoint_host` a host name or an IP address " +
        "(null: none; profiles are refused until one is set). Fields left out keep their " +
        "values. Profiles already handed out keep the old transport, port and host: download " +
        "them again.",
      access: UserRole.admin,
      body: OpenvpnSettingsBody,
      responses: { 200: answer("The settings", OpenvpnSettingsAnswer) },
      async handler({ c, body }) {
        const row = await updateOpenvpnSettings(deps, {
          subnet: body.subnet,
          transport: body.transport,
          listenPort: body.listen_port,
          endpointHost: body.endpoint_host,
          mtu: body.mtu,
          keepaliveIntervalSeconds: body.keepalive_interval_seconds,
          keepaliveTimeoutSeconds: body.keepalive_timeout_seconds,
        });
        return c.json(presentSettings(row));
      },
    }),
    defineRoute({
      method: "post",
      path: `${SETTINGS}/rotate-identity`,
      tag: "openvpn",
      summary: "Make a new CA, server certificate and tls-crypt key",
      description: "Every device's certificate is issued again by the new CA in the same " +
        "change, so every profile handed out before is invalid until downloaded again. " +
        "Logged as a warning.",
      access: UserRole.admin,
      responses: { 200: answer("The settings, with the new certificates", OpenvpnSettingsAnswer) },
      async handler({ c }) {
        const rotated = await rotateOpenvpnIdentity(
          deps,
          (tx, ca) => reissueAllCertificates(deps, tx, ca),
        );
        deps.logger.warn({ devices: rotated.devices }, OPENVPN_IDENTITY_ROTATED);
        return c.json(presentSettings(rotated.row));
      },
    }),
    defineRoute({
      method: "get",
      path: PEERS,
      tag: "openvpn",
      summary: "List a project's OpenVPN devices",
      description: `In creation order. ${USAGE_NOTE}`,
      access: UserRole.viewer,
      responses: { 200: answer("The devices", OpenvpnDeviceListAnswer) },
      async handler({ c, params }) {
        return c.json(await present(await listDevices(deps, params.id, OPENVPN)));
      },
    }),
    defineRoute({
      method: "post",
      path: PEERS,
      tag: "openvpn",
      summary: "Add an OpenVPN device",
      description: "`name` (unique among the project's OpenVPN devices, any case). The server " +
        "makes the device's key and a certificate the install's CA signs, its common name the " +
        "device's id. The device gets the lowest free address of the subnet from its second " +
        `host on (409 when none is left). ${OPTIONS_NOTE}`,
      access: UserRole.editor,
      body: CreateOpenvpnPeerBody,
      responses: {
        201: answer("The device", OpenvpnDeviceAnswer),
        400: "An OpenVPN device of the project already has this name",
        409: "The subnet has no free address left",
      },
      async handler({ c, body, params }) {
        const row = await createOpenvpnDevice(deps, params.id, {
          name: body.name,
          enabled: body.enabled,
          country: body.country,
          state: body.state,
          city: body.city,
          session_id: body.session_id,
        });
        return c.json(await presentOne(row), 201);
      },
    }),
    defineRoute({
      method: "get",
      path: `${PEERS}/:peer`,
      tag: "openvpn",
      summary: "Read an OpenVPN device",
      access: UserRole.viewer,
      responses: { 200: answer("The device", OpenvpnDeviceAnswer) },
      async handler({ c, params }) {
        return c.json(await presentOne(await getDevice(deps, params.id, params.peer, OPENVPN)));
      },
    }),
    deviceHistoryRoute({
      path: `${PEERS}/:peer/metrics/history`,
      tag: "openvpn",
      summary: "An OpenVPN device's usage over time",
      about: "What the device's connections carried, read as a project's history is, and " +
        "how many of them were closed as encrypted DNS (`encrypted_dns_closed`).",
      series: (params, window) =>
        deviceHistory(
          deps,
          usage,
          { projectId: params.id, deviceId: params.peer, protocol: OPENVPN },
          window,
        ),
    }),
    defineRoute({
      method: "patch",
      path: `${PEERS}/:peer`,
      tag: "openvpn",
      summary: "Edit a device's name, whether it may connect, or its options",
      description: "A disabled device stays in the feed and every gateway refuses it and cuts " +
        "its session. The options are checked as the edit would leave them. The certificate " +
        `changes through \`…/rotate-certificate\`, the address never. ${OPTIONS_NOTE}`,
      access: UserRole.editor,
      body: UpdateOpenvpnPeerBody,
      responses: {
        200: answer("The device", OpenvpnDeviceAnswer),
        400: "An OpenVPN device of the project already has this name",
      },
      async handler({ c, body, params }) {
        const row = await updateDevice(deps, params.id, params.peer, {
          name: body.name,
          enabled: body.enabled,
          country: body.country,
          state: body.state,
          city: body.city,
          session_id: body.session_id,
        }, OPENVPN);
        return c.json(await presentOne(row));
      },
    }),
    defineRoute({
      method: "delete",
      path: `${PEERS}/:peer`,
      tag: "openvpn",
      summary: "Delete an OpenVPN device",
      description: "Its address is free for the next device; gateways cut its session.",
      access: UserRole.editor,
      responses: { 204: "Deleted" },
      async handler({ c, params }) {
        await deleteDevice(deps, params.id, params.peer, OPENVPN);
        return c.body(null, 204);
      },
    }),
    defineRoute({
      method: "post",
      path: `${PEERS}/:peer/rotate-certificate`,
      tag: "openvpn",
      summary: "Give a device a new certificate and key",
      description: "Gateways admit only the new serial from the next feed on, and cut a " +
        "session of the old one: the profile handed out before stops working.",
      access: UserRole.editor,
      responses: { 200: answer("The device", OpenvpnDeviceAnswer) },
      async handler({ c, params }) {
        return c.json(
          await presentOne(await rotateDeviceCertificate(deps, params.id, params.peer)),
        );
      },
    }),
    defineRoute({
      method: "get",
      path: `${PEERS}/:peer/config`,
      tag: "openvpn",
      summary: "A device's OpenVPN profile (.ovpn)",
      description: "The profile an OpenVPN client imports (`application/x-openvpn-profile`, " +
        "an attachment named after the device): `client`, the transport, `remote " +
        "endpoint_host listen_port`, `remote-cert-tls server`, the MTU, and inline the CA, " +
        "the device's certificate and key and the tls-crypt key. The address, routes and DNS " +
        "come from the gateway when it connects. No QR code: a profile is too large for one. " +
        "It holds the device's key: editors and admins only, never cached.",
      access: UserRole.editor,
      responses: {
        200: "The profile (`application/x-openvpn-profile`)",
        409: "No endpoint host is set yet (an admin sets it in the OpenVPN settings), or the " +
          "keys do not open under this install's secret",
      },
      async handler({ c, params }) {
        const profile = await openvpnProfile(deps, params.id, params.peer);
        c.header("Cache-Control", "no-store");
        c.header("Content-Type", "application/x-openvpn-profile");
        c.header(
          "Content-Disposition",
          `attachment; filename="${configFileName(profile.name, "ovpn")}"`,
        );
        return c.body(profile.text);
      },
    }),
  ];
}
