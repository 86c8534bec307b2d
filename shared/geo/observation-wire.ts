/**
 * An observation: one exit seen at one moment, by one path that learns exits (a health check, a
 * vendor sync, a gateway's preflight, enrich, a lookup). Every api, worker and gateway process
 * records them in memory and appends them to the observations stream in batches; the workers'
 * observation ingest writes them to `ip_observations` and `connector_exit_ips`.
 *
 * This file is the stream entry's one definition, so a Node writer, a Deno writer and the ingest
 * never disagree on it. An entry holds one field, `o` (`OBSERVATION_FIELD`), whose value is a JSON
 * object:
 *
 *   {"v": 1, "observed_at": <epoch ms>, "ip": "<address>", "project_id": <uuid|null>,
 *    "connector_id": <uuid|null>, "proxy_id": <uuid|null>, "source": "<source>",
 *    "session_id": <text|null>, "instance_id": <text|null>, "country": <"DE"|null>,
 *    "region": <"DE-BE"|null>, "city": <text|null>, "asn": <number|null>,
 *    "claimed_country": <"DE"|null>, "sources": ["<name>", ...]}
 *
 * `v` is the format's version: an entry of another version (a release rolling in or out) is
 * logged and completed by the ingest, never written. Fields may be added under the same version
 * when an older reader can ignore them.
 *
 * Runtime-neutral: JSON and string handling only.
 */
import { formatIPv6, parseIPv4, parseIPv6 } from "../proxy-protocol/address.ts";

/** The stream entry's one field: the observation's JSON. */
export const OBSERVATION_FIELD = "o";
/** The version of the entry's JSON this release writes and reads. */
export const OBSERVATION_WIRE_VERSION = 1;

/** What saw an exit. */
export const ObservationSource = {
  health: "health",
  sync: "sync",
  preflight: "preflight",
  enrich: "enrich",
  lookup: "lookup",
} as const;
export type ObservationSource = (typeof ObservationSource)[keyof typeof ObservationSource];
export const OBSERVATION_SOURCES: readonly ObservationSource[] = Object.values(ObservationSource);

/**
 * Longest session id and instance id kept (their columns' sizes): longer ones are cut, so one
 * client's long `-sessid-` cannot fail a whole batch.
 */
export const MAX_SESSION_ID_CHARS = 255;
export const MAX_INSTANCE_ID_CHARS = 64;
/** Longest region or city kept, and source name; at most this many sources. */
export const MAX_PLACE_CHARS = 200;
export const MAX_SOURCE_CHARS = 64;
export const MAX_SOURCES = 16;

/** One exit seen: the contract every recorder and the ingest share. */
export interface Observation {
  /** When it was seen, epoch milliseconds. */
  observedAt: number;
  /** The exit's address. */
  ip: string;
  projectId: string | null;
  connectorId: string | null;
  proxyId: string | null;
  source: ObservationSource;
  /** The client's `-sessid-`, for a pooled session's exit. */
  sessionId?: string | null;
  /** The process that saw it (a gateway's instance id). */
  instanceId?: string | null;
  /** Where the exit is, as attribution placed it (ISO 3166-1 alpha-2); null when unknown. */
  country: string | null;
  region: string | null;
  city: string | null;
  asn: number | null;
  /** The country the vendor promised for this exit. */
  claimedCountry: string | null;
  /** The sources that placed it (database names, `vendor`, `endpoint`). */
  sources: readonly string[];
}

/** The entry's JSON for an observation (what a recorder appends, serialised at the cut). */
export function encodeObservation(o: Observation): string {
  return JSON.stringify({
    v: OBSERVATION_WIRE_VERSION,
    observed_at: o.observedAt,
    ip: o.ip,
    project_id: o.projectId,
    connector_id: o.connectorId,
    proxy_id: o.proxyId,
    source: o.source,
    session_id: o.sessionId ?? null,
    instance_id: o.instanceId ?? null,
    country: o.country,
    region: o.region,
    city: o.city,
    asn: o.asn,
    claimed_country: o.claimedCountry,
    sources: o.sources,
  });
}

export type DecodedObservation =
  | { ok: true; observation: Observation }
  | { ok: false; reason: string };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** From the epoch to the year 9999: a time every store and cursor of ours holds. */
const MIN_MS = 0;
const MAX_MS = Date.UTC(9999, 11, 31);
const INT32_MAX = 2_147_483_647;
/** A lone UTF-16 surrogate, which Postgres would not keep as sent. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Text Postgres refuses (a NUL) or would change (a lone surrogate). */
function unstorable(text: string): boolean {
  return text.includes("\u0000") || LONE_SURROGATE.test(text);
}

/**
 * An address as exits are kept: a dotted quad, or IPv6 in its short form (an IPv4-mapped one as
 * its IPv4 address), so one exit is one row whatever form a writer sent; undefined for anything
 * else (the lax IPv4 forms `inet_aton` reads included: an exit is what an echo answered).
 */
