/**
 * Alerting, for admins: rules (what to watch), channels (where to deliver, each with a signing
 * secret shown once), the events that fired and resolved, the delivery log with every try, and
 * a test delivery per channel (docs/alerts.md).
 */
import { UserRole } from "../../../shared/roles.ts";
import {
  createChannel,
  deleteChannel,
  getChannel,
  listChannels,
  updateChannel,
} from "../../alerts/channels.ts";
import { oweTest } from "../../alerts/deliveries.ts";
import { listDeliveries, listEvents } from "../../alerts/history.ts";
import { createRule, deleteRule, getRule, listRules, updateRule } from "../../alerts/rules.ts";
import {
  ALERT_KIND_NAMES,
  AlertListQuery,
  CreateAlertChannelBody,
  CreateAlertRuleBody,
  kindInfo,
  PatchAlertChannelBody,
  PatchAlertRuleBody,
} from "../../model/alerts.ts";
import type { ApiDeps } from "../deps.ts";
import { presentAlertChannel, presentAlertRule } from "../present-alerts.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import {
  AlertChannelAnswer,
  AlertChannelListAnswer,
  AlertDeliveryAnswer,
  AlertDeliveryListAnswer,
  AlertEventListAnswer,
  AlertRuleAnswer,
  AlertRuleListAnswer,
  CreatedAlertChannelAnswer,
} from "../answers/alerts.ts";

const RULES = "/api/v1/alerts/rules";
const CHANNELS = "/api/v1/alerts/channels";
const TAG = "alerts";

const KINDS_TEXT = ALERT_KIND_NAMES.map((kind) => {
  const info = kindInfo(kind);
  const threshold = info.threshold
    ? ` (threshold ${info.threshold.min} to ${info.threshold.max} ${info.threshold.unit})`
    : "";
  return `\`${kind}\`${threshold}`;
}).join(", ");

