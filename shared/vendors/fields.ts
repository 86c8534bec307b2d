/**
 * A credential's or connector's config checked against its descriptor: the one place that says
 * which keys a provider takes, their types and bounds, and fills the defaults. Issues name the
 * key at fault (`config.zone`), so the api answers 422 with the field.
 *
 * A connector config also holds the keys every descriptor connector has: `proxy_type` (one of
 * the descriptor's types; the first when absent), `slots` (session pools and port pools),
 * `session_mode` (`pool` or `dynamic`, on session types with dynamic sessions).
 *
 * Runs unchanged on Node and Deno.
 */
import { normaliseCountry } from "../countries.ts";
import {
  CONNECTOR_CONFIG_KEYS,
  type Descriptor,
  type Field,
  type ProxyType,
} from "./descriptor.ts";
import { DEFAULT_SLOTS, SessionMode } from "./provider.ts";

export interface ConfigIssue {
  /** The config key at fault. */
  key: string;
  message: string;
}

type Config = Readonly<Record<string, unknown>>;

function fieldIssue(field: Field, value: unknown): string | undefined {
  switch (field.type) {
    case "number": {
      if (typeof value !== "number" || !Number.isFinite(value)) return "must be a number";
      if (field.min !== undefined && value < field.min) return `must be at least ${field.min}`;
      if (field.max !== undefined && value > field.max) return `must be at most ${field.max}`;
      return undefined;
    }
    case "boolean":
      return typeof value === "boolean" ? undefined : "must be true or false";
    case "select": {
      const options = field.options ?? [];
      return typeof value === "string" && options.some((o) => o.value === value)
        ? undefined
        : `must be one of ${options.map((o) => o.value).join(", ")}`;
    }
    case "country":
      return typeof value === "string" && normaliseCountry(value) !== undefined
        ? undefined
        : "must be a two-letter ISO 3166-1 country code";
    case "url": {
      if (typeof value !== "string") return "must be a URL";
      try {
        new URL(value);
        return undefined;
      } catch {
        return "must be a URL";
      }
    }
    default: {
      if (typeof value !== "string") return "must be text";
      if (field.pattern !== undefined && !new RegExp(`^(?:${field.pattern})$`).test(value)) {
        return field.help
          ? `is not in the expected form: ${field.help}`
          : "is not in the expected form";
      }
      return undefined;
    }
  }
}

/** Checks `config` against `fields`; returns the config with defaults and the issues. */
function checkFields(
  fields: readonly Field[],
  config: Config,
  extraKeys: ReadonlySet<string>,
  owner: string,
  shipped = false,
): { config: Record<string, unknown>; issues: ConfigIssue[] } {
  const issues: ConfigIssue[] = [];
  const out: Record<string, unknown> = {};
  const known = new Set(fields.map((f) => f.key));
  for (const key of Object.keys(config)) {
    if (!known.has(key) && !extraKeys.has(key)) {
      issues.push({ key, message: `is not a field of ${owner}` });
    }
  }
  for (const field of fields) {
    const given = config[field.key];
    const empty = given === undefined || given === null || given === "";
    if (empty) {
      if (field.default !== undefined) out[field.key] = field.default;
      // A gateway's copy lacks the secrets no template reads: their absence is by design there.
      else if (field.required && !(shipped && field.secret)) {
        issues.push({ key: field.key, message: "is required" });
      }
      continue;
    }
    const issue = fieldIssue(field, given);
    if (issue !== undefined) issues.push({ key: field.key, message: issue });
    else {
      out[field.key] = field.type === "country" ? normaliseCountry(given as string) : given;
    }
  }
  return { config: out, issues };
}

/** A credential's config: the descriptor's credential fields. */
export function checkCredentialConfig(
  descriptor: Descriptor,
  config: Config,
  shipped = false,
): { config: Record<string, unknown>; issues: ConfigIssue[] } {
  return checkFields(descriptor.credential_fields, config, new Set(), descriptor.name, shipped);
}

const CONNECTOR_KEYS: ReadonlySet<string> = new Set(CONNECTOR_CONFIG_KEYS);

/** The proxy type a connector config names (the descriptor's first when it names none). */
export function proxyTypeOf(descriptor: Descriptor, config: Config): ProxyType | undefined {
  const id = config.proxy_type;
  if (id === undefined || id === null || id === "") return descriptor.proxy_types[0];
  return descriptor.proxy_types.find((t) => t.id === id);
}

/** A connector's config: its proxy type, slots and session mode, then the connector fields. */
export function checkConnectorConfig(
  descriptor: Descriptor,
  config: Config,
  shipped = false,
): { config: Record<string, unknown>; issues: ConfigIssue[] } {
  const checked = checkFields(
    descriptor.connector_fields,
    config,
    CONNECTOR_KEYS,
    descriptor.name,
    shipped,
  );
  const issues = checked.issues;
  const out = checked.config;
  const type = proxyTypeOf(descriptor, config);
  if (type === undefined) {
    issues.push({
      key: "proxy_type",
      message: `must be one of ${descriptor.proxy_types.map((t) => t.id).join(", ")}`,
    });
    return { config: out, issues };
  }
  out.proxy_type = type.id;

  const mode = config.session_mode;
  let dynamic = false;
  if (mode !== undefined && mode !== null) {
    if (type.mode !== "session" || !type.dynamic_sessions) {
      issues.push({ key: "session_mode", message: `${type.name} has no dynamic sessions` });
    } else if (mode !== SessionMode.pool && mode !== SessionMode.dynamic) {
      issues.push({ key: "session_mode", message: "must be pool or dynamic" });
    } else {
      out.session_mode = mode;
      dynamic = mode === SessionMode.dynamic;
    }
  } else if (type.mode === "session") {
    out.session_mode = SessionMode.pool;
  }

  const slots = config.slots;
  const slotted = (type.mode === "session" && !dynamic) ||
    (type.mode === "port" && type.call === undefined);
  if (slots !== undefined && slots !== null) {
    if (!slotted) {
      issues.push({
        key: "slots",
        message: dynamic
          ? "a dynamic-sessions connector has one row, rendered per request"
          : `${type.name} mirrors the vendor's list: it takes no slot count`,
      });
    } else if (
      typeof slots !== "number" || !Number.isInteger(slots) || slots < 1 || slots > type.max_slots
    ) {
      issues.push({ key: "slots", message: `must be a whole number from 1 to ${type.max_slots}` });
    } else out.slots = slots;
  } else if (slotted) {
    out.slots = Math.min(DEFAULT_SLOTS, type.max_slots);
  }
  return { config: out, issues };
}
