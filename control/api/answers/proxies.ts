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
  /** Where `country` came from (the list, a lookup), when known. */
  country_source: v.nullable(v.string()),
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
