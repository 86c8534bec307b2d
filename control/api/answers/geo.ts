/** What the `/geo` routes answer: IP databases, the attribution settings, lookups, the status. */
import * as v from "valibot";
import { count, id, nullableTimestamp, timestamp } from "./common.ts";

const nullableCount = v.nullable(count);

/** An admin's IP database. Its download credentials are never answered: only their type. */
export const GeoDatabaseAnswer = v.strictObject({
  id,
  name: v.string(),
  format: v.picklist(["mmdb", "geofeed"]),
  enabled: v.boolean(),
  /** Consulted in ascending position, then name; the shipped database after all of them. */
  position: v.pipe(v.number(), v.integer()),
  /** `upload` or `url`. */
  origin: v.picklist(["upload", "url"]),
  url: v.nullable(v.string()),
  /** How downloads authenticate (`basic`, `token`), or null; the secret itself never. */
  auth_type: v.nullable(v.picklist(["basic", "token"])),
  update_interval_hours: nullableCount,
  /** SHA-256 of the file in force, hex. */
  checksum: v.nullable(v.string()),
  size_bytes: nullableCount,
  /** Geofeed lines, or an mmdb's search-tree nodes. */
  entries: nullableCount,
  /** The file's own type and build day, when it states them. */
  version: v.nullable(v.string()),
  last_update_at: nullableTimestamp,
  /** Why the last download brought no usable file (the file in force was kept). */
  last_error: v.nullable(v.string()),
  last_error_at: nullableTimestamp,
  created_at: timestamp,
  updated_at: timestamp,
});
export type GeoDatabaseRecord = v.InferOutput<typeof GeoDatabaseAnswer>;

export const GeoDatabaseListAnswer = v.array(GeoDatabaseAnswer);

export const GeoSettingsAnswer = v.strictObject({
  location_sources: v.array(v.string()),
  location_conflict_rule: v.string(),
  observation_retention_days: count,
  exit_ip_retention_days: nullableCount,
  updated_at: nullableTimestamp,
});
export type GeoSettingsRecord = v.InferOutput<typeof GeoSettingsAnswer>;

/** What a file holds, read without storing it. */
export const GeoInspectAnswer = v.strictObject({
  format: v.picklist(["mmdb", "geofeed"]),
  checksum: v.string(),
  size_bytes: count,
  entries: count,
  version: v.nullable(v.string()),
});
export type GeoInspectRecord = v.InferOutput<typeof GeoInspectAnswer>;

const place = {
  country: v.nullable(v.string()),
  region: v.nullable(v.string()),
  city: v.nullable(v.string()),
  asn: nullableCount,
};

export const GeoLookupAnswer = v.strictObject({
  ip: v.string(),
  /** The stack's answer: the first database to place the address, filled by those agreeing. */
  answer: v.nullable(v.strictObject({ ...place, source: v.string() })),
  /** What each database in force says, in the order consulted. */
  databases: v.array(v.strictObject({
    name: v.string(),
    found: v.nullable(v.strictObject(place)),
  })),
});
export type GeoLookupRecord = v.InferOutput<typeof GeoLookupAnswer>;

export const GeoStatusAnswer = v.strictObject({
  settings: GeoSettingsAnswer,
  /** The admin's databases, each with how old its file is and when it is next due. */
  databases: v.array(v.strictObject({
    ...GeoDatabaseAnswer.entries,
    /** Seconds since its file was stored; null without one. */
    age_seconds: nullableCount,
    /** When geo_update downloads it next (a URL database, enabled); null otherwise. */
    next_update_at: nullableTimestamp,
    /** Whether its file is in the stack gateways and attribution consult. */
    in_force: v.boolean(),
  })),
  /** The database every install ships with, consulted last. */
  shipped: v.strictObject({
    name: v.string(),
    format: v.literal("mmdb"),
    checksum: v.string(),
    size_bytes: count,
  }),
});
export type GeoStatusRecord = v.InferOutput<typeof GeoStatusAnswer>;

export const GeoRefreshAnswer = v.strictObject({
  /** `updated`: a new file swapped in; `unchanged`: the same file; `failed`: the old one kept. */
  outcome: v.picklist(["updated", "unchanged", "failed"]),
  database: GeoDatabaseAnswer,
});
export type GeoRefreshRecord = v.InferOutput<typeof GeoRefreshAnswer>;

/** `POST /geo/reattribute`: the scope the workers were asked to judge again. */
export const GeoReattributeAnswer = v.strictObject({
  /** `all`, or `project:<id>`. */
  scope: v.string(),
});
