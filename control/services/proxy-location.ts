/**
 * Attributed locations written to proxy rows: the attribution store's one write. A batch is one
 * transaction, rows in id order, each a compare-and-set on the `location_checked_at` the row was
 * loaded with, and never when what the save judged was seen before the row's last judgement: a
 * sighting that arrives late never overwrites a newer one, and writers on several workers never
 * undo each other. Only rows whose routing fields changed (country, region, city, conflict)
 * announce, in one change entry naming their connectors, so checks that see the same exit again
 * move nothing in the feed.
 */
import { sql } from "drizzle-orm";
import type { ProxyLocation } from "../../db/schema.ts";
import { ChangeKind } from "../../shared/roles.ts";
import { type ServiceDeps, write } from "../core/store.ts";

export interface LocationSave {
  id: string;
  connectorId: string;
  /** What the row held when loaded: the write applies only while it still does. */
  loadedCheckedAt: Date | null;
  /** Likewise: an operator's edit of the country meanwhile wins over the save. */
  loadedCountrySource: string | null;
  /** When the exit judged was seen: the row's new `location_checked_at`. */
  seenAt: Date;
  country: string | null;
  countrySource: string | null;
  conflict: boolean;
  location: ProxyLocation;
  /** The feed carries what changed: the save is announced. */
  routingChanged: boolean;
}

/** Writes the saves that still apply; answers the ids written. */
export async function applyLocations(
  deps: Pick<ServiceDeps, "database" | "changes">,
  saves: readonly LocationSave[],
): Promise<Set<string>> {
  if (saves.length === 0) return new Set();
  const ordered = [...saves].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return await write(deps, async (tx) => {
    const values = sql.join(
      ordered.map((s) =>
        sql`(${s.id}::uuid, ${
          s.loadedCheckedAt?.toISOString() ?? null
        }::timestamptz, ${s.loadedCountrySource}::text, ${s.seenAt.toISOString()}::timestamptz, ${s.country}::text, ${s.countrySource}::text, ${s.conflict}::boolean, ${
          JSON.stringify(s.location)
        }::jsonb)`
      ),
      sql`, `,
    );
    const rows = await tx.execute<{ id: string }>(sql`
      update proxies as p
         set country = v.country, country_source = v.country_source,
             location_conflict = v.conflict, location = v.location,
             location_checked_at = v.seen_at, updated_at = now()
        from (values ${values})
          as v(id, loaded_at, loaded_source, seen_at, country, country_source, conflict, location)
       where p.id = v.id
         and p.location_checked_at is not distinct from v.loaded_at
         and p.country_source is not distinct from v.loaded_source
         and (p.location_checked_at is null or p.location_checked_at < v.seen_at)
      returning p.id`);
    const written = new Set(rows.map((row) => row.id));
    const announced = [
      ...new Set(
        ordered.filter((s) => s.routingChanged && written.has(s.id)).map((s) => s.connectorId),
      ),
    ].sort();
    return {
      result: written,
      change: announced.length === 0 ? null : { kind: ChangeKind.proxy, ref: announced.join(",") },
    };
  });
}
