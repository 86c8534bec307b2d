/**
 * The admin's IP databases: their rows (geo_databases) and files (geo_files, one row per
 * distinct file, by SHA-256). A file is opened with the gateways' own readers before anything is
 * stored, so a file that does not parse as its stated format is refused whole and nothing
 * changes. A row and its file are written in one transaction, then announced (announce.ts).
 *
 * Files no row names any more are left for the next geo_update tick to delete (refresh.ts), so
 * a gateway still applying the feed that listed one can fetch it meanwhile.
 */
import { and, asc, eq, ne, sql } from "drizzle-orm";
import type { Tx } from "../../db/client.ts";
import { geoDatabases, geoFiles } from "../../db/schema.ts";
import {
  ConflictError,
  DuplicateError,
  NotFoundError,
  ValidationError,
} from "../../shared/errors.ts";
import type { GeoFormat } from "../../shared/geo/contract.ts";
import { checkEgressHost } from "../egress/guard.ts";
import { read, type ServiceDeps, write } from "../core/store.ts";
import { type DownloadAuth, fillDownloadUrl } from "../model/geo.ts";
import { askReattribution, geoChange } from "./announce.ts";
import { type CheckedFile, checkFile } from "./files.ts";
import { shippedFile } from "./shipped.ts";

export type GeoDatabaseRow = typeof geoDatabases.$inferSelect;

export const DatabaseOrigin = { upload: "upload", url: "url" } as const;

/** The admin's databases in the order they are consulted: position, then name. */
export function listDatabases(deps: Pick<ServiceDeps, "database">): Promise<GeoDatabaseRow[]> {
  return read(deps, (db) =>
    db.select().from(geoDatabases).orderBy(
      asc(geoDatabases.position),
      asc(sql`lower(${geoDatabases.name})`),
      asc(geoDatabases.id),
    ));
}

export async function getDatabase(
  deps: Pick<ServiceDeps, "database">,
  id: string,
): Promise<GeoDatabaseRow> {
  const [row] = await read(
    deps,
    (db) => db.select().from(geoDatabases).where(eq(geoDatabases.id, id)),
  );
  if (row === undefined) throw new NotFoundError("IP database");
  return row;
}

/** Stores a file under its checksum; a file stored before is kept as it is. */
export async function storeFile(tx: Tx, checked: CheckedFile, bytes: Uint8Array): Promise<void> {
  await tx.insert(geoFiles).values({
    checksum: checked.checksum,
    bytes,
    sizeBytes: checked.sizeBytes,
  }).onConflictDoNothing();
}

/** The file fields a row takes from a checked file, stamped now. */
export function fileFields(checked: CheckedFile) {
  return {
    checksum: checked.checksum,
    sizeBytes: checked.sizeBytes,
    entries: checked.entries,
    version: checked.version,
    lastUpdateAt: sql`now()`,
    lastError: null,
    lastErrorAt: null,
    updatedAt: sql`now()`,
  };
}

/**
 * A name is the database's word in every attribution ("source: database, database: <name>"):
 * unique regardless of case, and never the shipped database's.
 */
async function checkName(tx: Tx, name: string, field: string, except?: string): Promise<void> {
  const shipped = await shippedFile().catch(() => undefined);
  if (shipped !== undefined && shipped.name.toLowerCase() === name.toLowerCase()) {
    throw new DuplicateError(field, `${shipped.name} is the shipped database's name`);
  }
  const taken = await tx.select({ id: geoDatabases.id }).from(geoDatabases).where(
    except === undefined
      ? sql`lower(${geoDatabases.name}) = lower(${name})`
      : and(sql`lower(${geoDatabases.name}) = lower(${name})`, ne(geoDatabases.id, except)),
  );
  if (taken.length > 0) {
    throw new DuplicateError(field, "An IP database with this name already exists");
  }
}

/** Refuses a download host the egress guard would refuse anyway, before anything is stored. */
function checkUrlHost(deps: Pick<ServiceDeps, "settings">, url: string, field: string): void {
  const host = new URL(fillDownloadUrl(url, new Date())).hostname;
  const refused = checkEgressHost(host, { allowLoopback: deps.settings.egressAllowLoopback });
  if (refused !== undefined) {
    throw new ValidationError([{
      field,
      message: `names a host downloads may not reach: ${refused}`,
    }]);
  }
}

export interface UploadInput {
  name: string;
  format: GeoFormat;
  position?: number;
  enabled?: boolean;
}

/** Adds a database from an uploaded file (422 naming the format when it is not one). */
export async function addUploaded(
  deps: ServiceDeps,
  input: UploadInput,
  bytes: Uint8Array,
): Promise<GeoDatabaseRow> {
  const checked = checkFile(input.name, input.format, bytes, "body");
  const row = await write(deps, async (tx) => {
    await checkName(tx, input.name, "query.name");
    await storeFile(tx, checked, bytes);
    const [created] = await tx.insert(geoDatabases).values({
      name: input.name,
      format: input.format,
      enabled: input.enabled ?? true,
      position: input.position ?? 0,
      origin: DatabaseOrigin.upload,
      ...fileFields(checked),
    }).returning();
    return { result: created, change: geoChange(created.id) };
  });
  if (row.enabled) await askReattribution(deps);
  return row;
}

