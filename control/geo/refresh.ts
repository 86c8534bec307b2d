/**
 * Refreshing URL databases: a download (download.ts), the file checked with the gateways'
 * readers, and only a file that opens swapped in, whole, in one transaction with its row. A
 * download that brings no usable file keeps the old one and records why (`last_error`), so a
 * publisher's bad day never costs the install its database. geo_update refreshes the databases
 * whose interval has passed, then deletes the files no row names any more.
 */
import { and, asc, eq, isNotNull, isNull, notInArray, or, sql } from "drizzle-orm";
import { geoDatabases, geoFiles } from "../../db/schema.ts";
import { ConflictError, errorText, ValidationError } from "../../shared/errors.ts";
import { type GeoFormat, GeoFormatError } from "../../shared/geo/contract.ts";
import { read, type ServiceDeps, write } from "../core/store.ts";
import { askReattribution, geoChange } from "./announce.ts";
import {
  DatabaseOrigin,
  fileFields,
  type GeoDatabaseRow,
  getDatabase,
  storeFile,
} from "./databases.ts";
import { downloadFile, type DownloadSource, storedAuth } from "./download.ts";
import { type CheckedFile, checkFile, formatReason } from "./files.ts";

/** What a refresh came to. */
export type RefreshOutcome =
  /** A new file is in force. */
  | "updated"
  /** The download brought the file in force already. */
  | "unchanged"
  /** No usable file: the old one stays, `last_error` says why. */
  | "failed";

export interface Refreshed {
  outcome: RefreshOutcome;
  row: GeoDatabaseRow;
}

/**
 * Downloads and checks a file, or says why there is none usable: the reason names the format
 * and, for a geofeed, the first lines at fault; never a credential.
 */
export async function fetchChecked(
  deps: Pick<ServiceDeps, "settings">,
  name: string,
  source: DownloadSource,
  at: Date,
  signal?: AbortSignal,
): Promise<{ checked: CheckedFile; bytes: Uint8Array }> {
  const bytes = await downloadFile(source, { settings: deps.settings, at, signal });
  try {
    return { checked: checkFile(name, source.format, bytes, "file"), bytes };
  } catch (error) {
    const cause = error instanceof ValidationError ? error.cause : undefined;
    if (cause instanceof GeoFormatError) {
      const lines = cause.lines.slice(0, 5).map((bad) => `line ${bad.line}: ${bad.reason}`);
      throw new Error(
        [`not a ${cause.format} file: ${formatReason(cause)}`, ...lines].join("; "),
        { cause },
      );
    }
    throw error;
  }
}

/** Refreshes one URL database now, whatever its schedule; never throws for a bad download. */
export async function refreshDatabase(
  deps: ServiceDeps,
  row: GeoDatabaseRow,
  options: { at?: Date; signal?: AbortSignal } = {},
): Promise<Refreshed> {
  if (row.origin !== DatabaseOrigin.url || row.url === null) {
    throw new ConflictError(
      `${row.name} was uploaded: it has no URL to refresh from (upload a new file instead)`,
    );
  }
  const at = options.at ?? new Date();
  const source: DownloadSource = {
    format: row.format as GeoFormat,
    url: row.url,
    auth: storedAuth(row.auth),
  };
  let fetched: { checked: CheckedFile; bytes: Uint8Array };
  try {
    fetched = await fetchChecked(deps, row.name, source, at, options.signal);
  } catch (error) {
    const reason = errorText(error);
    const [failed] = await write(deps, async (tx) => ({
      result: await tx.update(geoDatabases).set({
        lastError: reason.slice(0, 2000),
        lastErrorAt: sql`now()`,
      }).where(eq(geoDatabases.id, row.id)).returning(),
      change: null,
    }));
    return { outcome: "failed", row: failed ?? { ...row, lastError: reason } };
  }
  const { checked, bytes } = fetched;
  let moved = false;
  const updated = await write(deps, async (tx) => {
    const [held] = await tx.select().from(geoDatabases).where(eq(geoDatabases.id, row.id))
      .for("update");
    // Deleted while it downloaded: nothing to swap.
    if (held === undefined) return { result: undefined, change: null };
    moved = held.checksum !== checked.checksum;
    if (moved) await storeFile(tx, checked, bytes);
    const [next] = await tx.update(geoDatabases).set(fileFields(checked))
      .where(eq(geoDatabases.id, row.id)).returning();
    return { result: next, change: moved ? geoChange(row.id) : null };
  });
  if (updated === undefined) return { outcome: "failed", row };
  if (moved && updated.enabled) await askReattribution(deps);
  return { outcome: moved ? "updated" : "unchanged", row: updated };
}

/** Refreshes a database by id (the api's `refresh`). */
export async function refreshById(deps: ServiceDeps, id: string): Promise<Refreshed> {
  return await refreshDatabase(deps, await getDatabase(deps, id));
}

/**
 * The enabled URL databases due now: never downloaded, or whose interval has passed since the
 * last download that brought a file. One that failed is tried again at each tick.
 */
export function dueDatabases(
  deps: Pick<ServiceDeps, "database">,
  now: Date,
): Promise<GeoDatabaseRow[]> {
  return read(deps, (db) =>
    db.select().from(geoDatabases).where(and(
      eq(geoDatabases.origin, DatabaseOrigin.url),
      eq(geoDatabases.enabled, true),
      isNotNull(geoDatabases.url),
      or(
        isNull(geoDatabases.checksum),
        isNull(geoDatabases.lastUpdateAt),
        sql`${geoDatabases.lastUpdateAt} + make_interval(hours => coalesce(${geoDatabases.updateIntervalHours}, 24)) <= ${now.toISOString()}::timestamptz`,
      ),
    )).orderBy(asc(geoDatabases.position), asc(sql`lower(${geoDatabases.name})`)));
}

/** Deletes the files no database names; answers how many went. */
export async function deleteUnreferencedFiles(
  deps: Pick<ServiceDeps, "database" | "changes">,
): Promise<number> {
  return await write(deps, async (tx) => {
    const named = tx.select({ checksum: geoDatabases.checksum }).from(geoDatabases)
      .where(isNotNull(geoDatabases.checksum));
    const gone = await tx.delete(geoFiles)
      .where(notInArray(geoFiles.checksum, named))
      .returning({ checksum: geoFiles.checksum });
    return { result: gone.length, change: null };
  });
}
