/** The username grammar: options in any order, each at its first occurrence, values normalised. */
import { describe, expect, it } from "vitest";
import { type ParsedUsername, parseUsername, UsernameMessage } from "../../shared/username.ts";

const accepted: [string, ParsedUsername][] = [
  ["shop", { user: "shop" }],
  ["shop-cc-us", { user: "shop", country: "US" }],
  ["shop-cc-US", { user: "shop", country: "US" }],
  ["shop-cc-uk", { user: "shop", country: "GB" }],
  ["shop-cc-de-sessid-abc", { user: "shop", country: "DE", sessionId: "abc" }],
  ["shop-sessid-abc-cc-gb", { user: "shop", country: "GB", sessionId: "abc" }],
  ["shop-cc-us-st-ny-city-new_york", {
    user: "shop",
    country: "US",
    state: "NY",
    city: "new_york",
  }],
  ["shop-city-New York-st-US-NY-cc-us", {
    user: "shop",
    country: "US",
    state: "NY",
    city: "new_york",
  }],
  ["shop-cc-gb-st-eng", { user: "shop", country: "GB", state: "ENG" }],
  ["shop-cc-uk-st-gb-eng", { user: "shop", country: "GB", state: "ENG" }],
  ["shop-cc-us-city-nyc", { user: "shop", country: "US", city: "new_york" }],
  ["shop-cc-de-city-München (Altstadt)", { user: "shop", country: "DE", city: "munchen" }],
  ["shop-cc-fr-city--Saint--Étienne--", { user: "shop", country: "FR", city: "saint_etienne" }],
  ["shop-sessid-a-b-c", { user: "shop", sessionId: "a-b-c" }],
  ["shop-sessid-AbC", { user: "shop", sessionId: "AbC" }],
  ["shop-sesstime-30", { user: "shop", sessionMinutes: 30 }],
  ["shop-sesstime-1440-sessid-x", { user: "shop", sessionId: "x", sessionMinutes: 1440 }],
  ["shop-CC-us-SESSID-x", { user: "shop", country: "US", sessionId: "x" }],
  ["my-shop.eu-cc-pl", { user: "my-shop.eu", country: "PL" }],
  // The client's own opt-out from its project's interception, for this connection.
  ["shop-mitm-off", { user: "shop", mitmOff: true }],
  ["shop-MITM-OFF-cc-de", { user: "shop", country: "DE", mitmOff: true }],
  ["shop-sessid-s1-mitm-off", { user: "shop", sessionId: "s1", mitmOff: true }],
  ["shop-mitm-", { user: "shop" }],
  // Empty values count as absent.
  ["shop-sessid-", { user: "shop" }],
  ["shop-cc-", { user: "shop" }],
  ["shop-cc--sessid-x", { user: "shop", sessionId: "x" }],
  // A delimiter at the very start leaves no project username: no parsing.
  ["-cc-us", { user: "-cc-us" }],
];

const refused: [string, string][] = [
  ["shop-st-ny", UsernameMessage.needsCountry],
  ["shop-city-paris", UsernameMessage.needsCountry],
  ["shop-cc--st-ny", UsernameMessage.needsCountry],
  ["shop-cc-xx", UsernameMessage.country],
  ["shop-cc-usa", UsernameMessage.country],
  ["shop-cc-u1", UsernameMessage.country],
  ["shop-cc-us-st-ny1x", UsernameMessage.state],
  ["shop-cc-us-st-de-by", UsernameMessage.state],
  ["shop-cc-us-st-n y", UsernameMessage.state],
  ["shop-cc-us-city-()", UsernameMessage.city],
  ["shop-cc-us-city-___", UsernameMessage.city],
  ["shop-sesstime-0", UsernameMessage.sessionMinutes],
  ["shop-sesstime-1441", UsernameMessage.sessionMinutes],
  ["shop-sesstime-1.5", UsernameMessage.sessionMinutes],
  ["shop-sesstime-abc", UsernameMessage.sessionMinutes],
  ["shop-sessid-" + "x".repeat(129), UsernameMessage.sessionId],
  ["shop-cc-us-cc-de", UsernameMessage.repeated],
  ["shop-sessid-a-sessid-b", UsernameMessage.repeated],
  ["shop-mitm-on", UsernameMessage.mitmOff],
  ["shop-mitm-plain", UsernameMessage.mitmOff],
  ["shop-mitm-off-x", UsernameMessage.mitmOff],
  ["shop-mitm-off-mitm-off", UsernameMessage.repeated],
];

describe("username grammar", () => {
  it.each(accepted)("%s is read", (raw, options) => {
    expect(parseUsername(raw)).toEqual({ ok: true, options });
  });

  it.each(refused)("%s is refused", (raw, message) => {
    expect(parseUsername(raw)).toEqual({ ok: false, message });
  });

  it("the state-without-country message says how to write it", () => {
    expect(UsernameMessage.needsCountry).toBe(
      "State and city targeting need a country: add -cc-<code>, such as user-cc-us-st-ny",
    );
  });

  it("a city slug is at most 120 characters", () => {
    const result = parseUsername(`shop-cc-us-city-${"ab ".repeat(100)}`);
    expect(result.ok && result.options.city?.length).toBeLessThanOrEqual(120);
    expect(result.ok && result.options.city?.endsWith("_")).toBe(false);
  });
});
