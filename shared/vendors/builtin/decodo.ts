/**
 * Decodo (formerly Smartproxy), written from its public documentation:
 *
 * - https://help.decodo.com/docs/mobile-proxy-quick-start (the endpoint `gate.decodo.com:7000`)
 * - https://help.decodo.com/docs/mobile-proxy-protocols (parameters in the username:
 *   `user-username-session-1`, `user-username-country-us`)
 * - https://help.decodo.com/docs/residential-proxy-custom-sticky-sessions.md (residential
 *   sticky sessions: `sessionduration`, whole minutes from 1 to 1440, 10 by default)
 * - https://help.decodo.com/docs/residential-proxy-session-types.md (sticky and rotating
 *   sessions on the residential endpoint; a new session id rotates the IP)
 * - https://help.decodo.com/api-reference/sub-users/create-sub-user (proxy usernames: 6 to 64
 *   letters, digits and _)
 * - https://help.decodo.com/docs/datacenter-pay-per-gb-proxy-protocols (datacenter pay/GB at
 *   `dc.decodo.com:10001`, the plain `username:password`)
 *
 * Where the docs are silent, and what this descriptor does:
 * - The residential location page (country, state, city in the username) was not among the
 *   stored pages; the grammar here is the one widely documented for Smartproxy and seen in the
 *   pages above: `user-<username>-country-<cc>-state-us_<state>-city-<city>-session-<id>-
 *   sessionduration-<minutes>`, lower case, `_` between a city's words (`new_york`), US states
 *   only. Check it against the dashboard's endpoint generator before relying on states.
 * - The session id's length and alphabet are not documented: 10 lower-case letters and digits.
 * - Mobile proxies use the same endpoint and grammar with a mobile proxy user, so they take the
 *   residential type. ISP endpoints were not on the pages read and are not shipped.
 * - Datacenter: the page shows port 10001; that the next ports (10002, …) are the next sticky
 *   exits is the endpoint generator's convention, not stated there. The slot count is the
 *   connector's.
 */
import type { DescriptorInput } from "../descriptor.ts";

export const decodo: DescriptorInput = {
  id: "decodo",
  name: "Decodo (formerly Smartproxy)",
  description: "Residential sessions at gate.decodo.com; datacenter exits on ports from 10001.",
  docs_url: "https://help.decodo.com/docs/residential-proxy-custom-sticky-sessions",
  credential_fields: [
    {
      key: "username",
      label: "Proxy username",
      type: "text",
      required: true,
      help: "The proxy user's name, without the user- prefix",
    },
    { key: "password", label: "Password", type: "password", secret: true, required: true },
  ],
  proxy_types: [
    {
      id: "residential",
      name: "Residential",
      mode: "session",
      host: "gate.decodo.com",
      port: 7000,
      dynamic_sessions: true,
      session_id: { length: 10, alphabet: "abcdefghijklmnopqrstuvwxyz0123456789" },
      session_time: { unit: "minutes", min_minutes: 1, max_minutes: 1440, default_minutes: 10 },
      state_countries: ["US"],
      username: {
        separator: "-",
        parts: [
          { text: "user-{credential.username}" },
          { text: "country-{country|lower}", when: "country" },
          { text: "state-us_{state|us_state}", when: "state" },
          { text: "city-{city}", when: "city" },
          { text: "session-{session_id}", when: "session_id" },
          { text: "sessionduration-{session_time}", when: "session_time" },
        ],
      },
      password: "{credential.password}",
    },
    {
      id: "datacenter",
      name: "Datacenter (pay per GB)",
      mode: "port",
      host: "dc.decodo.com",
      port: 10001,
      username: "{credential.username}",
      password: "{credential.password}",
    },
  ],
};
