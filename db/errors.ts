/**
 * Tells a store that did not answer from a bug, and maps unique-index violations to the field
 * they guard. The one place driver errors are read; routes see only catalogue errors.
 */
import { DuplicateError, StoreUnavailableError } from "../shared/errors.ts";

const UNAVAILABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "CONNECT_TIMEOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now
  "53300", // too_many_connections
]);

function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** Walks the cause chain (drizzle wraps driver errors) looking for a driver error. */
function* chain(error: unknown): Generator<unknown> {
  let current = error;
  for (let depth = 0; current !== undefined && current !== null && depth < 8; depth++) {
    yield current;
    current = (current as { cause?: unknown }).cause;
  }
}

export function isPostgresUnavailable(error: unknown): boolean {
  for (const link of chain(error)) {
    if (link instanceof StoreUnavailableError) return true;
    const code = codeOf(link);
    if (code !== undefined && (UNAVAILABLE_CODES.has(code) || code.startsWith("08"))) return true;
    if (link instanceof AggregateError) {
      if (link.errors.some((inner) => isPostgresUnavailable(inner))) return true;
    }
  }
  return false;
}

/** Which unique index a violation hit, when it was one (SQLSTATE 23505). */
export function uniqueViolation(error: unknown): string | undefined {
  for (const link of chain(error)) {
    if (codeOf(link) === "23505") {
      const name = (link as { constraint_name?: unknown }).constraint_name;
      return typeof name === "string" ? name : "";
    }
  }
  return undefined;
}

/** What each unique index means to the person who hit it. */
const UNIQUE_MESSAGES: Readonly<Record<string, { field: string; message: string }>> = {
  users_username_key: { field: "username", message: "A user with this username already exists" },
  projects_name_key: { field: "name", message: "A project with this name already exists" },
  projects_username_key: {
    field: "username",
    message: "Another project already uses this proxy username",
  },
  credentials_project_name_key: {
    field: "name",
    message: "A credential with this name already exists in this project",
  },
  connectors_project_name_key: {
    field: "name",
    message: "A connector with this name already exists in this project",
  },
  distribution_keys_project_name_key: {
    field: "name",
    message: "A distribution key with this name already exists in this project",
  },
  // Checked before the insert (control/geo/databases.ts); this answers two admins racing.
  geo_databases_name_key: {
    field: "name",
    message: "An IP database with this name already exists",
  },
  alert_rules_name_key: { field: "name", message: "An alert rule with this name already exists" },
  alert_channels_name_key: {
    field: "name",
    message: "An alert channel with this name already exists",
  },
  tunnel_devices_project_name_key: {
    field: "name",
    message: "A device with this name already exists in this project",
  },
  tunnel_devices_public_key_key: {
    field: "public_key",
    message: "Another device already has this public key",
  },
  proxies_identity_key: {
    field: "url",
    message: "This proxy (scheme, host, port and username) already exists in this connector",
  },
};

/**
 * Rethrows a store error as the catalogue error it means: a known unique index as a
 * DuplicateError, an outage as StoreUnavailableError. Anything else is a bug and stays itself.
 */
export function translatePostgresError(error: unknown): unknown {
  const index = uniqueViolation(error);
  if (index !== undefined) {
    const known = UNIQUE_MESSAGES[index];
    if (known) return new DuplicateError(known.field, known.message, { cause: error });
    return error;
  }
  if (isPostgresUnavailable(error)) return new StoreUnavailableError("postgres", { cause: error });
  return error;
}