export function alertRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "get",
      path: RULES,
      tag: TAG,
      summary: "List the alert rules",
      access: UserRole.admin,
      responses: { 200: answer("The rules, oldest first", AlertRuleListAnswer) },
      async handler({ c }) {
        return c.json((await listRules(deps)).map(presentAlertRule));
      },
    }),
    defineRoute({
      method: "post",
      path: RULES,
      tag: TAG,
      summary: "Create an alert rule",
      description: `Kinds: ${KINDS_TEXT}. A kind's threshold is required and checked against ` +
        "its range (422 on body.threshold); an unknown kind is a 422 on body.kind. " +
        "The quiet period (seconds) is how long after an event fired no new one " +
        "fires for the same rule and subject.",
      access: UserRole.admin,
      body: CreateAlertRuleBody,
      responses: {
        201: answer("The rule", AlertRuleAnswer),
        400: "A rule has this name",
      },
      async handler({ c, body }) {
        return c.json(presentAlertRule(await createRule(deps, body)), 201);
      },
    }),
    defineRoute({
      method: "get",
      path: `${RULES}/:id`,
      tag: TAG,
      summary: "Get an alert rule",
      access: UserRole.admin,
      responses: { 200: answer("The rule", AlertRuleAnswer) },
      async handler({ c, params }) {
        return c.json(presentAlertRule(await getRule(deps, params.id)));
      },
    }),
    defineRoute({
      method: "patch",
      path: `${RULES}/:id`,
      tag: TAG,
      summary: "Edit an alert rule (its kind stays)",
      access: UserRole.admin,
      body: PatchAlertRuleBody,
      responses: { 200: answer("The rule as edited", AlertRuleAnswer) },
      async handler({ c, params, body }) {
        return c.json(presentAlertRule(await updateRule(deps, params.id, body)));
      },
    }),
    defineRoute({
      method: "delete",
      path: `${RULES}/:id`,
      tag: TAG,
      summary: "Delete an alert rule, its events and their deliveries",
      access: UserRole.admin,
      responses: { 204: "Deleted" },
      async handler({ c, params }) {
        await deleteRule(deps, params.id);
        return c.body(null, 204);
      },
    }),
    defineRoute({
      method: "get",
      path: CHANNELS,
      tag: TAG,
      summary: "List the alert channels (never their secrets)",
      access: UserRole.admin,
      responses: { 200: answer("The channels, oldest first", AlertChannelListAnswer) },
      async handler({ c }) {
        return c.json((await listChannels(deps)).map(presentAlertChannel));
      },
    }),
    defineRoute({
      method: "post",
      path: CHANNELS,
      tag: TAG,
      summary: "Create an alert channel (a webhook)",
      description:
        "Deliveries are POSTed as JSON (`format: json`) or as Slack's `{text, blocks}` " +
        "(`format: slack`), signed: `X-Octoprox-Signature` is the hex HMAC-SHA256 of " +
        "`<X-Octoprox-Timestamp>.<body>` under the channel's `secret`, which is in this answer " +
        "only. A URL resolving to a private, loopback or metadata address is refused (422 on " +
        "body.url) unless `allow_private_address` is true; metadata addresses always are. " +
        "`type: email` is refused in this release (422 on body.type).",
      access: UserRole.admin,
      body: CreateAlertChannelBody,
      responses: {
        201: answer("The channel and its `secret`, shown this once", CreatedAlertChannelAnswer),
        400: "A channel has this name",
      },
      async handler({ c, body }) {
        const { row, secret } = await createChannel(deps, body);
        return c.json({ ...presentAlertChannel(row), secret }, 201);
      },
    }),
    defineRoute({
      method: "patch",
      path: `${CHANNELS}/:id`,
      tag: TAG,
      summary: "Edit an alert channel (its secret stays)",
      access: UserRole.admin,
      body: PatchAlertChannelBody,
      responses: { 200: answer("The channel as edited", AlertChannelAnswer) },
      async handler({ c, params, body }) {
        return c.json(presentAlertChannel(await updateChannel(deps, params.id, body)));
      },
    }),
    defineRoute({
      method: "delete",
      path: `${CHANNELS}/:id`,
      tag: TAG,
      summary: "Delete an alert channel and its deliveries",
      access: UserRole.admin,
      responses: { 204: "Deleted" },
      async handler({ c, params }) {
        await deleteChannel(deps, params.id);
        return c.body(null, 204);
      },
    }),
    defineRoute({
      method: "post",
      path: `${CHANNELS}/:id/test`,
      tag: TAG,
      summary: "Send a test delivery to a channel",
      description: "The delivery is owed at once and tried by the next pass of a delivery " +
        "loop, retried like any other; follow it in the delivery log.",
      access: UserRole.admin,
      responses: { 202: answer("The delivery, owed", AlertDeliveryAnswer) },
      async handler({ c, params }) {
        const channel = await getChannel(deps, params.id);
        const id = await oweTest(deps.database, channel);
        const [owed] = await listDeliveries(deps.database, { limit: 1, id });
        return c.json(owed, 202);
      },
    }),
    defineRoute({
      method: "get",
      path: "/api/v1/alerts/events",
      tag: TAG,
      summary: "The alert events, newest first: what fired, and when it resolved",
      access: UserRole.admin,
      query: AlertListQuery,
      responses: { 200: answer("The events", AlertEventListAnswer) },
      async handler({ c, query }) {
        return c.json(await listEvents(deps.database, query.limit));
      },
    }),
    defineRoute({
      method: "get",
      path: "/api/v1/alerts/deliveries",
      tag: TAG,
      summary: "The delivery log, newest first, with every try's status or error",
      access: UserRole.admin,
      query: AlertListQuery,
      responses: { 200: answer("The deliveries", AlertDeliveryListAnswer) },
      async handler({ c, query }) {
        return c.json(await listDeliveries(deps.database, { limit: query.limit }));
      },
    }),
  ];
}
