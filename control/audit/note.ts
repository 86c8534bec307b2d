/**
 * An audit entry of an operation with no row of its own to show it (a quarantine lift lives in
 * Redis; a backup's import is one entry for all its rows), written in the caller's transaction
 * by the same function the triggers use, so it names the same writer. Outside a named writer
 * (the system's own loops) it writes nothing.
 */
import type postgres from "postgres";
import { type Database, reservedTransaction } from "../../db/client.ts";
import { translatePostgresError } from "../../db/errors.ts";
import type { AuditAction, AuditEntity } from "../model/audit.ts";

export interface AuditNote {
  entity: AuditEntity;
  action: AuditAction;
  entityId?: string | null;
  entityName?: string | null;
  count?: number;
  before?: Record<string, unknown> | null;
  after?: Record<string, unknown> | null;
}

export async function recordAuditNote(
  tx: Pick<postgres.Sql, "unsafe">,
  note: AuditNote,
): Promise<void> {
  await tx.unsafe(
    "select octoprox_audit_note($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb)",
    [
      note.entity,
      note.entityId ?? null,
      note.entityName ?? null,
      note.action,
      note.count ?? 1,
      note.before == null ? null : JSON.stringify(note.before),
      note.after == null ? null : JSON.stringify(note.after),
    ],
  );
}

/** The entry of an operation done outside Postgres (a lift in Redis), in a transaction of its own. */
export async function recordAuditOperation(
  database: Pick<Database, "sql">,
  note: AuditNote,
): Promise<void> {
  try {
    await reservedTransaction(database.sql, (tx) => recordAuditNote(tx, note));
  } catch (error) {
    throw translatePostgresError(error);
  }
}
