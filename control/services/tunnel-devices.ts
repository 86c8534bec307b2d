/**
 * Tunnel devices: clients of a project that join it over a tunnel, every TCP connection routed
 * with the device's fixed options, over WireGuard (here) or OpenVPN (openvpn-devices.ts). A device's
 * address is the lowest free one of the install's subnet (its first host is the gateways'), given
 * under the settings row's lock, so two creates never take one address and a subnet change never
 * strands a device; its keys are made here (a public key it supplies keeps its private key on
 * the device) and sealed at rest (wireguard-keys.ts). Every write announces `tunnel <id>`: the
 * feed's global section carries every device.
 */
import { and, asc, eq, sql } from "drizzle-orm";
import type { Tx } from "../../db/client.ts";
import { tunnelDevices, wireguardSettings } from "../../db/schema.ts";
import { formatIPv4 } from "../../shared/net/ip.ts";
import { PreconditionError, ValidationError } from "../../shared/errors.ts";
import { ChangeKind } from "../../shared/roles.ts";
import type { ChangeEntry } from "../core/changelog.ts";
import { read, type ServiceDeps, write } from "../core/store.ts";
import {
  type DeviceOptions,
  endpointOf,
  gatewayAddress,
  ipv4Value,
  readDeviceOptions,
  storedSubnet,
  type Subnet,
  type TunnelProtocol,
} from "../model/wireguard.ts";
import { changedFields } from "./diff.ts";
import { missingIn, requireProject } from "./scope.ts";
import {
  KeyPlace,
  newKeyPair,
  newPresharedKey,
  openWireguardKey,
  sealWireguardKey,
} from "./wireguard-keys.ts";
import { ensureWireguardSettings } from "./wireguard-settings.ts";

export type DeviceRow = typeof tunnelDevices.$inferSelect;

type Deps = Pick<ServiceDeps, "database" | "changes" | "settings">;

export const WIREGUARD = "wireguard";

export interface NewDevice extends Partial<DeviceOptions> {
  name: string;
  enabled?: boolean;
  /** The device's own public key; absent: the server makes the pair and keeps its private key. */
  publicKey?: string;
}

export interface DevicePatch extends Partial<DeviceOptions> {
  name?: string;
  enabled?: boolean;
}

export const deviceChange = (id: string): ChangeEntry => ({ kind: ChangeKind.tunnel, ref: id });

/** The options as a row holds them. */
function optionsOf(row: DeviceRow): DeviceOptions {
  return { country: row.country, state: row.state, city: row.city, session_id: row.sessionId };
}

/** Options read by the username grammar, or the 422 naming the field at fault. */
export function checkedOptions(options: DeviceOptions, touched: ReadonlySet<string>) {
  const read = readDeviceOptions(options, touched);
  if (!read.ok) throw new ValidationError([read.issue]);
  const { country, state, city, session_id } = read.options;
  return { country, state, city, sessionId: session_id };
}

/** The keys a device is made or rotated with, sealed for its row. */
function deviceKeys(deps: Deps, id: string, publicKey: string | undefined) {
  const secret = deps.settings.internalSecret;
  const pair = publicKey === undefined ? newKeyPair() : undefined;
  return {
    publicKey: pair?.publicKey ?? publicKey!,
    privateKeySealed: pair
      ? sealWireguardKey(secret, KeyPlace.devicePrivate(id), pair.privateKey)
      : null,
    presharedKeySealed: sealWireguardKey(secret, KeyPlace.devicePreshared(id), newPresharedKey()),
  };
}

export function listDevices(
  deps: Pick<ServiceDeps, "database">,
  projectId: string,
  protocol: TunnelProtocol = WIREGUARD,
) {
  return read(deps, async (db) => {
    await requireProject(db, projectId);
    return db.select().from(tunnelDevices)
      .where(and(eq(tunnelDevices.projectId, projectId), eq(tunnelDevices.protocol, protocol)))
      .orderBy(asc(tunnelDevices.createdAt), asc(tunnelDevices.id));
  });
}

