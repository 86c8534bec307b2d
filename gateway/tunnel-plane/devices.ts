/**
 * The devices a gateway admits, by tunnel address, from the feed's global section: a device's
 * address names it (a tunnel delivers only packets from the addresses its peer is allowed), and
 * it stands for its project with its fixed options, as a username with those options would,
 * and names itself (`deviceId`) so its transfers are metered per device too.
 * A disabled device, one of a project this snapshot does not hold, and one of a protocol this
 * gateway does not run are not admitted.
 */
import type { FeedTunnelDevice } from "../../shared/feed/models.ts";
import type { Client, UsernameOptions } from "../../shared/routing/contract.ts";
import { type ProjectEntry, withProjectPolicies } from "../../shared/routing/snapshot.ts";

/** Protocols this release's gateways run endpoints for. */
export const TunnelProtocol = { wireguard: "wireguard", openvpn: "openvpn" } as const;
export type TunnelProtocol = (typeof TunnelProtocol)[keyof typeof TunnelProtocol];

export interface DeviceProjects {
  /** A project as the snapshot in force has it. */
  project(projectId: string): ProjectEntry | undefined;
}

export interface AdmittedDevice {
  device: FeedTunnelDevice;
  client: Client;
}

export class DeviceDirectory {
  readonly #projects: DeviceProjects;
  #byAddress = new Map<string, FeedTunnelDevice>();
  /** Clients made per device, for the project entry they were made from. */
  #clients = new WeakMap<FeedTunnelDevice, { entry: ProjectEntry; client: Client }>();

  constructor(projects: DeviceProjects) {
    this.#projects = projects;
  }

  get size(): number {
    return this.#byAddress.size;
  }

  /** Replaces the directory with the feed's devices of `protocols`. */
  apply(devices: readonly FeedTunnelDevice[], protocols: ReadonlySet<string>): void {
    const byAddress = new Map<string, FeedTunnelDevice>();
    for (const device of devices) {
      if (device.enabled && protocols.has(device.protocol)) byAddress.set(device.address, device);
    }
    this.#byAddress = byAddress;
  }

  /** The enabled devices of `protocol`, for its endpoint's peers. */
  devicesOf(protocol: string): FeedTunnelDevice[] {
    return [...this.#byAddress.values()].filter((device) => device.protocol === protocol);
  }

  /** Whether `address` is an admitted device's (a connection from one no longer is ends). */
  has(address: string): boolean {
    return this.#byAddress.has(address);
  }

  /** The admitted device at `address`, if any. */
  deviceAt(address: string): FeedTunnelDevice | undefined {
    return this.#byAddress.get(address);
  }

  /** The device at `address` and the client it stands for; undefined when none is admitted. */
  admit(address: string): AdmittedDevice | undefined {
    const device = this.#byAddress.get(address);
    if (device === undefined) return undefined;
    const entry = this.#projects.project(device.project_id);
    if (entry === undefined) return undefined;
    const made = this.#clients.get(device);
    if (made !== undefined && made.entry === entry) return { device, client: made.client };
    const client = Object.freeze(withProjectPolicies(
      {
        projectId: entry.id,
        options: Object.freeze(deviceOptions(device, entry.username)),
        connectTimeoutMs: entry.connectTimeoutMs,
        maxRetries: entry.maxRetries,
        // Metering counts the device's transfers in its own window too.
        deviceId: device.id,
      },
      entry.interception,
      entry.blocking,
    ));
    this.#clients.set(device, { entry, client });
    return { device, client };
  }
}

/** A device's fixed options, as a username carrying them would ask. */
export function deviceOptions(device: FeedTunnelDevice, user: string): UsernameOptions {
  const options: UsernameOptions = { user };
  if (device.country !== null) options.country = device.country;
  if (device.state !== null) options.state = device.state;
  if (device.city !== null) options.city = device.city;
  if (device.session_id !== null) options.sessionId = device.session_id;
  return options;
}
