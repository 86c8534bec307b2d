/**
 * A `provider_api` connector's config: how its provider is called (`fetch`), how the answer is
 * read (`parser`) and how large its pool is kept (`pool`). Checked by valibot when a connector is
 * written (422 naming `body.config.<path>`), stored with its defaults, and read back by the pool
 * job with the same schema, so a config the api accepted is the config the job runs.
 *
 * Templates (URL, query parameters, headers, body strings and `auth`) are the descriptors'
 * templates (shared/providers/templates.ts): placeholders and a whitelist of pure filters,
 * nothing that reads a file, the network or the environment. They may read `{credential.<key>}`
 * (the connector's `provider_api` credential, every key of it secret) and `{count}` (proxies
 * asked of this call).
 */
import * as v from "valibot";
import { PROXY_SCHEMES, ProxyScheme } from "../../shared/roles.ts";
import { ANSWER_FIELDS, ANSWER_FORMATS, type AnswerSpec } from "./answer.ts";

/** The `provider` a provider-API connector and its credential are stored with. */
export const PROVIDER_API = "provider_api";

const message = (min: number, max: number) => `must be a whole number from ${min} to ${max}`;
const whole = (min: number, max: number) =>
  v.pipe(
    v.number(message(min, max)),
    v.integer(message(min, max)),
    v.minValue(min, message(min, max)),
    v.maxValue(max, message(min, max)),
  );

const template = v.pipe(
  v.string("must be text (a template)"),
  v.maxLength(4096, "must be at most 4096 characters"),
);

const AuthSchema = v.variant("type", [
  v.strictObject({ type: v.literal("none") }),
  /** `Authorization: Bearer <token>`. */
  v.strictObject({ type: v.literal("bearer"), token: template }),
  /** `Authorization: Basic base64(username:password)`. */
  v.strictObject({ type: v.literal("basic"), username: template, password: template }),
  /** A key in a header (`X-Api-Key` unless named) or a query parameter. */
  v.strictObject({
    type: v.literal("api_key"),
    value: template,
    header: v.optional(
      v.pipe(v.string(), v.regex(/^[A-Za-z0-9-]{1,64}$/, "must be a header name")),
    ),
    query: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_.-]{1,64}$/, "must be a name"))),
  }),
], "must be an object whose type is none, bearer, basic or api_key");

export const FetchSchema = v.strictObject({
  /** Where proxies are asked for: an https:// template. */
  url: v.pipe(template, v.startsWith("https://", "must be an https:// URL")),
  method: v.optional(v.picklist(["GET", "POST"], "must be GET or POST"), "GET"),
  headers: v.optional(v.record(v.string(), template, "must be an object of header templates")),
  params: v.optional(v.record(v.string(), template, "must be an object of query templates")),
  /** A JSON body; its strings are templates. */
  body: v.optional(v.record(v.string(), v.unknown(), "must be a JSON object")),
  auth: v.optional(AuthSchema, { type: "none" }),
  /** One call's deadline. */
  timeout_ms: v.optional(whole(100, 120_000), 10_000),
  /** Proxies one call is expected to hand out: what a call reserves of `max_total`. */
  estimated_ips_per_call: v.optional(whole(1, 100_000), 10),
  /** Least time between two calls' starts, across every worker. */
  request_interval_ms: v.optional(whole(0, 3_600_000), 1000),
  /** Calls in flight at once, across every worker. */
  max_in_flight: v.optional(whole(1, 64), 1),
  /** Proxies fetched at most over the connector's life (per pool generation); null: no cap. */
  max_total: v.optional(v.nullable(whole(1, Number.MAX_SAFE_INTEGER)), null),
});

export const ParserSchema = v.strictObject({
  format: v.picklist(ANSWER_FORMATS, `must be one of ${ANSWER_FORMATS.join(", ")}`),
  /** JSON only: the JMESPath expression selecting the entries. */
  items: v.optional(v.pipe(v.string(), v.minLength(1, "must not be empty"))),
  /** JSON only: a JMESPath expression per field. */
  fields: v.optional(
    v.record(
      v.picklist(ANSWER_FIELDS, `must name one of ${ANSWER_FIELDS.join(", ")}`),
      v.pipe(v.string(), v.minLength(1, "must not be empty")),
    ),
  ),
  default_scheme: v.optional(
    v.picklist(PROXY_SCHEMES, `must be one of ${PROXY_SCHEMES.join(", ")}`),
    ProxyScheme.http,
  ),
  /** The lifetime of entries the answer gives none (without it such an entry is invalid). */
  ttl_seconds: v.optional(whole(1, 30 * 86_400)),
  /** New allocations stop this long before a proxy's expiry (usable-until). */
  safety_margin_seconds: v.optional(whole(0, 86_400), 5),
});

export const PoolSchema = v.pipe(
  v.strictObject({
    /** Below this many live proxies (checking and available), a refill starts (default: the target)... */
    min_size: v.optional(whole(0, 1_000_000)),
    /** ...and fetches until this many. */
    target_size: v.optional(whole(1, 1_000_000), 10),
    /** Never more than this many live entries (extracted ones excluded). */
    max_size: v.optional(whole(1, 1_000_000), 100),
    /**
     * Available proxies kept for the gateways; the rest are extraction stock. null: every
     * available proxy is routed and none is extractable.
     */
    reserve_for_gateway: v.optional(v.nullable(whole(0, 1_000_000)), null),
    /** Empty fetches in a row that mark the connector depleted (sequential routing moves on). */
    depleted_after_empty: v.optional(whole(1, 1000), 3),
  }),
  v.forward(
    v.check(
      (pool) => (pool.min_size ?? pool.target_size) <= pool.target_size,
      "must not be above target_size",
    ),
    ["min_size"],
  ),
  v.forward(
    v.check((pool) => pool.target_size <= pool.max_size, "must not be above max_size"),
    ["target_size"],
  ),
  v.transform((pool) => ({ ...pool, min_size: pool.min_size ?? pool.target_size })),
);

export const ProviderApiConfigSchema = v.strictObject({
  fetch: FetchSchema,
  parser: ParserSchema,
  pool: v.optional(PoolSchema, {}),
});

export type ProviderApiConfig = v.InferOutput<typeof ProviderApiConfigSchema>;
export type ProviderApiConfigInput = v.InferInput<typeof ProviderApiConfigSchema>;
export type FetchConfig = ProviderApiConfig["fetch"];
export type PoolConfig = ProviderApiConfig["pool"];

/** The answer parser's settings of a config. */
export function answerSpec(config: ProviderApiConfig): AnswerSpec {
  const parser = config.parser;
  return {
    format: parser.format,
    ...(parser.items === undefined ? {} : { items: parser.items }),
    ...(parser.fields === undefined ? {} : { fields: parser.fields }),
    defaultScheme: parser.default_scheme,
    ...(parser.ttl_seconds === undefined ? {} : { defaultTtlSeconds: parser.ttl_seconds }),
    safetyMarginMs: parser.safety_margin_seconds * 1000,
  };
}

/** A stored config read back; undefined when it no longer parses (logged by the caller). */
export function readProviderApiConfig(stored: unknown): ProviderApiConfig | undefined {
  const parsed = v.safeParse(ProviderApiConfigSchema, stored);
  return parsed.success ? parsed.output : undefined;
}
