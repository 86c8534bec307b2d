/**
 * Webshare, written from its public documentation:
 *
 * - https://apidocs.webshare.io/proxy-list (the list in `direct` or `backbone` mode; in direct
 *   mode each proxy is reached at its `proxy_address` and `port` with its own `username` and
 *   `password`; `country_code`; `proxy_address` is null for residential plans)
 * - https://apidocs.webshare.io/proxy-connection (the backbone `p.webshare.io`, with options in
 *   the username: `{username}-{country_code}-{geo_params}-{session_id}`)
 *
 * Where the docs are silent, and what this descriptor does:
 * - The call (`GET /api/v2/proxy/list/?mode=direct&page=1&page_size=100`, header
 *   `Authorization: Token <key>`, items in `results`, the next page's URL in `next`) is the
 *   API's paginated list as the issue gives it; the stored pages show the proxy object, not the
 *   envelope, so `results` and `next` are not checked against them here.
 * - Only direct mode is mirrored: a residential plan's entries have no `proxy_address` and
 *   are skipped (an entry without a host is no row). A backbone session type is not shipped:
 *   it needs a second credential (the backbone proxy user) that list connectors would not have.
 * - The API key is read by the call only, so it never leaves the control plane; each entry's
 *   own password is the vendor's per-proxy credential and is kept with its row.
 */
import type { DescriptorInput } from "../descriptor.ts";

export const webshare: DescriptorInput = {
  id: "webshare",
  name: "Webshare",
  description: "Mirrors the account's proxy list (direct connections).",
  docs_url: "https://apidocs.webshare.io/proxy-list",
  credential_fields: [
    {
      key: "api_key",
      label: "API key",
      type: "password",
      secret: true,
      required: true,
      help: "From dashboard.webshare.io, API keys",
    },
  ],
  proxy_types: [
    {
      id: "proxy_list",
      name: "Proxy list",
      mode: "list",
      call: {
        method: "GET",
        url: "https://proxy.webshare.io/api/v2/proxy/list/?mode=direct&page=1&page_size=100",
        headers: { Authorization: "Token {credential.api_key}" },
        items: "results",
        next_url: "next",
      },
      item: {
        host: "{item.proxy_address}",
        port: "{item.port}",
        username: "{item.username}",
        password: "{item.password}",
        country: "{item.country_code}",
      },
    },
  ],
};
