/**
 * MaxMind DB files through `mmdb-lib` (the reader `maxmind` is built on, without its file
 * watching). The record shapes differ by publisher, so a record is read by what it holds:
 * MaxMind's and DB-IP's (`country.iso_code`, `subdivisions`, `city.names.en`), ip-location-db's
 * and IPinfo's flat ones (`country_code`, `country`, `region`, `city`), and an ASN field
 * (`autonomous_system_number`, `asn`) wherever it sits.
 *
 * Public data says nothing true of special-purpose addresses (private, loopback, link-local,
 * shared, documentation...): such an address is never looked up here (a geofeed may place one).
 * An IPv4-mapped IPv6 address is looked up as its IPv4 one.
 *
 * `mmdb-lib` wants a Node Buffer; `node:buffer` is one of the Node modules both runtimes carry.
 */
import { Buffer } from "node:buffer";
import { Reader } from "mmdb-lib";
import { clientIp } from "../net/cidr-set.ts";
import { formatIPv4 } from "../net/ip.ts";
import { prohibitedKind } from "../routing/destination-guard.ts";
import {
  countryCode,
  type GeoDatabase,
  GeoFormat,
  GeoFormatError,
  type GeoLocation,
} from "./contract.ts";

type Rec = Record<string, unknown>;

const isRecord = (value: unknown): value is Rec =>
  typeof value === "object" && value !== null && !Array.isArray(value);

function englishName(value: unknown): string | null {
  if (typeof value === "string") return value === "" ? null : value;
  if (isRecord(value) && isRecord(value.names) && typeof value.names.en === "string") {
    return value.names.en;
  }
  return null;
}

function asnOf(record: Rec): number | null {
  const raw = record.autonomous_system_number ?? record.asn ??
    (isRecord(record.traits) ? record.traits.autonomous_system_number : undefined);
  const asn = typeof raw === "string" ? Number(raw.replace(/^AS/i, "")) : raw;
  return typeof asn === "number" && Number.isInteger(asn) && asn > 0 ? asn : null;
}

/** A record, whatever its publisher's shape, as a location; undefined when it holds nothing. */
export function locationOf(record: unknown): GeoLocation | undefined {
  if (!isRecord(record)) return undefined;
  const country = countryCode(
    isRecord(record.country) ? record.country.iso_code : record.country_code ?? record.country,
  );
  let region: string | null = null;
  const subdivisions = record.subdivisions;
  if (Array.isArray(subdivisions) && isRecord(subdivisions[0]) && country !== null) {
    const code = subdivisions[0].iso_code;
    if (typeof code === "string" && code !== "") region = `${country}-${code.toUpperCase()}`;
  } else if (typeof record.region_code === "string" && country !== null && record.region_code) {
    region = `${country}-${record.region_code.toUpperCase()}`;
  }
  const city = englishName(record.city);
  const asn = asnOf(record);
  if (country === null && region === null && city === null && asn === null) return undefined;
  return { country, region, city, asn };
}

/** Records held decoded at most (a country file has a few hundred; a city file, many more). */
const MAX_DECODED = 50_000;

/**
 * Decoded records by their offset in the file: many addresses share one record (a country's),
 * and decoding it again for each lookup would cost most of the lookup. Bounded: past the bound
 * it starts afresh.
 */
class DecodedRecords {
  readonly #records = new Map<number, unknown>();

  get(offset: number): unknown {
    return this.#records.get(offset);
  }

  set(offset: number, value: unknown): void {
    if (this.#records.size >= MAX_DECODED) this.#records.clear();
    this.#records.set(offset, value);
  }
}

/** Locations by the record they were read from, so a hit builds no new object. */
const locations = new WeakMap<object, GeoLocation | null>();

/** The file's type and build day, as its metadata states them. */
function mmdbVersion(type: unknown, built: unknown): string | undefined {
  const parts: string[] = [];
  if (typeof type === "string" && type !== "") parts.push(type);
  if (built instanceof Date && Number.isFinite(built.getTime())) {
    parts.push(built.toISOString().slice(0, 10));
  }
  return parts.length === 0 ? undefined : parts.join(" ");
}

/** Opens a MaxMind DB file's bytes; throws GeoFormatError when they are not one. */
export function openMmdb(name: string, bytes: Uint8Array): GeoDatabase {
  let reader: Reader<Rec>;
  try {
    reader = new Reader<Rec>(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), {
      cache: new DecodedRecords(),
    });
  } catch (error) {
    throw new GeoFormatError(name, GeoFormat.mmdb, "its metadata does not read", [], {
      cause: error,
    });
  }
  return {
    name,
    format: GeoFormat.mmdb,
    size: reader.metadata.nodeCount,
    version: mmdbVersion(reader.metadata.databaseType, reader.metadata.buildEpoch),
    lookup(address: string): GeoLocation | undefined {
      const ip = clientIp(address);
      if (ip === undefined || prohibitedKind(ip) !== undefined) return undefined;
      let record: Rec | null;
      try {
        // mmdb-lib reads the text itself: IPv4 (a mapped one included) goes dotted, IPv6 as given.
        record = reader.get(ip.family === 4 ? formatIPv4(ip.value) : address);
      } catch {
        // Not an address, or an IPv6 one in an IPv4-only file: nothing to say of it.
        return undefined;
      }
      if (record === null) return undefined;
      let location = locations.get(record);
      if (location === undefined) {
        location = locationOf(record) ?? null;
        locations.set(record, location);
      }
      return location ?? undefined;
    },
  };
}
