/** Proxies of a project: paged listing, one at a time, and the upload of a list. */
import { ConnectorKind, UserRole } from "../../../shared/roles.ts";
import {
  createProxy,
  deleteProxy,
  getProxy,
  listProxies,
  updateProxy,
  uploadProxies,
} from "../../services/proxies.ts";
import type { ApiDeps } from "../deps.ts";
import { recordAuditOperation } from "../../audit/note.ts";
import { lastCheckView, readLastChecks } from "../../services/health-view.ts";
import { liftQuarantine, quarantineView, readQuarantines } from "../../services/quarantines.ts";
import type { ProxyRow } from "../../services/proxies.ts";
import { presentProxy } from "../present.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import {
  ProxyAnswer,
  ProxyPageAnswer,
  StatusOkAnswer,
  UploadReportAnswer,
} from "../answers/proxies.ts";
import {
  CreateProxyBody,
  ListProxiesQuery,
  UpdateProxyBody,
  UploadQuery,
} from "../../model/proxies.ts";

const PROXIES = "/api/v1/projects/:id/proxies";

/** An upload of 100,000 lines is about 5 MB; this leaves room for long credentials. */
export const MAX_UPLOAD_BYTES = 32 * 1024 * 1024;

const PASSWORD_NOTE = "Answers never carry a proxy's password: `url` and `username` show the " +
  "login, `has_password` whether a password is set.";

