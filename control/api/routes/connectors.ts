/** Connectors of a project. */
import { ConnectorKind, JobKind, UserRole } from "../../../shared/roles.ts";
import { errorText, StoreUnavailableError } from "../../../shared/errors.ts";
import { noPool, poolView } from "../../provider-api/pool/view.ts";
import { connectorSubject } from "../../../shared/traffic-subjects.ts";
import {
  type ConnectorPatch,
  type ConnectorRow,
  createConnector,
  deleteConnector,
  getConnector,
  listConnectors,
  proxyCounts,
  resetConnectorTraffic,
  updateConnector,
} from "../../services/connectors.ts";
import { askPending } from "../../traffic/asks.ts";
import { liftConnectorQuarantines } from "../../services/quarantines.ts";
import { sameValue } from "../../services/diff.ts";
import { changesDecision } from "../../traffic/rules.ts";
import { trafficUsageViews } from "../../traffic/usage-view.ts";
import type { ApiDeps } from "../deps.ts";
import { presentConnector } from "../present.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import {
  CloudInstancesAnswer,
  ConnectorAnswer,
  ConnectorListAnswer,
  ConnectorOptionsAnswer,
  PoolAnswer,
} from "../answers/connectors.ts";
import { instancesView } from "../../services/cloud-instances.ts";
import { connectorOptions } from "../../cloud/options.ts";
import { AskedAnswer } from "../answers/common.ts";
import {
  CONNECTOR_FIELD_NAMES,
  CreateConnectorBody,
  UpdateConnectorBody,
} from "../../model/connectors.ts";
import { renameFields } from "../../model/common.ts";
import type * as v from "valibot";

const CONNECTORS = "/api/v1/projects/:id/connectors";

/** The body's fields as the service names them; what the body leaves out stays undefined. */
function toFields(
  body: Omit<v.InferOutput<typeof UpdateConnectorBody>, "kind" | "provider">,
): ConnectorPatch {
  const { kind: _kind, ...fields } = CONNECTOR_FIELD_NAMES;
  return { ...renameFields(body, fields), config: body.config } as ConnectorPatch;
}

const USAGE_NOTE = "Each answer carries `traffic_usage` (null without a traffic_config): the " +
  "bytes of the usage window (the period, from a reset inside it), both directions, flushed " +
  "history plus the live counts; `percent` and `status` (ok, warning, limit) against " +
  "`limit_bytes`; `cost`; `blocked` and `blocked_until` as the stored decision the gateways " +
  "enforce; `pending` while a decision a reset or a limit edit asked for has not landed.";

