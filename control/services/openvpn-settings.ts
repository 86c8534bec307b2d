/**
 * The install's OpenVPN settings: one row, its CA, server certificate and tls-crypt key made
 * with it (openvpn-pki.ts). Made as WireGuard's are (wireguard-settings.ts): the first api to
 * start inserts it and the insert that commits first wins; a read or write that finds none (a
 * backup restored without one) makes it the same way. The two tunnel subnets must not overlap: a
 * gateway names a device by its address whichever tunnel it came through. Every write announces
 * `tunnel openvpn`: the feed's global section carries the settings.
 */
import { eq, sql } from "drizzle-orm";
import { withWriterSlot } from "../../db/actor.ts";
import type { Tx } from "../../db/client.ts";
import { openvpnSettings, tunnelDevices, wireguardSettings } from "../../db/schema.ts";
import { ValidationError } from "../../shared/errors.ts";
import { ChangeKind } from "../../shared/roles.ts";
import type { ChangeEntry } from "../core/changelog.ts";
import { read, type ServiceDeps, write } from "../core/store.ts";
import {
  DEFAULT_SUBNET,
  isDeviceAddress,
  readSubnet,
  storedSubnet,
  type Subnet,
} from "../model/wireguard.ts";
import { DEFAULT_OPENVPN_SUBNET, type OpenvpnTransport } from "../model/openvpn.ts";
import { changedFields } from "./diff.ts";
import {
  newOpenvpnIdentity,
  type OpenvpnIdentity,
  OpenvpnKeyPlace,
  sealOpenvpnKey,
} from "./openvpn-pki.ts";

export type OpenvpnSettingsRow = typeof openvpnSettings.$inferSelect;

type Deps = Pick<ServiceDeps, "database" | "changes" | "settings">;

export const OPENVPN = "openvpn";

export interface OpenvpnSettingsPatch {
  subnet?: string;
  transport?: OpenvpnTransport;
  listenPort?: number;
  endpointHost?: string | null;
  mtu?: number;
  keepaliveIntervalSeconds?: number;
  keepaliveTimeoutSeconds?: number;
}

export function openvpnChange(): ChangeEntry {
  return { kind: ChangeKind.tunnel, ref: OPENVPN };
}

/** The identity's columns, its secrets sealed for the row. */
function identityColumns(secret: string, identity: OpenvpnIdentity) {
  return {
    caCertificate: identity.caCertificate,
    caKeySealed: sealOpenvpnKey(secret, OpenvpnKeyPlace.ca, identity.caKey),
    serverCertificate: identity.serverCertificate,
    serverKeySealed: sealOpenvpnKey(secret, OpenvpnKeyPlace.server, identity.serverKey),
    tlsCryptKeySealed: sealOpenvpnKey(secret, OpenvpnKeyPlace.tlsCrypt, identity.tlsCryptKey),
  };
}

export async function findOpenvpnSettings(
  deps: Pick<ServiceDeps, "database">,
): Promise<OpenvpnSettingsRow | undefined> {
  const [row] = await read(
    deps,
    (db) => db.select().from(openvpnSettings).where(eq(openvpnSettings.id, 1)),
  );
  return row;
}

/** The settings row, made first when there is none (never an audited write of a caller). */
export async function ensureOpenvpnSettings(deps: Deps): Promise<OpenvpnSettingsRow> {
  const held = await findOpenvpnSettings(deps);
  if (held) return held;
  const identity = await newOpenvpnIdentity();
  return await withWriterSlot(() =>
    write(deps, async (tx) => {
      const [made] = await tx.insert(openvpnSettings).values({
        id: 1,
        ...identityColumns(deps.settings.internalSecret, identity),
      }).onConflictDoNothing().returning();
      if (made) return { result: made, change: openvpnChange() };
      const [row] = await tx.select().from(openvpnSettings).where(eq(openvpnSettings.id, 1));
      return { result: row, change: null };
    })
  );
}

/** Whether two blocks share an address (either holds the other's network). */
export function subnetsOverlap(a: Subnet, b: Subnet): boolean {
  const holds = (outer: Subnet, address: number) =>
    address >= outer.base && address < outer.base + 2 ** (32 - outer.bits);
  return holds(a, b.base) || holds(b, a.base);
}

/**
 * The 422 when `subnet` (of `protocol`) overlaps the other tunnel's block, read under `tx`.
 * Both settings writes call it, each after locking its own row.
 */
