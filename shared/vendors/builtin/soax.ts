/**
 * SOAX, written from its public documentation:
 *
 * - https://helpcenter.soax.com/en/articles/6723733-sticky-sessions (the single endpoint
 *   `proxy.soax.com:5000`; `package_id`; `country` in ISO 3166-1 alpha-2, `us`; `city` with
 *   the country, `new+york`; `region` with the country, by name, `england`)
 * - https://helpcenter.soax.com/en/articles/7035059-session-control-for-isp-proxies (the whole
 *   username, `package-{package_id}-country-us-sessionid-{session_id}-sessionlength-{time_in_sec}`
 *   with the package key as password; `sessionid` a random string such as `rand123456`;
 *   `sessionlength` in seconds, up to 86400, 180 when not given)
 *
 * Where the docs are silent, and what this descriptor does:
 * - The residential page's own session-length bounds were cut from the stored copy; the ISP
 *   page's are used (they describe the same gateway and parameters): 1 minute to 24 hours, 3
 *   minutes by default, sent in seconds.
 * - Regions are names (`england`) and clients send ISO 3166-2 codes; only US codes have a name
 *   table here, so only US regions are written (`region-new+york`, words joined by `+` as
 *   cities are).
 * - The order of `region` and `city` is not shown: country, region, city, then the session.
 * - No session id length is documented: 10 lower-case letters and digits, as the example.
 * - Mobile and ISP packages use the same endpoint and grammar; a package is a credential of its
 *   own, so one type serves them all.
 */
import type { DescriptorInput } from "../descriptor.ts";

export const soax: DescriptorInput = {
  id: "soax",
  name: "SOAX",
  description: "Residential, mobile and ISP packages at proxy.soax.com.",
  docs_url: "https://helpcenter.soax.com/en/articles/6723733-sticky-sessions",
  credential_fields: [
    {
      key: "package_id",
      label: "Package ID",
      type: "text",
      required: true,
      help: "Shown in the top left corner of the package card",
    },
    {
      key: "package_key",
      label: "Package key",
      type: "password",
      secret: true,
      required: true,
      help: "The package's password (its key)",
    },
  ],
  proxy_types: [
    {
      id: "residential",
      name: "Residential / mobile / ISP package",
      mode: "session",
      host: "proxy.soax.com",
      port: 5000,
      dynamic_sessions: true,
      session_id: { length: 10, alphabet: "abcdefghijklmnopqrstuvwxyz0123456789" },
      session_time: { unit: "seconds", min_minutes: 1, max_minutes: 1440, default_minutes: 3 },
      state_countries: ["US"],
      username: {
        separator: "-",
        parts: [
          { text: "package-{credential.package_id}" },
          { text: "country-{country|lower}", when: "country" },
          { text: "region-{state|us_state|plus}", when: "state" },
          { text: "city-{city|plus}", when: "city" },
          { text: "sessionid-{session_id}", when: "session_id" },
          { text: "sessionlength-{session_time}", when: "session_time" },
        ],
      },
      password: "{credential.package_key}",
    },
  ],
};
