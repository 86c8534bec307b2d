/**
 * A test bed for tunnel devices, in namespaces of its own (testkit/netns.ts), so nothing leaves
 * the machine: a control plane (role all) and a gateway with the WireGuard endpoint in the test's
 * namespace; the project's two tinyproxy exits (10.204.0.2 in DE, .3 in FR) in an upstream
 * namespace whose hosts file is the only place the origin's name resolves; devices in a namespace
 * of their own, joined to the gateway only by a veth pair their tunnels run over. The tunnel
 * e2e tests and the `tunnel-connect` bench share it.
 */
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { Cluster, type Gateway } from "./cluster.ts";
import { Netns, netnsAvailable } from "./netns.ts";
import { freePort } from "./ports.ts";
import { waitForStatuses } from "./routing.ts";
import { TEST_ADMIN_DATABASE_URL } from "./stores.ts";
import { type Origin, startOrigin } from "./upstreams/origin.ts";
import { startTinyproxy, type Tinyproxy } from "./upstreams/tinyproxy.ts";
import { startWireguardDevice, type WireguardDevice } from "./wireguard-device.ts";
import {
  type OpenvpnDevice,
  type OpenvpnDeviceOptions,
  startOpenvpnDevice,
} from "./openvpn-device.ts";

export const ORIGIN_NAME = "shop.example.test";
/** Another name of the origin the exits resolve, for a lookup no gateway has made yet. */
export const SECOND_NAME = "cdn.example.test";
const UPSTREAM_NET = "10.204.0";
const DEVICE_LINK = "10.205.0";
export const EXITS = [`${UPSTREAM_NET}.2`, `${UPSTREAM_NET}.3`];
export const COUNTRIES = ["DE", "FR"];
export const SUBNET = "10.66.0.0/16";
export const GATEWAY_ADDRESS = "10.66.0.1";
export const OPENVPN_SUBNET = "10.67.0.0/16";
export const OPENVPN_GATEWAY_ADDRESS = "10.67.0.1";

/** The advisory lock a bed holds for its life (any number no other test takes). */
const BED_LOCK = 720_466_204;

/**
 * The bed's addresses are fixed (its exits', its links', its tunnels' subnets), so two beds at
 * once, in two test files run side by side, would take each other's: a bed waits for the one
 * before it, through a Postgres session lock, which a process that dies gives up with its session.
 */
async function holdBedLock(): Promise<{ close(): Promise<void> }> {
  const sql = postgres(TEST_ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} });
  try {
    await sql`select pg_advisory_lock(${BED_LOCK})`;
  } catch (error) {
    await sql.end();
    throw error;
  }
  return { close: () => sql.end() };
}

export interface TunnelBedOptions {
  /** OCTOPROX_TUNNEL_STATUS_INTERVAL for every process, in seconds (10 unless said). */
  statusIntervalSeconds?: number;
  /** More settings of the gateway's. */
  gatewayEnv?: Record<string, string>;
  /** Whether the gateway runs the OpenVPN endpoint too (beside WireGuard's). */
  openvpn?: boolean;
}

export class TunnelBed {
  readonly cluster: Cluster;
  readonly upstreams: Netns;
  readonly devices: Netns;
  readonly origin: Origin;
  readonly tlsOrigin: Origin;
  readonly tinyproxies: Tinyproxy[];
  readonly projectId: string;
  readonly credentials: { username: string; password: string };
  readonly gatewayEnv: Record<string, string>;
  gateway: Gateway | undefined;
  readonly #started: (WireguardDevice | OpenvpnDevice)[] = [];
  readonly #lock: { close(): Promise<void> };

  private constructor(
    lock: { close(): Promise<void> },
    parts: Omit<
      TunnelBed,
      | "gateway"
      | "startGateway"
      | "addDevice"
      | "deviceConfig"
      | "addOpenvpnDevice"
      | "openvpnProfile"
      | "connectOpenvpn"
      | "curl"
      | "close"
    >,
  ) {
    this.cluster = parts.cluster;
    this.upstreams = parts.upstreams;
    this.devices = parts.devices;
    this.origin = parts.origin;
    this.tlsOrigin = parts.tlsOrigin;
    this.tinyproxies = parts.tinyproxies;
    this.projectId = parts.projectId;
    this.credentials = parts.credentials;
    this.gatewayEnv = parts.gatewayEnv;
    this.#lock = lock;
  }

