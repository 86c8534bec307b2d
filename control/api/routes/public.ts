/** Public routes outside the admin API proper: the echo (the dashboard is web-static.ts). */
import { callerIp, echoAnswer, echoReply, type PlaceOf } from "../../core/echo.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import * as v from "valibot";

/** Where the api answers the echo health checks ask. */
export const ECHO_PATH = "/echo";

/**
 * The echo answered before the app (HttpServer's fastGets), the same answer as the route's:
 * health checks ask it hundreds of times a second, on the worker's event loop in a single
 * instance, where the app's request frame cost more than the answer (no request id, no access
 * line).
 */
export function echoFastGets(placeOf?: PlaceOf) {
  return {
    [ECHO_PATH]: (request: Parameters<typeof echoAnswer>[0]) => echoAnswer(request, placeOf),
  };
}

const EchoAnswer = v.strictObject({
  ip: v.nullable(v.string()),
  nonce: v.optional(v.string()),
  country: v.optional(v.nullable(v.string())),
  region: v.optional(v.nullable(v.string())),
  city: v.optional(v.nullable(v.string())),
  asn: v.optional(v.nullable(v.number())),
});

export function publicRoutes(placeOf?: PlaceOf): Route[] {
  return [
    defineRoute({
      method: "get",
      path: ECHO_PATH,
      tag: "public",
      summary: "The caller's IP address, and where the IP databases place it",
      description: "For health checks and preflight through proxies: the address the request " +
        "arrived from, as the socket saw it (X-Forwarded-For and similar headers are ignored), " +
        "the `nonce` query parameter repeated (printable, at most 128 characters), and the " +
        "country, region, city and ASN the databases in force give the address, when they " +
        "place it.",
      access: "public",
      responses: { 200: answer("`{ip, nonce?, country?, region?, city?, asn?}`", EchoAnswer) },
      handler({ c }) {
        return c.json(echoReply(callerIp(c), c.req.query("nonce"), placeOf));
      },
    }),
  ];
}