export async function refuseOverlap(tx: Tx, protocol: "wireguard" | "openvpn", subnet: Subnet) {
  const [other] = protocol === OPENVPN
    ? await tx.select({ subnet: wireguardSettings.subnet }).from(wireguardSettings)
    : await tx.select({ subnet: openvpnSettings.subnet }).from(openvpnSettings);
  // A row not made yet will be made with its default block.
  const theirs = storedSubnet(
    other?.subnet ?? (protocol === OPENVPN ? DEFAULT_SUBNET : DEFAULT_OPENVPN_SUBNET),
  );
  if (subnetsOverlap(subnet, theirs)) {
    const name = protocol === OPENVPN ? "WireGuard" : "OpenVPN";
    throw new ValidationError([{
      field: "body.subnet",
      message: `overlaps the ${name} subnet ${theirs.cidr}: a gateway names a device by its ` +
        "address, so the two tunnels' blocks must not share one",
    }]);
  }
}

/**
 * Applies an admin's change (already read by its schema): a new subnet must hold every OpenVPN
 * device's address and not overlap WireGuard's; keepalive's timeout must be at least twice its
 * interval, as the daemon requires. Announced when a value moved.
 */
export async function updateOpenvpnSettings(
  deps: Deps,
  patch: OpenvpnSettingsPatch,
): Promise<OpenvpnSettingsRow> {
  await ensureOpenvpnSettings(deps);
  return await write(deps, async (tx) => {
    const [current] = await tx.select().from(openvpnSettings)
      .where(eq(openvpnSettings.id, 1)).for("update");
    const changes = changedFields(current, patch);
    if (!changes) return { result: current, change: null };
    const interval = changes.keepaliveIntervalSeconds ?? current.keepaliveIntervalSeconds;
    const timeout = changes.keepaliveTimeoutSeconds ?? current.keepaliveTimeoutSeconds;
    if (timeout < 2 * interval) {
      throw new ValidationError([{
        field: changes.keepaliveTimeoutSeconds !== undefined
          ? "body.keepalive_timeout_seconds"
          : "body.keepalive_interval_seconds",
        message: `the timeout (${timeout} s) must be at least twice the interval ` +
          `(${interval} s), as OpenVPN requires`,
      }]);
    }
    if (changes.subnet !== undefined) {
      const subnet = readSubnet(changes.subnet);
      if (subnet === undefined) {
        throw new ValidationError([{ field: "body.subnet", message: "is not a device block" }]);
      }
      await refuseOverlap(tx, OPENVPN, subnet);
      const devices = await tx.select({ name: tunnelDevices.name, address: tunnelDevices.address })
        .from(tunnelDevices).where(eq(tunnelDevices.protocol, OPENVPN));
      const stranded = devices.filter((device) => !isDeviceAddress(subnet, device.address));
      if (stranded.length > 0) {
        const first = stranded[0];
        throw new ValidationError([{
          field: "body.subnet",
          message: `would strand ${stranded.length} of the devices (such as ${first.name} at ` +
            `${first.address}): a new block must hold every device's address as a device ` +
            "address (not its network, first host or broadcast); delete those devices first",
        }]);
      }
    }
    const [row] = await tx.update(openvpnSettings).set({ ...changes, updatedAt: sql`now()` })
      .where(eq(openvpnSettings.id, 1)).returning();
    return { result: row, change: openvpnChange() };
  });
}

/**
 * A new CA, server certificate and tls-crypt key. Every device's certificate was signed by the
 * old CA, so each is issued again in the same transaction, and every profile must be downloaded
 * again. Answers the row and how many devices were issued new certificates.
 */
export async function rotateOpenvpnIdentity(
  deps: Deps,
  reissue: (tx: Tx, ca: { certificate: string; key: string }) => Promise<number>,
): Promise<{ row: OpenvpnSettingsRow; devices: number }> {
  await ensureOpenvpnSettings(deps);
  const identity = await newOpenvpnIdentity();
  return await write(deps, async (tx) => {
    await tx.select({ id: openvpnSettings.id }).from(openvpnSettings)
      .where(eq(openvpnSettings.id, 1)).for("update");
    const [row] = await tx.update(openvpnSettings).set({
      ...identityColumns(deps.settings.internalSecret, identity),
      updatedAt: sql`now()`,
    }).where(eq(openvpnSettings.id, 1)).returning();
    const devices = await reissue(tx, { certificate: identity.caCertificate, key: identity.caKey });
    return { result: { row, devices }, change: openvpnChange() };
  });
}
