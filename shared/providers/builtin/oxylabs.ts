/**
 * Oxylabs, from its public documentation of the residential entry point: `pr.oxylabs.io:7777`,
 * username `customer-<user>` followed by `-cc-<CC>`, `-st-<state>`, `-city-<city>`,
 * `-sessid-<id>` and `-sesstime-<minutes>` (1 to 30, 10 by default).
 */
import type { DescriptorInput } from "../descriptor.ts";

export const oxylabs: DescriptorInput = {
  id: "oxylabs",
  name: "Oxylabs",
  description: "Residential sessions at pr.oxylabs.io.",
  docs_url: "https://developers.oxylabs.io/proxies/residential-proxies",
  credential_fields: [
    { key: "username", label: "Username", type: "text", required: true },
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
      session_time: { unit: "minutes", min_minutes: 1, max_minutes: 30, default_minutes: 10 },
      username: {
        separator: "-",
        parts: [
          { text: "customer-{credential.username}" },
          { text: "cc-{country|upper}", when: "country" },
          { text: "city-{city}", when: "city" },
          { text: "sessid-{session_id}", when: "session_id" },
          { text: "sesstime-{session_time}", when: "session_id" },
        ],
      },
      password: "{credential.password}",
    },
  ],
};
