/**
 * OpenVPN devices: what differs from a WireGuard device (tunnel-devices.ts, which lists, reads,
 * edits and deletes both). A device's address is the lowest free one of the OpenVPN subnet,
 * given under the settings row's lock; its certificate, named by its id and signed by the
 * install's CA, and its key are made here, the key sealed at rest. A gateway admits a device
 * that presents the certificate serial on record, so a new certificate retires the old one at
 * the next feed. The profile (`.ovpn`) carries the device's certificate and key, the CA and the
 * tls-crypt key inline: one file a device imports.
 */
import { eq, sql } from "drizzle-orm";
import type { Tx } from "../../db/client.ts";
import { openvpnSettings, tunnelDevices } from "../../db/schema.ts";
import { PreconditionError } from "../../shared/errors.ts";
import { write } from "../core/store.ts";
import type { ServiceDeps } from "../core/store.ts";
import { readEndpointHost, storedSubnet } from "../model/wireguard.ts";
import {
  issueDeviceCertificate,
  openOpenvpnKey,
  OpenvpnKeyPlace,
  sealOpenvpnKey,
} from "./openvpn-pki.ts";
import { ensureOpenvpnSettings, OPENVPN } from "./openvpn-settings.ts";
import { requireProject } from "./scope.ts";
import {
  checkedOptions,
  deviceChange,
  type DeviceRow,
  freeAddress,
  getDevice,
  lockDevice,
  type NewDevice,
} from "./tunnel-devices.ts";

type Deps = Pick<ServiceDeps, "database" | "changes" | "settings">;

/** The CA's certificate and key, opened; 409 when the key does not open here. */
function openCa(deps: Deps, row: { caCertificate: string; caKeySealed: string }) {
  try {
    return {
      certificate: row.caCertificate,
      key: openOpenvpnKey(deps.settings.internalSecret, OpenvpnKeyPlace.ca, row.caKeySealed),
    };
  } catch {
    throw new PreconditionError(
      "The OpenVPN CA's key does not open under this install's secret (restored from another " +
        "install?): rotate the identity (POST /api/v1/openvpn/settings/rotate-identity)",
    );
  }
}

/** A new certificate for device `id`, as its row's columns. */
async function certificateColumns(
  deps: Deps,
  ca: { certificate: string; key: string },
  id: string,
) {
  const issued = await issueDeviceCertificate(ca, id);
  return {
    certificate: issued.certificate,
    certificateSerial: issued.serial,
    privateKeySealed: sealOpenvpnKey(
      deps.settings.internalSecret,
      OpenvpnKeyPlace.device(id),
      issued.key,
    ),
  };
}

/**
 * The settings row locked in `tx`, still under the CA a certificate was just signed by (made
 * outside the transaction, since signing awaits); 409 when a rotation replaced it meanwhile.
 */
async function holdIdentity(tx: Tx, caCertificate: string, lock: "update" | "share") {
  const [locked] = await tx.select({
    subnet: openvpnSettings.subnet,
    caCertificate: openvpnSettings.caCertificate,
  }).from(openvpnSettings).where(eq(openvpnSettings.id, 1)).for(lock);
  if (!locked || locked.caCertificate !== caCertificate) {
    throw new PreconditionError("The OpenVPN identity was replaced meanwhile: try again");
  }
  return locked;
}

export async function createOpenvpnDevice(
  deps: Deps,
  projectId: string,
  input: Omit<NewDevice, "publicKey">,
): Promise<DeviceRow> {
  const options = checkedOptions({
    country: input.country ?? null,
    state: input.state ?? null,
    city: input.city ?? null,
    session_id: input.session_id ?? null,
  }, new Set());
  const settings = await ensureOpenvpnSettings(deps);
  const id = crypto.randomUUID();
  const certificate = await certificateColumns(deps, openCa(deps, settings), id);
  return await write(deps, async (tx) => {
    await requireProject(tx, projectId, { lock: true });
    // One create at a time takes an address, and the subnet cannot move meanwhile.
    const locked = await holdIdentity(tx, settings.caCertificate, "update");
    const address = await freeAddress(tx, storedSubnet(locked.subnet), OPENVPN);
    const [row] = await tx.insert(tunnelDevices).values({
      id,
      projectId,
      protocol: OPENVPN,
      name: input.name,
      address,
      enabled: input.enabled ?? true,
      ...certificate,
      ...options,
    }).returning();
    return { result: row, change: deviceChange(id) };
  });
}

