/**
 * Vendors' proxy username grammars, for the vendor emulator (vendor-emulator.ts): how each
 * vendor's gateway reads the account, the location and the session a client asks for. Written
 * by hand from each vendor's public documentation (the page read is named at each grammar);
 * where the documentation is silent, the comment says so and what the grammar assumes.
 *
 * A grammar is strict: a key it does not model, a key twice, or a value the vendor documents as
 * invalid makes the username unparsable (407), so a descriptor template that writes something
 * else than the vendor reads fails a test rather than passing by accident.
 *
 * Values come back normalised for assertions: the country as an upper-case ISO code (`uk` as
 * `GB`), state and city lower case as the vendor spells them, with a state's `us_` prefix
 * dropped (`us_california` is `california`), and the session lifetime in minutes.
 */
import { normaliseCountry } from "../../shared/countries.ts";

/** What a client asked a vendor's gateway for. */
export interface VendorRequest {
  /**
   * The account the password belongs to, as the vendor issues it: the name inside the
   * username's fixed frame (oxylabs `customer-<account>`, decodo `user-<account>`), or the whole
   * issued name where the vendor issues one (brightdata `brd-customer-<id>-zone-<zone>`, soax
   * `package-<id>`).
   */
  account: string;
  country?: string;
  state?: string;
  city?: string;
  session?: string;
  sessionMinutes?: number;
}

export interface VendorGrammar {
  name: string;
  /** The request the credentials ask for; undefined when the vendor would not read them. */
  parse(username: string, password: string): VendorRequest | undefined;
  /** The account's own password in what the client sent (IPRoyal's carries options). */
  accountPassword?(password: string): string;
}

/** `key-value-key-value…` into a map; undefined on an odd count, a key twice or an unknown key. */
function pairs(
  tokens: readonly string[],
  keys: readonly string[],
): Map<string, string> | undefined {
  if (tokens.length % 2 !== 0) return undefined;
  const found = new Map<string, string>();
  for (let index = 0; index < tokens.length; index += 2) {
    const [key, value] = [tokens[index].toLowerCase(), tokens[index + 1]];
    if (!keys.includes(key) || found.has(key) || value === "") return undefined;
    found.set(key, value);
  }
  return found;
}

/** Assembles a request, leaving out what was not asked; undefined when a value was invalid. */
function request(
  account: string,
  parts: {
    country?: string;
    state?: string;
    city?: string;
    session?: string;
    sessionMinutes?: number;
  },
): VendorRequest | undefined {
  if (account === "") return undefined;
  const out: VendorRequest = { account };
  if (parts.country !== undefined) {
    const country = normaliseCountry(parts.country);
    if (country === undefined) return undefined;
    out.country = country;
  }
  if (parts.state !== undefined) out.state = parts.state.toLowerCase().replace(/^us_/, "");
  if (parts.city !== undefined) out.city = parts.city.toLowerCase();
  if (parts.session !== undefined) out.session = parts.session;
  if (parts.sessionMinutes !== undefined) {
    if (!Number.isFinite(parts.sessionMinutes)) return undefined;
    out.sessionMinutes = parts.sessionMinutes;
  }
  return out;
}

/** A whole number within bounds, or NaN (which `request` refuses). */
function bounded(text: string | undefined, min: number, max: number): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d+$/.test(text)) return NaN;
  const value = Number(text);
  return value >= min && value <= max ? value : NaN;
}

const SESSION_ID = /^[A-Za-z0-9]+$/;
const PLACE = /^[A-Za-z0-9_]+$/;

/**
 * Oxylabs residential: `customer-USER[-cc-US][-st-us_california][-city-los_angeles]
 * [-sessid-abc][-sesstime-10]`. Read: developers.oxylabs.io, residential-proxies "Making
 * requests", "Select state" (`st-us_<state>`, US only) and "Session control" (`sessid`
 * alphanumeric; `sesstime` minutes, with `sessid`, at most 1440 on the current page, 30 on an
 * older one: the current bound is taken).
 */
export const oxylabs: VendorGrammar = {
  name: "oxylabs",
  parse(username) {
    const [frame, account, ...rest] = username.split("-");
    if (frame !== "customer" || account === undefined) return undefined;
    const p = pairs(rest, ["cc", "st", "city", "sessid", "sesstime"]);
    if (p === undefined) return undefined;
    const state = p.get("st");
    if (state !== undefined && !/^us_[a-z_]+$/i.test(state)) return undefined;
    const city = p.get("city");
    const session = p.get("sessid");
    if (city !== undefined && !PLACE.test(city)) return undefined;
    if (session !== undefined && !SESSION_ID.test(session)) return undefined;
    if (p.has("sesstime") && session === undefined) return undefined;
    return request(account, {
      country: p.get("cc"),
      state,
      city,
      session,
      sessionMinutes: bounded(p.get("sesstime"), 1, 1440),
    });
  },
};

