/**
 * The echo: the caller's address as the socket saw it, for health checks through proxies. The
 * api answers it (control/api/routes/public.ts); workers ask it at the address operators
 * publish (OCTOPROX_PUBLIC_URL, control/jobs/health-echo.ts).
 */
import { getConnInfo } from "@hono/node-server/conninfo";
import type { Context } from "hono";
import type { IncomingMessage } from "node:http";

/** The address of the socket the request came in on; forwarding headers are not believed. */
export function callerIp(c: Context): string | null {
  // Without a Node socket (a test's app.request) there is no caller address to tell.
  const incoming = (c.env as { incoming?: unknown } | undefined)?.incoming;
  if (!incoming) return null;
  return socketIp(getConnInfo(c).remote.address);
}

/** A socket's remote address as the echo answers it. */
export function socketIp(address: string | undefined): string | null {
  // An IPv4 client of a dual-stack listener shows as ::ffff:a.b.c.d.
  if (address === undefined) return null;
  return address.startsWith("::ffff:") && address.includes(".") ? address.slice(7) : address;
}

/** The echo's answer to a request on a Node socket. */
export function echoAnswer(request: IncomingMessage): { ip: string | null } {
  return { ip: socketIp(request.socket.remoteAddress) };
}
