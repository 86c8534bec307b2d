/**
 * IP database files as the control plane takes them: opened with the same readers the gateways
 * use (shared/geo), so a file stored here is one every gateway can open, and named by the
 * SHA-256 of its bytes, which is how geo_files keeps it and how gateways ask for it.
 */
import { createHash } from "node:crypto";
import { type FieldIssue, ValidationError } from "../../shared/errors.ts";
import { type GeoDatabase, GeoFormat, GeoFormatError } from "../../shared/geo/contract.ts";
import { openGeofeed } from "../../shared/geo/geofeed.ts";
import { openMmdb } from "../../shared/geo/mmdb.ts";

/**
 * The largest file taken, uploaded or downloaded: the biggest public city databases are about
 * 130 MB; each file is held whole in memory while it is checked and stored.
 */
export const MAX_GEO_FILE_BYTES = 256 * 1024 * 1024;

/** SHA-256 of the bytes, lower-case hex. */
export function checksumOf(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** Opens a file as `format`; GeoFormatError when it is not one. */
export function openGeoFile(name: string, format: GeoFormat, bytes: Uint8Array): GeoDatabase {
  if (format === GeoFormat.mmdb) return openMmdb(name, bytes);
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch (error) {
    throw new GeoFormatError(name, format, "it is not UTF-8 text", [], { cause: error });
  }
  return openGeofeed(name, text);
}

/** What a file that opened holds: its name by content, its size, its entries, its version. */
export interface CheckedFile {
  checksum: string;
  sizeBytes: number;
  entries: number;
  version: string | null;
}

/**
 * Opens the file to check it is what it says, and answers what it holds; a file that does not
 * open is a 422 naming `field` and the format, and for a geofeed each line at fault.
 */
export function checkFile(
  name: string,
  format: GeoFormat,
  bytes: Uint8Array,
  field: string,
): CheckedFile {
  let opened: GeoDatabase;
  try {
    opened = openGeoFile(name, format, bytes);
  } catch (error) {
    if (error instanceof GeoFormatError) throw refusal(error, field);
    throw error;
  }
  return {
    checksum: checksumOf(bytes),
    sizeBytes: bytes.byteLength,
    entries: opened.size,
    version: opened.version ?? null,
  };
}

/** Why a file was refused, without the database's name the error leads with. */
export function formatReason(error: GeoFormatError): string {
  const lead = `${error.database}: not a ${error.format} file: `;
  return error.message.startsWith(lead) ? error.message.slice(lead.length) : error.message;
}

/** The 422 of a file that is not its format: one issue for the file, then one per bad line. */
function refusal(error: GeoFormatError, field: string): ValidationError {
  const issues: FieldIssue[] = [{
    field,
    message: `is not a ${error.format} file: ${formatReason(error)}`,
  }];
  for (const bad of error.lines) issues.push({ field, message: `line ${bad.line}: ${bad.reason}` });
  return new ValidationError(issues, { cause: error });
}
