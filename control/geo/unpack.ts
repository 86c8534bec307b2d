/**
 * Downloads come packed the way publishers ship them: DB-IP's `.mmdb.gz`, MaxMind's `.tar.gz`
 * holding a folder with the `.mmdb` and licence files. A gzip stream is inflated (bounded), and
 * a tar archive gives up its one member of the database's kind; anything else is taken as the
 * file itself and left to the format check.
 */
import { gunzipSync } from "node:zlib";
import { GeoFormat } from "../../shared/geo/contract.ts";

const GZIP_MAGIC = [0x1f, 0x8b];
const TAR_BLOCK = 512;

function isGzip(bytes: Uint8Array): boolean {
  return bytes.length > 2 && bytes[0] === GZIP_MAGIC[0] && bytes[1] === GZIP_MAGIC[1];
}

/** POSIX tar ("ustar" at offset 257 of the first header). */
function isTar(bytes: Uint8Array): boolean {
  if (bytes.length < TAR_BLOCK) return false;
  return new TextDecoder().decode(bytes.subarray(257, 262)) === "ustar";
}

function headerText(header: Uint8Array, offset: number, length: number): string {
  const field = header.subarray(offset, offset + length);
  const end = field.indexOf(0);
  return new TextDecoder().decode(end < 0 ? field : field.subarray(0, end));
}

/** The member names a database of `format` is read from, by their ending. */
const MEMBER_ENDINGS: Readonly<Record<GeoFormat, readonly string[]>> = {
  mmdb: [".mmdb"],
  geofeed: [".csv", ".txt", ".geofeed"],
};

/** The first regular member of the archive whose name ends as `format`'s files do. */
function tarMember(bytes: Uint8Array, format: GeoFormat): Uint8Array | undefined {
  for (let offset = 0; offset + TAR_BLOCK <= bytes.length;) {
    const header = bytes.subarray(offset, offset + TAR_BLOCK);
    if (header.every((byte) => byte === 0)) return undefined;
    const prefix = headerText(header, 345, 155);
    const name = `${prefix === "" ? "" : `${prefix}/`}${headerText(header, 0, 100)}`;
    const size = Number.parseInt(headerText(header, 124, 12).trim() || "0", 8);
    const type = String.fromCharCode(header[156] || 0x30);
    const start = offset + TAR_BLOCK;
    if (!Number.isFinite(size) || size < 0 || start + size > bytes.length) return undefined;
    if (
      (type === "0" || type === "\0") &&
      MEMBER_ENDINGS[format].some((ending) => name.toLowerCase().endsWith(ending))
    ) {
      return bytes.subarray(start, start + size);
    }
    offset = start + Math.ceil(size / TAR_BLOCK) * TAR_BLOCK;
  }
  return undefined;
}

/**
 * The database file in a download: inflated when gzipped (at most `maxBytes`), taken from its
 * archive when a tar; as it came otherwise. Throws when the packing is broken or holds no file
 * of the format, saying so.
 */
export function unpackDownload(bytes: Uint8Array, format: GeoFormat, maxBytes: number): Uint8Array {
  let file = bytes;
  if (isGzip(file)) {
    try {
      file = new Uint8Array(gunzipSync(file, { maxOutputLength: maxBytes }));
    } catch (error) {
      throw new Error(`the gzip download does not inflate within ${maxBytes} bytes`, {
        cause: error,
      });
    }
  }
  if (isTar(file)) {
    const member = tarMember(file, format);
    if (member === undefined) {
      throw new Error(
        `the tar archive holds no ${MEMBER_ENDINGS[format].join(" or ")} file`,
      );
    }
    file = member;
  }
  return file;
}
