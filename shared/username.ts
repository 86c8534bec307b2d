/**
 * The username grammar clients use to ask for a place and a session:
 * `<user>[-cc-<country>][-st-<state>][-city-<city>][-sessid-<id>][-sesstime-<minutes>]`.
 *
 * The options may come in any order. Each delimiter is found at its first occurrence (matched
 * without regard to case, as project usernames are checked against them that way) and its value
 * runs to the next delimiter found or to the end, so values may hold hyphens. An empty value
 * counts as absent. A delimiter at the very start leaves the whole text as the username: there is
 * no project username to attach options to.
 *
 * Runs unchanged on Node and Deno.
 */
import { normaliseCountry } from "./countries.ts";
import { USERNAME_DELIMITERS } from "./project-credentials.ts";

/** What a username asks for (the gateway's `UsernameOptions` has this shape). */
export interface ParsedUsername {
  user: string;
  country?: string;
  state?: string;
  city?: string;
  sessionId?: string;
  sessionMinutes?: number;
}

export type UsernameResult =
  | { ok: true; options: ParsedUsername }
  | { ok: false; message: string };

/** The messages a client reads in the 400 answer: each says how to write the option. */
export const UsernameMessage = {
  needsCountry: "State and city targeting need a country: add -cc-<code>, such as user-cc-us-st-ny",
  country: "Country must be a two-letter ISO 3166-1 code, such as -cc-us",
  state: "State must be the subdivision part of an ISO 3166-2 code, such as -st-ny or -st-eng",
  city: "City must be a name with letters or digits, such as -city-new_york",
  sessionId: "Session id must be at most 128 characters, such as -sessid-abc123",
  sessionMinutes: "Session time must be whole minutes from 1 to 1440, such as -sesstime-30",
  repeated: "Each username option may appear once, such as user-cc-us-sessid-abc123",
} as const;

export const CITY_MAX_CHARS = 120;
export const SESSION_ID_MAX_CHARS = 128;
export const SESSION_MINUTES_MAX = 1440;

const [CC, ST, CITY, SESSID, SESSTIME] = USERNAME_DELIMITERS as readonly [
  string,
  string,
  string,
  string,
  string,
];

/** Names people type for a city that vendors and databases spell otherwise. */
const CITY_ALIASES: Readonly<Record<string, string>> = {
  nyc: "new_york",
  new_york_city: "new_york",
  city_of_london: "london",
  washington_dc: "washington",
  washington_d_c: "washington",
  st_louis: "saint_louis",
  st_paul: "saint_paul",
  st_petersburg: "saint_petersburg",
};

interface Found {
  delimiter: string;
  at: number;
}

/** Reads a client's username; never throws. */
export function parseUsername(raw: string): UsernameResult {
  const lower = raw.toLowerCase();
  const found: Found[] = [];
  for (const delimiter of USERNAME_DELIMITERS) {
    const at = lower.indexOf(delimiter);
    if (at === 0) return { ok: true, options: { user: raw } };
    if (at > 0) {
      // A second occurrence would make the value ambiguous (and let a session id hold one).
      if (lower.indexOf(delimiter, at + 1) !== -1) {
        return { ok: false, message: UsernameMessage.repeated };
      }
      found.push({ delimiter, at });
    }
  }
  if (found.length === 0) return { ok: true, options: { user: raw } };
  found.sort((a, b) => a.at - b.at);

  const values = new Map<string, string>();
  for (let i = 0; i < found.length; i++) {
    const { delimiter, at } = found[i];
    const start = at + delimiter.length;
    const end = i + 1 < found.length ? found[i + 1].at : raw.length;
    // Overlapping delimiters (`-cc-st-`) leave the first with nothing: absent.
    if (end > start) values.set(delimiter, raw.slice(start, end));
  }

  const options: ParsedUsername = { user: raw.slice(0, found[0].at) };
  const countryText = values.get(CC);
  if (countryText !== undefined) {
    const country = normaliseCountry(countryText);
    if (country === undefined || !/^[A-Za-z]{2}$/.test(countryText)) {
      return { ok: false, message: UsernameMessage.country };
    }
    options.country = country;
  }
  const stateText = values.get(ST);
  const cityText = values.get(CITY);
  if ((stateText !== undefined || cityText !== undefined) && options.country === undefined) {
    return { ok: false, message: UsernameMessage.needsCountry };
  }
  if (stateText !== undefined) {
    const state = normaliseState(stateText, options.country);
    if (state === undefined) return { ok: false, message: UsernameMessage.state };
    options.state = state;
  }
  if (cityText !== undefined) {
    const city = slugifyCity(cityText);
    if (city === undefined) return { ok: false, message: UsernameMessage.city };
    options.city = city;
  }
  const sessionId = values.get(SESSID);
  if (sessionId !== undefined) {
    if (sessionId.length > SESSION_ID_MAX_CHARS) {
      return { ok: false, message: UsernameMessage.sessionId };
    }
    options.sessionId = sessionId;
  }
  const minutesText = values.get(SESSTIME);
  if (minutesText !== undefined) {
    const minutes = /^\d{1,4}$/.test(minutesText) ? Number(minutesText) : 0;
    if (minutes < 1 || minutes > SESSION_MINUTES_MAX) {
      return { ok: false, message: UsernameMessage.sessionMinutes };
    }
    options.sessionMinutes = minutes;
  }
  return { ok: true, options };
}

/**
 * The subdivision part of an ISO 3166-2 code, upper case: `ny`, `NY` and `US-NY` all give `NY`.
 * A country prefix must be the country asked for (`uk` read as `GB`).
 */
export function normaliseState(text: string, country: string | undefined): string | undefined {
  let code = text.toUpperCase();
  const dash = code.indexOf("-");
  if (dash !== -1) {
    const prefix = normaliseCountry(code.slice(0, dash));
    if (prefix === undefined || prefix !== country) return undefined;
    code = code.slice(dash + 1);
  }
  return /^[A-Z0-9]{1,3}$/.test(code) ? code : undefined;
}

/**
 * A city as a slug: ASCII lower case (accents dropped), parenthesised qualifiers dropped, every
 * run of other characters one `_`, at most 120 characters, common aliases read as their name.
 */
export function slugifyCity(text: string): string | undefined {
  const slug = text
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .replace(/\([^)]*\)/g, " ")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "_")
    .replace(/^_+|_+$/g, "")
    .slice(0, CITY_MAX_CHARS)
    .replace(/_+$/, "");
  if (slug === "") return undefined;
  return CITY_ALIASES[slug] ?? slug;
}
