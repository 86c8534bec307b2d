/**
 * Bright Data, written from its public documentation:
 *
 * - https://docs.brightdata.com/proxy-networks/config-options (the username is
 *   `brd-customer-[customerID]-zone-[zone name]-[optional parameters]`; a zone is one product,
 *   Datacenter, ISP, Residential or Mobile, with its own password)
 * - https://docs.brightdata.com/api-reference/proxy/geolocation-targeting.md (the super proxy
 *   `brd.superproxy.io:33335`; `-country-us`, two-letter codes in lower case; `-city-sanfrancisco`,
 *   lower case without spaces, best on Residential and Mobile, deprecated on Datacenter and ISP;
 *   `-state-<code>`, Residential only, two-letter state codes in lower case)
 * - https://docs.brightdata.com/cn/api-reference/proxy/geolocation-targeting.md (the same page in
 *   Chinese, whose state section names the countries: "relevant countries such as the US and
 *   Australia")
 * - https://help.brightdata.com/hc/en-us/articles/4413222056849-How-do-I-configure-IP-rotation-when-using-Bright-Data-
 *   (`-session-mystring12345`: each session id keeps its IP; an idle session ends after 60 s)
 *
 * Where the docs are silent, and what this descriptor does:
 * - The zone and its password belong to the connector (one connector per zone), the customer id
 *   to the credential: one account has many zones, each with its own password.
 * - States: the docs name the US and Australia but ask for two-letter codes, and Australia's
 *   ISO 3166-2 codes are mostly three letters (NSW, VIC), so only US states are written.
 * - Nothing orders `-state-` against `-city-`: country, state, city, session, coarse to fine.
 * - Bright Data has no session-time parameter (a session lives while it is used), so
 *   `-sesstime-` has nothing to render. No session id length is documented: 10 letters and
 *   digits.
 * - Datacenter and ISP zones take country and session only (city is deprecated there). Their
 *   dedicated IPs are chosen with `-ip-`, which the client grammar has no option for.
 */
import type { DescriptorInput } from "../descriptor.ts";

/**
 * One zone type: every Bright Data zone is reached at the same super proxy with the zone's own
 * password; the types differ in the places their zones can be asked for.
 */
function zoneType(
  id: string,
  name: string,
  places: { states: boolean; cities: boolean },
): NonNullable<DescriptorInput["proxy_types"]>[number] {
  return {
    id,
    name,
    mode: "session",
    host: "brd.superproxy.io",
    port: 33335,
    dynamic_sessions: true,
    session_id: { length: 10, alphabet: "abcdefghijklmnopqrstuvwxyz0123456789" },
    ...(places.states ? { state_countries: ["US"] } : {}),
    username: {
      separator: "-",
      parts: [
        { text: "brd-customer-{credential.customer_id}-zone-{connector.zone}" },
        { text: "country-{country|lower}", when: "country" },
        ...(places.states ? [{ text: "state-{state|us_state_code|lower}", when: "state" }] : []),
        ...(places.cities ? [{ text: "city-{city|compact}", when: "city" }] : []),
        { text: "session-{session_id}", when: "session_id" },
      ],
    },
    password: "{connector.zone_password}",
  };
}

export const brightdata: DescriptorInput = {
  id: "brightdata",
  name: "Bright Data",
  description: "Residential, mobile, ISP and datacenter zones through brd.superproxy.io.",
  docs_url: "https://docs.brightdata.com/proxy-networks/config-options",
  credential_fields: [
    {
      key: "customer_id",
      label: "Customer ID",
      type: "text",
      required: true,
      help: "The account's id, as in brd-customer-<id>-zone-…",
    },
  ],
  connector_fields: [
    {
      key: "zone",
      label: "Zone",
      type: "text",
      required: true,
      // A hyphen would split the username's parameters.
      pattern: "[A-Za-z0-9_]+",
      help: "The zone's name: letters, digits and _",
    },
    {
      key: "zone_password",
      label: "Zone password",
      type: "password",
      secret: true,
      required: true,
    },
  ],
  proxy_types: [
    zoneType("residential", "Residential", { states: true, cities: true }),
    // State targeting is Residential only: no `-state-` here.
    zoneType("mobile", "Mobile", { states: false, cities: true }),
    zoneType("isp", "ISP (shared)", { states: false, cities: false }),
    zoneType("datacenter", "Datacenter (shared)", { states: false, cities: false }),
  ],
};
