/**
 * How the gateway resolves a destination's name, for the destination guard: every A and AAAA
 * address, through the system's nameservers (Deno.resolveDns reads /etc/resolv.conf, never
 * /etc/hosts), or through one given nameserver (the tests' own DNS server).
 */
import type { Resolve } from "../../core/guard.ts";

export interface NameServer {
  ipAddr: string;
  port: number;
}

/** Every address a name resolves to (A, then AAAA); none when it does not. */
export function dnsResolver(nameServer?: NameServer): Resolve {
  const options = nameServer === undefined ? undefined : { nameServer };
  return async (host) => {
    const [v4, v6] = await Promise.allSettled([
      Deno.resolveDns(host, "A", options),
      Deno.resolveDns(host, "AAAA", options),
    ]);
    return [
      ...(v4.status === "fulfilled" ? v4.value : []),
      ...(v6.status === "fulfilled" ? v6.value : []),
    ];
  };
}
