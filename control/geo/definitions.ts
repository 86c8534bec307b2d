/**
 * The databases and settings in force, as a control process judges with them (the api's
 * lookups, the workers' attribution). `current()` reads the settings row and the enabled
 * database list (one small query each) every time it is asked, so it always says what is
 * committed; a file is read and opened only when its checksum is new to the process, and the
 * files no longer listed are let go. The admin's databases come by position, then name, and the
 * shipped database last, as the feed lists them for the gateways.
 */
import { and, asc, eq, inArray, isNotNull, sql } from "drizzle-orm";
import { geoDatabases, geoFiles } from "../../db/schema.ts";
import { errorText } from "../../shared/errors.ts";
import type { GeoDatabase, GeoFormat } from "../../shared/geo/contract.ts";
import { GeoStack } from "../../shared/geo/stack.ts";
import { read, type ServiceDeps } from "../core/store.ts";
import type { Logger } from "../core/logging.ts";
import { openGeoFile } from "./files.ts";
import type { GeoJudging, GeoJudgingSource } from "./judging.ts";
import { type GeoSettings, readGeoSettings } from "./settings.ts";
import { shippedBytes, type ShippedFile, shippedFile } from "./shipped.ts";

/** One database in force: who it is, and its file opened. */
export interface DatabaseInForce {
  /** The row's id; `shipped` for the shipped database. */
  id: string;
  name: string;
  format: GeoFormat;
  checksum: string;
  database: GeoDatabase;
}

export interface GeoCurrent {
  settings: GeoSettings;
  /** The databases in force, in the order consulted; the shipped one last. */
  databases: readonly DatabaseInForce[];
  stack: GeoStack;
}

export interface GeoDefinitionsOptions {
  deps: Pick<ServiceDeps, "database">;
  logger: Logger;
  /** The shipped database's bytes (its package file unless told). */
  shipped?: { describe(): Promise<ShippedFile>; bytes(): Promise<Uint8Array> };
}

/** A file opened once: by its checksum and format, whatever database names it. */
type OpenKey = string;
const openKey = (format: string, checksum: string): OpenKey => `${format}:${checksum}`;

/**
 * A view of an opened file under a database's name: the file's reader is shared, so a rename
 * needs no second open (the name is what attributions quote).
 */
function named(name: string, file: GeoDatabase): GeoDatabase {
  if (file.name === name) return file;
  return {
    name,
    format: file.format,
    size: file.size,
    version: file.version,
    lookup: (address) => file.lookup(address),
  };
}

export class GeoDefinitions implements GeoJudgingSource {
  readonly #o: GeoDefinitionsOptions;
  readonly #shipped: NonNullable<GeoDefinitionsOptions["shipped"]>;
  /**
   * Opened files by format and checksum: null for a file that did not open (logged once, not
   * tried again), undefined for one not read (deleted meanwhile: read again next time).
   */
  #files = new Map<OpenKey, Promise<GeoDatabase | null | undefined>>();
  /** The last answer's stack, kept while the list in force is the same. */
  #last: { signature: string; databases: DatabaseInForce[]; stack: GeoStack } | undefined;
  #opened = 0;

  constructor(options: GeoDefinitionsOptions) {
    this.#o = options;
    this.#shipped = options.shipped ?? { describe: shippedFile, bytes: shippedBytes };
  }

  /** Files read and opened by this process so far (each checksum once). */
  get opened(): number {
    return this.#opened;
  }

