/**
 * IPRoyal residential proxies, written from its public documentation:
 *
 * - https://docs.iproyal.com/proxies/residential/proxy/location.md (options go in the PASSWORD,
 *   each `_key-value`: `password321_region-europe` at `geo.iproyal.com:12321`)
 * - https://docs.iproyal.com/proxies/residential/proxy/rotation.md (`_session-` exactly 8
 *   letters and digits; `_lifetime-` from 1 second to 7 days in one unit:
 *   `password321_country-br_session-sgn34f3e_lifetime-10m`)
 * - https://docs.iproyal.com/tools/web-unblocker/geo-location-targeting (the same keys, shown
 *   with values: `_country-us`, two-letter codes; `_city-chicago`, with a country;
 *   `_state-iowa`, US states only, by name)
 *
 * Where the docs are silent, and what this descriptor does:
 * - The residential page's country, state and city examples were cut from the stored copy; the
 *   keys and value forms are the ones its web unblocker page documents for the same router.
 * - Names of more than one word: nothing says how to write them, and `_` separates IPRoyal's
 *   keys, so a state or city is written without it (`newyork`, `los_angeles` as `losangeles`).
 * - Nothing orders `_state-` against `_city-`: country, state, city, then the session.
 * - The lifetime is sent in minutes (`10m`), 1 to 10080 (7 days); with no `-sesstime-`, 10
 *   minutes, the documentation's example (no default is stated for a session without one).
 * - IPRoyal's ISP and datacenter products are lists in the dashboard, not covered by the pages
 *   read, and are not shipped.
 */
import type { DescriptorInput } from "../descriptor.ts";

export const iproyal: DescriptorInput = {
  id: "iproyal",
  name: "IPRoyal",
  description: "Residential sessions at geo.iproyal.com; the options ride in the password.",
  docs_url: "https://docs.iproyal.com/proxies/residential/proxy/rotation",
  credential_fields: [
    { key: "username", label: "Username", type: "text", required: true },
    {
      key: "password",
      label: "Password",
      type: "password",
      secret: true,
      required: true,
      help: "The bare password, without _country- or other options",
    },
  ],
  proxy_types: [
    {
      id: "residential",
      name: "Residential",
      mode: "session",
      host: "geo.iproyal.com",
      port: 12321,
      dynamic_sessions: true,
      session_id: { length: 8, alphabet: "abcdefghijklmnopqrstuvwxyz0123456789" },
      session_time: { unit: "minutes", min_minutes: 1, max_minutes: 10080, default_minutes: 10 },
      state_countries: ["US"],
      username: "{credential.username}",
      password: {
        separator: "_",
        parts: [
          { text: "{credential.password}" },
          { text: "country-{country|lower}", when: "country" },
          { text: "state-{state|us_state|compact}", when: "state" },
          { text: "city-{city|compact}", when: "city" },
          { text: "session-{session_id}", when: "session_id" },
          { text: "lifetime-{session_time}m", when: "session_time" },
        ],
      },
    },
  ],
};
