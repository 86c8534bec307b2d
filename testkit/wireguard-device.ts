/**
 * A WireGuard device in a namespace of its own (testkit/netns.ts), brought up from the `.conf`
 * the API hands out, as `wg-quick` would: `wireguard-go` makes the interface (the kernel here has
 * no WireGuard), `wg setconf` takes the keys, peer and endpoint, and the config's Address, MTU
 * and DNS become the interface's address, its MTU, a default route through it and the
 * namespace's resolver. Then programs inside (curl) reach the world only through the tunnel.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Netns } from "./netns.ts";
import { waitUntil } from "./wait.ts";

export interface DeviceConfig {
  privateKey: string;
  address: string;
  dns: string;
  mtu: number;
  publicKey: string;
  presharedKey: string | undefined;
  allowedIps: string;
  endpoint: string;
  keepalive: number | undefined;
}

/** Reads a `.conf` as wg-quick does (section, `Key = value` lines, `#` comments). */
export function parseDeviceConfig(text: string): DeviceConfig {
  const sections: Record<string, Record<string, string>> = {};
  let section = "";
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*$/, "").trim();
    if (line === "") continue;
    const header = /^\[(\w+)\]$/.exec(line);
    if (header) {
      section = header[1].toLowerCase();
      sections[section] ??= {};
      continue;
    }
    const eq = line.indexOf("=");
    if (eq === -1) throw new Error(`Not a config line: ${line}`);
    (sections[section] ??= {})[line.slice(0, eq).trim().toLowerCase()] = line.slice(eq + 1).trim();
  }
  const iface = sections.interface ?? {};
  const peer = sections.peer ?? {};
  const need = (part: Record<string, string>, key: string) => {
    const value = part[key];
    if (value === undefined) throw new Error(`The config has no ${key}`);
    return value;
  };
  return {
    privateKey: need(iface, "privatekey"),
    address: need(iface, "address"),
    dns: need(iface, "dns"),
    mtu: Number(iface.mtu ?? 1420),
    publicKey: need(peer, "publickey"),
    presharedKey: peer.presharedkey,
    allowedIps: need(peer, "allowedips"),
    endpoint: need(peer, "endpoint"),
    keepalive: peer.persistentkeepalive === undefined
      ? undefined
      : Number(peer.persistentkeepalive),
  };
}

export interface WireguardDevice {
  readonly interface: string;
  readonly config: DeviceConfig;
  /** The device's latest handshake with the gateway (epoch seconds; 0: none yet). */
  latestHandshake(): Promise<number>;
  close(): Promise<void>;
}

/** Brings the device up in `ns` from `configText`; resolves once the interface is configured. */
export async function startWireguardDevice(
  ns: Netns,
  configText: string,
): Promise<WireguardDevice> {
  const config = parseDeviceConfig(configText);
  const iface = `wgd${randomBytes(2).toString("hex")}`;
  const child = ns.spawn("wireguard-go", ["-f", iface], {
    WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD: "1",
  });
  let output = "";
  child.stdout!.setEncoding("utf8").on("data", (text: string) => (output += text));
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (output += text));
  await waitUntil(async () => {
    if (child.exitCode !== null) throw new Error(`wireguard-go exited: ${output}`);
    return await ns.exec("ip", ["link", "show", iface]).then(() => true, () => false);
  }, { timeoutMs: 10_000, message: "the device's WireGuard interface" });
  // wg takes the keys, peer and endpoint; Address, DNS and MTU are wg-quick's, done here.
  const wgConfig = [
    "[Interface]",
    `PrivateKey = ${config.privateKey}`,
    "",
    "[Peer]",
    `PublicKey = ${config.publicKey}`,
    ...(config.presharedKey === undefined ? [] : [`PresharedKey = ${config.presharedKey}`]),
    `AllowedIPs = ${config.allowedIps}`,
    `Endpoint = ${config.endpoint}`,
    ...(config.keepalive === undefined ? [] : [`PersistentKeepalive = ${config.keepalive}`]),
    "",
  ].join("\n");
  // A file, not stdin: Node's stdin pipe is a socket, which wg cannot open as a file.
  const folder = await mkdtemp(join(tmpdir(), "ox-wg-device-"));
  const file = join(folder, `${iface}.conf`);
  await writeFile(file, wgConfig, { mode: 0o600 });
  try {
    await ns.exec("wg", ["setconf", iface, file]);
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
  await ns.exec("ip", ["address", "add", config.address, "dev", iface]);
  await ns.exec("ip", ["link", "set", iface, "mtu", String(config.mtu), "up"]);
  await ns.exec("ip", ["route", "add", "default", "dev", iface]);
  await ns.resolver(config.dns);
  return {
    interface: iface,
    config,
    async latestHandshake() {
      const out = await ns.exec("wg", ["show", iface, "latest-handshakes"]);
      return Number(out.trim().split(/\s+/)[1] ?? 0);
    },
    async close() {
      child.kill("SIGTERM");
      await ns.exec("ip", ["link", "del", iface]).catch(() => undefined);
    },
  };
}
