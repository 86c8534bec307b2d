/**
 * Reads of the audit log, newest first a page at a time, and its retention. The entries are
 * written only by the triggers of migration 0016 and by recordAuditNote (note.ts).
 */
import type postgres from "postgres";
import type { Database } from "../../db/client.ts";
import type { ActorKind, ActorVia } from "../../db/actor.ts";
import type { AuditFilter } from "../model/audit.ts";

export interface AuditEntry {
  id: string;
  at: string;
  actor: {
    kind: ActorKind;
    id: string | null;
    name: string | null;
    user: string | null;
  };
  address: string | null;
  via: ActorVia;
  request: string | null;
  entity: string;
  entity_id: string | null;
  entity_name: string | null;
  action: string;
  count: number;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
}

export interface AuditPage {
  items: AuditEntry[];
  /** Pass as `cursor` for the next (older) page; null at the end. */
  next_cursor: string | null;
}

/** A row as read: the entry with its actor's four columns flat. */
type AuditRow = Omit<AuditEntry, "actor"> & {
  actor_kind: ActorKind;
  actor_id: string | null;
  actor_name: string | null;
  user_name: string | null;
};

/** The entries `filter` selects, newest first, `filter.limit` after `filter.cursor`. */
export async function readAuditLog(
  database: Pick<Database, "sql">,
  filter: AuditFilter,
): Promise<AuditPage> {
  const sql: postgres.Sql = database.sql;
  const rows = await sql<AuditRow[]>`
    select id::text,
      to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at,
      actor_kind, actor_id, actor_name, user_name, address, via, request, entity, entity_id,
      entity_name, action, count, before, after
    from audit_log
    where (${filter.entity ?? null}::text is null or entity = ${filter.entity ?? null})
      and (${filter.entity_id ?? null}::text is null or entity_id = ${filter.entity_id ?? null})
      and (${filter.user ?? null}::text is null
        or lower(user_name) = lower(${filter.user ?? null})
        or lower(actor_name) = lower(${filter.user ?? null}))
      and (${filter.action ?? null}::text is null or action = ${filter.action ?? null})
      and (${filter.via ?? null}::text is null or via = ${filter.via ?? null})
      and (${filter.since ?? null}::timestamptz is null or at >= ${filter.since ?? null})
      and (${filter.until ?? null}::timestamptz is null or at < ${filter.until ?? null})
      and (${filter.cursor ?? null}::bigint is null or id < ${filter.cursor ?? null}::bigint)
    order by audit_log.id desc
    limit ${filter.limit + 1}`;
  const page = rows.slice(0, filter.limit);
  const last = page[page.length - 1];
  return {
    items: page.map(({ actor_kind, actor_id, actor_name, user_name, ...entry }) => ({
      ...entry,
      actor: { kind: actor_kind, id: actor_id, name: actor_name, user: user_name },
    })),
    next_cursor: rows.length > filter.limit && last !== undefined ? last.id : null,
  };
}

/** Deletes the entries older than `days`; answers how many went. */
export async function pruneAuditLog(
  database: Pick<Database, "sql">,
  days: number,
): Promise<number> {
  const deleted = await database.sql`
    delete from audit_log where at < now() - ${days} * interval '1 day'`;
  return deleted.count;
}
