/**
 * A `provider_api` connector's config: how its provider is called (`fetch`), how the answer is
 * read (`parser`) and how large its pool is kept (`pool`). Checked by valibot when a connector is
 * written (422 naming `body.config.<path>`), stored with its defaults, and read back by the pool
 * job with the same schema, so a config the api accepted is the config the job runs.
 *
 * Templates (URL, query parameters, headers, body strings and `auth`) are the descriptors'
 * templates (shared/vendors/templates.ts): placeholders and a whitelist of pure filters,
 * nothing that reads a file, the network or the environment. They may read `{credential.<key>}`
 * (the connector's `provider_api` credential, every key of it secret) and `{count}` (proxies
 * asked of this call).
 */
import * as v from "valibot";
import type { FieldIssue } from "../../shared/errors.ts";
import { callHost } from "../../shared/vendors/descriptor.ts";
import { templateIssues, templateNames } from "../../shared/vendors/templates.ts";
import { PROXY_SCHEMES, ProxyScheme } from "../../shared/roles.ts";
import { ANSWER_FIELDS, ANSWER_FORMATS, type AnswerSpec, answerSpecIssues } from "./answer.ts";
import { DEFAULT_REMOVE_AFTER_FAILURES } from "./pool/contract.ts";

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

/** An HTTP header's name (RFC 9110's token). */
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/;
/**
 * Headers the call writes itself (the host the guard pins, the connection, the body's length):
 * a template could otherwise smuggle another site or a second request past the guard.
 */
const RESERVED_HEADERS: ReadonlySet<string> = new Set([
  "host",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "upgrade",
  "te",
  "trailer",
]);
const notReserved = v.check(
  (name: string) => !RESERVED_HEADERS.has(name.toLowerCase()),
  "is a header the call writes itself",
);

const HeadersSchema = v.pipe(
  v.record(
    v.pipe(v.string(), v.regex(HEADER_NAME, "must be a header name"), notReserved),
    template,
    "must be an object of header templates",
  ),
  v.check((record) => Object.keys(record).length <= 32, "must name at most 32 headers"),
  v.check(
    (record) =>
      new Set(Object.keys(record).map((name) => name.toLowerCase())).size ===
        Object.keys(record).length,
    "must name each header once (header names are read regardless of case)",
  ),
);

const ParamsSchema = v.pipe(
  v.record(
    v.pipe(v.string(), v.minLength(1, "must not be empty"), v.maxLength(128)),
    template,
    "must be an object of query templates",
  ),
  v.check((record) => Object.keys(record).length <= 64, "must name at most 64 parameters"),
);

/** The JSON body at most, as written (its strings are templates). */
const MAX_BODY_CHARS = 65_536;

const BodySchema = v.pipe(
  v.record(v.string(), v.unknown(), "must be a JSON object"),
  v.check(
    (value) => JSON.stringify(value).length <= MAX_BODY_CHARS,
    `must be at most ${MAX_BODY_CHARS} characters as JSON`,
  ),
);

const AuthSchema = v.variant("type", [
  v.strictObject({ type: v.literal("none") }),
  /** `Authorization: Bearer <token>`. */
  v.strictObject({ type: v.literal("bearer"), token: template }),
  /** `Authorization: Basic base64(username:password)`. */
  v.strictObject({ type: v.literal("basic"), username: template, password: template }),
  /** A key in a header (`X-Api-Key` unless named) or a query parameter. */
  v.pipe(
    v.strictObject({
      type: v.literal("api_key"),
      value: template,
      header: v.optional(
        v.pipe(v.string(), v.regex(/^[A-Za-z0-9-]{1,64}$/, "must be a header name"), notReserved),
      ),
      query: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_.-]{1,64}$/, "must be a name"))),
    }),
    v.forward(
      v.check(
        (auth) => auth.header === undefined || auth.query === undefined,
        "the key goes in a header or in the query, not both",
      ),
      ["query"],
    ),
  ),
], "must be an object whose type is none, bearer, basic or api_key");

