/**
 * Countries as everything that takes one spells them: ISO 3166-1 alpha-2, upper case. The admin
 * API (connector countries, proxy countries) and the gateway's username grammar (`-cc-`) both
 * read a code through `normaliseCountry`, so `uk`, ` gb ` and `GB` mean the same everywhere.
 *
 * Runs unchanged on Node and Deno.
 */

/** The officially assigned ISO 3166-1 alpha-2 codes. */
// deno-fmt-ignore
export const COUNTRY_CODES: readonly string[] = [
  "AD", "AE", "AF", "AG", "AI", "AL", "AM", "AO", "AQ", "AR", "AS", "AT", "AU", "AW", "AX", "AZ",
  "BA", "BB", "BD", "BE", "BF", "BG", "BH", "BI", "BJ", "BL", "BM", "BN", "BO", "BQ", "BR", "BS",
  "BT", "BV", "BW", "BY", "BZ", "CA", "CC", "CD", "CF", "CG", "CH", "CI", "CK", "CL", "CM", "CN",
  "CO", "CR", "CU", "CV", "CW", "CX", "CY", "CZ", "DE", "DJ", "DK", "DM", "DO", "DZ", "EC", "EE",
  "EG", "EH", "ER", "ES", "ET", "FI", "FJ", "FK", "FM", "FO", "FR", "GA", "GB", "GD", "GE", "GF",
  "GG", "GH", "GI", "GL", "GM", "GN", "GP", "GQ", "GR", "GS", "GT", "GU", "GW", "GY", "HK", "HM",
  "HN", "HR", "HT", "HU", "ID", "IE", "IL", "IM", "IN", "IO", "IQ", "IR", "IS", "IT", "JE", "JM",
  "JO", "JP", "KE", "KG", "KH", "KI", "KM", "KN", "KP", "KR", "KW", "KY", "KZ", "LA", "LB", "LC",
  "LI", "LK", "LR", "LS", "LT", "LU", "LV", "LY", "MA", "MC", "MD", "ME", "MF", "MG", "MH", "MK",
  "ML", "MM", "MN", "MO", "MP", "MQ", "MR", "MS", "MT", "MU", "MV", "MW", "MX", "MY", "MZ", "NA",
  "NC", "NE", "NF", "NG", "NI", "NL", "NO", "NP", "NR", "NU", "NZ", "OM", "PA", "PE", "PF", "PG",
  "PH", "PK", "PL", "PM", "PN", "PR", "PS", "PT", "PW", "PY", "QA", "RE", "RO", "RS", "RU", "RW",
  "SA", "SB", "SC", "SD", "SE", "SG", "SH", "SI", "SJ", "SK", "SL", "SM", "SN", "SO", "SR", "SS",
  "ST", "SV", "SX", "SY", "SZ", "TC", "TD", "TF", "TG", "TH", "TJ", "TK", "TL", "TM", "TN", "TO",
  "TR", "TT", "TV", "TW", "TZ", "UA", "UG", "UM", "US", "UY", "UZ", "VA", "VC", "VE", "VG", "VI",
  "VN", "VU", "WF", "WS", "YE", "YT", "ZA", "ZM", "ZW",
];

const KNOWN: ReadonlySet<string> = new Set(COUNTRY_CODES);

/** Names people type that are not the code: the United Kingdom is GB in ISO 3166-1. */
const ALIASES: Readonly<Record<string, string>> = { UK: "GB" };

/** What a country code must look like, for messages. */
export const COUNTRY_HINT = "must be a two-letter ISO 3166-1 country code, such as US or GB";

/**
 * The ISO 3166-1 alpha-2 code a user meant, upper-cased, with `uk` read as `GB`; undefined when
 * the text is no assigned code.
 */
export function normaliseCountry(input: string): string | undefined {
  const upper = input.trim().toUpperCase();
  const code = ALIASES[upper] ?? upper;
  return KNOWN.has(code) ? code : undefined;
}
