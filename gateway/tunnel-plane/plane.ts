/**
 * The tunnel data plane: what every tunnel protocol shares, once per gateway (the main isolate).
 * The fake-IP resolver (its mapping shared through Redis), the transparent listener devices'
 * connections are redirected to, the nftables table that redirects them, and the device
 * directory that names a connection's device by its address. It is built with the routing core,
 * before the first feed; each feed's global section hands it the tunnel settings and the devices
 * (`apply`), and each endpoint, WireGuard's (wireguard.ts) and OpenVPN's (openvpn.ts), attaches
 * its interface when it is up: a resolver and a listener bind on the interface's own address
 * only, and the interface's table redirects its DNS and TCP to them. A device removed or
 * disabled by a feed has its peer removed (its session killed) and its connections cut in the
 * same apply.
 */
import { Serial } from "../../shared/async/serial.ts";
import type { FeedTunnels } from "../../shared/feed/models.ts";
import {
  fakeIpOffset,
  type FakeIpRange,
  parseFakeIpRange,
} from "../../shared/net/fake-ip-range.ts";
import { type Cidr, parseCidr, parseIPv4, v4InCidr } from "../../shared/net/ip.ts";
import type { LuaScript } from "../../shared/lua/loader.ts";
import type { GatewayRedis } from "../../shared/redis/contract.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import type { GatewaySettings } from "../../shared/settings.ts";
import { unauthenticated } from "../../shared/routing/refusals.ts";
import { AdmissionStage, type AdmissionStep } from "../base/admission.ts";
import type { Logger } from "../base/log.ts";
import { counterSample, gaugeSample, type MetricSample } from "../base/metrics.ts";
import type { OriginalTarget, TransparentPlane } from "../net/tunnel/transparent-contract.ts";
import type { CommandRunner } from "./command-runner.ts";
import { commandRunner } from "./commands.ts";
import { ConntrackEvents, conntrackListing, ConntrackTable } from "./conntrack.ts";
import { ConntrackEventStream } from "./conntrack-events.ts";
import { DeviceDirectory, type DeviceProjects, TunnelProtocol } from "./devices.ts";
import { DnsServer } from "./dns-server.ts";
import { isEncryptedDns } from "./encrypted-dns.ts";
import { FakeIps } from "./fake-ips.ts";
import { applyRules, removeRules } from "./nftables.ts";
import { FakeIpResolver } from "./resolver.ts";
import { WireguardEndpoint } from "./wireguard.ts";
import { OpenvpnEndpoint } from "./openvpn.ts";
import { TunnelStatusPublisher } from "./status.ts";

/** A transparent listener the app makes on the plane's behalf (app/listener.ts). */
export interface TransparentListenerHandle {
  /** Cancels the connections of devices `admitted` no longer answers for. */
  cancelWhere(gone: (deviceAddress: string) => boolean): void;
  close(): Promise<void>;
}

export type OpenTransparentListener = (
  hostname: string,
  port: number,
  plane: TransparentPlane,
) => TransparentListenerHandle;

export interface TunnelPlaneOptions {
  settings: Pick<
    GatewaySettings,
    | "wireguardEnabled"
    | "wireguardInterface"
    | "wireguardListenPort"
    | "openvpnEnabled"
    | "openvpnInterface"
    | "openvpnListenPort"
    | "tunnelTransparentPort"
    | "tunnelDnsPort"
    | "tunnelFakeIpRange"
    | "tunnelSniffTimeoutMs"
    | "tunnelBlockEncryptedDns"
    | "redisRequestTimeoutMs"
    | "tunnelStatusIntervalMs"
  >;
  redis: GatewayRedis;
  keys: RedisKeys;
  /** This gateway's instance: its tunnel status key. */
  instance: string;
  scripts: { assign: LuaScript; lookup: LuaScript };
  projects: DeviceProjects;
  logger: Logger;
  runner?: CommandRunner;
  conntrack?: ConntrackTable;
}

/** An interface the plane serves: what is bound on its address, and its connection events. */
interface Attachment {
  address: string;
  subnet: string;
  dns: DnsServer;
  listener: TransparentListenerHandle;
  events: ConntrackEventStream;
}

interface DeviceCounts {
  fake_ip: number;
  sniffed: number;
  address: number;
  encrypted_dns_closed: number;
}

