/**
 * Strict mode: a gateway whose listeners bind beyond loopback (OCTOPROX_GATEWAY_HOST is not a
 * loopback address) refuses to serve a project anyone can use without a password, one whose
 * password-less blocks hold every IPv4 or every IPv6 address within its allowed blocks
 * (shared/net/cidr-set.ts `openToAnyone`). Such a project in the first feed stops the gateway at
 * start (app/feed-strict-mode.ts); one a later feed brings is served with a password only
 * (client-address.ts refuses its password-less requests with 403). Runtime-neutral.
 */
import { clientIp } from "../../shared/net/cidr-set.ts";
import type { ProjectEntry, RoutingSnapshot } from "../../shared/routing/snapshot.ts";

/**
 * Whether listeners bound to `host` take connections from other machines: anything but a
 * loopback literal (127.0.0.0/8, ::1) or `localhost`; a wildcard or another name does.
 */
export function listensBeyondLoopback(host: string): boolean {
  if (host.toLowerCase() === "localhost") return false;
  const ip = clientIp(host);
  if (ip === undefined) return true;
  if (ip.family === 4) return ip.value >>> 24 !== 127;
  return !(ip.words.slice(0, 7).every((word) => word === 0) && ip.words[7] === 1);
}

/** The snapshot's projects anyone can use without a password, by id. */
export function openProjects(snapshot: RoutingSnapshot): ProjectEntry[] {
  const open: ProjectEntry[] = [];
  for (const entry of snapshot.projectsById.values()) {
    if (entry.access.openToAnyone) open.push(entry);
  }
  return open;
}

/** How a log line names projects: `name (id)`, comma-separated. */
export function describeProjects(entries: readonly ProjectEntry[]): string {
  return entries.map((entry) => `${entry.project.name} (${entry.id})`).join(", ");
}
