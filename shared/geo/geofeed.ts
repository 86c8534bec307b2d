/**
 * RFC 8805 geofeeds: one `prefix,country,region,city,postal` line per block (trailing fields may
 * be left out; `#` starts a comment line; blank lines are skipped). A lookup takes the most
 * specific block holding the address (the shared CIDR table: one map probe per prefix length in
 * the file).
 *
 * Strict, whole-file: a line with a prefix that is not a CIDR block (or has host bits set), a
 * country that is not two letters, or a region that is not `<country>-<code>` refuses the file,
 * every such line reported with its number (the first hundred), so a typo never routes traffic
 * by half a file. Postal codes are read and dropped: routing has no use for them, and they can
 * name a street.
 */
import { CidrTable, clientIp } from "../net/cidr-set.ts";
import { type Cidr, parseCidr } from "../net/ip.ts";
import {
  countryCode,
  type GeoDatabase,
  GeoFormat,
  GeoFormatError,
  type GeoLocation,
} from "./contract.ts";

const MAX_REPORTED = 100;

/** Host bits set below the prefix (`10.0.0.1/8`): not the block the operator meant. */
function hostBitsSet(cidr: Cidr): boolean {
  if (cidr.family === 4) {
    const mask = cidr.bits === 0 ? 0 : (0xffffffff << (32 - cidr.bits)) >>> 0;
    return ((cidr.value & ~mask) >>> 0) !== 0;
  }
  for (let word = 0; word < 8; word++) {
    const kept = Math.max(0, Math.min(16, cidr.bits - word * 16));
    const mask = kept === 0 ? 0 : (0xffff << (16 - kept)) & 0xffff;
    if ((cidr.words[word] & ~mask & 0xffff) !== 0) return true;
  }
  return false;
}

/** Splits a CSV line (RFC 8805 fields are plain; quotes are allowed around a field). */
function fields(line: string): string[] {
  return line.split(",").map((field) => field.trim().replace(/^"(.*)"$/, "$1").trim());
}

/** Opens a geofeed's text; throws GeoFormatError naming every bad line. */
export function openGeofeed(name: string, text: string): GeoDatabase {
  const table = new CidrTable<GeoLocation>();
  const bad: { line: number; reason: string }[] = [];
  let badCount = 0;
  const refuse = (line: number, reason: string) => {
    badCount++;
    if (bad.length < MAX_REPORTED) bad.push({ line, reason });
  };
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (line === "" || line.startsWith("#")) continue;
    const [prefix, country = "", region = "", city = ""] = fields(line);
    let cidr: Cidr;
    try {
      cidr = parseCidr(prefix);
    } catch {
      refuse(i + 1, `"${prefix}" is not a CIDR block`);
      continue;
    }
    if (!prefix.includes("/")) {
      refuse(i + 1, `"${prefix}" has no prefix length`);
      continue;
    }
    if (hostBitsSet(cidr)) {
      refuse(i + 1, `"${prefix}" has bits set past its prefix length`);
      continue;
    }
    const code = countryCode(country);
    if (country !== "" && code === null) {
      refuse(i + 1, `"${country}" is not an ISO 3166-1 alpha-2 country code`);
      continue;
    }
    const subdivision = region.toUpperCase();
    if (subdivision !== "" && (code === null || !subdivision.startsWith(`${code}-`))) {
      refuse(i + 1, `"${region}" is not a region of ${code ?? "its (missing) country"}`);
      continue;
    }
    table.add(cidr, {
      country: code,
      region: subdivision === "" ? null : subdivision,
      city: city === "" ? null : city,
      asn: null,
    });
  }
  if (badCount > 0) {
    throw new GeoFormatError(
      name,
      GeoFormat.geofeed,
      `${badCount} line${badCount === 1 ? "" : "s"} refused, the first at line ${bad[0].line}: ${
        bad[0].reason
      }`,
      bad,
    );
  }
  if (table.size === 0) throw new GeoFormatError(name, GeoFormat.geofeed, "no prefix in it");
  return {
    name,
    format: GeoFormat.geofeed,
    size: table.size,
    lookup(address: string): GeoLocation | undefined {
      const ip = clientIp(address);
      if (ip === undefined) return undefined;
      // Two lines for one block: the first one the file gives.
      return table.match(ip)?.values[0];
    },
  };
}
