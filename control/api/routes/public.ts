/** Public routes outside the admin API proper: the echo (the dashboard is web-static.ts). */
import { callerIp } from "../../node/echo.ts";
import { defineRoute, type Route } from "../registry.ts";

/** Where the api answers the echo health checks ask. */
export const ECHO_PATH = "/echo";

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
      responses: { 200: "`{ip}`" },
      handler({ c }) {
        return c.json({ ip: callerIp(c) });
      },
    }),
  ];
}