/** A device of the project and protocol; another project's is not found. */
export function getDevice(
  deps: Pick<ServiceDeps, "database">,
  projectId: string,
  id: string,
  protocol: TunnelProtocol = WIREGUARD,
): Promise<DeviceRow> {
  return read(deps, async (db) => {
    const [row] = await db.select().from(tunnelDevices).where(and(
      eq(tunnelDevices.projectId, projectId),
      eq(tunnelDevices.id, id),
      eq(tunnelDevices.protocol, protocol),
    ));
    if (!row) return missingIn(db, projectId, "Device");
    return row;
  });
}

/** The lowest address of the subnet no device of `protocol` has; 409 when none is left. */
export async function freeAddress(
  tx: Tx,
  subnet: Subnet,
  protocol: TunnelProtocol = WIREGUARD,
): Promise<string> {
  const rows = await tx.select({ address: tunnelDevices.address }).from(tunnelDevices)
    .where(eq(tunnelDevices.protocol, protocol));
  const taken = new Set(rows.map((row) => ipv4Value(row.address)));
  for (let address = subnet.firstDevice; address <= subnet.lastDevice; address++) {
    if (!taken.has(address)) return formatIPv4(address);
  }
  const name = protocol === WIREGUARD ? "WireGuard" : "OpenVPN";
  throw new PreconditionError(
    `The ${name} subnet ${subnet.cidr} has no free address left ` +
      `(${subnet.lastDevice - subnet.firstDevice + 1} devices): delete a device, or have an ` +
      `admin set a larger subnet in the ${name} settings`,
  );
}

export async function createDevice(
  deps: Deps,
  projectId: string,
  input: NewDevice,
): Promise<DeviceRow> {
  const options = checkedOptions({
    country: input.country ?? null,
    state: input.state ?? null,
    city: input.city ?? null,
    session_id: input.session_id ?? null,
  }, new Set());
  await ensureWireguardSettings(deps);
  const id = crypto.randomUUID();
  const keys = deviceKeys(deps, id, input.publicKey);
  return await write(deps, async (tx) => {
    await requireProject(tx, projectId, { lock: true });
    // One create at a time takes an address, and the subnet cannot move meanwhile.
    const [settings] = await tx.select({ subnet: wireguardSettings.subnet })
      .from(wireguardSettings).where(eq(wireguardSettings.id, 1)).for("update");
    // Only a backup's import between the two statements removes it.
    if (!settings) throw new PreconditionError("The WireGuard settings were replaced: try again");
    const address = await freeAddress(tx, storedSubnet(settings.subnet));
    const [row] = await tx.insert(tunnelDevices).values({
      id,
      projectId,
      protocol: WIREGUARD,
      name: input.name,
      address,
      enabled: input.enabled ?? true,
      ...keys,
      ...options,
    }).returning();
    return { result: row, change: deviceChange(id) };
  });
}

/** Name, enabled and the options; the options are checked as the edit would leave them. */
export async function updateDevice(
  deps: Deps,
  projectId: string,
  id: string,
  patch: DevicePatch,
  protocol: TunnelProtocol = WIREGUARD,
): Promise<DeviceRow> {
  return await write(deps, async (tx) => {
    const current = await lockDevice(tx, projectId, id, protocol);
    const touched = new Set(
      Object.entries(patch).filter(([, value]) => value !== undefined).map(([key]) => key),
    );
    const merged = { ...optionsOf(current) };
    for (const field of ["country", "state", "city", "session_id"] as const) {
      if (patch[field] !== undefined) merged[field] = patch[field];
    }
    const changes = changedFields(current, {
      name: patch.name,
      enabled: patch.enabled,
      ...checkedOptions(merged, touched),
    });
    if (!changes) return { result: current, change: null };
    const [row] = await tx.update(tunnelDevices).set({ ...changes, updatedAt: sql`now()` })
      .where(eq(tunnelDevices.id, id)).returning();
    return { result: row, change: deviceChange(id) };
  });
}

