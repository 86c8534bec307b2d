/**
 * A sighting: one exit a gateway's preflight saw through one proxy, on the request path, where
 * nothing may wait for Postgres. The gateway appends it to the sightings stream; a worker's
 * sighting ingest (control/geo/sighting-ingest.ts) judges it again, writes the row forward only,
 * records the observation and rotates a vendor session slot whose claim it contradicts.
 *
 * This file is the stream entry's one definition, so the Deno writer and the Node reader never
 * disagree on it. An entry holds one field, `s` (`SIGHTING_FIELD`), whose value is a JSON object:
 *
 *   {"v": 1, "observed_at": <epoch ms>, "project_id": <uuid>, "connector_id": <uuid>,
 *    "proxy_id": <uuid>, "ip": "<address>", "instance_id": <text>, "requirement": <"GB">,
 *    "mode": <"report"|"retry"|"reject">, "judged": {"country", "source", "database"},
 *    "endpoint": {"country", "region", "city", "asn"} | null}
 *
 * `judged` is the answer the gateway judged the request with (its copy of attribution over its
 * databases); `endpoint` is what the echo said of the address, when it said a country. `v` is
 * the format's version: an entry of another version is logged and completed by the ingest, never
 * written. Runtime-neutral: JSON and string handling only.
 */
import type { GeoLocation } from "./contract.ts";
import { exitAddress } from "./observation-wire.ts";

/** The stream entry's one field: the sighting's JSON. */
export const SIGHTING_FIELD = "s";
/** The version of the entry's JSON this release writes and reads. */
export const SIGHTING_WIRE_VERSION = 1;
/** Longest instance id and database name kept; longer ones are cut, never refused. */
const MAX_TEXT_CHARS = 200;

/** What the gateway's judgement said of the exit. */
export interface SightingJudgement {
  /** The country attribution placed the exit in; null when no source could. */
  country: string | null;
  /** The source that placed it (`database`, `vendor`, `endpoint`). */
  source: string | null;
  /** The database that answered, when the source is `database`. */
  database: string | null;
}

export interface Sighting {
  /** When the echo answered, epoch milliseconds. */
  observedAt: number;
  projectId: string;
  connectorId: string;
  proxyId: string;
  /** The exit's address, as the echo saw it. */
  ip: string;
  /** The gateway that saw it (its instance id and isolate). */
  instanceId: string;
  /** The country the request required: its `-cc-`, or the row's own claim. */
  requirement: string;
  /** The project's preflight mode at the time: rotation follows retry and reject only. */
  mode: string;
  judged: SightingJudgement;
  /** What the echo said of the address, when it said a country. */
  endpoint: GeoLocation | null;
}

export function encodeSighting(s: Sighting): string {
  return JSON.stringify({
    v: SIGHTING_WIRE_VERSION,
    observed_at: s.observedAt,
    project_id: s.projectId,
    connector_id: s.connectorId,
    proxy_id: s.proxyId,
    ip: s.ip,
    instance_id: s.instanceId,
    requirement: s.requirement,
    mode: s.mode,
    judged: s.judged,
    endpoint: s.endpoint,
  });
}

export type DecodedSighting = { ok: true; sighting: Sighting } | { ok: false; reason: string };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const COUNTRY = /^[A-Z]{2}$/;
/** Year 1 to 9999: what a Postgres timestamptz and a JavaScript Date both hold. */
const MIN_MS = Date.UTC(1, 0, 1);
const MAX_MS = Date.UTC(9999, 11, 31);

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

function country(value: unknown): string | null | undefined {
  if (value === null || value === undefined) return null;
  if (typeof value !== "string") return undefined;
  const code = value.toUpperCase();
  return COUNTRY.test(code) ? code : undefined;
}

/** Text kept as sent up to its bound; null for none; undefined for what is not text. */
function text(value: unknown): string | null | undefined {
  if (value === null || value === undefined) return null;
  if (typeof value !== "string" || value.includes("\u0000")) return undefined;
  return value === "" ? null : value.slice(0, MAX_TEXT_CHARS);
}

function place(value: unknown): GeoLocation | null | undefined {
  if (value === null || value === undefined) return null;
  if (!isObject(value)) return undefined;
  const code = country(value.country);
  const region = text(value.region);
  const city = text(value.city);
  if (code === undefined || region === undefined || city === undefined) return undefined;
  const asn = typeof value.asn === "number" && Number.isInteger(value.asn) && value.asn >= 0
    ? value.asn
    : null;
  return { country: code, region: region?.toUpperCase() ?? null, city, asn };
}

/**
 * An entry's JSON back into a sighting, or why it cannot be read (another version, an id that
 * is not a uuid, an address that is not one, a country that is not two letters).
 */
export function decodeSighting(value: string | undefined): DecodedSighting {
  if (value === undefined) return { ok: false, reason: `no "${SIGHTING_FIELD}" field` };
  let raw: unknown;
  try {
    raw = JSON.parse(value);
  } catch {
    return { ok: false, reason: "not JSON" };
  }
  if (!isObject(raw)) return { ok: false, reason: "not a JSON object" };
  if (raw.v !== SIGHTING_WIRE_VERSION) return { ok: false, reason: `version ${String(raw.v)}` };
  const at = raw.observed_at;
  if (typeof at !== "number" || !Number.isInteger(at) || at < MIN_MS || at > MAX_MS) {
    return { ok: false, reason: "observed_at is not a time in epoch milliseconds" };
  }
  const ids = [raw.project_id, raw.connector_id, raw.proxy_id];
  if (!ids.every((id) => typeof id === "string" && UUID.test(id))) {
    return { ok: false, reason: "project_id, connector_id or proxy_id is not a uuid" };
  }
  const ip = typeof raw.ip === "string" ? exitAddress(raw.ip) : undefined;
  if (ip === undefined) return { ok: false, reason: "ip is not an IP address" };
  const requirement = country(raw.requirement);
  if (requirement === undefined || requirement === null) {
    return { ok: false, reason: "requirement is not a two-letter code" };
  }
  const instance = text(raw.instance_id);
  const mode = text(raw.mode);
  if (instance === undefined || mode === undefined) {
    return { ok: false, reason: "instance_id or mode is not text" };
  }
  const judgedRaw = isObject(raw.judged) ? raw.judged : {};
  const judged = {
    country: country(judgedRaw.country),
    source: text(judgedRaw.source),
    database: text(judgedRaw.database),
  };
  if (
    judged.country === undefined || judged.source === undefined || judged.database === undefined
  ) {
    return { ok: false, reason: "judged is not a country with its source" };
  }
  const endpoint = place(raw.endpoint);
  if (endpoint === undefined) return { ok: false, reason: "endpoint is not a place" };
  const [projectId, connectorId, proxyId] = ids.map((id) => (id as string).toLowerCase());
  return {
    ok: true,
    sighting: {
      observedAt: at,
      projectId,
      connectorId,
      proxyId,
      ip,
      instanceId: instance ?? "",
      requirement,
      mode: mode ?? "",
      judged: { country: judged.country, source: judged.source, database: judged.database },
      endpoint,
    },
  };
}