/** Replaces an uploaded database's file (a URL database takes its file from its URL). */
export async function replaceUploadedFile(
  deps: ServiceDeps,
  id: string,
  bytes: Uint8Array,
): Promise<GeoDatabaseRow> {
  const current = await getDatabase(deps, id);
  if (current.origin !== DatabaseOrigin.upload) {
    throw new ConflictError(
      `${current.name} is downloaded from its URL: refresh it instead of uploading a file`,
    );
  }
  const checked = checkFile(current.name, current.format as GeoFormat, bytes, "body");
  let moved = false;
  const row = await write(deps, async (tx) => {
    const [held] = await tx.select().from(geoDatabases).where(eq(geoDatabases.id, id))
      .for("update");
    if (held === undefined) throw new NotFoundError("IP database");
    moved = held.checksum !== checked.checksum;
    await storeFile(tx, checked, bytes);
    const [updated] = await tx.update(geoDatabases).set(fileFields(checked))
      .where(eq(geoDatabases.id, id)).returning();
    return { result: updated, change: moved ? geoChange(id) : null };
  });
  if (moved && row.enabled) await askReattribution(deps);
  return row;
}

export interface UrlInput {
  name: string;
  format: GeoFormat;
  url: string;
  auth: DownloadAuth | null;
  updateIntervalHours: number;
  position?: number;
  enabled?: boolean;
}

/**
 * Adds a URL database with the file its first download brought (refresh.ts downloads it and
 * checks it before this is called): an admin learns at once whether the URL gives a usable file.
 */
export async function addFromUrl(
  deps: ServiceDeps,
  input: UrlInput,
  first: { checked: CheckedFile; bytes: Uint8Array },
): Promise<GeoDatabaseRow> {
  const row = await write(deps, async (tx) => {
    await checkName(tx, input.name, "body.name");
    await storeFile(tx, first.checked, first.bytes);
    const [created] = await tx.insert(geoDatabases).values({
      name: input.name,
      format: input.format,
      enabled: input.enabled ?? true,
      position: input.position ?? 0,
      origin: DatabaseOrigin.url,
      url: input.url,
      auth: input.auth,
      updateIntervalHours: input.updateIntervalHours,
      ...fileFields(first.checked),
    }).returning();
    return { result: created, change: geoChange(created.id) };
  });
  if (row.enabled) await askReattribution(deps);
  return row;
}

/** Checks a new URL database's name and host before its first download is fetched. */
export async function checkNewUrlDatabase(deps: ServiceDeps, input: UrlInput): Promise<void> {
  checkUrlHost(deps, input.url, "body.url");
  await deps.database.transaction((tx) => checkName(tx, input.name, "body.name"));
}

export interface DatabasePatch {
  name?: string;
  enabled?: boolean;
  position?: number;
  url?: string;
  /** null: no authentication. */
  auth?: DownloadAuth | null;
  updateIntervalHours?: number;
}

/** Edits a database's row; its file changes only by an upload or a download. */
export async function patchDatabase(
  deps: ServiceDeps,
  id: string,
  patch: DatabasePatch,
): Promise<GeoDatabaseRow> {
  if (patch.url !== undefined) checkUrlHost(deps, patch.url, "body.url");
  let judged = false;
  let moved = false;
  const row = await write(deps, async (tx) => {
    const [held] = await tx.select().from(geoDatabases).where(eq(geoDatabases.id, id))
      .for("update");
    if (held === undefined) throw new NotFoundError("IP database");
    const downloads = patch.url !== undefined || patch.auth !== undefined ||
      patch.updateIntervalHours !== undefined;
    if (held.origin !== DatabaseOrigin.url && downloads) {
      throw new ConflictError(
        `${held.name} was uploaded: it has no URL, authentication or update interval`,
      );
    }
    if (patch.name !== undefined && patch.name !== held.name) {
      await checkName(tx, patch.name, "body.name", id);
    }
    const next = {
      name: patch.name ?? held.name,
      enabled: patch.enabled ?? held.enabled,
      position: patch.position ?? held.position,
      url: patch.url ?? held.url,
      auth: patch.auth === undefined ? held.auth : patch.auth,
      updateIntervalHours: patch.updateIntervalHours ?? held.updateIntervalHours,
    };
    const holdsFile = held.checksum !== null;
    // A rename changes what attributions name; enabling, disabling or moving a database with a
    // file changes which database answers.
    judged = holdsFile && (next.enabled !== held.enabled ||
      (next.enabled && (next.position !== held.position || next.name !== held.name)));
    moved = judged || next.name !== held.name || next.url !== held.url ||
      JSON.stringify(next.auth) !== JSON.stringify(held.auth) ||
      next.updateIntervalHours !== held.updateIntervalHours ||
      next.position !== held.position || next.enabled !== held.enabled;
    if (!moved) return { result: held, change: null };
    const [updated] = await tx.update(geoDatabases).set({ ...next, updatedAt: sql`now()` })
      .where(eq(geoDatabases.id, id)).returning();
    return { result: updated, change: geoChange(id) };
  });
  if (judged) await askReattribution(deps);
  return row;
}

/** Deletes a database; its file goes with the next geo_update tick unless another names it. */
export async function deleteDatabase(deps: ServiceDeps, id: string): Promise<void> {
  const deleted = await write(deps, async (tx) => {
    const [row] = await tx.delete(geoDatabases).where(eq(geoDatabases.id, id)).returning();
    if (row === undefined) throw new NotFoundError("IP database");
    return { result: row, change: geoChange(id) };
  });
  if (deleted.enabled && deleted.checksum !== null) await askReattribution(deps);
}
