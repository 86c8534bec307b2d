/**
 * Parsing opened sections into the models a gateway builds on. The global and runtime sections,
 * and each connector's own fields, go through their valibot schemas. A connector's proxy rows
 * (up to hundreds of thousands) get a hand-written structural check of the same rules instead:
 * valibot spends most of a one-connector update's budget on them (see docs/feed.md).
 *
 * Runs unchanged on Node and Deno.
 */
import * as v from "valibot";
import { PROXY_SCHEMES, PROXY_STATUSES } from "../roles.ts";
import { FeedIntegrityError } from "./codec.ts";
import {
  CONNECTOR_SECTION_PREFIX,
  type ConnectorSection,
  FeedConnectorSchema,
  type FeedProxy,
  GLOBAL_SECTION,
  type GlobalSection,
  GlobalSectionSchema,
  RUNTIME_SECTION,
  type RuntimeSection,
  RuntimeSectionSchema,
  SCHEMA_VERSION,
} from "./models.ts";

export type ParsedSection =
  | { kind: "global"; section: GlobalSection }
  | { kind: "runtime"; section: RuntimeSection }
  | { kind: "connector"; connectorId: string; section: ConnectorSection };

/** The connector id a section name carries, or undefined when it names no connector. */
export function connectorIdOf(name: string): string | undefined {
  return name.startsWith(CONNECTOR_SECTION_PREFIX)
    ? name.slice(CONNECTOR_SECTION_PREFIX.length)
    : undefined;
}

function invalid(name: string, problem: string): FeedIntegrityError {
  return new FeedIntegrityError(`Section ${name} does not match its model: ${problem}`);
}

function parseWith<T>(name: string, schema: v.GenericSchema<unknown, T>, value: unknown): T {
  const parsed = v.safeParse(schema, value);
  if (!parsed.success) throw issueError(name, parsed.issues);
  return parsed.output;
}

function parseJson(name: string, json: string): unknown {
  try {
    return JSON.parse(json);
  } catch {
    throw invalid(name, "not JSON");
  }
}

/** Parses an opened section by its name. Throws FeedIntegrityError when it fits no model. */
export function parseSection(name: string, json: string): ParsedSection {
  const value = parseJson(name, json);
  if (name === GLOBAL_SECTION) {
    return { kind: "global", section: parseWith(name, GlobalSectionSchema, value) };
  }
  if (name === RUNTIME_SECTION) {
    return { kind: "runtime", section: parseWith(name, RuntimeSectionSchema, value) };
  }
  const connectorId = connectorIdOf(name);
  if (connectorId === undefined || connectorId === "") throw invalid(name, "unknown section name");
  const section = checkConnectorSection(name, value);
  if (section.connector.id !== connectorId) {
    throw invalid(name, "its connector's id differs from its name");
  }
  return { kind: "connector", connectorId, section };
}

function issueError(name: string, issues: readonly v.BaseIssue<unknown>[]): FeedIntegrityError {
  const issue = issues[0];
  const path = issue.path?.map((p) => String(p.key)).join(".") ?? "";
  return invalid(name, `${path ? `${path}: ` : ""}${issue.message}`);
}

// ---------------------------------------------------------------------------------------------
// The connector section: valibot for the connector, a structural check for its proxies.

const SCHEMES: ReadonlySet<unknown> = new Set(PROXY_SCHEMES);
const STATUSES: ReadonlySet<unknown> = new Set(PROXY_STATUSES);

const isString = (x: unknown): x is string => typeof x === "string";
const isNumber = (x: unknown): x is number => typeof x === "number";
const isStringOrNull = (x: unknown) => x === null || typeof x === "string";
const isNumberOrNull = (x: unknown) => x === null || typeof x === "number";

/** The rules of FeedProxySchema, checked by hand; the first row that breaks one is named. */
function proxyProblem(row: unknown): string | undefined {
  if (typeof row !== "object" || row === null || Array.isArray(row)) return "not an object";
  const p = row as Record<string, unknown>;
  if (!isString(p.id)) return "id";
  if (!SCHEMES.has(p.scheme)) return "scheme";
  if (!isString(p.host)) return "host";
  if (!isNumber(p.port)) return "port";
  if (!isStringOrNull(p.username)) return "username";
  if (!isStringOrNull(p.password)) return "password";
  if (!isStringOrNull(p.country)) return "country";
  if (!STATUSES.has(p.status)) return "status";
  if (!isNumberOrNull(p.max_concurrency)) return "max_concurrency";
  if (p.usable_until_ms !== undefined && !isNumberOrNull(p.usable_until_ms)) {
    return "usable_until_ms";
  }
  if (p.region !== undefined && !isStringOrNull(p.region)) return "region";
  if (p.city !== undefined && !isStringOrNull(p.city)) return "city";
  if (p.location_conflict !== undefined && typeof p.location_conflict !== "boolean") {
    return "location_conflict";
  }
  if (p.country_manual !== undefined && typeof p.country_manual !== "boolean") {
    return "country_manual";
  }
  return undefined;
}

function checkConnectorSection(name: string, value: unknown): ConnectorSection {
  if (typeof value !== "object" || value === null) throw invalid(name, "not an object");
  const section = value as Record<string, unknown>;
  if (section.schema !== SCHEMA_VERSION) throw invalid(name, "schema");
  const connector = parseWith(name, FeedConnectorSchema, section.connector);
  const proxies = section.proxies;
  if (!Array.isArray(proxies)) throw invalid(name, "proxies: not a list");
  for (let i = 0; i < proxies.length; i++) {
    const problem = proxyProblem(proxies[i]);
    if (problem !== undefined) throw invalid(name, `proxies.${i}.${problem}`);
  }
  const config = configOf(name, "config", section.config);
  const credential = configOf(name, "credential", section.credential);
  // The rows are the parsed objects themselves (no copy): the check above proved their shape.
  // Unknown keys are kept as they are; nothing reads them.
  return { schema: SCHEMA_VERSION, connector, proxies: proxies as FeedProxy[], config, credential };
}

/** A vendor connector's config or credential: an object, or absent (null). */
function configOf(name: string, field: string, value: unknown): Record<string, unknown> | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "object" || Array.isArray(value)) {
    throw invalid(name, `${field}: not an object`);
  }
  return value as Record<string, unknown>;
}
