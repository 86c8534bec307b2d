/**
 * A provider descriptor: a vendor account described as data (YAML or JSON), never as code. It
 * names the fields a credential and a connector take, and each proxy type the vendor sells with
 * its mode:
 *
 * - `session`: one vendor gateway host; each slot is a vendor session of its own, its id drawn
 *   once; with dynamic sessions, one gateway row whose credentials are rendered per request.
 * - `port`: one exit per slot, on sequential ports from a first one, the exits known from a
 *   vendor call.
 * - `list`: mirrors a vendor's list of proxies, each with its own credentials.
 *
 * Usernames and passwords are templates (templates.ts). HTTP calls (a sync's listing, a token
 * flow, a credential check) run under the egress guard on the control plane only.
 *
 * Every accepted field has behaviour; the schema refuses what nothing reads. Runs unchanged on
 * Node and Deno (the gateway builds providers from the same descriptors).
 */
import * as v from "valibot";
import { COUNTRY_CODES } from "../countries.ts";
import { PROXY_SCHEMES } from "../roles.ts";
import { templateIssues, type TemplateSpec, templateSpecSchema } from "./templates.ts";

export const FIELD_TYPES = [
  "text",
  "password",
  "number",
  "select",
  "boolean",
  "textarea",
  "url",
  "country",
] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

export const PROVIDER_MODES = ["session", "port", "list"] as const;
export type ProviderMode = (typeof PROVIDER_MODES)[number];

/** Where a descriptor came from: shipped, `OCTOPROX_PROVIDERS_DIR`, or stored by an admin. */
export const DESCRIPTOR_SOURCES = ["builtin", "file", "custom"] as const;
export type DescriptorSource = (typeof DESCRIPTOR_SOURCES)[number];

const IDENT = /^[a-z][a-z0-9_]*$/;
const PROVIDER_ID = /^[a-z][a-z0-9_-]{1,47}$/;
/** The config keys every descriptor connector has besides its descriptor's fields. */
export const CONNECTOR_CONFIG_KEYS = ["proxy_type", "slots", "session_mode"] as const;
/** Names a descriptor's connector fields may not take: those keys and the connector's countries. */
export const RESERVED_CONNECTOR_KEYS = [...CONNECTOR_CONFIG_KEYS, "countries"] as const;

const ident = (what: string) =>
  v.pipe(v.string(), v.regex(IDENT, `${what} must be lower case letters, digits and _`));

const FieldOptionSchema = v.strictObject({
  value: v.string(),
  label: v.optional(v.string()),
});

export const FieldSchema = v.pipe(
  v.strictObject({
    key: ident("a field key"),
    label: v.pipe(v.string(), v.minLength(1)),
    type: v.picklist(FIELD_TYPES, `type must be one of ${FIELD_TYPES.join(", ")}`),
    /** Kept out of every answer (masked) and out of the feed unless a template reads it. */
    secret: v.optional(v.boolean(), false),
    required: v.optional(v.boolean(), false),
    default: v.optional(v.union([v.string(), v.number(), v.boolean()])),
    /** Bounds of a number. */
    min: v.optional(v.number()),
    max: v.optional(v.number()),
    /** A regular expression a text value must match whole. */
    pattern: v.optional(v.string()),
    /** The choices of a `select`. */
    options: v.optional(v.array(FieldOptionSchema)),
    help: v.optional(v.string()),
  }),
  v.check(
    (f) => f.type !== "select" || (f.options !== undefined && f.options.length > 0),
    "a select field needs options",
  ),
  v.check(
    (f) => f.pattern === undefined || compiles(f.pattern),
    "pattern must be a valid regular expression",
  ),
);
export type Field = v.InferOutput<typeof FieldSchema>;

function compiles(pattern: string): boolean {
  try {
    new RegExp(pattern);
    return true;
  } catch {
    return false;
  }
}

