/**
 * The feed's `geo` part of the global section: the install's attribution settings and the
 * databases gateways open, in the order consulted (the enabled databases with a file, by
 * position then name, the shipped database last), each named by the checksum gateways fetch it
 * by. Read inside the compile's snapshot; keys in the schema's order (shared/feed/models.ts) so
 * an unchanged install compiles to the same bytes.
 */
import { and, asc, eq, isNotNull, sql } from "drizzle-orm";
import type { Tx } from "../../db/client.ts";
import { geoDatabases, geoSettings } from "../../db/schema.ts";
import { DEFAULT_FEED_GEO, type FeedGeo } from "../../shared/feed/models.ts";
import type { ShippedFile } from "./shipped.ts";

export interface FeedGeoRows {
  settings: { locationSources: string[]; locationConflictRule: string } | undefined;
  databases: { id: string; name: string; format: string; checksum: string; sizeBytes: number }[];
}

/** The rows the part is made of, read in the compile's transaction. */
export async function readFeedGeo(tx: Pick<Tx, "select">): Promise<FeedGeoRows> {
  const [settings] = await tx.select({
    locationSources: geoSettings.locationSources,
    locationConflictRule: geoSettings.locationConflictRule,
  }).from(geoSettings).where(eq(geoSettings.id, 1));
  const rows = await tx.select({
    id: geoDatabases.id,
    name: geoDatabases.name,
    format: geoDatabases.format,
    checksum: geoDatabases.checksum,
    sizeBytes: geoDatabases.sizeBytes,
  }).from(geoDatabases)
    .where(and(eq(geoDatabases.enabled, true), isNotNull(geoDatabases.checksum)))
    .orderBy(
      asc(geoDatabases.position),
      asc(sql`lower(${geoDatabases.name})`),
      asc(geoDatabases.id),
    );
  return {
    settings,
    databases: rows.map((row) => ({
      id: row.id,
      name: row.name,
      format: row.format,
      checksum: row.checksum!,
      sizeBytes: row.sizeBytes ?? 0,
    })),
  };
}

/** The part itself; without the shipped file's description, the admin's databases alone. */
export function feedGeo(rows: FeedGeoRows, shipped: ShippedFile | undefined): FeedGeo {
  const databases = rows.databases.map((row) => ({
    id: row.id,
    name: row.name,
    format: row.format,
    checksum: row.checksum,
    size_bytes: row.sizeBytes,
  }));
  if (shipped !== undefined) {
    databases.push({
      id: shipped.id,
      name: shipped.name,
      format: shipped.format,
      checksum: shipped.checksum,
      size_bytes: shipped.sizeBytes,
    });
  }
  return {
    sources: [...(rows.settings?.locationSources ?? DEFAULT_FEED_GEO.sources)],
    conflict_rule: rows.settings?.locationConflictRule ?? DEFAULT_FEED_GEO.conflict_rule,
    databases,
  };
}
