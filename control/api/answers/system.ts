/** GET /system/stats as the API answers it (control/metrics/system-stats.ts). */
import * as v from "valibot";
import type { LoopSnapshot } from "../../../shared/async/loop.ts";
import { count, jsonObject, timestamp } from "./common.ts";

/** A section of the stats: its data, or what Redis answered instead. */
function section<TData extends v.GenericSchema>(data: TData) {
  return v.strictObject({ data: v.nullable(data), error: v.nullable(v.string()) });
}

export interface StatsSection<T> {
  data: T | null;
  error: string | null;
}

export const ListedProcessAnswer = v.strictObject({
  instance: v.string(),
  role: v.string(),
  version: v.nullable(v.string()),
  started_at: v.nullable(timestamp),
  /** How long ago the last heartbeat landed. */
  heartbeat_age_ms: v.nullable(v.number()),
  /** The process's own report; null when this release cannot read it. */
  snapshot: v.nullable(jsonObject),
});
export type ListedProcess = v.InferOutput<typeof ListedProcessAnswer>;

/** One gateway against the routing feed. */
export const FeedGatewayAnswer = v.strictObject({
  instance: v.string(),
  /** The head digest it applied last (null: none yet, or unknown). */
  applied_digest: v.nullable(v.string()),
  /** It applied the head Redis holds now. */
  current: v.boolean(),
  apply_age_ms: v.nullable(v.number()),
  heartbeat_age_ms: v.nullable(v.number()),
});
export type FeedGatewayStatus = v.InferOutput<typeof FeedGatewayAnswer>;

export const WorkStreamAnswer = v.strictObject({
  length: count,
  pending: count,
  backlog: count,
  consumers: count,
  /** Age of the oldest entry on Redis's clock, or null when the stream is empty. */
  oldestAgeMs: v.nullable(v.number()),
  groupMissing: v.boolean(),
});
export type WorkStreamStatus = v.InferOutput<typeof WorkStreamAnswer>;

export const SystemStatsAnswer = v.strictObject({
  read_at: timestamp,
  processes: section(v.strictObject({
    total: count,
    by_role: v.record(v.string(), v.array(ListedProcessAnswer)),
  })),
  leader: section(v.strictObject({ instance: v.string(), lease_ttl_ms: v.number() })),
  feed: section(v.strictObject({
    head: v.nullable(v.strictObject({ digest: v.string(), compiled_at: v.string() })),
    gateways: v.array(FeedGatewayAnswer),
    /** Gateways listed that have not applied the head. */
    behind: count,
  })),
  work_streams: section(v.record(v.string(), WorkStreamAnswer)),
  /** Provider-API pools whose runs go on with last-known settings (Postgres away). */
  pool_settings: section(v.strictObject({
    on_last_known: count,
    connector_ids: v.array(v.string()),
    /** Listed workers whose pool runs find Postgres away now. */
    workers_without_postgres: count,
  })),
});
export type SystemStats = v.InferOutput<typeof SystemStatsAnswer>;

/** A loop of a process's snapshot (`snapshot.loops`), with its owner when the process says. */
export type LoopStats = LoopSnapshot & { owner?: string };