export class TunnelPlane implements TransparentPlane {
  readonly #o: TunnelPlaneOptions;
  readonly range: FakeIpRange;
  readonly fakeIps: FakeIps;
  readonly resolver: FakeIpResolver;
  readonly directory: DeviceDirectory;
  /** Where device connections were going: the kernel's events, the listing behind them. */
  readonly #connections: ConntrackEvents;
  readonly #listing: ConntrackTable;
  readonly #runner: CommandRunner;
  readonly #wireguard: WireguardEndpoint | undefined;
  readonly #openvpn: OpenvpnEndpoint | undefined;
  readonly #status: TunnelStatusPublisher | undefined;
  readonly #protocols: ReadonlySet<string>;
  #open: OpenTransparentListener | undefined;
  /** The interfaces attached, by name. */
  readonly #attachments = new Map<string, Attachment>();
  /** One attach at a time: two endpoints may come up together. */
  readonly #attaching = new Serial();
  readonly #counts = new Map<string, DeviceCounts>();
  #stopping: Promise<void> | undefined;
  #applyFailures = 0;

  constructor(options: TunnelPlaneOptions) {
    this.#o = options;
    const { settings } = options;
    this.range = parseFakeIpRange(settings.tunnelFakeIpRange);
    this.fakeIps = new FakeIps({
      range: this.range,
      redis: options.redis,
      keys: options.keys,
      assignScript: options.scripts.assign,
      lookupScript: options.scripts.lookup,
      requestTimeoutMs: settings.redisRequestTimeoutMs,
      logger: options.logger,
    });
    this.resolver = new FakeIpResolver({
      fakeIps: this.fakeIps,
      blockEncryptedDns: settings.tunnelBlockEncryptedDns,
    });
    this.directory = new DeviceDirectory(options.projects);
    this.#runner = options.runner ?? commandRunner;
    this.#listing = options.conntrack ??
      new ConntrackTable(async () => {
        const listings = await Promise.all(
          [...this.#attachments.values()].map((attached) =>
            this.#runner.run(
              "conntrack",
              conntrackListing(attached.subnet, settings.tunnelTransparentPort),
            )
          ),
        );
        return listings.join("\n");
      });
    this.#connections = new ConntrackEvents({
      fallback: (address, port) => this.#listing.lookup(address, port),
    });
    const protocols: string[] = [];
    if (settings.wireguardEnabled) protocols.push(TunnelProtocol.wireguard);
    if (settings.openvpnEnabled) protocols.push(TunnelProtocol.openvpn);
    this.#protocols = new Set(protocols);
    this.#wireguard = settings.wireguardEnabled
      ? new WireguardEndpoint({
        interface: settings.wireguardInterface,
        listenPort: settings.wireguardListenPort,
        runner: this.#runner,
        logger: options.logger,
        onUp: (address, subnet) => this.#attach(settings.wireguardInterface, address, subnet),
      })
      : undefined;
    this.#openvpn = settings.openvpnEnabled
      ? new OpenvpnEndpoint({
        interface: settings.openvpnInterface,
        listenPort: settings.openvpnListenPort,
        logger: options.logger,
        onUp: (address, subnet) => this.#attach(settings.openvpnInterface, address, subnet),
      })
      : undefined;
    const wireguard = this.#wireguard;
    const openvpn = this.#openvpn;
    this.#status = wireguard === undefined && openvpn === undefined
      ? undefined
      : new TunnelStatusPublisher({
        redis: options.redis,
        keys: options.keys,
        instance: options.instance,
        peers: () => wireguard?.peers() ?? Promise.resolve([]),
        openvpnDevices: () => openvpn?.connectedDevices() ?? [],
        requestTimeoutMs: settings.redisRequestTimeoutMs,
        intervalMs: settings.tunnelStatusIntervalMs,
      });
  }

  /** Starts publishing the devices' statuses (every OCTOPROX_TUNNEL_STATUS_INTERVAL). */
  start(): void {
    void this.#status?.start();
  }

  get sniffTimeoutMs(): number {
    return this.#o.settings.tunnelSniffTimeoutMs;
  }

  /** Where device connections are listened for: set by the app before the first feed. */
  useListeners(open: OpenTransparentListener): void {
    this.#open = open;
  }

  /** The step naming a connection's client: the device its address is, else 407 (closed). */
  deviceStep(): AdmissionStep {
    return {
      name: "device",
      stage: AdmissionStage.client,
      admit: (request) => {
        const admitted = this.directory.admit(request.clientAddress.hostname);
        if (admitted === undefined) return unauthenticated;
        request.client = admitted.client;
        return undefined;
      },
    };
  }

  /**
   * The feed's tunnel settings and devices: the directory first (a device removed is refused
   * from now on, and its connections cut), then the endpoint's identity and peers. Never
   * rejects: a failure is logged, and the next feed tries again.
   */
  async apply(tunnels: FeedTunnels): Promise<void> {
    if (this.#stopping !== undefined) return;
    this.directory.apply(tunnels.devices, this.#protocols);
    for (const attached of this.#attachments.values()) {
      attached.listener.cancelWhere((address) => !this.directory.has(address));
    }
    await Promise.all([this.#applyWireguard(tunnels), this.#applyOpenvpn(tunnels)]);
  }

  async #applyWireguard(tunnels: FeedTunnels): Promise<void> {
    const wireguard = this.#wireguard;
    if (wireguard === undefined) return;
    if (!this.#usable("WireGuard", tunnels.wireguard?.subnet)) return;
    try {
      await wireguard.apply(tunnels.wireguard!, this.directory.devicesOf(TunnelProtocol.wireguard));
    } catch (error) {
      this.#applyFailures++;
      this.#o.logger.error("The WireGuard endpoint could not apply the feed's settings", {
        error: error instanceof Error ? error.message : String(error),
      });
    }
  }

  async #applyOpenvpn(tunnels: FeedTunnels): Promise<void> {
    const openvpn = this.#openvpn;
    if (openvpn === undefined) return;
    if (!this.#usable("OpenVPN", tunnels.openvpn?.subnet)) return;
    try {
      await openvpn.apply(tunnels.openvpn!, this.directory.devicesOf(TunnelProtocol.openvpn));
    } catch (error) {
      this.#applyFailures++;
      this.#o.logger.error("The OpenVPN endpoint could not apply the feed's settings", {
        error: error instanceof Error ? error.message : String(error),
      });
    }
  }

  /** Whether an endpoint's identity is there and its subnet clear of the fake-IP range. */
  #usable(name: string, subnet: string | undefined): boolean {
    if (subnet === undefined) {
      this.#o.logger.warn(`${name} is enabled but the install has no ${name} identity yet`);
      return false;
    }
    if (this.#overlapsFakeRange(subnet)) {
      this.#o.logger.error(`The ${name} subnet overlaps the fake-IP range; the endpoint waits`, {
        subnet,
        fake_ip_range: this.range.cidr,
      });
      return false;
    }
    return true;
  }

  /** Two blocks overlap when either holds the other's network address. */
  #overlapsFakeRange(subnet: string): boolean {
    const range = parseCidr(this.range.cidr);
    let block: Cidr;
    try {
      block = parseCidr(subnet);
    } catch {
      return false;
    }
    if (range.family !== 4 || block.family !== 4) return false;
    return v4InCidr(range.value, block) || v4InCidr(block.value, range);
  }

  /** The interface is up at `address`: a resolver, a listener and the rules go there. */
  #attach(iface: string, address: string, subnet: string): Promise<void> {
    return this.#attaching.run(() => this.#attachNow(iface, address, subnet));
  }

  async #attachNow(iface: string, address: string, subnet: string): Promise<void> {
    const { settings, logger } = this.#o;
    const held = this.#attachments.get(iface);
    if (held === undefined || held.address !== address || held.subnet !== subnet) {
      if (held !== undefined) await this.#detach(iface);
      if (this.#open === undefined) throw new Error("No transparent listener to open");
      const events = new ConntrackEventStream(this.#connections, logger);
      await events.start(subnet, settings.tunnelTransparentPort);
      this.#attachments.set(iface, {
        address,
        subnet,
        events,
        dns: new DnsServer({
          hostname: address,
          port: settings.tunnelDnsPort,
          resolver: this.resolver,
        }),
        listener: this.#open(address, settings.tunnelTransparentPort, this),
      });
    }
    await applyRules(this.#runner, {
      interface: iface,
      dnsPort: settings.tunnelDnsPort,
      transparentPort: settings.tunnelTransparentPort,
    });
    logger.info("Tunnel plane attached", {
      interface: iface,
      address,
      dns_port: settings.tunnelDnsPort,
      transparent_port: settings.tunnelTransparentPort,
      fake_ip_range: this.range.cidr,
    });
  }

  /** Closes what is bound for `iface`. Never rejects. */
  async #detach(iface: string): Promise<void> {
    const attached = this.#attachments.get(iface);
    if (attached === undefined) return;
    this.#attachments.delete(iface);
    await Promise.allSettled([
      attached.dns.close(),
      attached.listener.close(),
      attached.events.stop(),
    ]);
  }

  async #detachAll(): Promise<void> {
    await Promise.all([...this.#attachments.keys()].map((iface) => this.#detach(iface)));
  }

  // TransparentPlane ----------------------------------------------------------------------------

  async originalDestination(peer: Deno.NetAddr): Promise<OriginalTarget | undefined> {
    const found = await this.#connections.lookup(peer.hostname, peer.port);
    if (found === undefined) {
      this.#o.logger.warn("A device connection's original destination was not found", {
        device: peer.hostname,
        port: peer.port,
        read_error: this.#listing.lastError,
      });
    }
    return found;
  }

  isFake(address: string): boolean {
    const value = parseIPv4(address);
    return value !== undefined && fakeIpOffset(this.range, value) !== undefined;
  }

  nameOf(address: string): Promise<string | undefined> {
    const value = parseIPv4(address);
    return value === undefined ? Promise.resolve(undefined) : this.fakeIps.lookup(value);
  }

  closesEncryptedDns(deviceAddress: string, host: string, port: number): boolean {
    if (!this.#o.settings.tunnelBlockEncryptedDns || !isEncryptedDns(host, port)) return false;
    this.#count(deviceAddress).encrypted_dns_closed++;
    return true;
  }

  routed(deviceAddress: string, byName: "fake_ip" | "sniffed" | "address"): void {
    this.#count(deviceAddress)[byName]++;
  }

  #count(deviceAddress: string): DeviceCounts {
    let counts = this.#counts.get(deviceAddress);
    if (counts === undefined) {
      counts = { fake_ip: 0, sniffed: 0, address: 0, encrypted_dns_closed: 0 };
      this.#counts.set(deviceAddress, counts);
    }
    return counts;
  }

  // Reporting -----------------------------------------------------------------------------------

  /** The plane's series for /metrics: per device (by id), the resolver's and the mapping's. */
  samples(): MetricSample[] {
    const samples: MetricSample[] = [
      ...this.resolver.samples(),
      ...this.fakeIps.samples(),
      gaugeSample("octoprox_gateway_tunnel_devices", this.directory.size),
      gaugeSample("octoprox_gateway_tunnel_wireguard_up", this.#wireguard?.up ? 1 : 0),
      gaugeSample("octoprox_gateway_tunnel_openvpn_up", this.#openvpn?.up ? 1 : 0),
      gaugeSample(
        "octoprox_gateway_tunnel_openvpn_sessions",
        this.#openvpn?.connectedDevices().length ?? 0,
      ),
      counterSample(
        "octoprox_gateway_tunnel_openvpn_admissions_total",
        this.#openvpn?.admissions.admitted ?? 0,
        'result="admitted"',
      ),
      counterSample(
        "octoprox_gateway_tunnel_openvpn_admissions_total",
        this.#openvpn?.admissions.refused ?? 0,
        'result="refused"',
      ),
      counterSample("octoprox_gateway_tunnel_apply_failures_total", this.#applyFailures),
    ];
    for (const [address, counts] of this.#counts) {
      const device = this.directory.deviceAt(address)?.id ?? "gone";
      const labels = `device="${device}",address="${address}"`;
      for (const by of ["fake_ip", "sniffed", "address"] as const) {
        samples.push(
          counterSample(
            "octoprox_gateway_tunnel_device_connections_total",
            counts[by],
            `${labels},name_from="${by}"`,
          ),
        );
      }
      samples.push(
        counterSample(
          "octoprox_gateway_tunnel_device_encrypted_dns_closed_total",
          counts.encrypted_dns_closed,
          labels,
        ),
      );
    }
    return samples;
  }

  /** Closes the transparent listener and the resolver (with the gateway's other listeners). */
  closeListeners(): Promise<void> {
    return this.#detachAll();
  }

  /**
   * Stops the listener and the resolver, removes the rules and the interface. Safe twice; never
   * rejects; every step runs.
   */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      const step = async (name: string, run: () => Promise<void>) => {
        try {
          await run();
        } catch (error) {
          this.#o.logger.error(`Tunnel plane stop step failed: ${name}`, { error });
        }
      };
      await step("status", () => this.#status?.stop() ?? Promise.resolve());
      await step("listeners, resolvers and connection events", () => this.#detachAll());
      await step("WireGuard endpoint", () => this.#wireguard?.stop() ?? Promise.resolve());
      await step("OpenVPN endpoint", () => this.#openvpn?.stop() ?? Promise.resolve());
      const { settings } = this.#o;
      if (this.#wireguard !== undefined) {
        await step("rules", () => removeRules(this.#runner, settings.wireguardInterface));
      }
      if (this.#openvpn !== undefined) {
        await step("rules", () => removeRules(this.#runner, settings.openvpnInterface));
      }
    })();
    return this.#stopping;
  }
}