export function exitAddress(text: string): string | undefined {
  const v4 = parseIPv4(text);
  if (v4 !== undefined) return v4.join(".");
  const v6 = parseIPv6(text);
  if (v6 === undefined) return undefined;
  const mapped = v6.subarray(0, 10).every((b) => b === 0) && v6[10] === 0xff && v6[11] === 0xff;
  return mapped ? [...v6.subarray(12)].join(".") : formatIPv6(v6);
}

type Field = { ok: true; value: string | null } | { ok: false };

function optionalText(value: unknown, max: number): Field {
  if (value === undefined || value === null) return { ok: true, value: null };
  if (typeof value !== "string" || unstorable(value)) return { ok: false };
  // A cut between the halves of a surrogate pair would leave a lone half: cut before it.
  let cut = value.length > max ? value.slice(0, max) : value;
  if (cut.length < value.length && /[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1);
  return { ok: true, value: cut === "" ? null : cut };
}

function optionalId(value: unknown): Field {
  if (value === undefined || value === null) return { ok: true, value: null };
  return typeof value === "string" && UUID.test(value)
    ? { ok: true, value: value.toLowerCase() }
    : { ok: false };
}

function optionalCountry(value: unknown): Field {
  if (value === undefined || value === null) return { ok: true, value: null };
  return typeof value === "string" && /^[A-Za-z]{2}$/.test(value)
    ? { ok: true, value: value.toUpperCase() }
    : { ok: false };
}

/**
 * An entry's JSON back into an observation, or why it is malformed. Lenient where a value is
 * only too long (session and instance ids, places and sources are cut; an ASN past what the
 * column holds is dropped), strict where a value could not be stored or would be wrong (an id
 * that is not a uuid, an address that is not one, an unknown source, another version).
 */
export function decodeObservation(text: string | undefined): DecodedObservation {
  if (text === undefined) return { ok: false, reason: `no "${OBSERVATION_FIELD}" field` };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { ok: false, reason: "not JSON" };
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    return { ok: false, reason: "not a JSON object" };
  }
  const r = raw as Record<string, unknown>;
  if (r.v !== OBSERVATION_WIRE_VERSION) return { ok: false, reason: `version ${String(r.v)}` };
  const at = r.observed_at;
  if (typeof at !== "number" || !Number.isInteger(at) || at < MIN_MS || at > MAX_MS) {
    return { ok: false, reason: "observed_at is not a time in epoch milliseconds" };
  }
  const ip = typeof r.ip === "string" ? exitAddress(r.ip) : undefined;
  if (ip === undefined) return { ok: false, reason: "ip is not an IP address" };
  if (!(OBSERVATION_SOURCES as readonly unknown[]).includes(r.source)) {
    return { ok: false, reason: "source is not a known source" };
  }
  const project = optionalId(r.project_id);
  const connector = optionalId(r.connector_id);
  const proxy = optionalId(r.proxy_id);
  if (!project.ok || !connector.ok || !proxy.ok) {
    return { ok: false, reason: "project_id, connector_id or proxy_id is not a uuid" };
  }
  const session = optionalText(r.session_id, MAX_SESSION_ID_CHARS);
  const instance = optionalText(r.instance_id, MAX_INSTANCE_ID_CHARS);
  const region = optionalText(r.region, MAX_PLACE_CHARS);
  const city = optionalText(r.city, MAX_PLACE_CHARS);
  if (!session.ok || !instance.ok || !region.ok || !city.ok) {
    return { ok: false, reason: "session_id, instance_id, region or city is not storable text" };
  }
  const country = optionalCountry(r.country);
  const claimed = optionalCountry(r.claimed_country);
  if (!country.ok || !claimed.ok) {
    return { ok: false, reason: "country or claimed_country is not a two-letter code" };
  }
  const asnValue = r.asn;
  if (asnValue !== undefined && asnValue !== null && typeof asnValue !== "number") {
    return { ok: false, reason: "asn is not a number" };
  }
  // A 32-bit ASN past the column's signed range is a private-use one: nothing to keep.
  const asn = typeof asnValue === "number" && Number.isInteger(asnValue) && asnValue >= 0 &&
      asnValue <= INT32_MAX
    ? asnValue
    : null;
  const sourcesValue = r.sources ?? [];
  if (!Array.isArray(sourcesValue)) return { ok: false, reason: "sources is not a list" };
  const sources: string[] = [];
  for (const item of sourcesValue.slice(0, MAX_SOURCES)) {
    const name = optionalText(item, MAX_SOURCE_CHARS);
    if (!name.ok) return { ok: false, reason: "sources holds something other than text" };
    if (name.value !== null && !sources.includes(name.value)) sources.push(name.value);
  }
  return {
    ok: true,
    observation: {
      observedAt: at,
      ip,
      projectId: project.value,
      connectorId: connector.value,
      proxyId: proxy.value,
      source: r.source as ObservationSource,
      sessionId: session.value,
      instanceId: instance.value,
      country: country.value,
      region: region.value === null ? null : region.value.toUpperCase(),
      city: city.value,
      asn,
      claimedCountry: claimed.value,
      sources,
    },
  };
}