/**
 * Bright Data: `brd-customer-ID-zone-ZONE[-country-us][-state-ny][-city-newyork]
 * [-session-abc]`. Read: docs.brightdata.com/proxy-networks/config-options (`-state-` a
 * two-letter US state and needs `-country-us`; `-city-` without spaces and needs a country)
 * and the residential FAQ (`session` any random string). The username carries no session
 * lifetime: the documentation names none.
 */
export const brightdata: VendorGrammar = {
  name: "brightdata",
  parse(username) {
    const tokens = username.split("-");
    const [brd, customer, id, zone, zoneName, ...rest] = tokens;
    if (brd !== "brd" || customer !== "customer" || zone !== "zone") return undefined;
    if (!id || !zoneName) return undefined;
    const p = pairs(rest, ["country", "state", "city", "session"]);
    if (p === undefined) return undefined;
    const country = p.get("country");
    const state = p.get("state");
    const city = p.get("city");
    const session = p.get("session");
    if (state !== undefined && (!/^[a-z]{2}$/i.test(state) || country?.toLowerCase() !== "us")) {
      return undefined;
    }
    if (city !== undefined && (country === undefined || !/^[a-z0-9]+$/i.test(city))) {
      return undefined;
    }
    if (session !== undefined && !/^[A-Za-z0-9_]+$/.test(session)) return undefined;
    return request(`brd-customer-${id}-zone-${zoneName}`, { country, state, city, session });
  },
};

/**
 * Decodo (formerly Smartproxy): `user-USER[-country-us][-state-us_california]
 * [-city-los_angeles][-session-abc][-sessionduration-10]`. Read: help.decodo.com "Custom Sticky
 * Sessions" (`session`, and `sessionduration` a whole number of minutes from 1 to 1440). The
 * pages found are silent on the state's spelling: `us_<state>` is assumed; the city is lower case
 * with `_` for spaces, as the endpoint API's `city` parameter is documented.
 */
export const decodo: VendorGrammar = {
  name: "decodo",
  parse(username) {
    const [frame, account, ...rest] = username.split("-");
    if (frame !== "user" || account === undefined) return undefined;
    const p = pairs(rest, ["country", "state", "city", "session", "sessionduration"]);
    if (p === undefined) return undefined;
    const state = p.get("state");
    const city = p.get("city");
    const session = p.get("session");
    if (state !== undefined && !/^us_[a-z_]+$/i.test(state)) return undefined;
    if (city !== undefined && !PLACE.test(city)) return undefined;
    if (session !== undefined && !SESSION_ID.test(session)) return undefined;
    if (p.has("sessionduration") && session === undefined) return undefined;
    return request(account, {
      country: p.get("country"),
      state,
      city,
      session,
      sessionMinutes: bounded(p.get("sessionduration"), 1, 1440),
    });
  },
};

/**
 * NetNut residential: `USER-res-<cc|any>[-sid-N]`, or with a city `USER-res_sc-<cc>_<city>`
 * (US: `us_<state>_<city>`). Read: help.netnut.io residential "Initial Setup" and "cURL request
 * parameters" (the SID a number from 1 to 99999999, after the country; `uk` for the United
 * Kingdom). The documentation's states are one word: a US value is read as state, then the
 * rest as the city. No session lifetime in the username (a session lasts up to 30 minutes).
 */
export const netnut: VendorGrammar = {
  name: "netnut",
  parse(username) {
    const match = /^(.+?)-(res|res_sc)-([A-Za-z_]+)(?:-sid-(\d{1,8}))?$/.exec(username);
    if (match === null) return undefined;
    const [, account, kind, place, sid] = match;
    if (sid !== undefined && Number(sid) < 1) return undefined;
    const session = sid;
    if (kind === "res") {
      if (place.includes("_")) return undefined;
      const country = place.toLowerCase() === "any" ? undefined : place;
      return request(account, { country, session });
    }
    const [country, ...parts] = place.split("_");
    if (country.toLowerCase() === "us") {
      if (parts.length < 2) return undefined;
      return request(account, {
        country,
        state: parts[0],
        city: parts.slice(1).join("_"),
        session,
      });
    }
    if (parts.length === 0) return undefined;
    return request(account, { country, city: parts.join("_"), session });
  },
};

/**
 * SOAX: `package-ID[-country-us][-region-california][-city-los_angeles][-sessionid-abc]
 * [-sessionlength-600]`. Read: helpcenter.soax.com "Sticky sessions" (region and city need a
 * country; the help writes a city as `new+york`, so `+` is taken beside `_`) and "Understanding
 * session parameters" (`sessionlength` in seconds, 360 by default; 0 rotates on every request,
 * read here as no session).
 */
