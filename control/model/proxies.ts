/** Proxy bodies and queries; addresses are read by services/proxy-url.ts. */
import * as v from "valibot";
import { COUNTRY_HINT, normaliseCountry } from "../../shared/countries.ts";
import { PROXY_STATUSES } from "../../shared/roles.ts";
import { parseProxyUrl } from "./proxy-url.ts";
import { jsonObjectField, queryInteger, readOnly, uuidField } from "./common.ts";

export const MAX_PAGE_SIZE = 1000;
export const DEFAULT_PAGE_SIZE = 50;

/** `scheme://[user:pass@]host:port`, read by the same parser as the upload's lines. */
const proxyUrl = v.pipe(
  v.string("must be text"),
  v.rawTransform(({ dataset, addIssue, NEVER }) => {
    const parsed = parseProxyUrl(dataset.value);
    if (parsed.ok) return parsed.value;
    addIssue({ message: parsed.reason });
    return NEVER;
  }),
);

/** A country code, or "" / null to clear it. */
const country = v.nullable(
  v.pipe(
    v.string("must be text"),
    v.trim(),
    v.check((value) => value === "" || normaliseCountry(value) !== undefined, COUNTRY_HINT),
    v.transform((value) => value === "" ? null : normaliseCountry(value) ?? null),
  ),
);

const serverFields = {
  id: readOnly(),
  status: readOnly("is moved by the health checks, not by an edit"),
  created_at: readOnly(),
  updated_at: readOnly(),
};

export const CreateProxyBody = v.strictObject({
  connector_id: uuidField,
  url: proxyUrl,
  country: v.optional(country),
  metadata: v.optional(jsonObjectField),
  ...serverFields,
});

export const UpdateProxyBody = v.strictObject({
  url: v.optional(proxyUrl),
  country: v.optional(country),
  metadata: v.optional(jsonObjectField),
  connector_id: readOnly("cannot be changed; delete the proxy and add it to the other connector"),
  ...serverFields,
});

/** The list's orders; ties go by creation (then id), in the same direction. */
export const PROXY_SORTS = ["created", "status", "country", "status_changed"] as const;
export type ProxySort = (typeof PROXY_SORTS)[number];

export const ListProxiesQuery = v.object({
  page: queryInteger(1, 1_000_000, 1),
  sort: v.optional(
    v.picklist(PROXY_SORTS, `must be one of ${PROXY_SORTS.join(", ")}`),
    "created",
  ),
  direction: v.optional(v.picklist(["asc", "desc"], "must be asc or desc"), "asc"),
  search: v.optional(
    v.pipe(
      v.string(),
      v.trim(),
      v.maxLength(200, "must be at most 200 characters"),
      v.transform((value) => value.toLowerCase()),
    ),
  ),
  page_size: queryInteger(1, MAX_PAGE_SIZE, DEFAULT_PAGE_SIZE),
  connector_id: v.optional(uuidField),
  status: v.optional(
    v.picklist(PROXY_STATUSES, `must be one of ${PROXY_STATUSES.join(", ")}`),
  ),
  country: v.optional(
    v.pipe(
      v.string(),
      v.check((value) => normaliseCountry(value) !== undefined, COUNTRY_HINT),
      v.transform((value) => normaliseCountry(value) as string),
    ),
  ),
});

export const UploadQuery = v.object({
  connector_id: uuidField,
});
