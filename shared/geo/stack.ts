/**
 * The databases in force, in order: a lookup asks each until one places the address in a
 * country, and takes that database's answer, filling a region, city or ASN it lacks from the
 * databases after it that agree on the country (a geofeed names a city, a country database
 * the ASN). Which database answered is kept, so attribution can say where a country came from.
 */
import type { GeoDatabase, GeoLocation } from "./contract.ts";

export interface GeoAnswer extends GeoLocation {
  /** The database that placed the address in its country (or, with no country, the first that knew anything). */
  source: string;
}

export class GeoStack {
  readonly databases: readonly GeoDatabase[];

  constructor(databases: readonly GeoDatabase[]) {
    this.databases = databases;
  }

  lookup(address: string): GeoAnswer | undefined {
    let answer: GeoAnswer | undefined;
    for (const database of this.databases) {
      const found = database.lookup(address);
      if (found === undefined) continue;
      if (answer === undefined) {
        answer = { ...found, source: database.name };
        if (answer.country === null) continue;
      } else if (answer.country === null) {
        if (found.country === null) continue;
        answer = { ...found, source: database.name };
      } else if (found.country !== null && found.country !== answer.country) {
        continue;
      } else {
        answer.region ??= found.region;
        answer.city ??= found.city;
        answer.asn ??= found.asn;
      }
      if (answer.region !== null && answer.city !== null && answer.asn !== null) break;
    }
    return answer;
  }
}