/** A JMESPath expression (extraction from a vendor's JSON answer). */
const jmesPath = v.pipe(v.string(), v.minLength(1));

/** One HTTP call a sync, token flow or check makes; URL, headers and body are templates. */
export const HttpCallSchema = v.strictObject({
  method: v.optional(v.picklist(["GET", "POST"]), "GET"),
  url: v.pipe(v.string(), v.startsWith("https://", "a call's url must start with https://")),
  headers: v.optional(v.record(v.string(), v.string())),
  /** Query parameters (templates), added to the URL. */
  params: v.optional(v.record(v.string(), v.string())),
  /** A JSON body: strings inside are templates. */
  body: v.optional(v.record(v.string(), v.unknown())),
  /** Where the answer's items are (JMESPath); the whole answer when absent. */
  items: v.optional(jmesPath),
  /** Where the next page's URL is (JMESPath); it must stay on the call's host. */
  next_url: v.optional(jmesPath),
});
export type HttpCall = v.InferOutput<typeof HttpCallSchema>;

const TemplateSchema = templateSpecSchema();

/** How one exit of a list or port answer becomes a proxy: templates over `{item.<key>}`. */
const ItemMappingSchema = v.strictObject({
  host: v.string(),
  port: v.string(),
  /** The exit's address as the vendor lists it, when the host is its gateway (port pools). */
  exit: v.optional(v.string()),
  username: v.optional(TemplateSchema),
  password: v.optional(TemplateSchema),
  country: v.optional(v.string()),
});

const SessionIdSchema = v.strictObject({
  length: v.optional(v.pipe(v.number(), v.integer(), v.minValue(4), v.maxValue(64)), 10),
  alphabet: v.optional(
    v.pipe(v.string(), v.minLength(2), v.maxLength(64)),
    "abcdefghijklmnopqrstuvwxyz0123456789",
  ),
  prefix: v.optional(v.string(), ""),
});

/** A vendor's session lifetime, when its grammar has one: `{session_time}` in `unit`. */
const SessionTimeSchema = v.strictObject({
  unit: v.picklist(["minutes", "seconds"]),
  /** Bounds and default in minutes, what clients ask for with `-sesstime-`. */
  min_minutes: v.pipe(v.number(), v.integer(), v.minValue(1)),
  max_minutes: v.pipe(v.number(), v.integer(), v.minValue(1)),
  default_minutes: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
});

/**
 * How a port pool learns each slot's exit when the vendor lists none: one GET through the slot
 * (the vendor's own "where am I" page), its JSON read at `ip_path` and `country_path`.
 */
const DiscoverySchema = v.strictObject({
  url: v.pipe(
    v.string(),
    v.regex(/^https?:\/\/[^{}\s]+$/, "a discovery url is an http:// or https:// URL, written out"),
  ),
  ip_path: v.optional(jmesPath, "ip"),
  country_path: v.optional(jmesPath),
  /** Slots asked at once. */
  concurrency: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(64)), 8),
});

const country = v.pipe(
  v.string(),
  v.check(
    (c) => COUNTRY_CODES.includes(c),
    "countries must be upper-case ISO 3166-1 alpha-2 codes",
  ),
);

