/**
 * The shipped country database as the control plane hands it out: always last in the stack,
 * listed in the feed under its own checksum like any admin's file, and served to gateways by
 * that checksum from the package on disk (it is never stored in geo_files).
 */
import { readFile } from "node:fs/promises";
import { GeoFormat } from "../../shared/geo/contract.ts";
import { SHIPPED_COUNTRY_DATABASE } from "../../shared/geo/shipped.ts";
import { checksumOf } from "./files.ts";

/** The feed's and the answers' id for it: no row of geo_databases has one like it. */
export const SHIPPED_ID = "shipped";

export interface ShippedFile {
  id: typeof SHIPPED_ID;
  name: string;
  format: GeoFormat;
  checksum: string;
  sizeBytes: number;
}

let described: Promise<ShippedFile> | undefined;

/** The file's bytes, read from the package each time (a gateway asks once per start). */
export async function shippedBytes(): Promise<Uint8Array> {
  return new Uint8Array(await readFile(SHIPPED_COUNTRY_DATABASE.url));
}

/** Its checksum and size, read once per process (the file does not change under a build). */
export function shippedFile(): Promise<ShippedFile> {
  const pending = described ?? shippedBytes().then((bytes): ShippedFile => ({
    id: SHIPPED_ID,
    name: SHIPPED_COUNTRY_DATABASE.name,
    format: GeoFormat.mmdb,
    checksum: checksumOf(bytes),
    sizeBytes: bytes.byteLength,
  })).catch((error) => {
    // A failed read is tried again by the next caller, not remembered.
    described = undefined;
    throw error;
  });
  described = pending;
  return pending;
}