export function proxyRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "get",
      path: PROXIES,
      tag: "proxies",
      summary: "List a project's proxies, a page at a time",
      description: "Ordered by `sort` (created, the default; status; country; status_changed) " +
        "in `direction` (asc, the default, or desc), ties by creation. Filters combine; " +
        "`search` matches part of the host. `last_checked_at` is the last health check " +
        `(null when none is known). ${PASSWORD_NOTE}`,
      access: UserRole.viewer,
      query: ListProxiesQuery,
      responses: { 200: answer("`{items, total, page, page_size}`", ProxyPageAnswer) },
      async handler({ c, params, query }) {
        const { items, total } = await listProxies(deps, params.id, {
          connectorId: query.connector_id,
          status: query.status,
          country: query.country,
          search: query.search,
        }, {
          offset: (query.page - 1) * query.page_size,
          limit: query.page_size,
          sort: query.sort,
          direction: query.direction,
        });
        const ids = items.map((row) => row.id);
        const [quarantines, checks] = await Promise.all([
          readQuarantines(deps, ids),
          readLastChecks(deps, ids),
        ]);
        const nowMs = Date.now();
        return c.json({
          items: items.map((row) =>
            presentProxy(
              row,
              quarantineView(quarantines.get(row.id), nowMs),
              lastCheckView(checks.get(row.id)),
            )
          ),
          total,
          page: query.page,
          page_size: query.page_size,
        });
      },
    }),
    defineRoute({
      method: "post",
      path: PROXIES,
      tag: "proxies",
      summary: "Add one proxy to a static connector",
      description: "`url` is `scheme://[user:pass@]host:port` with scheme http, https, socks4 " +
        "or socks5; user and password are percent-decoded; an IPv6 host goes in brackets. " +
        `New proxies start as \`initializing\`. ${PASSWORD_NOTE}`,
      access: UserRole.editor,
      body: CreateProxyBody,
      responses: {
        201: answer("The proxy", ProxyAnswer),
        400: "The connector already has this proxy, or is not a static connector of the project",
      },
      async handler({ c, body, params }) {
        const row = await createProxy(deps, params.id, {
          connectorId: body.connector_id,
          address: body.url,
          country: body.country,
          metadata: body.metadata,
        });
        // A new proxy has never taken a request, so it rests in no quarantine.
        return c.json(presentProxy(row, quarantineView(undefined, 0)), 201);
      },
    }),
    defineRoute({
      method: "post",
      path: `${PROXIES}/upload`,
      tag: "proxies",
      summary: "Upload a list of proxies to a static connector",
      description: "One `scheme://user:pass@host:port` a line, optionally followed by " +
        "whitespace and a country code; blank lines and lines starting with # are skipped. " +
        "Every good line lands in one transaction; each refused line is reported with its " +
        "number and reason, and lines the connector already has (or an earlier line named) " +
        "count as duplicates.",
      access: UserRole.editor,
      query: UploadQuery,
      textBody: {
        maxBytes: MAX_UPLOAD_BYTES,
        description: "The list, text/plain, at most 32 MB",
      },
      responses: {
        200: answer(
          "`{total_lines, added, duplicates, refused, errors: [{line, reason}], " +
            "duplicate_lines}`",
          UploadReportAnswer,
        ),
        400: "The connector is not a static connector of the project",
        413: "The body is larger than 32 MB",
      },
      async handler({ c, params, query, text }) {
        return c.json(await uploadProxies(deps, params.id, query.connector_id, text));
      },
    }),
    defineRoute({
      method: "get",
      path: `${PROXIES}/:pid`,
      tag: "proxies",
      summary: "Read a proxy",
      description: PASSWORD_NOTE,
      access: UserRole.viewer,
      responses: { 200: answer("The proxy", ProxyAnswer) },
      async handler({ c, params }) {
        return c.json(
          await presentWithQuarantine(deps, await getProxy(deps, params.id, params.pid)),
        );
      },
    }),
    defineRoute({
      method: "patch",
      path: `${PROXIES}/:pid`,
      tag: "proxies",
      summary: "Edit a proxy's address, country or metadata",
      description: "`url` replaces the whole address, login included (a url without a " +
        'password clears it). `country` "" or null clears it. `metadata` is replaced whole. ' +
        "The status is the health checks' to move.",
      access: UserRole.editor,
      body: UpdateProxyBody,
      responses: {
        200: answer("The proxy", ProxyAnswer),
        400: "The connector already has a proxy at that address",
      },
      async handler({ c, body, params }) {
        const row = await updateProxy(deps, params.id, params.pid, {
          address: body.url,
          country: body.country,
          metadata: body.metadata,
        });
        return c.json(await presentWithQuarantine(deps, row));
      },
    }),
    defineRoute({
      method: "post",
      path: `${PROXIES}/:pid/unquarantine`,
      tag: "proxies",
      summary: "End a proxy's rate-limit quarantine now",
      description: "A proxy whose connector's rate limit filled its window rests in quarantine " +
        "for a while (`quarantined`, `quarantine_remaining_seconds`). This ends it: gateways " +
        "route to the proxy again once the next feed reaches them, normally within a second. " +
        "Redis holds quarantines, so without Redis this answers 503.",
      access: UserRole.editor,
      responses: {
        200: answer('`{"status": "ok"}`', StatusOkAnswer),
        400: "The proxy is not quarantined",
        503: "Redis did not answer",
      },
      async handler({ c, params }) {
        const row = await getProxy(deps, params.id, params.pid);
        await liftQuarantine(deps, row.id);
        deps.logger.info({ project: params.id, proxy: row.id }, "Quarantine lifted");
        await recordAuditOperation(deps.database, {
          entity: "proxy",
          action: "lift",
          entityId: row.id,
          entityName: row.host,
          after: { quarantined: false },
        });
        return c.json({ status: "ok" as const });
      },
    }),
    defineRoute({
      method: "delete",
      path: `${PROXIES}/:pid`,
      tag: "proxies",
      summary: "Delete a proxy",
      description: "A cloud connector's proxy stands for an instance, which goes first: the " +
        "row is marked terminating and the scale job terminates the instance, then deletes the " +
        "row (202). Deleting it again asks the scale job again.",
      access: UserRole.editor,
      responses: { 202: "A cloud instance's row: terminating", 204: "Deleted" },
      async handler({ c, params }) {
        const kind = await deleteProxy(deps, params.id, params.pid);
        return c.body(null, kind === ConnectorKind.cloud ? 202 : 204);
      },
    }),
  ];
}

/** One proxy with its quarantine as Redis holds it (none shown when Redis does not answer). */
async function presentWithQuarantine(deps: ApiDeps, row: ProxyRow) {
  const [quarantines, checks] = await Promise.all([
    readQuarantines(deps, [row.id]),
    readLastChecks(deps, [row.id]),
  ]);
  return presentProxy(
    row,
    quarantineView(quarantines.get(row.id), Date.now()),
    lastCheckView(checks.get(row.id)),
  );
}
