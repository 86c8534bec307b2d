/** Public routes outside the admin API proper: the echo (the dashboard is web-static.ts). */
import { callerIp, echoAnswer } from "../../core/echo.ts";
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
export const ECHO_FAST_GETS = { [ECHO_PATH]: echoAnswer } as const;

export function publicRoutes(): Route[] {
  return [
    defineRoute({
      method: "get",
      path: ECHO_PATH,
      tag: "public",
      summary: "The caller's IP address",
      description: "For health checks through proxies: the address the request arrived from, " +
        "as the socket saw it. X-Forwarded-For and similar headers are ignored.",
      access: "public",
      responses: { 200: answer("`{ip}`", v.strictObject({ ip: v.nullable(v.string()) })) },
      handler({ c }) {
        return c.json({ ip: callerIp(c) });
      },
    }),
  ];
}
