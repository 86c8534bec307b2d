/**
 * The admin API: every route of the registry under /api/v1, the public echo and home page, and
 * the probes at the root, then the dashboard (web-static.ts) as the catch-all. Each request runs inside its request context (so every log line names
 * its request id), answers with X-Request-ID, and leaves one access log line.
 */
import { randomUUID } from "node:crypto";
import { Hono } from "hono";
import { requestContext } from "../core/logging.ts";
import { probeRoutes } from "./probes.ts";
import { authorize } from "./auth.ts";
import { Extraction } from "../provider-api/extraction/extraction.ts";
import "./context.ts";
import { presentedKey } from "./distribution-auth.ts";
import { callerIp } from "../core/echo.ts";
import { withWriterSlot } from "../../db/actor.ts";
import type { ApiDeps } from "./deps.ts";
import { errorResponse, notFoundResponse } from "./errors.ts";
import { buildOpenApiDocument } from "./openapi.ts";
import { mountWeb } from "./web-static.ts";
import { defineRoute, mountRoutes, type Route } from "./registry.ts";
import { authRoutes } from "./routes/auth.ts";
import { alertRoutes } from "./routes/alerts.ts";
import { configRoutes } from "./routes/config.ts";
import { backupRoutes } from "./routes/backup.ts";
import { providerRoutes } from "./routes/providers.ts";
import { connectorRoutes } from "./routes/connectors.ts";
import { credentialRoutes } from "./routes/credentials.ts";
import { distributionKeyRoutes } from "./routes/distribution-keys.ts";
import { extractionRoutes } from "./routes/extraction.ts";
import { geoRoutes } from "./routes/geo.ts";
import { internalGeoRoutes } from "./internal-geo.ts";
import { metricsRoutes } from "./routes/metrics.ts";
import { mitmCaptureRoutes } from "./routes/mitm-captures.ts";
import { geoExitRoutes } from "./routes/geo-exits.ts";
import { auditRoutes } from "./routes/audit.ts";
import { projectRoutes } from "./routes/projects.ts";
import { blockRuleRoutes } from "./routes/block-rules.ts";
import { domainRoutes } from "./routes/domains.ts";
import { caCertificateRoutes } from "./routes/ca-certificate.ts";
import { proxyRoutes } from "./routes/proxies.ts";
import { ECHO_PATH, publicRoutes } from "./routes/public.ts";
import { routingPreviewRoutes } from "./routes/routing-preview.ts";
import { sequenceRoutes } from "./routes/sequences.ts";
import { systemRoutes } from "./routes/system.ts";
import { tokenRoutes } from "./routes/tokens.ts";
import { userRoutes } from "./routes/users.ts";
import { wireguardRoutes } from "./routes/wireguard.ts";
import { openvpnRoutes } from "./routes/openvpn.ts";

/** A request id we take from the client: short and of safe characters, else we make one. */
const SANE_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

export const OPENAPI_PATH = "/api/v1/openapi.json";

/** Every route of the app, in mount order. */
export function apiRoutes(deps: ApiDeps): Route[] {
  const extraction = deps.extraction ?? new Extraction(deps);
  const routes: Route[] = [
    ...publicRoutes(deps.echoPlaces?.placeOf),
    ...authRoutes(deps),
    ...tokenRoutes(deps),
    ...userRoutes(deps),
    // Before the projects': their `/projects/:id` would take `ca-certificate` for an id.
    ...caCertificateRoutes(deps),
    ...projectRoutes(deps),
    ...blockRuleRoutes(),
    ...domainRoutes(deps),
    ...distributionKeyRoutes(deps),
    ...extractionRoutes(extraction),
    ...credentialRoutes(deps),
    ...connectorRoutes(deps),
    ...providerRoutes(deps),
    ...proxyRoutes(deps),
    ...routingPreviewRoutes(deps),
    ...sequenceRoutes(deps),
    ...metricsRoutes(deps),
    ...mitmCaptureRoutes(deps),
    ...geoExitRoutes(deps),
    ...systemRoutes(deps),
    ...geoRoutes(deps),
    ...configRoutes(deps),
    ...backupRoutes(deps),
    ...alertRoutes(deps),
    ...auditRoutes(deps),
    ...wireguardRoutes(deps),
    ...openvpnRoutes(deps),
  ];
  let document: Record<string, unknown> | undefined;
  routes.push(defineRoute({
    method: "get",
    path: OPENAPI_PATH,
    tag: "public",
    summary: "This API's OpenAPI 3.1 description",
    access: "public",
    responses: { 200: "The OpenAPI document" },
    handler({ c }) {
      // Built on first ask from the final list, this route included.
      document ??= buildOpenApiDocument(routes, deps.process.version);
      return c.json(document);
    },
  }));
  return routes;
}

/**
 * What the access log says of a path: an extraction lease's id is per-extraction detail, which
 * no log line carries.
 */
export function loggedPath(path: string): string {
  return path.replace(/\/extract\/[^/]+\//, "/extract/:lease/");
}

export function createApp(appDeps: ApiDeps): Hono {
  const deps: ApiDeps & { extraction: Extraction } = {
    ...appDeps,
    extraction: appDeps.extraction ?? new Extraction(appDeps),
  };
  const app = new Hono();
  const logger = deps.logger;

  app.use(async (c, next) => {
    const offered = c.req.header("x-request-id");
    const requestId = offered !== undefined && SANE_REQUEST_ID.test(offered)
      ? offered
      : randomUUID();
    c.set("requestId", requestId);
    c.header("X-Request-ID", requestId);
    const startedMs = performance.now();
    await requestContext.run({ requestId }, async () => {
      // Authentication names the writer of the request's transactions (db/actor.ts).
      await withWriterSlot(next);
      // The echo is health-check traffic, hundreds a second while checks run: a line each would
      // cost the process more than answering it.
      logger[c.req.path === ECHO_PATH ? "debug" : "info"]({
        method: c.req.method,
        path: loggedPath(c.req.path),
        status: c.res.status,
        duration_ms: Math.round((performance.now() - startedMs) * 10) / 10,
      }, "request");
    });
    // An answer built outside c.json (a thrown error's) still carries the id.
    if (!c.res.headers.has("X-Request-ID")) c.res.headers.set("X-Request-ID", requestId);
  });

  app.onError((error, c) => errorResponse(error, c, logger));
  app.notFound((c) => notFoundResponse(c));

  app.route("/", probeRoutes(deps));
  app.route("/", internalGeoRoutes(deps));
  mountRoutes(app, apiRoutes(deps), {
    authorize: async (c, access) => {
      if (access !== "distribution") return await authorize(deps, c, access);
      // The extraction's own check: a distribution key of the project in the path, nothing else.
      const projectId = (c.req.param("id") ?? "").toLowerCase();
      c.set(
        "distribution",
        await deps.extraction.keys.authenticate(presentedKey(c), callerIp(c), projectId),
      );
      return undefined;
    },
  });
  // Last: the dashboard's files, and its pages for any other GET outside /api.
  mountWeb(app, deps.webDir);
  return app;
}
