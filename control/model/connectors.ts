/** Connector bodies, with the rate-limit and traffic settings they carry. */
import * as v from "valibot";
import { COUNTRY_HINT, normaliseCountry } from "../../shared/countries.ts";
import {
  CONNECTOR_KINDS,
  TRAFFIC_ACTIONS,
  TRAFFIC_LIMIT_STATUSES,
  TRAFFIC_PERIODS,
} from "../../shared/roles.ts";
import type { connectors, RateLimitConfig, TrafficConfig } from "../../db/schema.ts";
import { booleanField, integerField, nameField, readOnly, uuidField } from "./common.ts";

const MAX_LIST_ITEMS = 1000;

const kind = v.picklist(CONNECTOR_KINDS, `must be one of ${CONNECTOR_KINDS.join(", ")}`);

/**
 * A vendor connector's provider: a descriptor id from GET /api/v1/providers (a provider_api
 * connector's is `provider_api`, and may be left out); a cloud connector's `aws`, `gcp` or
 * `azure`.
 */
const provider = v.pipe(
  v.string("must be text"),
  v.trim(),
  v.toLowerCase(),
  v.regex(/^[a-z][a-z0-9_-]{1,47}$/, "must be a provider id from GET /api/v1/providers"),
);

/**
 * A vendor connector's config, checked against its descriptor by the connectors service; a
 * provider_api connector's, checked by its own schema (control/provider-api/config.ts); a cloud
 * connector's, by its cloud's schema (control/model/cloud.ts).
 */
const config = v.record(v.string(), v.unknown(), "must be an object of config fields");

/** Country codes upper-cased (`uk` read as GB), deduplicated and sorted. */
const countries = v.pipe(
  v.array(
    v.pipe(
      v.string("must be text"),
      v.check((value) => normaliseCountry(value) !== undefined, COUNTRY_HINT),
      v.transform((value) => normaliseCountry(value) as string),
    ),
    "must be a list of country codes",
  ),
  v.maxLength(300, "lists too many countries"),
  v.transform((codes) => [...new Set(codes)].sort()),
);

const HOST_LABEL = /^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/;

/** Host names lower-cased; a leading `*.` or `.` is dropped (matching covers subdomains). */
const domainList = v.pipe(
  v.array(
    v.pipe(
      v.string("must be text"),
      v.trim(),
      v.toLowerCase(),
      v.transform((value) => value.replace(/^\*?\./, "").replace(/\.$/, "")),
      v.check(
        (value) => value.length <= 253 && value.split(".").every((l) => HOST_LABEL.test(l)),
        "must be a host name such as example.com",
      ),
    ),
    "must be a list of host names",
  ),
  v.maxLength(MAX_LIST_ITEMS, `lists more than ${MAX_LIST_ITEMS} host names`),
  v.transform((hosts) => [...new Set(hosts)].sort()),
);

const MAX_URL_CHARS = 2048;

const healthcheckUrl = v.nullable(
  v.pipe(
    v.string("must be text"),
    v.trim(),
    v.maxLength(MAX_URL_CHARS, `must be at most ${MAX_URL_CHARS} characters`),
    v.check((value) => {
      try {
        const url = new URL(value);
        return url.protocol === "http:" || url.protocol === "https:";
      } catch {
        return false;
      }
    }, "must be an http:// or https:// URL"),
  ),
);

const seconds = integerField(1, 86_400);

/**
 * Per-proxy request rate limit. Quarantine bounds default to the window (a tripped proxy rests
 * at least as long as the window it filled); the max defaults to the min.
 */
export const RATE_LIMIT_CONFIG_FIELDS = {
  max_requests: integerField(1, 1_000_000_000),
  window_seconds: seconds,
  quarantine_seconds_min: seconds,
  quarantine_seconds_max: seconds,
  sticky_quarantine: booleanField,
};

export const RateLimitConfigSchema = v.pipe(
  v.strictObject({
    max_requests: RATE_LIMIT_CONFIG_FIELDS.max_requests,
    window_seconds: RATE_LIMIT_CONFIG_FIELDS.window_seconds,
    quarantine_seconds_min: v.optional(RATE_LIMIT_CONFIG_FIELDS.quarantine_seconds_min),
    quarantine_seconds_max: v.optional(RATE_LIMIT_CONFIG_FIELDS.quarantine_seconds_max),
    sticky_quarantine: v.optional(RATE_LIMIT_CONFIG_FIELDS.sticky_quarantine),
  }),
  v.forward(
    v.check(
      (input) =>
        (input.quarantine_seconds_min ?? input.window_seconds) <=
          (input.quarantine_seconds_max ?? Number.POSITIVE_INFINITY),
      "must not be less than quarantine_seconds_min (which defaults to window_seconds)",
    ),
    ["quarantine_seconds_max"],
  ),
  v.transform((input): RateLimitConfig => {
    const min = input.quarantine_seconds_min ?? input.window_seconds;
    return {
      max_requests: input.max_requests,
      window_seconds: input.window_seconds,
      quarantine_seconds_min: min,
      quarantine_seconds_max: input.quarantine_seconds_max ?? min,
      sticky_quarantine: input.sticky_quarantine ?? false,
    };
  }),
);