export const soax: VendorGrammar = {
  name: "soax",
  parse(username) {
    const [frame, id, ...rest] = username.split("-");
    if (frame !== "package" || !id) return undefined;
    const p = pairs(rest, ["country", "region", "city", "sessionid", "sessionlength"]);
    if (p === undefined) return undefined;
    const country = p.get("country");
    const region = p.get("region");
    const city = p.get("city");
    const length = bounded(p.get("sessionlength"), 0, 7 * 86_400);
    if ((region !== undefined || city !== undefined) && country === undefined) return undefined;
    for (const place of [region, city]) {
      if (place !== undefined && !/^[A-Za-z0-9_+]+$/.test(place)) return undefined;
    }
    let session = p.get("sessionid");
    if (session !== undefined && !SESSION_ID.test(session)) return undefined;
    if (length === 0) session = undefined;
    return request(`package-${id}`, {
      country,
      state: region,
      city,
      session,
      sessionMinutes: session === undefined || length === undefined ? undefined : length / 60,
    });
  },
};

const IPROYAL_KEYS = ["country", "state", "city", "session", "lifetime"];
const IPROYAL_OPTION = /^([a-z]+)-(.*)$/;
const LIFETIME_MINUTES: Readonly<Record<string, number>> = { s: 1 / 60, m: 1, h: 60, d: 1440 };

/** IPRoyal's password split into the account's own and its `_key-value` options. */
function iproyalPassword(password: string): { base: string; options: string[] } {
  const segments = password.split("_");
  const options: string[] = [];
  // Options come last; the account's own password is what precedes the first of them.
  while (segments.length > 1) {
    const match = IPROYAL_OPTION.exec(segments[segments.length - 1]);
    if (match === null || !IPROYAL_KEYS.includes(match[1])) break;
    options.unshift(segments.pop()!);
  }
  return { base: segments.join("_"), options };
}

/**
 * IPRoyal residential: options in the PASSWORD, `PASS[_country-us][_state-california]
 * [_city-losangeles][_session-abc12345][_lifetime-10m]`. Read: docs.iproyal.com residential
 * "Proxy" (the password holds the configuration) and "Rotation" (`_session-` exactly 8
 * letters and digits; `_lifetime-` one unit of s, m, h or d, from 1 second to 7 days, with a
 * session). The pages found are silent on the state's and city's spelling: single lower case
 * words are assumed (`california`, `losangeles`).
 */
export const iproyal: VendorGrammar = {
  name: "iproyal",
  parse(username, password) {
    const { options } = iproyalPassword(password);
    const tokens = options.flatMap((option) => {
      const match = IPROYAL_OPTION.exec(option)!;
      return [match[1], match[2]];
    });
    const p = pairs(tokens, IPROYAL_KEYS);
    if (p === undefined) return undefined;
    const session = p.get("session");
    if (session !== undefined && !/^[A-Za-z0-9]{8}$/.test(session)) return undefined;
    for (const place of [p.get("state"), p.get("city")]) {
      if (place !== undefined && !/^[a-z]+$/i.test(place)) return undefined;
    }
    let sessionMinutes: number | undefined;
    const lifetime = p.get("lifetime");
    if (lifetime !== undefined) {
      const match = /^(\d+)([smhd])$/.exec(lifetime);
      if (match === null || session === undefined) return undefined;
      sessionMinutes = Number(match[1]) * LIFETIME_MINUTES[match[2]];
      if (sessionMinutes < 1 / 60 || sessionMinutes > 7 * 1440) return undefined;
    }
    return request(username, {
      country: p.get("country"),
      state: p.get("state"),
      city: p.get("city"),
      session,
      sessionMinutes,
    });
  },
  accountPassword(password) {
    return iproyalPassword(password).base;
  },
};

/**
 * Webshare, as Octoprox uses it (a list of proxies, each with its own username and password):
 * plain credentials, no options. Read: apidocs.webshare.io "Proxy Connection": the direct mode
 * takes the credentials as they are; the backbone mode (p.webshare.io) also reads suffixes
 * (`-us`, a numeric session, `-rotate`, `-city_…`), which this grammar does not model: such a
 * username is read as an account name of its own.
 */
export const webshare: VendorGrammar = {
  name: "webshare",
  parse(username) {
    return request(username, {});
  },
};

export const VENDOR_GRAMMARS: readonly VendorGrammar[] = [
  oxylabs,
  brightdata,
  decodo,
  netnut,
  soax,
  iproyal,
  webshare,
];
