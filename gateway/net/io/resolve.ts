/**
 * How the gateway resolves a destination's name, for the destination guard: the addresses the
 * system's hosts file gives it, then every A and AAAA address through the system's nameservers
 * (Deno.resolveDns reads /etc/resolv.conf, never /etc/hosts), or through one given nameserver
 * (the tests' own DNS server). The hosts file is read because an upstream on the same machine
 * (or sharing its files) resolves through it: a name it maps inward (the machine's own name, a
 * container's `extra_hosts`) must be refused here, not found open for want of a DNS answer.
 */
import type { Resolve } from "../../../shared/routing/destination-guard.ts";
import { parseHostsFile } from "../../../shared/routing/hosts-file.ts";

export interface NameServer {
  ipAddr: string;
  port: number;
}

/** Where the system resolver reads names before DNS (the gateway's permissions include it). */
export const HOSTS_FILE = "/etc/hosts";

/** The hosts file is read again at most this often, so an edit is seen without a restart. */
const HOSTS_REREAD_MS = 5_000;

/** Every address a name resolves to (the hosts file's, then A, then AAAA); none when none. */
export function dnsResolver(nameServer?: NameServer, hostsFile: string = HOSTS_FILE): Resolve {
  const options = nameServer === undefined ? undefined : { nameServer };
  let hosts: Map<string, string[]> = new Map();
  let hostsReadAtMs = Number.NEGATIVE_INFINITY;
  let reading: Promise<void> | undefined;
  const readHosts = (): Promise<void> => {
    if (Date.now() - hostsReadAtMs < HOSTS_REREAD_MS) return Promise.resolve();
    if (reading !== undefined) return reading;
    reading = Deno.readTextFile(hostsFile).then(
      (text) => {
        hosts = parseHostsFile(text);
      },
      // No hosts file (or no permission to read it): DNS alone, as before.
      () => {
        hosts = new Map();
      },
    ).finally(() => {
      hostsReadAtMs = Date.now();
      reading = undefined;
    });
    return reading;
  };
  return async (host) => {
    const name = host.toLowerCase().replace(/\.$/, "");
    const [, v4, v6] = await Promise.allSettled([
      readHosts(),
      Deno.resolveDns(host, "A", options),
      Deno.resolveDns(host, "AAAA", options),
    ]);
    return [
      ...(hosts.get(name) ?? []),
      ...(v4.status === "fulfilled" ? v4.value : []),
      ...(v6.status === "fulfilled" ? v6.value : []),
    ];
  };
}