export const FetchSchema = v.pipe(
  v.strictObject({
    /**
     * Where proxies are asked for: an https:// template whose host is written out (no
     * placeholder in it), so no value can send the call elsewhere.
     */
    url: v.pipe(
      template,
      v.startsWith("https://", "must be an https:// URL"),
      v.check(
        (url) => callHost(url) !== undefined,
        "must write its host out: a template may not make the host",
      ),
      v.check(
        (url) => !/^https:\/\/[^/?#]*@/i.test(url),
        "may not carry credentials; use auth, headers or params",
      ),
    ),
    method: v.optional(v.picklist(["GET", "POST"], "must be GET or POST"), "GET"),
    headers: v.optional(HeadersSchema),
    params: v.optional(ParamsSchema),
    /** A JSON body (POST only); its strings are templates. */
    body: v.optional(BodySchema),
    auth: v.optional(AuthSchema, { type: "none" }),
    /** One call's deadline. */
    timeout_ms: v.optional(whole(100, 120_000), 10_000),
    /**
     * Proxies one call is expected to hand out: what a call asks for (`{count}`) and reserves
     * of `max_total`.
     */
    estimated_ips_per_call: v.optional(whole(1, 100_000), 10),
    /** Least time between two calls' starts, across every worker. */
    request_interval_ms: v.optional(whole(0, 3_600_000), 1000),
    /** Calls in flight at once, across every worker. */
    max_in_flight: v.optional(whole(1, 64), 1),
    /** Proxies fetched at most over the connector's life (per pool generation); null: no cap. */
    max_total: v.optional(v.nullable(whole(1, Number.MAX_SAFE_INTEGER)), null),
  }),
  v.forward(
    v.check(
      (fetch) => fetch.body === undefined || fetch.method === "POST",
      "a GET call takes no body; use POST",
    ),
    ["body"],
  ),
);

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
    /**
     * null (the default): a proxy handed out by extraction is never routed or handed out again,
     * even once its lease is released or has lapsed; it is retired, kept only so the provider
     * handing it out again is a duplicate. A number: a released or lapsed proxy goes back to be
     * checked this many seconds after, then may be routed or extracted again, while the first
     * holder may still have its address and credentials.
     */
    reuse_after_release_seconds: v.optional(v.nullable(whole(0, 86_400)), null),
    /**
     * Failed checks in a row that remove an available proxy; the first failure (a check's, or
     * gateways failing to reach it) makes it suspect: no new request or extraction until a check
     * passes.
     */
    remove_after_failures: v.optional(whole(1, 10), DEFAULT_REMOVE_AFTER_FAILURES),
    /**
     * Transfers at once through one proxy on each gateway (the gateways' dispatch holds it), and
     * what a refill counts a proxy as: null for no limit (a refill then counts proxies).
     */
    max_concurrency: v.optional(v.nullable(whole(1, 100_000)), null),
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

/** Where `answerSpecIssues` names a field, as the config names it. */
const SPEC_FIELDS: Readonly<Record<string, string>> = {
  format: "format",
  items: "items",
  defaultScheme: "default_scheme",
  defaultTtlSeconds: "ttl_seconds",
  safetyMarginMs: "safety_margin_seconds",
};

export const ProviderApiConfigSchema = v.pipe(
  v.strictObject({
    fetch: FetchSchema,
    parser: ParserSchema,
    pool: v.optional(PoolSchema, {}),
  }),
  // The parser's expressions compile, and only where they are read (the parser's own rules).
  v.rawCheck(({ dataset, addIssue }) => {
    if (!dataset.typed) return;
    for (const issue of answerSpecIssues(answerSpec(dataset.value))) {
      const [head, ...rest] = issue.field.split(".");
      const item = (key: string): v.ObjectPathItem => ({
        type: "object",
        origin: "value",
        input: dataset.value,
        key,
        value: undefined,
      });
      addIssue({
        message: issue.message,
        path: [item("parser"), ...[SPEC_FIELDS[head] ?? head, ...rest].map(item)],
      });
    }
  }),
  v.forward(
    v.check(
      (config) => config.parser.format !== "text" || config.parser.ttl_seconds !== undefined,
      "is required for a text answer, whose lines give no expiry",
    ),
    ["parser", "ttl_seconds"],
  ),
);

export type ProviderApiConfig = v.InferOutput<typeof ProviderApiConfigSchema>;
export type ProviderApiConfigInput = v.InferInput<typeof ProviderApiConfigSchema>;
export type FetchConfig = ProviderApiConfig["fetch"];
export type PoolConfig = ProviderApiConfig["pool"];

/** The answer parser's settings of a config. */
export function answerSpec(config: Pick<ProviderApiConfig, "parser">): AnswerSpec {
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

// ---------------------------------------------------------------------------------------------
// Templates.

/** Bare names a fetch template may read, besides `{credential.<key>}`. */
export const FETCH_TEMPLATE_NAMES: readonly string[] = ["count"];

/** A template of a config: where it is (a dot path from the config's root) and its text. */
export interface ConfigTemplate {
  path: string;
  text: string;
}

function bodyTemplates(value: unknown, path: string, out: ConfigTemplate[]): void {
  if (typeof value === "string") out.push({ path, text: value });
  else if (Array.isArray(value)) {
    value.forEach((entry, index) => bodyTemplates(entry, `${path}.${index}`, out));
  } else if (value !== null && typeof value === "object") {
    for (const [key, entry] of Object.entries(value)) bodyTemplates(entry, `${path}.${key}`, out);
  }
}

/** Every template of a config's fetch call, with its path. */
export function fetchTemplates(config: { fetch: FetchConfig }): ConfigTemplate[] {
  const fetch = config.fetch;
  const out: ConfigTemplate[] = [{ path: "fetch.url", text: fetch.url }];
  for (const [key, text] of Object.entries(fetch.params ?? {})) {
    out.push({ path: `fetch.params.${key}`, text });
  }
  for (const [key, text] of Object.entries(fetch.headers ?? {})) {
    out.push({ path: `fetch.headers.${key}`, text });
  }
  if (fetch.body !== undefined) bodyTemplates(fetch.body, "fetch.body", out);
  const auth = fetch.auth;
  if (auth.type === "bearer") out.push({ path: "fetch.auth.token", text: auth.token });
  if (auth.type === "basic") {
    out.push({ path: "fetch.auth.username", text: auth.username });
    out.push({ path: "fetch.auth.password", text: auth.password });
  }
  if (auth.type === "api_key") out.push({ path: "fetch.auth.value", text: auth.value });
  return out;
}

/** The credential keys a template reads (`{credential.<key>}`). */
function credentialReads(text: string): string[] {
  return templateNames(text).flatMap((name) => {
    const [head, key, ...rest] = name.split(".");
    return head === "credential" && key !== undefined && key !== "" && rest.length === 0
      ? [key]
      : [];
  });
}

/** The credential keys a config's templates read, sorted. */
export function credentialKeysRead(config: { fetch: FetchConfig }): string[] {
  const keys = new Set<string>();
  for (const template of fetchTemplates(config)) {
    for (const key of credentialReads(template.text)) keys.add(key);
  }
  return [...keys].sort();
}

const NO_NAMES: ReadonlySet<string> = new Set();

/**
 * What is wrong with a config's templates, each issue at its template's path: a name other than
 * `{credential.<key>}` and `{count}` (no template reads the environment, a file or the network),
 * an unknown filter, the credential read in the URL (its path shows in errors and logs: secrets
 * go in params, headers, the body or auth), and, when the credential's keys are given, a key the
 * credential lacks.
 */
export function fetchTemplateIssues(
  config: { fetch: FetchConfig },
  credentialKeys?: ReadonlySet<string>,
): FieldIssue[] {
  const issues: FieldIssue[] = [];
  for (const template of fetchTemplates(config)) {
    const reads = credentialReads(template.text);
    const found = templateIssues(template.text, {
      credential: new Set(reads),
      connector: NO_NAMES,
      secrets: NO_NAMES,
      auth: false,
      names: FETCH_TEMPLATE_NAMES,
    });
    if (template.path === "fetch.url" && reads.length > 0) {
      found.push(
        "may not read the credential (the URL's path shows in errors and logs); put secrets " +
          "in params, headers, the body or auth",
      );
    }
    if (credentialKeys !== undefined) {
      for (const key of reads) {
        if (!credentialKeys.has(key)) {
          found.push(`{credential.${key}} names no key of the connector's credential`);
        }
      }
    }
    if (found.length > 0) issues.push({ field: template.path, message: found.join("; ") });
  }
  return issues;
}