/** A new certificate and key: the device's old profile is refused from the next feed on. */
export async function rotateDeviceCertificate(
  deps: Deps,
  projectId: string,
  id: string,
): Promise<DeviceRow> {
  const settings = await ensureOpenvpnSettings(deps);
  const certificate = await certificateColumns(deps, openCa(deps, settings), id);
  return await write(deps, async (tx) => {
    await holdIdentity(tx, settings.caCertificate, "share");
    await lockDevice(tx, projectId, id, OPENVPN);
    const [row] = await tx.update(tunnelDevices).set({ ...certificate, updatedAt: sql`now()` })
      .where(eq(tunnelDevices.id, id)).returning();
    return { result: row, change: deviceChange(id) };
  });
}

/**
 * Every OpenVPN device's certificate issued again by `ca`, in `tx` (an identity rotation's):
 * answers how many. Each device's change rides with the settings' one announcement.
 */
export async function reissueAllCertificates(
  deps: Deps,
  tx: Tx,
  ca: { certificate: string; key: string },
): Promise<number> {
  const devices = await tx.select({ id: tunnelDevices.id }).from(tunnelDevices)
    .where(eq(tunnelDevices.protocol, OPENVPN)).for("update");
  for (const device of devices) {
    await tx.update(tunnelDevices).set({
      ...(await certificateColumns(deps, ca, device.id)),
      updatedAt: sql`now()`,
    }).where(eq(tunnelDevices.id, device.id));
  }
  return devices.length;
}

export interface DeviceProfile {
  name: string;
  text: string;
}

/** A PEM block for inline use, without trailing blank lines. */
const inline = (tag: string, pem: string) => `<${tag}>\n${pem.trim()}\n</${tag}>`;

/**
 * The device's `.ovpn` profile as the settings stand now. 409 until an admin set the endpoint
 * host, and for keys that do not open under this install's secret.
 */
export async function openvpnProfile(
  deps: Deps,
  projectId: string,
  id: string,
): Promise<DeviceProfile> {
  const device = await getDevice(deps, projectId, id, OPENVPN);
  const settings = await ensureOpenvpnSettings(deps);
  if (settings.endpointHost === null) {
    throw new PreconditionError(
      "No endpoint host is set, so a device cannot be told where to connect: an admin must " +
        "set endpoint_host in the OpenVPN settings (PUT /api/v1/openvpn/settings)",
    );
  }
  const secret = deps.settings.internalSecret;
  let key: string;
  let tlsCrypt: string;
  try {
    key = openOpenvpnKey(secret, OpenvpnKeyPlace.device(device.id), device.privateKeySealed ?? "");
    tlsCrypt = openOpenvpnKey(secret, OpenvpnKeyPlace.tlsCrypt, settings.tlsCryptKeySealed);
  } catch {
    throw new PreconditionError(
      "The device's keys do not open under this install's secret (restored from another " +
        "install?): rotate its certificate (POST …/rotate-certificate) and download its " +
        "profile again",
    );
  }
  const host = readEndpointHost(settings.endpointHost) ?? settings.endpointHost;
  const tcp = settings.transport === "tcp";
  const lines = [
    `# Octoprox device ${device.name}`,
    "client",
    "dev tun",
    `proto ${tcp ? "tcp-client" : "udp"}`,
    `remote ${host} ${settings.listenPort}`,
    "nobind",
    "persist-key",
    "persist-tun",
    "remote-cert-tls server",
    `tun-mtu ${settings.mtu}`,
    "verb 3",
    inline("ca", settings.caCertificate),
    inline("cert", device.certificate ?? ""),
    inline("key", key),
    inline("tls-crypt", tlsCrypt),
    "",
  ];
  return { name: device.name, text: lines.join("\n") };
}
