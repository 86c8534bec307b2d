/**
 * NetNut, written from its public documentation:
 *
 * - https://help.netnut.io/netnut-documentation/netnut-proxies/residential-proxies/initial-setup
 *   (`gw.netnut.net:5959`; `USERNAME-res-any`, `USERNAME-res-nl`; the United Kingdom is `UK`,
 *   not `GB`; cities as `USERNAME-res_sc-nl_amsterdam`; sessions as
 *   `USERNAME-res-<COUNTRY CODE>-sid-44575`)
 * - https://help.netnut.io/netnut-documentation/netnut-proxies/residential-proxies/curl-request-parameters
 *   (`res_sc` for state and city; a US state comes with its city, `us_alabama_birmingham`; the
 *   SID is a number from 10000 to 999999999)
 * - https://help.netnut.io/netnut-documentation/netnut-proxies/datacenter-proxies/initial-setup
 *   (`USERNAME-dc-any`, `USERNAME-dc-nl`, `-sid-` as for residential)
 *
 * Where the docs are silent, and what this descriptor does:
 * - A state is only shown with a city. A state alone is written the same way without the city
 *   (`res_sc-us_alabama`): a form the pages do not show, which NetNut may refuse; the request
 *   then fails rather than leaving the state out and serving anywhere in the country.
 * - Names of more than one word: no example; written with `_` (`us_new_york_new_york`), the
 *   only joiner NetNut's own values use.
 * - The SID is drawn as 9 digits from a leading 1 (100000000 to 199999999), inside the
 *   documented range whatever the digits.
 * - NetNut documents no session lifetime (a session lasts while its exit stays connected), so
 *   `-sesstime-` has nothing to render. Static residential (`stc`) and mobile are not shipped:
 *   the pages read show no session control for `stc`, and no mobile username.
 */
import type { DescriptorInput } from "../descriptor.ts";

export const netnut: DescriptorInput = {
  id: "netnut",
  name: "NetNut",
  description: "Residential and datacenter sessions at gw.netnut.net.",
  docs_url:
    "https://help.netnut.io/netnut-documentation/netnut-proxies/residential-proxies/initial-setup",
  credential_fields: [
    { key: "username", label: "Proxy username", type: "text", required: true },
    { key: "password", label: "Password", type: "password", secret: true, required: true },
  ],
  proxy_types: [
    {
      id: "residential",
      name: "Residential",
      mode: "session",
      host: "gw.netnut.net",
      port: 5959,
      dynamic_sessions: true,
      session_id: { length: 8, alphabet: "0123456789", prefix: "1" },
      state_countries: ["US"],
      // Joined by hand (no separator): `res` or `res_sc` depends on a state or city being there,
      // and a state and a city are joined to the country by `_`, not `-`.
      username: {
        separator: "",
        parts: [
          { text: "{credential.username}" },
          { text: "-res{state|then:_sc}-{country|gb_as_uk|lower|or:any}", when: "!city" },
          { text: "-res_sc-{country|gb_as_uk|lower}", when: "city" },
          { text: "_{state|us_state}", when: "state" },
          { text: "_{city}", when: "city" },
          { text: "-sid-{session_id}", when: "session_id" },
        ],
      },
      password: "{credential.password}",
    },
    {
      id: "datacenter",
      name: "Datacenter",
      mode: "session",
      host: "gw.netnut.net",
      port: 5959,
      dynamic_sessions: true,
      session_id: { length: 8, alphabet: "0123456789", prefix: "1" },
      username: {
        separator: "-",
        parts: [
          { text: "{credential.username}-dc-{country|gb_as_uk|lower|or:any}" },
          { text: "sid-{session_id}", when: "session_id" },
        ],
      },
      password: "{credential.password}",
    },
  ],
};
