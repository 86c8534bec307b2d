/**
 * Where an exit is, as the pages show it: a country with its name on hover, where the country
 * came from, and a badge when the sources attribution asked disagree. The proxies list and the
 * Exit locations tab share these, so a disagreement looks the same on both.
 */
import type { Proxy } from "../../../api/answers/proxies.ts";

// The browser's own country names; a code it does not know is shown as it is.
const NAMES = typeof Intl.DisplayNames === "function"
  ? new Intl.DisplayNames(undefined, { type: "region" })
  : undefined;

export function countryName(code: string): string {
  try {
    return NAMES?.of(code) ?? code;
  } catch {
    return code;
  }
}

/** A country code with its name on hover; a dash when there is none. */
export function Country({ code }: { code: string | null | undefined }) {
  if (!code) return <span class="muted">–</span>;
  return <abbr class="country" title={countryName(code)}>{code}</abbr>;
}

/** What `country_source` means, in a few words. */
const SOURCE_WORDS: Record<string, string> = {
  manual: "set by hand",
  vendor: "the vendor's word",
  database: "an IP database",
  endpoint: "the echo",
};

export const sourceWords = (source: string) => SOURCE_WORDS[source] ?? source;

type Location = NonNullable<Proxy["location"]>;

/** What each source said, one line: `database (exits): GB · endpoint: GB · set by hand: US`. */
export function sourcesSaid(
  location: Location | null,
  manual: string | null,
): string {
  const said = (location?.sources ?? []).map((word) =>
    `${word.source}${word.database ? ` (${word.database})` : ""}: ${word.country ?? "nothing"}`
  );
  if (manual !== null) said.push(`set by hand: ${manual}`);
  return said.join(" · ");
}

/** The badge a row gets when its sources disagree on the country. */
export function ConflictBadge({ title }: { title?: string }) {
  return (
    <span class="badge warning" data-conflict title={title}>
      sources disagree
    </span>
  );
}

/** A proxy's country, where it came from, the place seen, and the conflict badge. */
export function ProxyCountry({ proxy }: { proxy: Proxy }) {
  const location = proxy.location;
  const place = [location?.city, location?.region].filter(Boolean).join(", ");
  return (
    <span class="proxy-country">
      <Country code={proxy.country} />
      {proxy.country_source
        ? (
          <span
            class="muted source"
            data-source={proxy.country_source}
            title={sourceWords(proxy.country_source)}
          >
            {proxy.country_source}
          </span>
        )
        : null}
      {proxy.location_conflict
        ? (
          <ConflictBadge
            title={sourcesSaid(location, proxy.country_source === "manual" ? proxy.country : null)}
          />
        )
        : null}
      {place || location?.ip
        ? (
          <span class="muted place">
            {place}
            {place && location?.ip ? " · " : ""}
            {location?.ip
              ? (
                <a
                  class="exit-ip"
                  href={`/projects/${proxy.project_id}/exits/log?proxy=${proxy.id}`}
                  title="Where this proxy was seen"
                >
                  {location.ip}
                </a>
              )
              : null}
          </span>
        )
        : null}
    </span>
  );
}

/** An exit seen in another country than was claimed for it: the badge saying what was claimed. */
export function ClaimedElsewhere(
  { seen, claimed }: { seen: string | null; claimed: string | null },
) {
  if (seen === null || claimed === null || seen === claimed) return null;
  return (
    <span class="badge warning" data-elsewhere title="Seen in another country than claimed">
      claimed {claimed}
    </span>
  );
}
