/**
 * One host normaliser for every side: the routing rules and the destination guard, the egress
 * guard's calls and metering's per-host counts all see a host the same way.
 */

/**
 * Lower case, without IPv6 brackets or a root dot (a lone "." is kept): how domain rules, the
 * guards and metering see a host.
 */
export function normaliseHost(host: string): string {
  let h = host.toLowerCase();
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1);
  if (h.endsWith(".") && h.length > 1) h = h.slice(0, -1);
  return h;
}
