/** The attribution rule: sources in order, the conflict rules, a country set by hand. */
import { describe, expect, it } from "vitest";
import { attribute, policyOf } from "../../shared/geo/attribute.ts";
import { openGeofeed } from "../../shared/geo/geofeed.ts";
import { GeoStack } from "../../shared/geo/stack.ts";

const stack = new GeoStack([
  openGeofeed(
    "exits",
    ["198.51.100.0/24,DE,DE-BE,Berlin,", "203.0.113.0/24,FR,,,"].join("\n"),
  ),
]);
const consensus = policyOf(
  { sources: ["database", "vendor", "endpoint"], conflictRule: "consensus" },
  null,
  null,
);
const facts = (over: Partial<Parameters<typeof attribute>[0]> = {}) => ({
  ip: "198.51.100.7",
  vendorCountry: null,
  manualCountry: null,
  ...over,
});

describe("attribution", () => {
  it("places an exit by the databases, with its region and city, saying where it came from", () => {
    expect(attribute(facts(), consensus, stack)).toEqual({
      country: "DE",
      countrySource: "database",
      region: "DE-BE",
      city: "Berlin",
      asn: null,
      conflict: false,
      sources: [
        { source: "database", country: "DE", database: "exits" },
        { source: "vendor", country: null },
        { source: "endpoint", country: null },
      ],
    });
  });

  it("knows nothing of an address no source places", () => {
    const judged = attribute(facts({ ip: "192.0.2.1" }), consensus, stack);
    expect(judged).toMatchObject({ country: null, countrySource: null, conflict: false });
  });

  it("consensus: the country most sources name; a disagreement is a conflict", () => {
    const endpoint = { country: "FR", region: null, city: null, asn: 64500 };
    // Database DE, vendor FR, endpoint FR: two against one.
    const judged = attribute(facts({ vendorCountry: "FR", endpoint }), consensus, stack);
    expect(judged).toMatchObject({
      country: "FR",
      countrySource: "vendor",
      conflict: true,
      // Berlin is the database's, which disagrees: only the endpoint's ASN agrees.
      region: null,
      city: null,
      asn: 64500,
    });
    // A tie goes to the earlier source.
    expect(attribute(facts({ vendorCountry: "FR" }), consensus, stack)).toMatchObject({
      country: "DE",
      countrySource: "database",
      conflict: true,
    });
  });

  it("first: the first source in order that names a country", () => {
    const vendorFirst = policyOf(consensus, ["vendor", "database"], "first");
    expect(vendorFirst.sources).toEqual(["vendor", "database"]);
    expect(attribute(facts({ vendorCountry: "FR" }), vendorFirst, stack)).toMatchObject({
      country: "FR",
      countrySource: "vendor",
      conflict: true,
    });
    // With the vendor silent, the database answers, and nothing disagrees.
    expect(attribute(facts(), vendorFirst, stack)).toMatchObject({
      country: "DE",
      countrySource: "database",
      conflict: false,
    });
  });

  it("asks only the sources the policy names", () => {
    const vendorOnly = policyOf(consensus, ["vendor"], null);
    expect(attribute(facts({ vendorCountry: "FR" }), vendorOnly, stack)).toEqual({
      country: "FR",
      countrySource: "vendor",
      region: null,
      city: null,
      asn: null,
      conflict: false,
      sources: [{ source: "vendor", country: "FR" }],
    });
  });

  it("never replaces a country set by hand; sources that contradict it are a conflict", () => {
    expect(attribute(facts({ manualCountry: "DE" }), consensus, stack)).toMatchObject({
      country: "DE",
      countrySource: "manual",
      region: "DE-BE",
      conflict: false,
    });
    expect(attribute(facts({ manualCountry: "US" }), consensus, stack)).toMatchObject({
      country: "US",
      countrySource: "manual",
      region: null,
      conflict: true,
    });
  });

  it("a project's own policy overrides the install's; unknown names are dropped", () => {
    expect(policyOf(consensus, ["endpoint", "bogus"], "first")).toEqual({
      sources: ["endpoint"],
      conflictRule: "first",
    });
    expect(policyOf(consensus, [], "other")).toEqual(consensus);
  });
});
