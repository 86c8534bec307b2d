/**
 * IP databases as the attribution reads them: where an address is, from one database. Two
 * formats: MaxMind DB files (`mmdb`: the shipped country database, GeoLite2, DB-IP, IPinfo and
 * the ip-location-db packages) and RFC 8805 geofeeds (`geofeed`: a CSV of `prefix,country,
 * region,city,postal` that network owners publish for their own ranges, and that an operator
 * writes for the exits they know). Runtime-neutral: the gateway (Deno) and the control plane
 * (Node) open the same files the same way.
 */

export const GeoFormat = {
  mmdb: "mmdb",
  geofeed: "geofeed",
} as const;
export type GeoFormat = (typeof GeoFormat)[keyof typeof GeoFormat];
export const GEO_FORMATS: readonly GeoFormat[] = Object.values(GeoFormat);

/** Where one database places an address; a field it does not know is null. */
export interface GeoLocation {
  /** ISO 3166-1 alpha-2, upper case. */
  country: string | null;
  /** ISO 3166-2 subdivision (`DE-BE`), upper case. */
  region: string | null;
  city: string | null;
  asn: number | null;
}

/** One opened database: answers addresses from memory, never blocking. */
export interface GeoDatabase {
  readonly name: string;
  readonly format: GeoFormat;
  /** Entries (geofeed lines) or search-tree nodes (mmdb): a size for the System page. */
  readonly size: number;
  /**
   * What the file says of itself, when it says (an mmdb's type and build day,
   * `GeoLite2-City 2026-06-17`); a geofeed states nothing.
   */
  readonly version?: string;
  /**
   * What the database says of the address (an IP literal); undefined when it holds nothing. The
   * answer may be shared by many addresses: read it, never change it.
   */
  lookup(address: string): GeoLocation | undefined;
}

/** A file that does not read as its stated format: refused whole, with where and why. */
export class GeoFormatError extends Error {
  readonly database: string;
  readonly format: GeoFormat;
  /** Geofeed lines at fault, numbered from 1 (the first hundred). */
  readonly lines: readonly { line: number; reason: string }[];

  constructor(
    database: string,
    format: GeoFormat,
    message: string,
    lines: readonly { line: number; reason: string }[] = [],
    options?: { cause?: unknown },
  ) {
    super(`${database}: not a ${format} file: ${message}`, options);
    this.name = "GeoFormatError";
    this.database = database;
    this.format = format;
    this.lines = lines;
  }
}

/** An ISO 3166-1 alpha-2 code as databases write it, upper case; null for anything else. */
export function countryCode(value: unknown): string | null {
  if (typeof value !== "string") return null;
  const code = value.trim().toUpperCase();
  return /^[A-Z]{2}$/.test(code) ? code : null;
}
