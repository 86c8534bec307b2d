/** Extraction bodies (the Distribution API). */
import * as v from "valibot";
import { COUNTRY_HINT, normaliseCountry } from "../../shared/countries.ts";
import { PROXY_SCHEMES } from "../../shared/roles.ts";
import { integerField, textField, uuidField } from "./common.ts";

/** How an extraction treats a count it cannot fill: hand out what there is, or nothing. */
export const EXTRACT_MODES = ["partial", "all_or_nothing"] as const;

export const MAX_EXTRACT_COUNT = 1000;
export const DEFAULT_LEASE_SECONDS = 300;
const MAX_LEASE_SECONDS = 86_400;
const MAX_AGE_SECONDS = 30 * 86_400;

const leaseSeconds = v.optional(integerField(1, MAX_LEASE_SECONDS), DEFAULT_LEASE_SECONDS);

export const ExtractBody = v.strictObject({
  /** Proxies wanted, 1 to 1000. */
  count: integerField(1, MAX_EXTRACT_COUNT),
  /** Their scheme; any when absent. */
  protocol: v.optional(v.picklist(PROXY_SCHEMES, `must be one of ${PROXY_SCHEMES.join(", ")}`)),
  /** Their country (ISO 3166-1 alpha-2, `uk` read as GB); any when absent. */
  country: v.optional(
    v.pipe(
      v.string("must be a country code"),
      v.check((value) => normaliseCountry(value) !== undefined, COUNTRY_HINT),
      v.transform((value) => normaliseCountry(value) as string),
    ),
  ),
  /** Their carrier, compared regardless of case; any when absent. */
  carrier: v.optional(v.pipe(textField(100), v.trim(), v.minLength(1, "must not be empty"))),
  /** Connectors of the project to take from; every eligible one when absent. */
  connectors: v.optional(
    v.pipe(
      v.array(uuidField, "must be a list of connector ids"),
      v.minLength(1, "must name at least one connector (or be left out)"),
      v.maxLength(100, "must name at most 100 connectors"),
      v.transform((ids) => [...new Set(ids.map((id) => id.toLowerCase()))]),
    ),
  ),
  /** `partial` hands out what there is; `all_or_nothing` all of `count` or none. */
  mode: v.optional(
    v.picklist(EXTRACT_MODES, `must be one of ${EXTRACT_MODES.join(", ")}`),
    "partial",
  ),
  /** Each proxy must stay usable at least this long. */
  min_remaining_ttl_seconds: v.optional(integerField(0, MAX_AGE_SECONDS), 0),
  /** Each proxy must have passed a check at most this long ago; any check when absent. */
  max_health_check_age_seconds: v.optional(integerField(1, MAX_AGE_SECONDS)),
  /** The lease's length; renew it before its end, or release it when done. */
  lease_seconds: leaseSeconds,
});

export const RenewLeaseBody = v.strictObject({
  /** The lease's new length, from now. */
  lease_seconds: integerField(1, MAX_LEASE_SECONDS),
});

/** The optional `Idempotency-Key` header: printable ASCII, 1 to 255 characters. */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e][\x20-\x7e]{0,254}$/;
