/**
 * The audit log's vocabulary: what its entries name (the entities the audited tables are, and
 * what operations with no row of their own write) and the filters its reads take.
 */
import * as v from "valibot";
import { queryInteger } from "./common.ts";

/** Every entity an entry can name: the audited tables' (migration 0016) and the operations'. */
export const AUDIT_ENTITIES = [
  "user",
  "invitation",
  "token",
  "project",
  "distribution_key",
  "credential",
  "connector",
  "proxy",
  "sequence",
  "config_revision",
  "provider_descriptor",
  "geo_settings",
  "geo_database",
  "alert_rule",
  "alert_rule_channel",
  "alert_channel",
  "tunnel_device",
  "wireguard_settings",
  "openvpn_settings",
  "backup",
] as const;
export type AuditEntity = (typeof AUDIT_ENTITIES)[number];

/** What an entry says was done: a row's create, update or delete, or an operation's name. */
export const AUDIT_ACTIONS = ["create", "update", "delete", "import", "lift"] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export const AUDIT_VIAS = ["dashboard", "cli", "api", "config"] as const;

const TIME_HINT = "must be an ISO 8601 timestamp such as 2026-12-01T12:00:00Z";
const timeField = v.optional(
  v.pipe(
    v.string(TIME_HINT),
    v.isoTimestamp(TIME_HINT),
    v.transform((text) => new Date(text).toISOString()),
  ),
);

/** A cursor the audit log gave: the last entry's id. */
const cursorField = v.optional(
  v.pipe(
    v.string("is not a cursor this API gave (next_cursor of a previous page)"),
    v.regex(/^\d{1,18}$/, "is not a cursor this API gave (next_cursor of a previous page)"),
  ),
);

export const AuditQuery = v.object({
  entity: v.optional(
    v.picklist(AUDIT_ENTITIES, `must be one of ${AUDIT_ENTITIES.join(", ")}`),
  ),
  entity_id: v.optional(v.pipe(v.string(), v.maxLength(200, "must be at most 200 characters"))),
  /** The user who wrote, or for whom a token wrote (username, any case). */
  user: v.optional(v.pipe(v.string(), v.maxLength(200, "must be at most 200 characters"))),
  action: v.optional(v.picklist(AUDIT_ACTIONS, `must be one of ${AUDIT_ACTIONS.join(", ")}`)),
  via: v.optional(v.picklist(AUDIT_VIAS, `must be one of ${AUDIT_VIAS.join(", ")}`)),
  since: timeField,
  until: timeField,
  limit: queryInteger(1, 500, 100),
  cursor: cursorField,
});
export type AuditFilter = v.InferOutput<typeof AuditQuery>;
