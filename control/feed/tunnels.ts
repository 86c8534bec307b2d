/**
 * The global section's tunnel part: the install's WireGuard identity (its private key opened:
 * the feed is sealed, which is how gateways get it), the OpenVPN identity (the CA certificate,
 * the server's certificate and key and the tls-crypt key, opened; never the CA's key), and every
 * device of every project by id, a WireGuard device with its public and preshared keys, an
 * OpenVPN device with its certificate's serial. A device's private key never goes in the feed.
 * Sealed keys that do not open under this install's secret (a backup restored from another
 * install) leave their part out, with a warning, until a rotation makes new ones.
 */
import { asc, eq } from "drizzle-orm";
import type { Tx } from "../../db/client.ts";
import { openvpnSettings, tunnelDevices, wireguardSettings } from "../../db/schema.ts";
import type { FeedTunnelDevice, FeedTunnels } from "../../shared/feed/models.ts";
import { KeyPlace, openWireguardKey } from "../services/wireguard-keys.ts";
import { openOpenvpnKey, OpenvpnKeyPlace } from "../services/openvpn-pki.ts";
import { WIREGUARD } from "../services/tunnel-devices.ts";

export interface TunnelRows {
  settings: (typeof wireguardSettings.$inferSelect) | undefined;
  openvpn: (typeof openvpnSettings.$inferSelect) | undefined;
  devices: {
    id: string;
    projectId: string;
    protocol: string;
    name: string;
    address: string;
    enabled: boolean;
    publicKey: string | null;
    presharedKeySealed: string | null;
    country: string | null;
    state: string | null;
    city: string | null;
    sessionId: string | null;
    certificateSerial: string | null;
  }[];
}

/** The rows, in the compile's snapshot; one project's devices only for a one-project compile. */
export async function readFeedTunnels(tx: Tx, projectId?: string): Promise<TunnelRows> {
  const [settings] = await tx.select().from(wireguardSettings)
    .where(eq(wireguardSettings.id, 1));
  const devices = await tx.select({
    id: tunnelDevices.id,
    projectId: tunnelDevices.projectId,
    protocol: tunnelDevices.protocol,
    name: tunnelDevices.name,
    address: tunnelDevices.address,
    enabled: tunnelDevices.enabled,
    publicKey: tunnelDevices.publicKey,
    presharedKeySealed: tunnelDevices.presharedKeySealed,
    country: tunnelDevices.country,
    state: tunnelDevices.state,
    city: tunnelDevices.city,
    sessionId: tunnelDevices.sessionId,
    certificateSerial: tunnelDevices.certificateSerial,
  }).from(tunnelDevices)
    .where(projectId === undefined ? undefined : eq(tunnelDevices.projectId, projectId))
    .orderBy(asc(tunnelDevices.id));
  const [openvpn] = await tx.select().from(openvpnSettings).where(eq(openvpnSettings.id, 1));
  return { settings, openvpn, devices };
}

export type TunnelWarn = (key: string, fields: Record<string, unknown>, message: string) => void;

/** The part, keys in the order of their schema (shared/feed/models.ts), devices by id. */
export function feedTunnels(
  rows: TunnelRows,
  internalSecret: string,
  warn: TunnelWarn,
): FeedTunnels {
  const open = (place: string, sealed: string | null) => {
    if (sealed === null) return null;
    try {
      return openWireguardKey(internalSecret, place, sealed);
    } catch {
      return undefined;
    }
  };
  let wireguard: FeedTunnels["wireguard"] = null;
  const settings = rows.settings;
  if (settings !== undefined) {
    const privateKey = open(KeyPlace.server, settings.privateKeySealed);
    if (typeof privateKey === "string") {
      wireguard = {
        private_key: privateKey,
        public_key: settings.publicKey,
        subnet: settings.subnet,
        listen_port: settings.listenPort,
        mtu: settings.mtu,
        persistent_keepalive_seconds: settings.persistentKeepaliveSeconds,
      };
    } else {
      warn(
        `wireguard:${settings.publicKey}`,
        { public_key: settings.publicKey },
        "WireGuard server key left out of the feed: it does not open under this install's " +
          "secret (rotate it)",
      );
    }
  }
  const devices: FeedTunnelDevice[] = [];
  for (const row of rows.devices) {
    let presharedKey: string | null = null;
    if (row.protocol === WIREGUARD) {
      const opened = open(KeyPlace.devicePreshared(row.id), row.presharedKeySealed);
      if (typeof opened !== "string") {
        warn(
          `tunnel-device:${row.id}:${row.presharedKeySealed}`,
          { device_id: row.id, project_id: row.projectId },
          "Device left out of the feed: its keys do not open under this install's secret " +
            "(rotate them)",
        );
        continue;
      }
      presharedKey = opened;
    }
    devices.push({
      id: row.id,
      project_id: row.projectId,
      protocol: row.protocol,
      name: row.name,
      address: row.address,
      enabled: row.enabled,
      public_key: row.publicKey,
      preshared_key: presharedKey,
      country: row.country,
      state: row.state,
      city: row.city,
      session_id: row.sessionId,
      certificate_serial: row.certificateSerial,
    });
  }
  return { wireguard, devices, openvpn: feedOpenvpn(rows.openvpn, internalSecret, warn) };
}

function feedOpenvpn(
  settings: TunnelRows["openvpn"],
  internalSecret: string,
  warn: TunnelWarn,
): FeedTunnels["openvpn"] {
  if (settings === undefined) return null;
  try {
    return {
      ca_certificate: settings.caCertificate,
      server_certificate: settings.serverCertificate,
      server_key: openOpenvpnKey(internalSecret, OpenvpnKeyPlace.server, settings.serverKeySealed),
      tls_crypt_key: openOpenvpnKey(
        internalSecret,
        OpenvpnKeyPlace.tlsCrypt,
        settings.tlsCryptKeySealed,
      ),
      subnet: settings.subnet,
      transport: settings.transport,
      listen_port: settings.listenPort,
      mtu: settings.mtu,
      keepalive_interval_seconds: settings.keepaliveIntervalSeconds,
      keepalive_timeout_seconds: settings.keepaliveTimeoutSeconds,
    };
  } catch {
    warn(
      `openvpn:${settings.serverKeySealed}`,
      {},
      "OpenVPN identity left out of the feed: its keys do not open under this install's " +
        "secret (rotate it)",
    );
    return null;
  }
}
