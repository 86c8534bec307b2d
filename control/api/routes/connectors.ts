/** Connectors of a project. */
import { UserRole } from "../../../shared/roles.ts";
import {
  type ConnectorPatch,
  createConnector,
  deleteConnector,
  getConnector,
  listConnectors,
  proxyCounts,
  updateConnector,
} from "../../services/connectors.ts";
import type { ApiDeps } from "../deps.ts";
import { presentConnector } from "../present.ts";
import { defineRoute, type Route } from "../registry.ts";
import { CreateConnectorBody, UpdateConnectorBody } from "../schemas/connectors.ts";
import type * as v from "valibot";

const CONNECTORS = "/api/v1/projects/:id/connectors";

/** The body's fields as the service names them; what the body leaves out stays undefined. */
function toFields(body: Omit<v.InferOutput<typeof UpdateConnectorBody>, "kind">): ConnectorPatch {
  return {
    name: body.name,
    credentialId: body.credential_id,
    enabled: body.enabled,
    weight: body.weight,
    countries: body.countries,
    domainAllow: body.domain_allow,
    domainDeny: body.domain_deny,
    healthcheckUrl: body.healthcheck_url,
    rateLimitConfig: body.rate_limit_config,
    trafficConfig: body.traffic_config,
  };
}

export function connectorRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "get",
      path: CONNECTORS,
      tag: "connectors",
      summary: "List a project's connectors",
      access: UserRole.viewer,
      responses: { 200: "The connectors, oldest first, each with its `proxy_count`" },
      async handler({ c, params }) {
        const rows = await listConnectors(deps, params.id);
        const counts = await proxyCounts(deps, params.id);
        return c.json(rows.map((row) => presentConnector(row, counts.get(row.id) ?? 0)));
      },
    }),
    defineRoute({
      method: "post",
      path: CONNECTORS,
      tag: "connectors",
      summary: "Create a connector",
      description: "Only kind `static` (a list of proxies you own) is available yet. Countries " +
        "are ISO 3166-1 alpha-2 (`uk` reads as GB), stored upper-cased, deduplicated and " +
        "sorted. `domain_allow` and `domain_deny` are mutually exclusive. `credential_id` must " +
        "name a credential of the same project (400 otherwise). `rate_limit_config` and " +
        "`traffic_config` are stored whole, with their defaults filled in.",
      access: UserRole.editor,
      body: CreateConnectorBody,
      responses: {
        201: "The connector",
        400: "The name is taken in this project, or the credential is not the project's",
      },
      async handler({ c, body, params }) {
        const row = await createConnector(deps, params.id, {
          ...toFields(body),
          name: body.name,
          kind: body.kind,
        });
        return c.json(presentConnector(row, 0), 201);
      },
    }),
    defineRoute({
      method: "get",
      path: `${CONNECTORS}/:cid`,
      tag: "connectors",
      summary: "Read a connector",
      access: UserRole.viewer,
      responses: { 200: "The connector" },
      async handler({ c, params }) {
        const row = await getConnector(deps, params.id, params.cid);
        const counts = await proxyCounts(deps, params.id, row.id);
        return c.json(presentConnector(row, counts.get(row.id) ?? 0));
      },
    }),
    defineRoute({
      method: "patch",
      path: `${CONNECTORS}/:cid`,
      tag: "connectors",
      summary: "Edit a connector",
      description: "`rate_limit_config` and `traffic_config` are replaced whole (null clears " +
        "them). The kind cannot change.",
      access: UserRole.editor,
      body: UpdateConnectorBody,
      responses: {
        200: "The connector",
        400: "The name is taken in this project, or the credential is not the project's",
      },
      async handler({ c, body, params }) {
        const row = await updateConnector(deps, params.id, params.cid, toFields(body));
        const counts = await proxyCounts(deps, params.id, row.id);
        return c.json(presentConnector(row, counts.get(row.id) ?? 0));
      },
    }),
    defineRoute({
      method: "delete",
      path: `${CONNECTORS}/:cid`,
      tag: "connectors",
      summary: "Delete a connector with its proxies",
      access: UserRole.editor,
      responses: { 204: "Deleted, with its proxies, in one transaction" },
      async handler({ c, params }) {
        await deleteConnector(deps, params.id, params.cid);
        return c.body(null, 204);
      },
    }),
  ];
}