  /** Makes the namespaces, the exits, the origin, the cluster and the project (not the gateway). */
  static async start(options: TunnelBedOptions = {}): Promise<TunnelBed> {
    const refused = await netnsAvailable();
    if (refused !== undefined) throw new Error(`This machine refuses tunnel tests: ${refused}`);
    const lock = await holdBedLock();
    const made: { close(): Promise<unknown> }[] = [];
    try {
      const upstreams = await Netns.create("up");
      made.push(upstreams);
      await upstreams.veth({
        outside: `${UPSTREAM_NET}.1/24`,
        inside: EXITS.map((a) => `${a}/24`),
      });
      await upstreams.hosts([`${UPSTREAM_NET}.1 ${ORIGIN_NAME} ${SECOND_NAME}`]);
      const devices = await Netns.create("dev");
      made.push(devices);
      await devices.veth({ outside: `${DEVICE_LINK}.1/30`, inside: [`${DEVICE_LINK}.2/30`] });
      const [origin, tlsOrigin, tinyproxies] = await Promise.all([
        startOrigin({ host: `${UPSTREAM_NET}.1` }),
        startOrigin({ host: `${UPSTREAM_NET}.1`, tls: true }),
        Promise.all(EXITS.map((address) =>
          startTinyproxy({
            netns: upstreams.name,
            listenAddress: address,
            bindAddress: address,
            allow: [`${UPSTREAM_NET}.0/24`],
          })
        )),
      ]);
      made.push(origin, tlsOrigin, ...tinyproxies);
      const interval = String(options.statusIntervalSeconds ?? 10);
      const cluster = await Cluster.create({ env: { OCTOPROX_TUNNEL_STATUS_INTERVAL: interval } });
      made.unshift(cluster);
      await cluster.start("all");
      const settings = await cluster.request("PUT", "/api/v1/wireguard/settings", {
        subnet: SUBNET,
        listen_port: await freePort(),
        endpoint_host: `${DEVICE_LINK}.1`,
      });
      if (settings.status !== 200) throw new Error(`Settings: ${JSON.stringify(settings.body)}`);
      const openvpn = await cluster.request("PUT", "/api/v1/openvpn/settings", {
        subnet: OPENVPN_SUBNET,
        listen_port: await freePort(),
        endpoint_host: `${DEVICE_LINK}.1`,
      });
      if (openvpn.status !== 200) throw new Error(`OpenVPN: ${JSON.stringify(openvpn.body)}`);
      const credentials = {
        username: `wg${randomBytes(4).toString("hex")}`,
        password: `pw-${randomBytes(8).toString("hex")}`,
      };
      const project = await cluster.request("POST", "/api/v1/projects", {
        name: credentials.username,
        ...credentials,
        strategy: "round_robin",
      });
      if (project.status !== 201) throw new Error(`Project: ${JSON.stringify(project.body)}`);
      const projectId: string = project.body.id;
      const connector = await cluster.request("POST", `/api/v1/projects/${projectId}/connectors`, {
        name: "static",
        kind: "static",
        // Checked through each exit against the origin, by the name only the exits resolve.
        healthcheck_url: `http://${ORIGIN_NAME}:${origin.port}/ip`,
      });
      if (connector.status !== 201) throw new Error(`Connector: ${JSON.stringify(connector.body)}`);
      const proxyIds: string[] = [];
      for (const [index, tinyproxy] of tinyproxies.entries()) {
        const proxy = await cluster.request("POST", `/api/v1/projects/${projectId}/proxies`, {
          connector_id: connector.body.id,
          url: tinyproxy.url,
          country: COUNTRIES[index],
        });
        if (proxy.status !== 201) throw new Error(`Proxy: ${JSON.stringify(proxy.body)}`);
        proxyIds.push(proxy.body.id);
      }
      await waitForStatuses(cluster, proxyIds, "healthy");
      return new TunnelBed(lock, {
        cluster,
        upstreams,
        devices,
        origin,
        tlsOrigin,
        tinyproxies,
        projectId,
        credentials,
        gatewayEnv: {
          OCTOPROX_WIREGUARD_ENABLED: "true",
          OCTOPROX_WIREGUARD_INTERFACE: `oxwg${randomBytes(2).toString("hex")}`,
          ...(options.openvpn
            ? {
              OCTOPROX_OPENVPN_ENABLED: "true",
              OCTOPROX_OPENVPN_INTERFACE: `oxov${randomBytes(2).toString("hex")}`,
            }
            : {}),
          OCTOPROX_TUNNEL_TRANSPARENT_PORT: String(await freePort()),
          OCTOPROX_TUNNEL_DNS_PORT: String(await freePort()),
          OCTOPROX_TUNNEL_STATUS_INTERVAL: interval,
          ...options.gatewayEnv,
        },
      });
    } catch (error) {
      await Promise.allSettled(made.map((part) => part.close()));
      await lock.close();
      throw error;
    }
  }

