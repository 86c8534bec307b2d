/** Proxies and proxy uploads as the API answers them. */
import * as v from "valibot";
import { PROXY_SCHEMES } from "../../../shared/roles.ts";
import { count, id, jsonObject, nullableTimestamp, pageOf, timestamp } from "./common.ts";

/** A proxy without its password: `url` carries the username only, `has_password` the rest. */
export const ProxyAnswer = v.strictObject({
  id,
  project_id: id,
  connector_id: id,
  url: v.string(),
  scheme: v.picklist(PROXY_SCHEMES),
  host: v.string(),
  port: count,
  username: v.nullable(v.string()),
  has_password: v.boolean(),
  country: v.nullable(v.string()),
  /** Where `country` came from: `manual`, `vendor`, `database` or `endpoint`; null: unknown. */
  country_source: v.nullable(v.string()),
  /** The country the vendor promised for the exit. */
  vendor_country: v.nullable(v.string()),
  /** The sources attribution asked disagree on the country (out of routing under `strict`). */
  location_conflict: v.boolean(),
  /** Where the exit was seen: its address, region, city, ASN and what each source said. */
  location: v.nullable(v.object({
    ip: v.nullable(v.string()),
    region: v.nullable(v.string()),
    city: v.nullable(v.string()),
    asn: v.nullable(v.number()),
    sources: v.array(v.object({
      source: v.string(),
      country: v.nullable(v.string()),
      database: v.optional(v.string()),
    })),
  })),
  /** When attribution last judged the exit. */
  location_checked_at: nullableTimestamp,
  metadata: jsonObject,
  status: v.string(),
  status_changed_at: timestamp,
  /** A rate-limit quarantine (soft state in Redis). */
  quarantined: v.boolean(),
  quarantine_remaining_seconds: count,
  /** The last health check; null when none is known. */
  last_checked_at: nullableTimestamp,
  created_at: timestamp,
  updated_at: timestamp,
});
export type Proxy = v.InferOutput<typeof ProxyAnswer>;

export const ProxyPageAnswer = pageOf(ProxyAnswer);

export const UploadReportAnswer = v.strictObject({
  total_lines: count,
  added: count,
  duplicates: count,
  refused: count,
  errors: v.array(v.strictObject({ line: count, reason: v.string() })),
  /** Lines whose proxy the connector already had, or an earlier line of the file named. */
  duplicate_lines: v.array(count),
});
export type UploadReport = v.InferOutput<typeof UploadReportAnswer>;

export const StatusOkAnswer = v.strictObject({ status: v.literal("ok") });
