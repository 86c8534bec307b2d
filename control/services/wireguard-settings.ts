/**
 * The install's WireGuard settings: one row, its server key pair made with it. The first api to
 * start makes it (the insert that commits first wins, the others do nothing); a read or a write
 * that finds none (a backup restored without one) makes it the same way, as the install's own
 * write rather than its caller's. Every write announces `tunnel wireguard`: the feed's global
 * section carries the settings, so the controller compiles again.
 */
import { eq, sql } from "drizzle-orm";
import { tunnelDevices, wireguardSettings } from "../../db/schema.ts";
import { withWriterSlot } from "../../db/actor.ts";
import { ValidationError } from "../../shared/errors.ts";
import { ChangeKind } from "../../shared/roles.ts";
import type { ChangeEntry } from "../core/changelog.ts";
import { read, type ServiceDeps, write } from "../core/store.ts";
import { isDeviceAddress, readSubnet } from "../model/wireguard.ts";
import { changedFields } from "./diff.ts";
import { refuseOverlap } from "./openvpn-settings.ts";
import { KeyPlace, newKeyPair, sealWireguardKey } from "./wireguard-keys.ts";

export type WireguardSettingsRow = typeof wireguardSettings.$inferSelect;

type Deps = Pick<ServiceDeps, "database" | "changes" | "settings">;

/** What an admin may change; the keys are the server's to make. */
export interface WireguardSettingsPatch {
  subnet?: string;
  listenPort?: number;
  endpointHost?: string | null;
  mtu?: number;
  persistentKeepaliveSeconds?: number;
}

/** The change entry of a write to the settings (a device's names the device). */
export function wireguardChange(): ChangeEntry {
  return { kind: ChangeKind.tunnel, ref: "wireguard" };
}

/** The row as it stands, when there is one. */
export async function findWireguardSettings(
  deps: Pick<ServiceDeps, "database">,
): Promise<WireguardSettingsRow | undefined> {
  const [row] = await read(
    deps,
    (db) => db.select().from(wireguardSettings).where(eq(wireguardSettings.id, 1)),
  );
  return row;
}

/**
 * The settings row, made first when there is none: a new key pair and the defaults. Run by the
 * api at start, and by whatever finds the row missing; never an audited write of a caller.
 */
export async function ensureWireguardSettings(deps: Deps): Promise<WireguardSettingsRow> {
  const held = await findWireguardSettings(deps);
  if (held) return held;
  return await withWriterSlot(() =>
    write(deps, async (tx) => {
      const pair = newKeyPair();
      const [made] = await tx.insert(wireguardSettings).values({
        id: 1,
        privateKeySealed: sealWireguardKey(
          deps.settings.internalSecret,
          KeyPlace.server,
          pair.privateKey,
        ),
        publicKey: pair.publicKey,
      }).onConflictDoNothing().returning();
      if (made) return { result: made, change: wireguardChange() };
      // Another process's insert committed first: its row is the install's.
      const [row] = await tx.select().from(wireguardSettings).where(eq(wireguardSettings.id, 1));
      return { result: row, change: null };
    })
  );
}

/**
 * Applies an admin's change (already read by its schema). A new subnet must still hold every
 * WireGuard device's address as a device address (not its network, first host or broadcast):
 * devices' configs name their addresses, so a block that strands one is refused (422 on
 * `body.subnet`). Announced when a value moved.
 */
export async function updateWireguardSettings(
  deps: Deps,
  patch: WireguardSettingsPatch,
): Promise<WireguardSettingsRow> {
  await ensureWireguardSettings(deps);
  return await write(deps, async (tx) => {
    const [current] = await tx.select().from(wireguardSettings)
      .where(eq(wireguardSettings.id, 1)).for("update");
    const changes = changedFields(current, patch);
    if (!changes) return { result: current, change: null };
    if (changes.subnet !== undefined) {
      const subnet = readSubnet(changes.subnet);
      if (subnet === undefined) {
        throw new ValidationError([{ field: "body.subnet", message: "is not a device block" }]);
      }
      await refuseOverlap(tx, "wireguard", subnet);
      // Device creates lock the settings row first, so none lands outside the block meanwhile.
      const devices = await tx.select({ name: tunnelDevices.name, address: tunnelDevices.address })
        .from(tunnelDevices).where(eq(tunnelDevices.protocol, "wireguard"));
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
    const [row] = await tx.update(wireguardSettings).set({ ...changes, updatedAt: sql`now()` })
      .where(eq(wireguardSettings.id, 1)).returning();
    return { result: row, change: wireguardChange() };
  });
}

/** A new server key pair: every device's config names the old public key until downloaded again. */
export async function rotateServerKey(deps: Deps): Promise<WireguardSettingsRow> {
  await ensureWireguardSettings(deps);
  const pair = newKeyPair();
  return await write(deps, async (tx) => {
    const [row] = await tx.update(wireguardSettings).set({
      privateKeySealed: sealWireguardKey(
        deps.settings.internalSecret,
        KeyPlace.server,
        pair.privateKey,
      ),
      publicKey: pair.publicKey,
      updatedAt: sql`now()`,
    }).where(eq(wireguardSettings.id, 1)).returning();
    return { result: row, change: wireguardChange() };
  });
}
