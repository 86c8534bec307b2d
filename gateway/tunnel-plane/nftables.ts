/**
 * The nftables table that turns a tunnel interface's traffic into the plane's: DNS (UDP 53) to
 * the resolver's port, every TCP connection to the transparent listener's, and any other UDP
 * refused with an ICMP port-unreachable, so an app falls back to TCP at once rather than wait.
 * Nothing a device sends is forwarded: the gateway is no router. One table per gateway
 * interface, replaced whole in one transaction (the table is made, deleted and made again in one
 * `nft -f`, which works whether it existed or not), and deleted when the endpoint stops.
 */
import type { CommandRunner } from "./command-runner.ts";

export interface TunnelRules {
  /** The tunnel interface the rules apply to. */
  interface: string;
  dnsPort: number;
  transparentPort: number;
}

/** The table's name: its interface's, so two gateways on one host never touch each other's. */
export function tableName(iface: string): string {
  return `octoprox_${iface.replace(/[^A-Za-z0-9_]/g, "_")}`;
}

export function tunnelRuleset(rules: TunnelRules): string {
  const table = tableName(rules.interface);
  const iif = JSON.stringify(rules.interface);
  return [
    `table inet ${table}`,
    `delete table inet ${table}`,
    `table inet ${table} {`,
    `  chain prerouting {`,
    `    type nat hook prerouting priority dstnat; policy accept;`,
    `    iifname ${iif} udp dport 53 redirect to :${rules.dnsPort}`,
    `    iifname ${iif} meta l4proto tcp redirect to :${rules.transparentPort}`,
    `  }`,
    `  chain input {`,
    `    type filter hook input priority filter; policy accept;`,
    `    iifname ${iif} udp dport ${rules.dnsPort} accept`,
    `    iifname ${iif} tcp dport ${rules.transparentPort} accept`,
    `    iifname ${iif} meta l4proto icmp accept`,
    `    iifname ${iif} meta l4proto udp reject`,
    `    iifname ${iif} drop`,
    `  }`,
    `  chain forward {`,
    `    type filter hook forward priority filter; policy accept;`,
    `    iifname ${iif} reject`,
    `  }`,
    `}`,
    "",
  ].join("\n");
}

export async function applyRules(runner: CommandRunner, rules: TunnelRules): Promise<void> {
  await runner.run("nft", ["-f", "-"], tunnelRuleset(rules));
}

/** Deletes the interface's table; one that is not there is nothing to delete. */
export async function removeRules(runner: CommandRunner, iface: string): Promise<void> {
  const table = tableName(iface);
  await runner.run("nft", ["-f", "-"], `table inet ${table}\ndelete table inet ${table}\n`);
}