export function connectorRoutes(deps: ApiDeps): Route[] {
  /** The connectors as answered: each with its proxy count and its traffic usage. */
  const present = async (rows: readonly ConnectorRow[], counts: Map<string, number>) => {
    const usage = await trafficUsageViews(
      deps,
      rows.map((row) => ({
        subject: { kind: "connector", id: row.id },
        projectId: row.projectId,
        config: row.trafficConfig,
        resetAt: row.trafficResetAt,
      })),
    );
    return rows.map((row) =>
      presentConnector(
        row,
        counts.get(row.id) ?? 0,
        usage.get(connectorSubject(row.id)) ?? null,
        deps.providers,
      )
    );
  };
  /** A reset or an edit of what decides the block asks for a decision, marked pending. */
  const askDecision = async (connectorId: string) => {
    try {
      await askPending(deps, [connectorSubject(connectorId)], deps.settings.redisRequestTimeoutMs);
    } catch (error) {
      deps.logger.warn(
        { connector: connectorId, error: errorText(error) },
        "Traffic decision not asked; the next metered bytes or index hygiene ask again",
      );
    }
  };
  return [
    defineRoute({
      method: "get",
      path: CONNECTORS,
      tag: "connectors",
      summary: "List a project's connectors",
      access: UserRole.viewer,
      description: USAGE_NOTE,
      responses: {
        200: answer(
          "The connectors, oldest first, each with its `proxy_count`",
          ConnectorListAnswer,
        ),
      },
      async handler({ c, params }) {
        const rows = await listConnectors(deps, params.id);
        const counts = await proxyCounts(deps, params.id);
        return c.json(await present(rows, counts));
      },
    }),
    defineRoute({
      method: "post",
      path: CONNECTORS,
      tag: "connectors",
      summary: "Create a connector",
      description: "Kinds `static` (a list of proxies you own), `vendor` (a vendor account: " +
        "`provider` names a descriptor of GET /api/v1/providers, `config` its connector fields " +
        "with `proxy_type`, `slots` and `session_mode`, checked against it; `credential_id` " +
        "names a credential of the same provider; its rows are kept by the sync job) and " +
        "`provider_api` (a provider API handing out short-lived proxies into the connector's " +
        "pool: `config` holds `fetch`, `parser` and `pool`, stored with their defaults (422 " +
        "naming `body.config.<path>`); its templates read only `{credential.<key>}` of its " +
        "`provider_api` credential and `{count}`; `provider` is `provider_api` or left out; see " +
        "docs/provider-api.md) and `cloud` (instances an `aws`, `gcp` or `azure` account runs, " +
        "which the scale job creates between `min_proxies` and `max_proxies` of `config`, " +
        "rotates and terminates; `credential_id` names a credential of that cloud; the " +
        "connector is checked against the cloud before it is saved, a refusal answered 422 at " +
        "the field the cloud named, a cloud that does not answer 502; see docs/cloud.md). Countries " +
        "are ISO 3166-1 alpha-2 (`uk` reads as GB), stored upper-cased, deduplicated and " +
        "sorted. `domain_allow` and `domain_deny` are mutually exclusive. `credential_id` must " +
        "name a credential of the same project (400 otherwise). `rate_limit_config` and " +
        "`traffic_config` are stored whole, with their defaults filled in.",
      access: UserRole.editor,
      body: CreateConnectorBody,
      responses: {
        201: answer("The connector", ConnectorAnswer),
        400: "The name is taken in this project, or the credential is not the project's",
      },
      async handler({ c, body, params }) {
        const { provider, ...fields } = body;
        const row = await createConnector(deps, params.id, {
          ...toFields(fields),
          name: body.name,
          kind: body.kind,
          provider,
        });
        const [answer] = await present([row], new Map());
        return c.json(answer, 201);
      },
    }),
    defineRoute({
      method: "get",
      path: `${CONNECTORS}/:cid`,
      tag: "connectors",
      summary: "Read a connector",
      description: USAGE_NOTE,
      access: UserRole.viewer,
      responses: { 200: answer("The connector", ConnectorAnswer) },
      async handler({ c, params }) {
        const row = await getConnector(deps, params.id, params.cid);
        const counts = await proxyCounts(deps, params.id, row.id);
        const [answer] = await present([row], counts);
        return c.json(answer);
      },
    }),
    defineRoute({
      method: "patch",
      path: `${CONNECTORS}/:cid`,
      tag: "connectors",
      summary: "Edit a connector",
      description: "`rate_limit_config` and `traffic_config` are replaced whole (null clears " +
        "them). The kind cannot change. An edit of what decides a traffic block (a limit set or " +
        "cleared, its bytes, period, reset day or action) asks for a traffic decision at once " +
        "(`traffic_usage.pending` until it lands, normally within a second); one of the price, " +
        "the currency or the warning line asks for none. An edit of `rate_limit_config` lifts the " +
        "quarantines the connector's proxies are in.",
      access: UserRole.editor,
      body: UpdateConnectorBody,
      responses: {
        200: answer("The connector", ConnectorAnswer),
        400: "The name is taken in this project, or the credential is not the project's",
      },
      async handler({ c, body, params }) {
        const { row, previous } = await updateConnector(
          deps,
          params.id,
          params.cid,
          toFields(body),
        );
        if (changesDecision(previous.trafficConfig, row.trafficConfig)) await askDecision(row.id);
        if (!sameValue(previous.rateLimitConfig, row.rateLimitConfig)) {
          await liftConnectorQuarantines(deps, row.id);
        }
        const counts = await proxyCounts(deps, params.id, row.id);
        const [answer] = await present([row], counts);
        return c.json(answer);
      },
    }),
    defineRoute({
      method: "post",
      path: `${CONNECTORS}/:cid/traffic/reset`,
      tag: "connectors",
      summary: "Count a connector's traffic usage from now on",
      description: "Stores the moment usage counts from (`traffic_usage.counting_since`); the " +
        "history stays. Asks for a traffic decision, so a block the reset lifts lifts within " +
        "a second (`traffic_usage.pending` until then). Traffic metered just before the reset " +
        "but flushed after it still counts, up to one flush interval of it.",
      access: UserRole.editor,
      responses: { 200: answer("The connector, with its usage counted from now", ConnectorAnswer) },
      async handler({ c, params }) {
        const row = await resetConnectorTraffic(deps, params.id, params.cid);
        await askDecision(row.id);
        const counts = await proxyCounts(deps, params.id, row.id);
        const [answer] = await present([row], counts);
        return c.json(answer);
      },
    }),
    defineRoute({
      method: "get",
      path: `${CONNECTORS}/:cid/pool`,
      tag: "connectors",
      summary: "Read a provider-API connector's pool",
      description: "The activity pool's entries by state (checking, routed, stock, draining, " +
        "extracted; exact), the pool's sizes, the fetch bookkeeping of the current pool " +
        "generation (fetches by kind, 429s, streaks, back-off, calls in flight, the max_total " +
        "ledger) and `depleted_at`. No address or credential. 404 for another kind of " +
        "connector; 503 while Redis does not answer.",
      access: UserRole.viewer,
      responses: {
        200: answer("The pool", PoolAnswer),
        404: "No such connector, or not a provider_api one",
      },
      async handler({ c, params }) {
        const row = await getConnector(deps, params.id, params.cid);
        return c.json(await poolView(deps, row));
      },
    }),
    defineRoute({
      method: "post",
      path: `${CONNECTORS}/:cid/pool/run`,
      tag: "connectors",
      summary: "Ask a pool run of a provider-API connector now",
      description: "Appends the connector's key to the pool job's stream: a worker reaps, " +
        "checks and refills the pool within moments (a run in hand covers it). 202 once Redis " +
        "took the request.",
      access: UserRole.editor,
      responses: {
        202: answer("Asked", AskedAnswer),
        404: "No such connector, or not a provider_api one",
      },
      async handler({ c, params }) {
        const row = await getConnector(deps, params.id, params.cid);
        if (row.kind !== ConnectorKind.providerApi) throw noPool();
        if (!await deps.jobs.request(JobKind.pool, [row.id])) {
          throw new StoreUnavailableError("redis");
        }
        return c.json({ asked: true }, 202);
      },
    }),
    defineRoute({
      method: "get",
      path: `${CONNECTORS}/:cid/instances`,
      tag: "connectors",
      summary: "Read a cloud connector's instances and its scaling",
      description: "Each instance's row (status, address, age, when it rotates, a draining " +
        "one's quiet checks), the instances being created, and what the last scale run " +
        "decided: its `target` and what held its step (`hold`), the demand, the last listing, " +
        "the last error and the back-off it causes. 400 for a connector of another kind.",
      access: UserRole.viewer,
      responses: { 200: answer("The instances", CloudInstancesAnswer) },
      async handler({ c, params }) {
        return c.json(await instancesView(deps, params.id, params.cid));
      },
    }),
    defineRoute({
      method: "delete",
      path: `${CONNECTORS}/:cid`,
      tag: "connectors",
      summary: "Delete a connector with its proxies",
      description: "Any connector but a cloud one is deleted at once, with its proxies and " +
        "history. A cloud connector's instances go first: its proxies are marked terminating, " +
        "it is disabled and marked `pending_deletion`, and the scale job terminates the " +
        "instances, then deletes it (202). Deleting it again asks the scale job again.",
      access: UserRole.editor,
      responses: {
        202: "A cloud connector: pending deletion, its instances terminating",
        204: "Deleted, with its proxies, in one transaction",
      },
      async handler({ c, params }) {
        const kind = await deleteConnector(deps, params.id, params.cid);
        return kind === ConnectorKind.cloud ? c.body(null, 202) : c.body(null, 204);
      },
    }),
    defineRoute({
      method: "get",
      path: "/api/v1/connector-options",
      tag: "connectors",
      summary: "What a cloud connector's form offers",
      description: "Each cloud's common regions (GCP zones, Azure locations) and sizes, and " +
        "the country codes a connector may declare: lists to choose from, not limits (the " +
        "cloud's own check refuses what it does not know).",
      access: UserRole.viewer,
      responses: { 200: answer("The options", ConnectorOptionsAnswer) },
      handler({ c }) {
        return Promise.resolve(c.json(connectorOptions()));
      },
    }),
  ];
}
