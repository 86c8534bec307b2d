/**
 * Proxy status writes from jobs: compare-and-set from the status each row was loaded with, all
 * of a batch in one transaction under one change entry, so a vendor outage that flips a pool
 * appends an entry per batch, not per proxy. Draining and terminating are never left here: a
 * check must not undo a drain that landed meanwhile.
 */
import { sql } from "drizzle-orm";
import { ChangeKind, ProxyStatus } from "../../shared/roles.ts";
import { type ServiceDeps, write } from "../core/store.ts";

export interface StatusChange {
  id: string;
  connectorId: string;
  from: string;
  to: string;
}

/**
 * Applies the changes whose rows still hold their `from` status; answers those that applied (a
 * change another writer made meanwhile is not this caller's to report).
 */
export async function applyStatusChanges(
  deps: ServiceDeps,
  changes: readonly StatusChange[],
): Promise<StatusChange[]> {
  if (changes.length === 0) return [];
  return await write(deps, async (tx) => {
    const values = sql.join(
      changes.map((c) => sql`(${c.id}::uuid, ${c.from}, ${c.to})`),
      sql`, `,
    );
    const rows = await tx.execute<{ id: string; connector_id: string }>(sql`
      update proxies as p
         set status = v.to_status, status_changed_at = now(), updated_at = now()
        from (values ${values}) as v(id, from_status, to_status)
       where p.id = v.id
         and p.status = v.from_status
         and p.status not in (${ProxyStatus.draining}, ${ProxyStatus.terminating})
      returning p.id, p.connector_id`);
    const connectorIds = [...new Set(rows.map((row) => row.connector_id))].sort();
    const applied = new Set(rows.map((row) => row.id));
    return {
      result: changes.filter((c) => applied.has(c.id)),
      change: rows.length === 0 ? null : { kind: ChangeKind.proxy, ref: connectorIds.join(",") },
    };
  });
}
