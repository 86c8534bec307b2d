/**
 * The WireGuard endpoint's text: the `wg syncconf` config it applies (keys checked first, so a
 * value can never add a line of its own), the interface's address from the device subnet, and
 * the peers `wg show dump` reports. Runtime-neutral.
 */
import type { FeedTunnelDevice, FeedWireguard } from "../../shared/feed/models.ts";
import { formatIPv4, parseCidr } from "../../shared/net/ip.ts";

/** A WireGuard key as `wg` writes it: 32 bytes, base64. */
const KEY = /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/;

export function isWireguardKey(text: string): boolean {
  return KEY.test(text);
}

/** The interface's address: the subnet's first host, with the subnet's length. */
export function gatewayAddress(subnet: string): { address: string; bits: number } {
  const cidr = parseCidr(subnet);
  if (cidr.family !== 4) throw new Error(`WireGuard subnet ${subnet} is not IPv4`);
  const size = 2 ** (32 - cidr.bits);
  const network = cidr.value - (cidr.value % size);
  return { address: formatIPv4(network + 1), bits: cidr.bits };
}

/** The `wg syncconf` text: the identity and one peer per device, keys checked first. */
export function wireguardConfig(
  identity: FeedWireguard,
  listenPort: number,
  devices: readonly FeedTunnelDevice[],
): string {
  if (!isWireguardKey(identity.private_key)) {
    throw new Error("The WireGuard private key is not a key");
  }
  const lines = [
    "[Interface]",
    `PrivateKey = ${identity.private_key}`,
    `ListenPort = ${listenPort}`,
  ];
  for (const device of devices) {
    if (device.public_key === null || !isWireguardKey(device.public_key)) continue;
    if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(device.address)) continue;
    lines.push("", "[Peer]", `PublicKey = ${device.public_key}`);
    if (device.preshared_key !== null && isWireguardKey(device.preshared_key)) {
      lines.push(`PresharedKey = ${device.preshared_key}`);
    }
    lines.push(`AllowedIPs = ${device.address}/32`);
  }
  return lines.join("\n") + "\n";
}

export interface PeerStatus {
  publicKey: string;
  /** Epoch ms of its latest handshake; 0 when it never made one. */
  latestHandshakeMs: number;
  receivedBytes: number;
  sentBytes: number;
}

/** `wg show <if> dump`: the interface's line, then one line per peer, tab-separated. */
export function parsePeerDump(dump: string): PeerStatus[] {
  const peers: PeerStatus[] = [];
  for (const line of dump.split("\n").slice(1)) {
    const fields = line.split("\t");
    if (fields.length < 8) continue;
    peers.push({
      publicKey: fields[0],
      latestHandshakeMs: Number(fields[4]) * 1000,
      receivedBytes: Number(fields[5]),
      sentBytes: Number(fields[6]),
    });
  }
  return peers;
}