  /**
   * Starts (again) the gateway with the endpoints; resolves once the tunnel plane attached to
   * each endpoint's interface.
   */
  async startGateway(): Promise<Gateway> {
    const gateway = await this.cluster.startGateway({ env: this.gatewayEnv });
    const interfaces = [
      this.gatewayEnv.OCTOPROX_WIREGUARD_INTERFACE,
      this.gatewayEnv.OCTOPROX_OPENVPN_INTERFACE,
    ].filter((name) => name !== undefined);
    await this.cluster.until(
      () =>
        interfaces.every((name) =>
          gateway.logs().some((line) =>
            line.msg === "Tunnel plane attached" && line.interface === name
          )
        ),
      { timeoutMs: 30_000, message: "the gateway's tunnel plane to attach" },
    );
    this.gateway = gateway;
    return gateway;
  }

  /** The device's `.conf`, as the API hands it out. */
  async deviceConfig(id: string): Promise<string> {
    const answer = await this.cluster.request(
      "GET",
      `/api/v1/projects/${this.projectId}/wireguard/peers/${id}/config`,
    );
    if (answer.status !== 200) throw new Error(`Config: ${answer.status} ${String(answer.body)}`);
    return String(answer.body);
  }

  /** A device made through the API and brought up in the devices' namespace from its config. */
  async addDevice(
    fields: Record<string, unknown> & { name: string },
  ): Promise<{ id: string; device: WireguardDevice }> {
    const created = await this.cluster.request(
      "POST",
      `/api/v1/projects/${this.projectId}/wireguard/peers`,
      fields,
    );
    if (created.status !== 201) throw new Error(`Device: ${JSON.stringify(created.body)}`);
    const device = await startWireguardDevice(
      this.devices,
      await this.deviceConfig(created.body.id),
    );
    this.#started.push(device);
    return { id: created.body.id, device };
  }

  /** The device's `.ovpn`, as the API hands it out. */
  async openvpnProfile(id: string): Promise<string> {
    const answer = await this.cluster.request(
      "GET",
      `/api/v1/projects/${this.projectId}/openvpn/peers/${id}/config`,
    );
    if (answer.status !== 200) throw new Error(`Profile: ${answer.status} ${String(answer.body)}`);
    return String(answer.body);
  }

  /** An OpenVPN device made through the API, connected from the devices' namespace. */
  async addOpenvpnDevice(
    fields: Record<string, unknown> & { name: string },
  ): Promise<{ id: string; device: OpenvpnDevice }> {
    const created = await this.cluster.request(
      "POST",
      `/api/v1/projects/${this.projectId}/openvpn/peers`,
      fields,
    );
    if (created.status !== 201) throw new Error(`Device: ${JSON.stringify(created.body)}`);
    const device = await this.connectOpenvpn(await this.openvpnProfile(created.body.id));
    return { id: created.body.id, device };
  }

  /** Connects a client from `profile` in the devices' namespace (closed with the bed). */
  async connectOpenvpn(
    profile: string,
    options: Partial<OpenvpnDeviceOptions> = {},
  ): Promise<OpenvpnDevice> {
    const device = await startOpenvpnDevice(this.devices, profile, {
      dns: OPENVPN_GATEWAY_ADDRESS,
      ...options,
    });
    this.#started.push(device);
    return device;
  }

  /** curl inside the devices' namespace: its output, or its failure. */
  curl(url: string, extra: readonly string[] = []): Promise<string> {
    return this.devices.exec("curl", ["-sS", "--max-time", "10", ...extra, url]);
  }

  /** Closes everything, every step whatever an earlier one threw; rethrows the first error. */
  async close(): Promise<void> {
    const steps = await Promise.allSettled([
      ...this.#started.map((device) => device.close()),
      this.cluster.close(),
      ...[this.origin, this.tlsOrigin, ...this.tinyproxies].map((server) => server.close()),
    ]);
    // A namespace left behind would hold its addresses against the next run.
    await Promise.allSettled([this.upstreams.close(), this.devices.close()]);
    // The next bed may take the addresses now.
    await this.#lock.close().catch(() => {});
    const failed = steps.find((step) => step.status === "rejected");
    if (failed !== undefined) throw failed.reason;
  }
}
