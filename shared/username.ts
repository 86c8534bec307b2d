/**
 * The username grammar clients use to ask for a place and a session:
 * `<user>[-cc-<country>][-st-<state>][-city-<city>][-sessid-<id>][-sesstime-<minutes>][-mitm-off]`.
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
  /** `-mitm-off`: this connection's tunnels stay raw, whatever its project intercepts. */
  mitmOff?: true;
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
  sessionId:
    "Session id must be at most 128 characters and no control characters, such as -sessid-abc123",
  sessionMinutes: "Session time must be whole minutes from 1 to 1440, such as -sesstime-30",
  mitmOff: "Interception can only be turned off for a connection: -mitm-off",
  repeated: "Each username option may appear once, such as user-cc-us-sessid-abc123",
} as const;

export const CITY_MAX_CHARS = 120;
export const SESSION_ID_MAX_CHARS = 128;
export const SESSION_MINUTES_MAX = 1440;

/** Whether `text` holds a C0 control character or DEL. */
function hasControlCharacter(text: string): boolean {
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}

const [CC, ST, CITY, SESSID, SESSTIME, MITM] = USERNAME_DELIMITERS as readonly [
  string,
  string,
  string,
  string,
  string,
  string,
];

/** Each option's delimiter in a username, by option (what other places of an option name). */
export const OptionDelimiter: Readonly<Record<keyof OptionTexts, string>> = {
  country: CC,
  state: ST,
  city: CITY,
  sessionId: SESSID,
  sessionMinutes: SESSTIME,
  mitmOff: MITM,
};

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

  const read = readOptions({
    country: values.get(CC),
    state: values.get(ST),
    city: values.get(CITY),
    sessionId: values.get(SESSID),
    sessionMinutes: values.get(SESSTIME),
    mitmOff: values.get(MITM),
  }, UsernameMessage);
  if (!read.ok) return read;
  return { ok: true, options: { user: raw.slice(0, found[0].at), ...read.options } };
}

/** The options as text, before they are read (undefined: not given). */
export interface OptionTexts {
  country?: string;
  state?: string;
  city?: string;
  sessionId?: string;
  sessionMinutes?: string;
  /** The interception opt-out: `off` is the one value (any case). */
  mitmOff?: string;
}

/** What a client reads when an option is written wrong, in the words of where it wrote it. */
export interface OptionMessages {
  needsCountry: string;
  country: string;
  state: string;
  city: string;
  sessionId: string;
  sessionMinutes: string;
  mitmOff: string;
}

export type OptionsResult =
  | { ok: true; options: Omit<ParsedUsername, "user"> }
  | { ok: false; message: string };

/**
 * Reads and checks option values, wherever the client wrote them (a username, request headers):
 * one grammar for every place. `country` is a country already asked for elsewhere (the
 * username's, for header options), which a state or city given here may rest on.
 */
export function readOptions(
  texts: OptionTexts,
  messages: OptionMessages,
  country?: string,
): OptionsResult {
  const options: Omit<ParsedUsername, "user"> = {};
  const countryText = texts.country;
  if (countryText !== undefined) {
    const parsed = normaliseCountry(countryText);
    if (parsed === undefined || !/^[A-Za-z]{2}$/.test(countryText)) {
      return { ok: false, message: messages.country };
    }
    options.country = parsed;
  }
  const place = options.country ?? country;
  const stateText = texts.state;
  const cityText = texts.city;
  if ((stateText !== undefined || cityText !== undefined) && place === undefined) {
    return { ok: false, message: messages.needsCountry };
  }
  if (stateText !== undefined) {
    const state = normaliseState(stateText, place);
    if (state === undefined) return { ok: false, message: messages.state };
    options.state = state;
  }
  if (cityText !== undefined) {
    const city = slugifyCity(cityText);
    if (city === undefined) return { ok: false, message: messages.city };
    options.city = city;
  }
  const sessionId = texts.sessionId;
  if (sessionId !== undefined) {
    // Control characters (CR, LF, NUL, escapes) would travel on into upstream usernames, sticky
    // keys and log lines.
    if (sessionId.length > SESSION_ID_MAX_CHARS || hasControlCharacter(sessionId)) {
      return { ok: false, message: messages.sessionId };
    }
    options.sessionId = sessionId;
  }
  const minutesText = texts.sessionMinutes;
  if (minutesText !== undefined) {
    const minutes = /^\d{1,4}$/.test(minutesText) ? Number(minutesText) : 0;
    if (minutes < 1 || minutes > SESSION_MINUTES_MAX) {
      return { ok: false, message: messages.sessionMinutes };
    }
    options.sessionMinutes = minutes;
  }
  const mitmText = texts.mitmOff;
  if (mitmText !== undefined) {
    if (mitmText.toLowerCase() !== "off") return { ok: false, message: messages.mitmOff };
    options.mitmOff = true;
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
