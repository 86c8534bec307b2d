/**
 * Attribution: where a proxy's exit is, from what each source says of it. One rule for every
 * path that learns an exit (health checks, vendor syncs, enrich, re-attribution, the gateway's
 * preflight), so a gateway judging a session slot reaches the verdict the worker writes.
 *
 * Sources, in the order a project (or the install) lists them:
 * - `database`: the IP databases in force, looking up the exit's address;
 * - `vendor`: the country the vendor promised for the exit (its session or its list);
 * - `endpoint`: what the echo answered about the address it saw, when it answers a country.
 *
 * The conflict rule picks the country when sources disagree: `first` takes the first source in
 * order that names one; `consensus` takes the country most sources name (ties go to the earlier
 * source). Either way a disagreement is kept as a conflict: the row says so, the Exit locations
 * page shows it, and the `strict` location policy takes the proxy out of routing.
 *
 * A country an operator set by hand is never replaced; sources that contradict it are a
 * conflict like any other.
 */
import type { GeoLocation } from "./contract.ts";
import type { GeoStack } from "./stack.ts";

export const LocationSource = {
  database: "database",
  vendor: "vendor",
  endpoint: "endpoint",
} as const;
export type LocationSource = (typeof LocationSource)[keyof typeof LocationSource];
export const LOCATION_SOURCES: readonly LocationSource[] = Object.values(LocationSource);

export const ConflictRule = {
  consensus: "consensus",
  first: "first",
} as const;
export type ConflictRule = (typeof ConflictRule)[keyof typeof ConflictRule];
export const CONFLICT_RULES: readonly ConflictRule[] = Object.values(ConflictRule);

/** Where a row's country came from (`proxies.country_source`). */
export const CountrySource = {
  manual: "manual",
  ...LocationSource,
} as const;
export type CountrySource = (typeof CountrySource)[keyof typeof CountrySource];

export interface AttributionPolicy {
  sources: readonly LocationSource[];
  conflictRule: ConflictRule;
}

export const DEFAULT_POLICY: AttributionPolicy = {
  sources: LOCATION_SOURCES,
  conflictRule: ConflictRule.consensus,
};

/** A project's own policy where it sets one, else the install's; unknown names dropped. */
export function policyOf(
  install: AttributionPolicy,
  sources: readonly string[] | null | undefined,
  conflictRule: string | null | undefined,
): AttributionPolicy {
  const own = sources?.filter((s): s is LocationSource =>
    (LOCATION_SOURCES as readonly string[]).includes(s)
  );
  return {
    sources: own !== undefined && own.length > 0 ? own : install.sources,
    conflictRule: conflictRule === "first" || conflictRule === "consensus"
      ? conflictRule
      : install.conflictRule,
  };
}

/** What is known of one exit when it is judged. */
export interface ExitFacts {
  /** The address the exit was seen at; null when only the vendor's word is known. */
  ip: string | null;
  /** The vendor's promise for the exit. */
  vendorCountry: string | null;
  /** A country the operator set by hand: kept whatever the sources say. */
  manualCountry: string | null;
  /** What the echo said of the address, when it answered a location. */
  endpoint?: GeoLocation | null;
}

/** What one source said. */
export interface SourceWord {
  source: LocationSource;
  country: string | null;
  /** The database that placed the address (source `database`). */
  database?: string;
}

export interface Attribution {
  country: string | null;
  countrySource: CountrySource | null;
  /** ISO 3166-2 subdivision (`DE-BE`), from a source agreeing on the country. */
  region: string | null;
  city: string | null;
  asn: number | null;
  /** The sources that named a country disagree (or contradict a country set by hand). */
  conflict: boolean;
  /** Each source asked, in policy order, with what it said. */
  sources: SourceWord[];
}

/** Judges one exit. `stack` is the databases in force; undefined when none is open. */
export function attribute(
  facts: ExitFacts,
  policy: AttributionPolicy,
  stack: GeoStack | undefined,
): Attribution {
  const words: SourceWord[] = [];
  const places = new Map<LocationSource, GeoLocation>();
  for (const source of policy.sources) {
    if (source === LocationSource.database) {
      const found = facts.ip === null || stack === undefined ? undefined : stack.lookup(facts.ip);
      words.push({
        source,
        country: found?.country ?? null,
        ...(found?.country ? { database: found.source } : {}),
      });
      if (found !== undefined) places.set(source, found);
    } else if (source === LocationSource.vendor) {
      words.push({ source, country: facts.vendorCountry });
    } else {
      const found = facts.endpoint ?? undefined;
      words.push({ source, country: found?.country ?? null });
      if (found !== undefined) places.set(source, found);
    }
  }

  const named = words.filter((w) => w.country !== null);
  const countries = new Set(named.map((w) => w.country));
  let country: string | null = null;
  let countrySource: CountrySource | null = null;
  if (facts.manualCountry !== null) {
    country = facts.manualCountry;
    countrySource = CountrySource.manual;
    countries.add(country);
  } else if (named.length > 0) {
    const chosen = policy.conflictRule === ConflictRule.first ? named[0] : mostNamed(named);
    country = chosen.country;
    countrySource = chosen.source;
  }

  // The finer places come only from a source that agrees on the country.
  let region: string | null = null;
  let city: string | null = null;
  let asn: number | null = null;
  for (const source of policy.sources) {
    const place = places.get(source);
    if (place === undefined || (place.country !== null && place.country !== country)) continue;
    if (place.country === null && country !== null) {
      asn ??= place.asn;
      continue;
    }
    region ??= place.region;
    city ??= place.city;
    asn ??= place.asn;
  }
  return {
    country,
    countrySource,
    region,
    city,
    asn,
    conflict: countries.size > 1,
    sources: words,
  };
}

/** The word whose country most words name; the earliest such on a tie. */
function mostNamed(named: readonly SourceWord[]): SourceWord {
  let best = named[0];
  let bestVotes = 0;
  for (const word of named) {
    let votes = 0;
    for (const other of named) if (other.country === word.country) votes++;
    if (votes > bestVotes) {
      best = word;
      bestVotes = votes;
    }
  }
  return best;
}
