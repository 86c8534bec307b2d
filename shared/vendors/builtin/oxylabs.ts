/**
 * Oxylabs, written from its public documentation:
 *
 * - https://developers.oxylabs.io/proxies/residential-proxies/making-requests (the entry point
 *   `pr.oxylabs.io:7777`, `customer-USERNAME-cc-US-city-CITY-sessid-abcde12345-sesstime-5`)
 * - https://developers.oxylabs.io/proxies/residential-proxies/location-settings/select-city
 *   (`cc-DE-city-munich`, `cc-US-city-los_angeles`: spaces as `_`)
 * - https://developers.oxylabs.io/proxies/residential-proxies/location-settings/select-state
 *   (US states only, `st-us_california`, `st-us_california-city-los_angeles`)
 * - https://developers.oxylabs.io/products/proxies/residential-proxies/session-control
 *   (`sessid` alphanumeric, 10 minutes by default; `sesstime` up to 1440 minutes)
 * - https://developers.oxylabs.io/help-center/getting-started/start-using-isp-proxies
 *   (`isp.oxylabs.io:8001`, `user-USERNAME`; 8002, 8003… for the next IPs)
 * - https://developers.oxylabs.io/help-center/getting-started/start-using-datacenter-proxies-per-ip
 *   (`dc.oxylabs.io:8001` for a static IP, `user-USERNAME`)
 * - https://developers.oxylabs.io/help-center/es/primeros-pasos/start-using-dedicated-datacenter-proxies
 *   (self-service dedicated datacenter, `ddc.oxylabs.io:8001`, `user-USERNAME`)
 *
 * Where the docs are silent or disagree, and what this descriptor does:
 * - The older making-requests page caps `sesstime` at 30 minutes; the current session-control
 *   page says 1440. The bounds follow the current page: 1 to 1440, 10 by default (the standard
 *   session time), sent with every session so the vendor's lifetime is the one Octoprox asked.
 * - The state examples leave `cc` out (`st-us_california-…`); nothing says `cc-US` may not come
 *   with `st`, and clients must name the country to name a state, so both are written.
 * - No length is documented for `sessid`: 10 lower-case letters and digits, as the examples.
 * - Mobile proxies share the residential entry and grammar (a mobile proxy user is a credential
 *   of its own), so they take the residential type. Dedicated ISP (`disp.oxylabs.io`) is not
 *   shipped: its username form was not on the pages read.
 * - Port types: the ports count up from 8001, one static IP each; how many a plan has is the
 *   connector's slot count, not a vendor call.
 */
import type { DescriptorInput } from "../descriptor.ts";

export const oxylabs: DescriptorInput = {
  id: "oxylabs",
  name: "Oxylabs",
  description: "Residential sessions at pr.oxylabs.io; ISP and datacenter IPs on ports from 8001.",
  docs_url: "https://developers.oxylabs.io/proxies/residential-proxies",
  credential_fields: [
    {
      key: "username",
      label: "Proxy username",
      type: "text",
      required: true,
      help: "The proxy user's name, without the customer- or user- prefix",
    },
    { key: "password", label: "Password", type: "password", secret: true, required: true },
  ],
  proxy_types: [
    {
      id: "residential",
      name: "Residential",
      mode: "session",
      host: "pr.oxylabs.io",
      port: 7777,
      dynamic_sessions: true,
      session_id: { length: 10, alphabet: "abcdefghijklmnopqrstuvwxyz0123456789" },
      session_time: { unit: "minutes", min_minutes: 1, max_minutes: 1440, default_minutes: 10 },
      // `st` takes only US states (`us_<name>`), so other countries' states are refused.
      state_countries: ["US"],
      username: {
        separator: "-",
        parts: [
          { text: "customer-{credential.username}" },
          { text: "cc-{country|upper}", when: "country" },
          { text: "st-us_{state|us_state}", when: "state" },
          { text: "city-{city}", when: "city" },
          { text: "sessid-{session_id}", when: "session_id" },
          { text: "sesstime-{session_time}", when: "session_time" },
        ],
      },
      password: "{credential.password}",
    },
    {
      id: "isp",
      name: "ISP",
      mode: "port",
      host: "isp.oxylabs.io",
      port: 8001,
      username: "user-{credential.username}",
      password: "{credential.password}",
    },
    {
      id: "datacenter",
      name: "Datacenter (per IP)",
      mode: "port",
      host: "dc.oxylabs.io",
      port: 8001,
      username: "user-{credential.username}",
      password: "{credential.password}",
    },
    {
      id: "dedicated_datacenter",
      name: "Dedicated datacenter",
      mode: "port",
      host: "ddc.oxylabs.io",
      port: 8001,
      username: "user-{credential.username}",
      password: "{credential.password}",
    },
  ],
};