export async function deleteDevice(
  deps: Deps,
  projectId: string,
  id: string,
  protocol: TunnelProtocol = WIREGUARD,
): Promise<void> {
  await write(deps, async (tx) => {
    await lockDevice(tx, projectId, id, protocol);
    await tx.delete(tunnelDevices).where(eq(tunnelDevices.id, id));
    return { result: undefined, change: deviceChange(id) };
  });
}

/**
 * New keys: a new preshared key always, and a new pair made here (its private key kept), or the
 * device's own new public key (none kept). The device's old config stops working.
 */
export async function rotateDeviceKeys(
  deps: Deps,
  projectId: string,
  id: string,
  publicKey?: string,
): Promise<DeviceRow> {
  const keys = deviceKeys(deps, id, publicKey);
  return await write(deps, async (tx) => {
    await lockDevice(tx, projectId, id);
    const [row] = await tx.update(tunnelDevices).set({ ...keys, updatedAt: sql`now()` })
      .where(eq(tunnelDevices.id, id)).returning();
    return { result: row, change: deviceChange(id) };
  });
}

export async function lockDevice(
  tx: Tx,
  projectId: string,
  id: string,
  protocol: TunnelProtocol = WIREGUARD,
): Promise<DeviceRow> {
  const [row] = await tx.select().from(tunnelDevices).where(and(
    eq(tunnelDevices.projectId, projectId),
    eq(tunnelDevices.id, id),
    eq(tunnelDevices.protocol, protocol),
  )).for("update");
  if (!row) return missingIn(tx, projectId, "Device");
  return row;
}

/** What a device whose public key was supplied gets in place of its private key. */
export const PRIVATE_KEY_PLACEHOLDER =
  "# PrivateKey = <this device's own private key: put it here and remove the #; " +
  "the server never had it>";

export interface DeviceConfig {
  /** The device's name, for the file's. */
  name: string;
  text: string;
}

/**
 * The device's wg-quick config: its keys opened, its address, the gateways' tunnel address as
 * its DNS, and the server's key and endpoint as the settings stand now. 409 until an admin set
 * the endpoint host, and for keys that do not open under this install's secret.
 */
export async function deviceConfig(
  deps: Deps,
  projectId: string,
  id: string,
): Promise<DeviceConfig> {
  const device = await getDevice(deps, projectId, id);
  const settings = await ensureWireguardSettings(deps);
  if (settings.endpointHost === null) {
    throw new PreconditionError(
      "No endpoint host is set, so a device cannot be told where to connect: an admin must " +
        "set endpoint_host in the WireGuard settings (PUT /api/v1/wireguard/settings)",
    );
  }
  const secret = deps.settings.internalSecret;
  let privateKey: string | undefined;
  let presharedKey: string;
  try {
    privateKey = device.privateKeySealed === null
      ? undefined
      : openWireguardKey(secret, KeyPlace.devicePrivate(device.id), device.privateKeySealed);
    presharedKey = openWireguardKey(
      secret,
      KeyPlace.devicePreshared(device.id),
      device.presharedKeySealed ?? "",
    );
  } catch {
    throw new PreconditionError(
      "The device's keys do not open under this install's secret (restored from another " +
        "install?): rotate them (POST …/rotate-keys) and download its config again",
    );
  }
  const subnet = storedSubnet(settings.subnet);
  const lines = [
    "[Interface]",
    privateKey === undefined ? PRIVATE_KEY_PLACEHOLDER : `PrivateKey = ${privateKey}`,
    `Address = ${device.address}/32`,
    `DNS = ${gatewayAddress(subnet)}`,
    `MTU = ${settings.mtu}`,
    "",
    "[Peer]",
    `PublicKey = ${settings.publicKey}`,
    `PresharedKey = ${presharedKey}`,
    "AllowedIPs = 0.0.0.0/0, ::/0",
    `Endpoint = ${endpointOf(settings.endpointHost, settings.listenPort)}`,
    `PersistentKeepalive = ${settings.persistentKeepaliveSeconds}`,
  ];
  return { name: device.name, text: `${lines.join("\n")}\n` };
}
