/** The audit log's answer: a page of entries, newest first. */
import * as v from "valibot";
import { count, jsonObject, timestamp } from "./common.ts";

export const AuditEntryAnswer = v.strictObject({
  id: v.string(),
  at: timestamp,
  actor: v.strictObject({
    /** `user`, `token` or `system` (the api's configuration file). */
    kind: v.picklist(["user", "token", "system"]),
    id: v.nullable(v.string()),
    name: v.nullable(v.string()),
    /** The user a token acts for. */
    user: v.nullable(v.string()),
  }),
  address: v.nullable(v.string()),
  via: v.picklist(["dashboard", "cli", "api", "config"]),
  request: v.nullable(v.string()),
  entity: v.string(),
  entity_id: v.nullable(v.string()),
  entity_name: v.nullable(v.string()),
  action: v.string(),
  count,
  /** The fields that changed as they were (a delete: the whole row); secrets masked. */
  before: v.nullable(jsonObject),
  /** The fields that changed as they are now (a create: the whole row); secrets masked. */
  after: v.nullable(jsonObject),
});

export const AuditPageAnswer = v.strictObject({
  items: v.array(AuditEntryAnswer),
  /** Pass as `cursor` for the next (older) page; null at the end. */
  next_cursor: v.nullable(v.string()),
});

export type AuditEntryView = v.InferOutput<typeof AuditEntryAnswer>;

const shown = (value: unknown): string => {
  const text = JSON.stringify(value) ?? "null";
  return text.length > 40 ? `${text.slice(0, 39)}…` : text;
};

/** Who wrote, as the CLI and the dashboard show it: `ci (token of editor)`. */
export function auditActorText(entry: AuditEntryView): string {
  if (entry.actor.kind === "token") return `${entry.actor.name} (token of ${entry.actor.user})`;
  return entry.actor.name ?? entry.actor.kind;
}

/**
 * What changed, in one line: an update's fields `field: before → after`, a bulk write's count,
 * a create's or a delete's name.
 */
export function auditChangeText(entry: AuditEntryView): string {
  if (entry.count > 1) return `${entry.count} rows`;
  if (entry.action === "update" && entry.before !== null && entry.after !== null) {
    const before = entry.before;
    return Object.entries(entry.after).map(([field, value]) =>
      `${field}: ${shown(before[field])} → ${shown(value)}`
    ).join("; ");
  }
  const row = entry.after ?? entry.before;
  if (row === null) return "";
  return `${Object.keys(row).length} fields`;
}