const MAX_PRICE_PER_GB = 1_000_000;

const PERIODS = TRAFFIC_PERIODS;
const ACTIONS = TRAFFIC_ACTIONS;
const LIMIT_STATUSES = TRAFFIC_LIMIT_STATUSES;

/**
 * A traffic_config's fields, each as stored: the body's schema takes each as optional (filling
 * in its default), and the answers declare them whole (control/api/answers/).
 */
export const TRAFFIC_CONFIG_FIELDS = {
  limit_bytes: v.nullable(integerField(1, Number.MAX_SAFE_INTEGER, "bigint")),
  period: v.picklist(PERIODS, `must be one of ${PERIODS.join(", ")}`),
  reset_day: integerField(1, 28),
  action: v.picklist(ACTIONS, `must be one of ${ACTIONS.join(", ")}`),
  warn_percent: integerField(1, 100),
  limit_status: v.picklist(LIMIT_STATUSES, "must be 509 or 429"),
  price_per_gb: v.nullable(
    v.pipe(
      v.number("must be a number"),
      v.minValue(0, "must not be negative"),
      // A sane bound: far past any price, and every number up to it exact in a double.
      v.maxValue(MAX_PRICE_PER_GB, `must be at most ${MAX_PRICE_PER_GB}`),
    ),
  ),
  currency: v.pipe(
    v.string("must be text"),
    v.trim(),
    v.toUpperCase(),
    v.regex(/^[A-Z]{3}$/, "must be a three-letter currency code such as USD"),
  ),
};

/**
 * Traffic limit and billing. Only limit fields are required to be sensible together: reset_day
 * is 1-28 for a monthly period, 1 (Monday) to 7 for a weekly one, and ignored for a daily one.
 */
export const TrafficConfigSchema = v.pipe(
  v.strictObject({
    limit_bytes: v.optional(TRAFFIC_CONFIG_FIELDS.limit_bytes),
    period: v.optional(TRAFFIC_CONFIG_FIELDS.period),
    reset_day: v.optional(TRAFFIC_CONFIG_FIELDS.reset_day),
    action: v.optional(TRAFFIC_CONFIG_FIELDS.action),
    warn_percent: v.optional(TRAFFIC_CONFIG_FIELDS.warn_percent),
    limit_status: v.optional(TRAFFIC_CONFIG_FIELDS.limit_status),
    price_per_gb: v.optional(TRAFFIC_CONFIG_FIELDS.price_per_gb),
    currency: v.optional(TRAFFIC_CONFIG_FIELDS.currency),
  }),
  v.forward(
    v.check(
      (input) => input.period !== "week" || (input.reset_day ?? 1) <= 7,
      "must be from 1 (Monday) to 7 (Sunday) for a weekly period",
    ),
    ["reset_day"],
  ),
  v.transform((input): TrafficConfig => {
    const period = input.period ?? "month";
    return {
      limit_bytes: input.limit_bytes ?? null,
      period,
      reset_day: period === "day" ? 1 : input.reset_day ?? 1,
      action: input.action ?? "alert",
      warn_percent: input.warn_percent ?? 80,
      limit_status: input.limit_status ?? 509,
      price_per_gb: input.price_per_gb ?? null,
      currency: input.currency ?? "USD",
    };
  }),
);

/** A connector's fields as a body sets them; the answers declare the same (api/answers/). */
export const CONNECTOR_FIELDS = {
  name: nameField(),
  credential_id: v.nullable(uuidField),
  enabled: booleanField,
  weight: integerField(1, 100),
  /** Its escalation tier, ranked above price (shared/routing/tiers.ts); null: by price. */
  tier: v.nullable(integerField(0, 99)),
  countries,
  domain_allow: domainList,
  domain_deny: domainList,
  healthcheck_url: healthcheckUrl,
  rate_limit_config: v.nullable(RateLimitConfigSchema),
  traffic_config: v.nullable(TrafficConfigSchema),
};

const serverFields = {
  id: readOnly(),
  pending_deletion: readOnly(),
  created_at: readOnly(),
  updated_at: readOnly(),
};

export const CreateConnectorBody = v.strictObject({
  ...v.partial(v.strictObject(CONNECTOR_FIELDS)).entries,
  name: CONNECTOR_FIELDS.name,
  kind,
  provider: v.optional(provider),
  config: v.optional(config),
  ...serverFields,
});

export const UpdateConnectorBody = v.strictObject({
  ...v.partial(v.strictObject(CONNECTOR_FIELDS)).entries,
  kind: readOnly("cannot be changed; create another connector"),
  provider: readOnly("cannot be changed; create another connector"),
  config: v.optional(config),
  ...serverFields,
});

/** Body field names as the connectors service names them. */
export const CONNECTOR_FIELD_NAMES = {
  name: "name",
  kind: "kind",
  credential_id: "credentialId",
  enabled: "enabled",
  weight: "weight",
  tier: "tier",
  countries: "countries",
  domain_allow: "domainAllow",
  domain_deny: "domainDeny",
  healthcheck_url: "healthcheckUrl",
  rate_limit_config: "rateLimitConfig",
  traffic_config: "trafficConfig",
} as const;

/** A connector as stored. */
export type ConnectorRow = typeof connectors.$inferSelect;
