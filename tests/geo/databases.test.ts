/**
 * IP databases: the shipped country database answers known public addresses (against the file
 * itself); geofeeds place blocks by the most specific prefix and refuse a file with a bad line,
 * naming each; a file that is not a MaxMind DB is refused by name; the stack takes the first
 * database that places an address in a country and fills what it lacks from those that agree.
 */
import { readFile } from "node:fs/promises";
import { beforeAll, describe, expect, it } from "vitest";
import { GeoFormatError } from "../../shared/geo/contract.ts";
import { openGeofeed } from "../../shared/geo/geofeed.ts";
import { locationOf, openMmdb } from "../../shared/geo/mmdb.ts";
import { SHIPPED_COUNTRY_DATABASE } from "../../shared/geo/shipped.ts";
import { GeoStack } from "../../shared/geo/stack.ts";
import type { GeoDatabase } from "../../shared/geo/contract.ts";

let shipped: GeoDatabase;

beforeAll(async () => {
  shipped = openMmdb(
    SHIPPED_COUNTRY_DATABASE.name,
    new Uint8Array(await readFile(SHIPPED_COUNTRY_DATABASE.url)),
  );
});

describe("the shipped country database", () => {
  it("places well-known public addresses, IPv4 and IPv6", () => {
    const cases: [string, string][] = [
      ["8.8.8.8", "US"], // Google Public DNS
      ["1.1.1.1", "AU"], // APNIC's research block
      ["193.0.14.129", "NL"], // k.root-servers.net, RIPE NCC
      ["202.12.27.33", "JP"], // m.root-servers.net, WIDE
      ["81.2.69.142", "GB"],
      ["2001:4860:4860::8888", "US"],
      ["::ffff:8.8.8.8", "US"],
    ];
    for (const [address, country] of cases) {
      expect(shipped.lookup(address)?.country, address).toBe(country);
    }
  });

  it("knows nothing of private and loopback addresses, nor of text that is not an address", () => {
    for (const address of ["10.0.0.1", "127.0.0.1", "192.168.1.1", "::1", "not-an-ip", ""]) {
      expect(shipped.lookup(address), address).toBeUndefined();
    }
  });
});

describe("geofeeds", () => {
  const feed = [
    "# exits we know, RFC 8805",
    "127.0.0.0/8,DE,DE-BE,Berlin,10115",
    "127.0.0.34/32,FR,FR-IDF,Paris,",
    "2001:db8::/32,NL,,,",
    "",
    "198.51.100.0/24,us",
  ].join("\n");

  it("places an address by the most specific block holding it", () => {
    const db = openGeofeed("exits", feed);
    expect(db.size).toBe(4);
    expect(db.lookup("127.0.0.33")).toEqual({
      country: "DE",
      region: "DE-BE",
      city: "Berlin",
      asn: null,
    });
    expect(db.lookup("127.0.0.34")).toMatchObject({
      country: "FR",
      region: "FR-IDF",
      city: "Paris",
    });
    expect(db.lookup("::ffff:127.0.0.34")?.country).toBe("FR");
    expect(db.lookup("2001:db8::1")).toMatchObject({ country: "NL", region: null, city: null });
    expect(db.lookup("198.51.100.7")?.country).toBe("US");
    expect(db.lookup("203.0.113.1")).toBeUndefined();
  });

  it("refuses a file with any bad line, naming each by its number", () => {
    const text = [
      "127.0.0.0/8,DE,DE-BE,Berlin",
      "127.0.0.1/8,DE",
      "not-a-block,DE",
      "10.0.0.0/8,Germany",
      "10.1.0.0/16,DE,FR-IDF",
      "10.2.0.0,DE",
    ].join("\n");
    let refused: GeoFormatError | undefined;
    try {
      openGeofeed("typos", text);
    } catch (error) {
      refused = error as GeoFormatError;
    }
    expect(refused).toBeInstanceOf(GeoFormatError);
    expect(refused!.message).toMatch(
      /^typos: not a geofeed file: 5 lines refused, the first at line 2/,
    );
    expect(refused!.lines.map((l) => l.line)).toEqual([2, 3, 4, 5, 6]);
    expect(refused!.lines[2].reason).toContain("not an ISO 3166-1 alpha-2 country code");
    expect(() => openGeofeed("empty", "# nothing\n")).toThrow(/no prefix in it/);
  });
});

describe("MaxMind DB files", () => {
  it("refuses bytes that are not one, by name", () => {
    expect(() => openMmdb("upload.mmdb", new TextEncoder().encode("127.0.0.0/8,DE\n")))
      .toThrow(/^upload\.mmdb: not a mmdb file/);
  });

  it("reads each publisher's record shape", () => {
    expect(locationOf({ country_code: "de" })).toEqual({
      country: "DE",
      region: null,
      city: null,
      asn: null,
    });
    expect(locationOf({
      country: { iso_code: "DE", names: { en: "Germany" } },
      subdivisions: [{ iso_code: "BE" }],
      city: { names: { en: "Berlin" } },
    })).toEqual({ country: "DE", region: "DE-BE", city: "Berlin", asn: null });
    expect(locationOf({ autonomous_system_number: 15169, autonomous_system_organization: "G" }))
      .toEqual({ country: null, region: null, city: null, asn: 15169 });
    expect(locationOf({ country: "FR", region_code: "idf", city: "Paris", asn: "AS3215" }))
      .toEqual({ country: "FR", region: "FR-IDF", city: "Paris", asn: 3215 });
    expect(locationOf({})).toBeUndefined();
  });
});

describe("the stack", () => {
  it("takes the first database that places the address, filling what it lacks from those that agree", () => {
    const exits = openGeofeed("exits", "8.8.8.0/24,US,US-CA,Mountain View\n127.0.0.0/8,DE");
    const stack = new GeoStack([exits, shipped]);
    expect(stack.lookup("8.8.8.8")).toEqual({
      country: "US",
      region: "US-CA",
      city: "Mountain View",
      asn: null,
      source: "exits",
    });
    // Loopback is only in the geofeed; 1.1.1.1 only in the shipped database.
    expect(stack.lookup("127.0.0.9")).toMatchObject({ country: "DE", source: "exits" });
    expect(stack.lookup("1.1.1.1")).toMatchObject({ country: "AU", source: shipped.name });
    expect(stack.lookup("10.0.0.1")).toBeUndefined();
  });
});
