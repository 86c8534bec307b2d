/**
 * What a tunnel device carried, whatever its protocol: its all-time usage (its running totals,
 * the live window added) and its history over a window, each with its connections closed as
 * encrypted DNS beside the transfer counts. One history table and one totals kind serve every
 * protocol, so each protocol's routes read through here with their own protocol.
 */
import { and, eq } from "drizzle-orm";
import { tunnelDevices } from "../../db/schema.ts";
import type { Window } from "../metrics/ranges.ts";
import type { DeviceSeries, UsageReader } from "../metrics/usage.ts";
import { DEVICE_SHAPE, type DeviceUsage as DeviceCountsUsage } from "../metrics/usage-model.ts";
import type { TunnelProtocol } from "../model/wireguard.ts";
import { read, type ServiceDeps } from "../core/store.ts";
import { missingIn } from "./scope.ts";

export interface DeviceRef {
  projectId: string;
  deviceId: string;
  protocol: TunnelProtocol;
}

/** A device's all-time usage as its answers carry it. */
export interface DeviceUsage extends DeviceCountsUsage {
  /** Whether the live window was added (false: Redis did not answer). */
  live_included: boolean;
}

/**
 * The device's usage over `window`, in its buckets (the project's and proxies' series shape,
 * each point with the encrypted DNS closed); 404 unless the project has a device of this id
 * and protocol.
 */
export async function deviceHistory(
  deps: Pick<ServiceDeps, "database">,
  usage: UsageReader,
  device: DeviceRef,
  window: Window,
): Promise<DeviceSeries> {
  await read(deps, async (db) => {
    const [row] = await db.select({ id: tunnelDevices.id }).from(tunnelDevices).where(and(
      eq(tunnelDevices.projectId, device.projectId),
      eq(tunnelDevices.id, device.deviceId),
      eq(tunnelDevices.protocol, device.protocol),
    ));
    if (!row) await missingIn(db, device.projectId, "Device");
  });
  return await usage.deviceSeries(device.deviceId, device.protocol, window);
}

/** Each device's all-time usage, by id: one totals lookup and one live read for them all. */
export async function devicesUsage(
  usage: UsageReader,
  ids: readonly string[],
): Promise<Map<string, DeviceUsage>> {
  if (ids.length === 0) return new Map();
  const { totals, liveIncluded } = await usage.totals("device", ids);
  return new Map(ids.map((id) => [id, {
    ...DEVICE_SHAPE.usage(totals.get(id) ?? DEVICE_SHAPE.zero()),
    live_included: liveIncluded,
  }]));
}

/** Devices as answered, each with its all-time usage, read for them all at once. */
export async function withUsage<Row extends { id: string }, Answer>(
  usage: UsageReader,
  rows: readonly Row[],
  present: (row: Row, usage: DeviceUsage) => Answer,
): Promise<Answer[]> {
  const used = await devicesUsage(usage, rows.map((row) => row.id));
  return rows.map((row) => present(row, used.get(row.id)!));
}
