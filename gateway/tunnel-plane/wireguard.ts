/**
 * The WireGuard endpoint: the gateway's tunnel interface, its identity and its peers (the
 * enabled WireGuard devices of the feed). The kernel's WireGuard is used where the kernel has it;
 * otherwise `wireguard-go` runs the interface on /dev/net/tun, supervised: an exit the gateway did
 * not ask for is logged and the interface made again after a back-off (5 s, doubling to 60 s).
 *
 * Every gateway presents the install's one key pair, and its interface has the subnet's first
 * host as its address, so a device's config works against any gateway a balancer sends it to.
 * Peers are set with `wg syncconf`, which keeps the sessions of peers that did not change: an
 * edit of one device never interrupts the others. A peer removed (a device deleted or disabled)
 * can send nothing more from the moment its entry goes.
 */
import type { FeedTunnelDevice, FeedWireguard } from "../../shared/feed/models.ts";
import {
  gatewayAddress,
  parsePeerDump,
  type PeerStatus,
  wireguardConfig,
} from "./wireguard-config.ts";
import { Serial } from "../../shared/async/serial.ts";
import { sleep } from "../../shared/async/sleep.ts";
import { RestartBackoff } from "./restart.ts";
import type { Logger } from "../base/log.ts";
import type { CommandRunner } from "./command-runner.ts";

/** How long `wireguard-go` may take to make its interface. */
const INTERFACE_WAIT_MS = 5_000;

export interface WireguardEndpointOptions {
  interface: string;
  /** OCTOPROX_WIREGUARD_LISTEN_PORT; undefined: the identity's `listen_port`. */
  listenPort: number | undefined;
  runner: CommandRunner;
  logger: Logger;
  /**
   * Called once the interface is up (again, after a restart, or on a new subnet): the plane
   * attaches to it at `address`, the first host of `subnet`.
   */
  onUp(address: string, subnet: string): Promise<void>;
}

export class WireguardEndpoint {
  readonly #o: WireguardEndpointOptions;
  #identity: FeedWireguard | undefined;
  #devices: readonly FeedTunnelDevice[] = [];
  #userspace: Deno.ChildProcess | undefined;
  #up = false;
  /** The subnet the plane was last attached on, for the interface that is up. */
  #attached: string | undefined;
  #stopping = false;
  readonly #backoff = new RestartBackoff();
  #restarting: Promise<void> | undefined;
  /** One change at a time: an apply waits for the one under way. */
  readonly #applying = new Serial();

  constructor(options: WireguardEndpointOptions) {
    this.#o = options;
  }

  get up(): boolean {
    return this.#up;
  }

  /**
   * Brings the interface to `identity` and `devices`: made the first time, its address, MTU and
   * peers changed after. Rejects when a command failed (the caller logs it; the next feed tries
   * again).
   */
  apply(identity: FeedWireguard, devices: readonly FeedTunnelDevice[]): Promise<void> {
    return this.#applying.run(() => this.#apply(identity, devices));
  }

  async #apply(identity: FeedWireguard, devices: readonly FeedTunnelDevice[]): Promise<void> {
    if (this.#stopping) return;
    const previous = this.#identity;
    this.#identity = identity;
    this.#devices = devices;
    if (!this.#up) {
      this.#attached = undefined;
      await this.#create();
      await this.#configure(identity, undefined);
      this.#up = true;
      this.#backoff.reset();
    } else {
      await this.#configure(identity, previous);
    }
    // Attached once per interface and subnet; an attach that failed (a port taken) is tried
    // again by the next apply.
    if (this.#attached !== identity.subnet) {
      await this.#o.onUp(gatewayAddress(identity.subnet).address, identity.subnet);
      this.#attached = identity.subnet;
    }
  }

  /** Peers and keys; the address and MTU when they changed (or the first time). */
  async #configure(identity: FeedWireguard, previous: FeedWireguard | undefined): Promise<void> {
    const iface = this.#o.interface;
    const runner = this.#o.runner;
    const port = this.#o.listenPort ?? identity.listen_port;
    await runner.run(
      "wg",
      ["syncconf", iface, "/dev/stdin"],
      wireguardConfig(identity, port, this.#devices),
    );
    if (previous === undefined || previous.subnet !== identity.subnet) {
      const { address, bits } = gatewayAddress(identity.subnet);
      await runner.run("ip", ["address", "flush", "dev", iface]);
      await runner.run("ip", ["address", "add", `${address}/${bits}`, "dev", iface]);
    }
    if (previous === undefined || previous.mtu !== identity.mtu) {
      await runner.run("ip", ["link", "set", iface, "mtu", String(identity.mtu), "up"]);
    }
  }

  /** Makes the interface: the kernel's WireGuard, else `wireguard-go`. */
  async #create(): Promise<void> {
    const iface = this.#o.interface;
    const runner = this.#o.runner;
    // A run that ended without its stop left the interface behind: it is this gateway's.
    await runner.run("ip", ["link", "del", iface]).catch(() => {});
    try {
      await runner.run("ip", ["link", "add", iface, "type", "wireguard"]);
      return;
    } catch (error) {
      this.#o.logger.info("No kernel WireGuard: running wireguard-go", {
        interface: iface,
        error: error instanceof Error ? error.message : String(error),
      });
    }
    const child = new Deno.Command("wireguard-go", {
      args: ["-f", iface],
      // Without this, wireguard-go on a kernel of 5.6 or later refuses to run at all.
      env: { WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD: "1" },
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    this.#userspace = child;
    child.status.then((status) => this.#exited(child, status.code));
    const deadline = Date.now() + INTERFACE_WAIT_MS;
    for (;;) {
      try {
        await runner.run("ip", ["link", "show", iface]);
        return;
      } catch (error) {
        if (Date.now() >= deadline) throw error;
        await sleep(50);
      }
    }
  }

  #exited(child: Deno.ChildProcess, code: number): void {
    if (this.#userspace !== child) return;
    this.#userspace = undefined;
    this.#up = false;
    if (this.#stopping) return;
    this.#o.logger.error("wireguard-go exited; the WireGuard interface is made again", {
      interface: this.#o.interface,
      exit_code: code,
      retry_in_ms: this.#backoff.nextMs,
    });
    this.#restarting ??= this.#restart();
  }

  async #restart(): Promise<void> {
    while (!this.#stopping && !this.#up) {
      await sleep(this.#backoff.advance());
      const identity = this.#identity;
      if (this.#stopping || identity === undefined) break;
      await this.apply(identity, this.#devices).catch((error) => {
        this.#o.logger.error("The WireGuard interface could not be made again", {
          interface: this.#o.interface,
          error: error instanceof Error ? error.message : String(error),
        });
      });
    }
    this.#restarting = undefined;
  }

  /** Each peer's latest handshake and traffic (empty while the interface is down). */
  async peers(): Promise<PeerStatus[]> {
    if (!this.#up) return [];
    return parsePeerDump(await this.#o.runner.run("wg", ["show", this.#o.interface, "dump"]));
  }

  /** Removes the interface (and stops wireguard-go). Safe twice; never rejects. */
  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    await this.#applying.settled();
    this.#up = false;
    const child = this.#userspace;
    this.#userspace = undefined;
    await this.#o.runner.run("ip", ["link", "del", this.#o.interface]).catch(() => {});
    if (child !== undefined) {
      try {
        child.kill("SIGTERM");
      } catch {
        // Gone with its interface.
      }
      await child.status.catch(() => undefined);
    }
  }
}
