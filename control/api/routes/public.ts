/** Public routes outside the admin API proper: the echo and the placeholder home page. */
import { callerIp } from "../../node/echo.ts";
import { defineRoute, type Route } from "../registry.ts";

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