export const ProxyTypeSchema = v.pipe(
  v.strictObject({
    id: ident("a proxy type id"),
    name: v.pipe(v.string(), v.minLength(1)),
    mode: v.picklist(PROVIDER_MODES, `mode must be one of ${PROVIDER_MODES.join(", ")}`),
    scheme: v.optional(v.picklist(PROXY_SCHEMES), "http"),
    /** The vendor's gateway host (session and port modes). */
    host: v.optional(v.pipe(v.string(), v.minLength(1))),
    /** The gateway port (session mode), or the first port (port mode). */
    port: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535))),
    /** Session mode: the type can render one row per request (dynamic sessions). */
    dynamic_sessions: v.optional(v.boolean(), false),
    session_id: v.optional(SessionIdSchema),
    session_time: v.optional(SessionTimeSchema),
    /** The countries the vendor serves on this type; absent: any. */
    countries: v.optional(v.array(country)),
    /** The countries whose states the templates can write (`-st-`); absent: any country's. */
    state_countries: v.optional(v.array(country)),
    /** The countries whose cities the templates can write (`-city-`); absent: any country's. */
    city_countries: v.optional(v.array(country)),
    /** Slots a connector of this type may ask for, at most. */
    max_slots: v.optional(
      v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(100_000)),
      1000,
    ),
    username: v.optional(TemplateSchema),
    password: v.optional(TemplateSchema),
    /** Port mode: the call that lists the exits (items mapped by `item`); list mode: the list. */
    call: v.optional(HttpCallSchema),
    item: v.optional(ItemMappingSchema),
    /** Port mode without a call: each slot's exit discovered through it at every sync. */
    discovery: v.optional(DiscoverySchema),
  }),
  v.check((t) => t.mode === "list" || t.host !== undefined, "session and port types need a host"),
  v.check((t) => t.mode === "list" || t.port !== undefined, "session and port types need a port"),
  v.check(
    (t) => t.mode !== "list" || (t.call !== undefined && t.item !== undefined),
    "a list type needs a call and an item mapping",
  ),
  v.check(
    (t) => !t.dynamic_sessions || t.mode === "session",
    "only session types have dynamic sessions",
  ),
  v.check(
    (t) => (t.call === undefined) === (t.item === undefined),
    "a call and its item mapping come together",
  ),
  v.check((t) => t.mode !== "session" || t.call === undefined, "a session type makes no call"),
  v.check(
    (t) => t.discovery === undefined || (t.mode === "port" && t.call === undefined),
    "discovery is for port types whose exits no call lists",
  ),
);
export type ProxyType = v.InferOutput<typeof ProxyTypeSchema>;

const AuthSchema = v.strictObject({
  call: HttpCallSchema,
  /** Where the token is in the answer (JMESPath); templates read it as `{auth.token}`. */
  token_path: jmesPath,
  ttl_seconds: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 3600),
});

const ValidationSchema = v.strictObject({
  call: HttpCallSchema,
  /** A JMESPath expression that must be truthy on the answer; a 2xx answer is enough without. */
  success: v.optional(jmesPath),
  error_message: v.optional(v.string(), "the vendor refused the credential"),
});

export const DescriptorSchema = v.pipe(
  v.strictObject({
    id: v.pipe(
      v.string(),
      v.regex(PROVIDER_ID, "id must be 2-48 lower case letters, digits, _ or -, from a letter"),
    ),
    name: v.pipe(v.string(), v.minLength(1)),
    description: v.optional(v.string(), ""),
    docs_url: v.optional(v.pipe(v.string(), v.url())),
    beta: v.optional(v.boolean(), false),
    credential_fields: v.optional(v.array(FieldSchema), []),
    connector_fields: v.optional(v.array(FieldSchema), []),
    proxy_types: v.pipe(
      v.array(ProxyTypeSchema),
      v.minLength(1, "a descriptor needs a proxy type"),
    ),
    auth: v.optional(AuthSchema),
    validation: v.optional(ValidationSchema),
  }),
  v.rawCheck(({ dataset, addIssue }) => {
    if (!dataset.typed) return;
    for (const message of descriptorIssues(dataset.value)) addIssue({ message });
  }),
);
export type Descriptor = v.InferOutput<typeof DescriptorSchema>;
export type DescriptorInput = v.InferInput<typeof DescriptorSchema>;

