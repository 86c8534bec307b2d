/**
 * The echo: the caller's address as the socket saw it, for health checks through proxies.
 * Every control process answers it (the api as a documented route, controllers and workers
 * beside their probes), so a worker's default echo URL, its own port, answers too.
 */
import { getConnInfo } from "@hono/node-server/conninfo";
import type { Context } from "hono";

/** The address of the socket the request came in on; forwarding headers are not believed. */
export function callerIp(c: Context): string | null {
  // Without a Node socket (a test's app.request) there is no caller address to tell.
  const incoming = (c.env as { incoming?: unknown } | undefined)?.incoming;
  if (!incoming) return null;
  const address = getConnInfo(c).remote.address ?? null;
  // An IPv4 client of a dual-stack listener shows as ::ffff:a.b.c.d.
  return address?.startsWith("::ffff:") && address.includes(".") ? address.slice(7) : address;
}
