/**
 * A traffic subject's usage in its window, read as every decision and usage answer reads it:
 * the limit and reset from Postgres, the history of the window (the period, cut at a reset) from
 * Postgres, then the live windows from Redis. The history comes before the live windows: a flush
 * takes a window out of Redis before it commits the counts, so a count is live, in flight or in
 * the history, never in two at once; the other order could count a flush's bytes twice.
 */
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import type { TrafficConfig } from "../../db/schema.ts";
import {
  ConnectorWindows,
  ProjectWindows,
  readCounts,
  TRANSFER_FIELDS,
  windowKey,
} from "../../shared/metric-windows.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import {
  parseTrafficSubject,
  type TrafficSubject,
  trafficSubjectKey,
} from "../../shared/traffic-subjects.ts";
import { isUuid } from "../core/store.ts";
import { type TimeWindow, usageWindow } from "./rules.ts";

/** A subject as Postgres holds it; undefined in a result: gone. */
export interface SubjectRow {
  subject: TrafficSubject;
  projectId: string;
  limit: TrafficConfig | null;
  resetAtMs: number | null;
}

export interface SubjectUsage {
  row: SubjectRow;
  window: TimeWindow | undefined;
  /** Bytes both ways in the window: the history's and the live window's. */
  bytes: number;
  historyBytes: number;
  liveBytes: number;
}

const msOf = (value: string | Date | null): number | null =>
  value === null ? null : new Date(value).getTime();

/** The subjects' rows, by subject key (the ones gone are absent). */
export async function readSubjects(
  database: Database,
  subjects: readonly string[],
): Promise<Map<string, SubjectRow>> {
  const connectorIds: string[] = [];
  const projectIds: string[] = [];
  for (const key of subjects) {
    const subject = parseTrafficSubject(key);
    if (!subject || !isUuid(subject.id)) continue;
    (subject.kind === "project" ? projectIds : connectorIds).push(subject.id);
  }
  const sql = database.sql;
  const [connectors, projects] = await Promise.all([
    connectorIds.length === 0 ? [] : sql<
      {
        id: string;
        project_id: string;
        traffic_config: TrafficConfig | null;
        traffic_reset_at: string | null;
      }[]
    >`select id::text, project_id::text, traffic_config, traffic_reset_at::text from connectors
      where id = any(${connectorIds}::uuid[])`,
    projectIds.length === 0 ? [] : sql<
      { id: string; traffic_quota: TrafficConfig | null; traffic_reset_at: string | null }[]
    >`select id::text, traffic_quota, traffic_reset_at::text from projects
      where id = any(${projectIds}::uuid[])`,
  ]);
  const rows = new Map<string, SubjectRow>();
  for (const c of connectors) {
    const subject: TrafficSubject = { kind: "connector", id: c.id };
    rows.set(trafficSubjectKey(subject), {
      subject,
      projectId: c.project_id,
      limit: parseJson(c.traffic_config),
      resetAtMs: msOf(c.traffic_reset_at),
    });
  }
  for (const p of projects) {
    const subject: TrafficSubject = { kind: "project", id: p.id };
    rows.set(trafficSubjectKey(subject), {
      subject,
      projectId: p.id,
      limit: parseJson(p.traffic_quota),
      resetAtMs: msOf(p.traffic_reset_at),
    });
  }
  return rows;
}

/** jsonb may come back as text, depending on the client's parsers. */
function parseJson<T>(value: T | string | null): T | null {
  if (typeof value === "string") return JSON.parse(value) as T;
  return value;
}

/**
 * Each limited subject's usage in its window: the history in one query per kind, then the live
 * windows in one pipeline. Subjects without a limit get no window and count nothing.
 */
export async function readUsage(
  database: Database,
  redis: Redis,
  keys: RedisKeys,
  rows: readonly SubjectRow[],
  nowMs: number,
  options: { live?: boolean } = {},
): Promise<SubjectUsage[]> {
  const windowed = rows.map((row) => ({
    row,
    window: row.limit ? usageWindow(row.limit, row.resetAtMs, nowMs) : undefined,
  }));
  const history = new Map<string, number>();
  const sql = database.sql;
  for (const kind of ["connector", "project"] as const) {
    const mine = windowed.filter((w) => w.window && w.row.subject.kind === kind);
    if (mine.length === 0) continue;
    const table = kind === "connector" ? "connector_metrics" : "project_metrics";
    const column = kind === "connector" ? "connector_id" : "project_id";
    // Lateral: one index range per subject (connector_metrics_entity_idx and
    // project_metrics_usage_idx cover it), whatever share of the table the batch is.
    const found = await sql.unsafe<{ id: string; bytes: string }[]>(
      `select w.id::text, coalesce(s.bytes, 0)::text as bytes
      from unnest($1::uuid[], $2::text[]) as w(id, since)
      cross join lateral (
        select sum(m.bytes_sent + m.bytes_received) as bytes from ${table} m
        where m.${column} = w.id and m.bucket_start >= w.since::timestamptz
      ) s`,
      [
        mine.map((w) => w.row.subject.id),
        mine.map((w) => new Date(w.window!.startMs).toISOString()),
      ] as never[],
    );
    for (const row of found) history.set(`${kind}:${row.id}`, Number(row.bytes));
  }
  const live = new Map<string, number>();
  const limited = windowed.filter((w) => w.window);
  if (options.live !== false && limited.length > 0) {
    const pipeline = redis.pipeline();
    for (const { row } of limited) {
      const kind = row.subject.kind === "connector" ? ConnectorWindows : ProjectWindows;
      pipeline.hgetall(windowKey(keys, kind, row.subject.id));
    }
    const replies = (await pipeline.exec()) ?? [];
    replies.forEach(([error, hash], i) => {
      if (error) throw error;
      const counts = readCounts(TRANSFER_FIELDS, hash as Record<string, string>);
      const { subject } = limited[i].row;
      live.set(`${subject.kind}:${subject.id}`, counts.bytes_sent + counts.bytes_received);
    });
  }
  return windowed.map(({ row, window }) => {
    const id = `${row.subject.kind}:${row.subject.id}`;
    const historyBytes = window ? history.get(id) ?? 0 : 0;
    const liveBytes = window ? live.get(id) ?? 0 : 0;
    return { row, window, bytes: historyBytes + liveBytes, historyBytes, liveBytes };
  });
}