/** Cross-field rules valibot's shape cannot say: unique keys, templates that name real fields. */
function descriptorIssues(d: Descriptor): string[] {
  const issues: string[] = [];
  const unique = (what: string, keys: readonly string[]) => {
    const seen = new Set<string>();
    for (const key of keys) {
      if (seen.has(key)) issues.push(`${what} ${key} appears twice`);
      seen.add(key);
    }
  };
  unique("credential field", d.credential_fields.map((f) => f.key));
  unique("connector field", d.connector_fields.map((f) => f.key));
  unique("proxy type", d.proxy_types.map((t) => t.id));
  for (const field of d.connector_fields) {
    if ((RESERVED_CONNECTOR_KEYS as readonly string[]).includes(field.key)) {
      issues.push(`connector field ${field.key} is a name every connector has already`);
    }
  }
  const secrets = new Set(d.credential_fields.filter((f) => f.secret).map((f) => f.key));
  for (const f of d.connector_fields) if (f.secret) secrets.add(f.key);
  const scope = {
    credential: new Set(d.credential_fields.map((f) => f.key)),
    connector: new Set(d.connector_fields.map((f) => f.key)),
    secrets,
    auth: d.auth !== undefined,
  };
  for (const type of d.proxy_types) {
    const where = `proxy type ${type.id}`;
    const templates: [string, TemplateSpec | string | undefined, readonly string[]][] = [
      ["username", type.username, ROW_NAMES],
      ["password", type.password, ROW_NAMES],
    ];
    if (type.item) {
      for (const [name, spec] of Object.entries(type.item)) {
        templates.push([`item.${name}`, spec, ITEM_NAMES]);
      }
    }
    for (const [name, spec, names] of templates) {
      if (spec === undefined) continue;
      for (const issue of templateIssues(spec, { ...scope, names })) {
        issues.push(`${where} ${name}: ${issue}`);
      }
    }
    if (type.call && callHost(type.call.url) === undefined) {
      issues.push(`${where}: a call's host must be written out, not a template`);
    }
    if (type.session_time && type.session_time.min_minutes > type.session_time.max_minutes) {
      issues.push(`${where}: session_time min_minutes is above max_minutes`);
    }
  }
  for (const call of [d.auth?.call, d.validation?.call]) {
    if (call && callHost(call.url) === undefined) {
      issues.push("a call's host must be written out, not a template");
    }
  }
  return issues;
}

/** Bare names a row's templates may read (besides credential., connector. and auth.). */
const ROW_NAMES = [
  "session_id",
  "index",
  "port",
  "country",
  "state",
  "city",
  "session_time",
] as const;
/** Names an item mapping may read. */
const ITEM_NAMES = ["item", "index"] as const;

/** Parses a descriptor, or returns its issues as `path: message` lines. */
export function parseDescriptor(
  input: unknown,
): { ok: true; descriptor: Descriptor } | { ok: false; issues: string[] } {
  const result = v.safeParse(DescriptorSchema, input);
  if (result.success) return { ok: true, descriptor: result.output };
  return {
    ok: false,
    issues: result.issues.map((issue) => {
      const path = v.getDotPath(issue);
      return path ? `${path}: ${issue.message}` : issue.message;
    }),
  };
}

/** The hosts a descriptor's calls reach: what an admin must confirm before it is stored. */
export function egressHosts(d: Descriptor): string[] {
  const hosts = new Set<string>();
  const add = (call: HttpCall | undefined) => {
    if (!call) return;
    const host = callHost(call.url);
    if (host !== undefined) hosts.add(host);
  };
  for (const call of descriptorCalls(d)) add(call);
  return [...hosts].sort();
}

/** Every HTTP call a descriptor makes. */
export function descriptorCalls(d: Descriptor): HttpCall[] {
  const calls: HttpCall[] = [];
  if (d.auth) calls.push(d.auth.call);
  if (d.validation) calls.push(d.validation.call);
  for (const type of d.proxy_types) if (type.call) calls.push(type.call);
  return calls;
}

/** The lower-case host of a call URL; undefined when its host part is a template. */
export function callHost(url: string): string | undefined {
  const match = /^https:\/\/([^/?#:]+)/i.exec(url);
  if (!match || match[1].includes("{")) return undefined;
  return match[1].toLowerCase();
}
