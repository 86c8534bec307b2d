/**
 * The country database a fresh install works with, offline: `geo-whois-asn-country` from the
 * ip-location-db project (CC0; countries from the registries' whois data and ASN origins), shipped
 * in its npm package, IPv4 and IPv6 in one file. Each runtime reads it its own way.
 */
export const SHIPPED_COUNTRY_DATABASE = {
  name: "geo-whois-asn-country",
  url: new URL(
    "../../node_modules/@ip-location-db/geo-whois-asn-country-mmdb/geo-whois-asn-country.mmdb",
    import.meta.url,
  ),
} as const;
