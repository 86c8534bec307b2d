/**
 * Where exits really were: the observation log, every connector's exits, and provider accuracy
 * (what each connector claims against where its exits were seen). Reads of what the workers'
 * observation ingest wrote (control/geo/exit-reads.ts); viewers may read them.
 */
import { UserRole } from "../../../shared/roles.ts";
import {
  readAccuracy,
  readConnectorExits,
  readExitIps,
  readObservationLog,
} from "../../geo/exit-reads.ts";
import type { ApiDeps } from "../deps.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import {
  AccuracyListAnswer,
  ConnectorExitsListAnswer,
  ExitIpPageAnswer,
  ObservationLogAnswer,
} from "../answers/geo-exits.ts";
import { ConnectorExitsQuery, ExitIpsQuery, ObservationsQuery } from "../../model/geo-exits.ts";

const JUDGED = "An exit is judged when it has both a claimed country (what the vendor promised " +
  "for it) and a seen one, and matches when they agree; `accuracy` is matching over judged " +
  "(null when none is judged). A connector is listed once it has an exit.";

export function geoExitRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "get",
      path: "/api/v1/geo/observations",
      tag: "geo",
      summary: "The observation log: every exit seen, newest first",
      description: "Raw observations (kept `observation_retention_days`), filtered by " +
        "`project_id`, `connector_id`, `proxy_id` and `ip`, `limit` (1-500, default 100) a " +
        "page; pass `next_cursor` as `cursor` for the next, older page. A row survives the " +
        "deletion of its connector and proxy. `hand_out` says the proxy was seen on another " +
        "exit than the last one counted for it.",
      access: UserRole.viewer,
      query: ObservationsQuery,
      responses: { 200: answer("`{items, next_cursor}`", ObservationLogAnswer) },
      async handler({ c, query }) {
        return c.json(
          await readObservationLog(
            deps.database,
            {
              projectId: query.project_id,
              connectorId: query.connector_id,
              proxyId: query.proxy_id,
              ip: query.ip,
            },
            query.limit,
            query.cursor,
          ),
        );
      },
    }),
    defineRoute({
      method: "get",
      path: "/api/v1/geo/exits",
      tag: "geo",
      summary: "Provider accuracy: each connector's claimed countries against where its exits " +
        "were seen",
      description: "Per connector (of `project_id`, or `connector_id`, or all): the countries " +
        "it declares and its exits were promised in, where its exits were seen (exits per " +
        "country, null for not placed), its distinct exits, observations and hand-outs. " +
        JUDGED,
      access: UserRole.viewer,
      query: ConnectorExitsQuery,
      responses: { 200: answer("`{items}`", ConnectorExitsListAnswer) },
      async handler({ c, query }) {
        const items = await readConnectorExits(deps.database, {
          projectId: query.project_id,
          connectorId: query.connector_id,
        });
        return c.json({ items });
      },
    }),
    defineRoute({
      method: "get",
      path: "/api/v1/geo/exits/ips",
      tag: "geo",
      summary: "Every exit seen, with where it is, a page at a time",
      description: "Each connector's distinct exits, last seen first: the address, the latest " +
        "state (country, region, city, ASN, the sources that placed it, the claimed country), " +
        "first and last seen, observations and hand-outs onto it. Filtered by `project_id`, " +
        "`connector_id` and `country` (seen there); `page_size` up to 1000. Kept " +
        "`exit_ip_retention_days` after last seen when set, else as long as the connector.",
      access: UserRole.viewer,
      query: ExitIpsQuery,
      responses: { 200: answer("`{items, total, page, page_size}`", ExitIpPageAnswer) },
      async handler({ c, query }) {
        const { items, total } = await readExitIps(deps.database, {
          projectId: query.project_id,
          connectorId: query.connector_id,
          country: query.country,
        }, { offset: (query.page - 1) * query.page_size, limit: query.page_size });
        return c.json({ items, total, page: query.page, page_size: query.page_size });
      },
    }),
    defineRoute({
      method: "get",
      path: "/api/v1/geo/accuracy",
      tag: "geo",
      summary: "Provider accuracy: the share of each connector's exits seen where claimed",
      description: `Per connector, and per claimed country within it. ${JUDGED}`,
      access: UserRole.viewer,
      query: ConnectorExitsQuery,
      responses: { 200: answer("`{items}`", AccuracyListAnswer) },
      async handler({ c, query }) {
        const items = await readAccuracy(deps.database, {
          projectId: query.project_id,
          connectorId: query.connector_id,
        });
        return c.json({ items });
      },
    }),
  ];
}
