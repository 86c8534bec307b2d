/**
 * The echo: the caller's address as the socket saw it, for health checks through proxies. The
 * api answers it (control/api/routes/public.ts); workers ask it at the address operators
 * publish (OCTOPROX_PUBLIC_URL, control/jobs/health-echo.ts).
 */
import { getConnInfo } from "@hono/node-server/conninfo";
import type { Context } from "hono";
import type { IncomingMessage } from "node:http";
import type { GeoLocation } from "../../shared/geo/contract.ts";

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

/** Where the databases in force place an address; undefined when none does. */
export type PlaceOf = (ip: string) => GeoLocation | undefined;

/**
 * The echo's answer: the caller's address, the `nonce` it sent (so a check through a proxy
 * knows the answer is to its own request, not a cache's), and what attribution needs of the
 * address where the databases place it (its `endpoint` source).
 */
export interface EchoReply {
  ip: string | null;
  nonce?: string;
  country?: string | null;
  region?: string | null;
  city?: string | null;
  asn?: number | null;
}

/** A nonce as the echo repeats it: short, printable, or nothing. */
function readNonce(value: string | null | undefined): string | undefined {
  if (value === null || value === undefined) return undefined;
  return /^[\x21-\x7e]{1,128}$/.test(value) ? value : undefined;
}

export function echoReply(
  ip: string | null,
  nonce: string | null | undefined,
  placeOf?: PlaceOf,
): EchoReply {
  const reply: EchoReply = { ip };
  const repeated = readNonce(nonce);
  if (repeated !== undefined) reply.nonce = repeated;
  const place = ip === null || placeOf === undefined ? undefined : placeOf(ip);
  if (place !== undefined && place.country !== null) {
    reply.country = place.country;
    reply.region = place.region;
    reply.city = place.city;
    reply.asn = place.asn;
  }
  return reply;
}

/** The echo's answer to a request on a Node socket. */
export function echoAnswer(request: IncomingMessage, placeOf?: PlaceOf): EchoReply {
  const url = request.url ?? "";
  const query = url.indexOf("?");
  const nonce = query < 0 ? null : new URLSearchParams(url.slice(query + 1)).get("nonce");
  return echoReply(socketIp(request.socket.remoteAddress), nonce, placeOf);
}