  async current(): Promise<GeoCurrent> {
    const [settings, rows, shipped] = await Promise.all([
      readGeoSettings(this.#o.deps),
      read(this.#o.deps, (db) =>
        db.select({
          id: geoDatabases.id,
          name: geoDatabases.name,
          format: geoDatabases.format,
          checksum: geoDatabases.checksum,
        }).from(geoDatabases)
          .where(and(eq(geoDatabases.enabled, true), isNotNull(geoDatabases.checksum)))
          .orderBy(
            asc(geoDatabases.position),
            asc(sql`lower(${geoDatabases.name})`),
            asc(geoDatabases.id),
          )),
      this.#shipped.describe(),
    ]);
    const listed = [
      ...rows.map((row) => ({
        id: row.id,
        name: row.name,
        format: row.format as GeoFormat,
        checksum: row.checksum!,
      })),
      { id: shipped.id, name: shipped.name, format: shipped.format, checksum: shipped.checksum },
    ];
    const signature = JSON.stringify(listed);
    if (this.#last?.signature === signature) {
      return { settings, databases: this.#last.databases, stack: this.#last.stack };
    }
    await this.#openNew(listed, shipped);
    const databases: DatabaseInForce[] = [];
    let unread = false;
    for (const entry of listed) {
      const file = await this.#files.get(openKey(entry.format, entry.checksum));
      if (file) databases.push({ ...entry, database: named(entry.name, file) });
      else if (file === undefined) unread = true;
    }
    // Files no database lists any more are let go (their memory with them).
    const kept = new Set(listed.map((entry) => openKey(entry.format, entry.checksum)));
    for (const key of this.#files.keys()) if (!kept.has(key)) this.#files.delete(key);
    const stack = new GeoStack(databases.map((entry) => entry.database));
    // With a file not read (deleted meanwhile), the next call reads the list again.
    this.#last = unread ? undefined : { signature, databases, stack };
    return { settings, databases, stack };
  }

  /** What attribution judges with: the install's policy and the stack. */
  async judging(): Promise<GeoJudging> {
    const { settings, stack } = await this.current();
    return {
      policy: { sources: settings.locationSources, conflictRule: settings.locationConflictRule },
      stack,
    };
  }

  /** Reads the files of checksums new to the process (one query) and opens each. */
  async #openNew(
    listed: readonly { name: string; format: GeoFormat; checksum: string }[],
    shipped: ShippedFile,
  ): Promise<void> {
    const fresh = listed.filter((entry) => !this.#files.has(openKey(entry.format, entry.checksum)));
    if (fresh.length === 0) return;
    const stored = fresh.filter((entry) => entry.checksum !== shipped.checksum);
    const wanted = [...new Set(stored.map((entry) => entry.checksum))];
    const bytes = new Map<string, Uint8Array>();
    const load = (async () => {
      if (wanted.length > 0) {
        const rows = await read(
          this.#o.deps,
          (db) =>
            db.select({ checksum: geoFiles.checksum, bytes: geoFiles.bytes }).from(geoFiles)
              .where(inArray(geoFiles.checksum, wanted)),
        );
        for (const row of rows) bytes.set(row.checksum, row.bytes);
      }
      if (fresh.some((entry) => entry.checksum === shipped.checksum)) {
        bytes.set(shipped.checksum, await this.#shipped.bytes());
      }
    })();
    for (const entry of fresh) {
      const key = openKey(entry.format, entry.checksum);
      if (this.#files.has(key)) continue;
      const opening = load.then(() => this.#open(entry, bytes.get(entry.checksum)));
      // A failed read rejects here too: the caller hears of it once, from `load` below.
      opening.catch(() => {});
      this.#files.set(key, opening);
    }
    try {
      await load;
    } finally {
      // What was not read (a failed query, a file deleted meanwhile) is read again next time.
      for (const entry of fresh) {
        const key = openKey(entry.format, entry.checksum);
        if (!bytes.has(entry.checksum)) this.#files.delete(key);
      }
    }
  }

  #open(
    entry: { name: string; format: GeoFormat; checksum: string },
    bytes: Uint8Array | undefined,
  ): GeoDatabase | null | undefined {
    if (bytes === undefined) return undefined;
    try {
      const file = openGeoFile(entry.name, entry.format, bytes);
      this.#opened++;
      return file;
    } catch (error) {
      // Stored files were checked when they came; one that fails now is skipped, loudly.
      this.#o.logger.error(
        { database: entry.name, checksum: entry.checksum, error: errorText(error) },
        "IP database file does not open; consulted without it",
      );
      return null;
    }
  }
}
