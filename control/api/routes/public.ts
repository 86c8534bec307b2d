/** Public routes outside the admin API proper: the echo and the placeholder home page. */
import { getConnInfo } from "@hono/node-server/conninfo";
import type { Context } from "hono";
import { type AppEnv, nodeBindings } from "../context.ts";
import { defineRoute, type Route } from "../registry.ts";

/** The address of the socket the request came in on; forwarding headers are not believed. */
function callerIp(c: Context<AppEnv>): string | null {
  // Without a Node socket (a test's app.request) there is no caller address to tell.
  if (!nodeBindings(c)?.incoming) return null;
  const address = getConnInfo(c).remote.address ?? null;
  // An IPv4 client of a dual-stack listener shows as ::ffff:a.b.c.d.
  return address?.startsWith("::ffff:") && address.includes(".") ? address.slice(7) : address;
}

const HOME_PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Octoprox</title></head>
<body>
<h1>Octoprox</h1>
<p>The dashboard comes in a later release. The admin API is served under
<code>/api/v1</code>; its description is at
<a href="/api/v1/openapi.json">/api/v1/openapi.json</a>.</p>
</body>
</html>
`;

export function publicRoutes(): Route[] {
  return [
    defineRoute({
      method: "get",
      path: "/echo",
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
    defineRoute({
      method: "get",
      path: "/",
      tag: "public",
      summary: "Placeholder home page",
      access: "public",
      responses: { 200: "A small HTML page linking the API description" },
      handler({ c }) {
        return c.html(HOME_PAGE);
      },
    }),
  ];
}
