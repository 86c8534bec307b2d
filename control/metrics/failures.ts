/**
 * The failure log as the api reads it: the summary from the failure_metrics history the
 * metrics flush writes (so without Redis the counts stay), and the examples from the capped
 * streams gateways append to, one per project and kind (so without Postgres the examples stay,
 * and without Redis they fail: a 503). Examples are ordered newest first by stream id, then
 * kind (two kinds' streams can hand out one id in the same millisecond), and paged by a cursor
 * naming the last one shown.
 */
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import { translatePostgresError } from "../../db/errors.ts";
import { ValidationError } from "../../shared/errors.ts";
import { decodeFailureExample, type FailureExample } from "../../shared/failure-examples.ts";
import { FAILURE_KINDS, type FailureKind } from "../../shared/failure-kinds.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { STREAM_CAPS } from "../../shared/redis-keys.ts";
import { redisDeadline } from "../core/redis.ts";
import type { Window } from "./ranges.ts";

export interface FailureSummaryRow {
  kind: string;
  connector_id: string | null;
  vendor_status: number | null;
  count: number;
}

export interface FailureSummary {
  range: string;
  from: string;
  to: string;
  total: number;
  /** Every kind with failures in the window, most first. */
  by_kind: { kind: string; count: number }[];
  /** The same counts split by connector and the upstream's own status. */
  rows: FailureSummaryRow[];
}

export async function failureSummary(
  database: Database,
  projectId: string,
  window: Window,
  connectorId?: string,
): Promise<FailureSummary> {
  const params: string[] = [
    projectId,
    new Date(window.fromMs).toISOString(),
    new Date(window.toMs).toISOString(),
  ];
  let filter = "";
  if (connectorId) {
    params.push(connectorId);
    filter = "and connector_id = $4";
  }
  let rows: {
    kind: string;
    connector_id: string | null;
    vendor_status: number | null;
    n: string;
  }[];
  try {
    rows = await database.sql.unsafe(
      `select kind, connector_id::text, vendor_status, sum(count)::text as n
      from failure_metrics
      where project_id = $1 and bucket_start >= $2 and bucket_start < $3 ${filter}
      group by kind, connector_id, vendor_status order by sum(count) desc, kind`,
      params,
    );
  } catch (error) {
    throw translatePostgresError(error);
  }
  const byKind = new Map<string, number>();
  let total = 0;
  const out: FailureSummaryRow[] = rows.map((row) => {
    const count = Number(row.n);
    total += count;
    byKind.set(row.kind, (byKind.get(row.kind) ?? 0) + count);
    return {
      kind: row.kind,
      connector_id: row.connector_id,
      vendor_status: row.vendor_status,
      count,
    };
  });
  return {
    range: window.range,
    from: new Date(window.fromMs).toISOString(),
    to: new Date(window.toMs).toISOString(),
    total,
    by_kind: [...byKind.entries()]
      .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
      .map(([kind, count]) => ({ kind, count })),
    rows: out,
  };
}

/** An example as the api answers it. */
export interface FailureExampleView {
  /** The stream entry's id: with the kind, what a cursor names. */
  id: string;
  at: string;
  kind: FailureKind;
  protocol: string;
  client_status: number;
  proxy_status: string;
  vendor_status: number | null;
  connector_id: string | null;
  proxy_id: string | null;
  target: string;
  message: string;
}

export interface ExamplesFilter {
  kind?: FailureKind;
  connectorId?: string;
  limit: number;
  /** `<entry id>:<kind>` of the last example of the previous page. */
  cursor?: string;
}

export interface ExamplesPage {
  items: FailureExampleView[];
  /** Pass as `cursor` for the next page; null at the end. */
  next_cursor: string | null;
}

const STREAM_ID = /^\d{1,20}-\d{1,20}$/;

function parseCursor(cursor: string): { id: string; kind: string } {
  const colon = cursor.indexOf(":");
  const id = cursor.slice(0, colon);
  const kind = cursor.slice(colon + 1);
  if (colon <= 0 || !STREAM_ID.test(id) || !(FAILURE_KINDS as readonly string[]).includes(kind)) {
    throw new ValidationError([{
      field: "query.cursor",
      message: "is not a cursor this API gave (next_cursor of a previous page)",
    }]);
  }
  return { id, kind };
}

/** Stream ids compare as (ms, sequence). */
function compareIds(a: string, b: string): number {
  const [am, as] = a.split("-").map(BigInt);
  const [bm, bs] = b.split("-").map(BigInt);
  if (am !== bm) return am < bm ? -1 : 1;
  if (as !== bs) return as < bs ? -1 : 1;
  return 0;
}

/** Newest first by id, then by kind: the order pages follow. */
function before(a: { id: string; kind: string }, b: { id: string; kind: string }): boolean {
  const byId = compareIds(a.id, b.id);
  return byId > 0 || (byId === 0 && a.kind < b.kind);
}

export async function failureExamples(
  redis: Redis,
  keys: RedisKeys,
  deadlineMs: number,
  projectId: string,
  filter: ExamplesFilter,
): Promise<ExamplesPage> {
  const cursor = filter.cursor === undefined ? undefined : parseCursor(filter.cursor);
  const kinds = filter.kind ? [filter.kind] : FAILURE_KINDS;
  // Each stream is capped (STREAM_CAPS.failures, about that many entries): read each whole,
  // up to the cursor, and page the merge in memory.
  const end = cursor?.id ?? "+";
  const replies = await redisDeadline(deadlineMs, async () => {
    const pipeline = redis.pipeline();
    for (const kind of kinds) {
      pipeline.xrevrange(
        keys.failures(projectId, kind),
        end,
        "-",
        "COUNT",
        STREAM_CAPS.failures * 2,
      );
    }
    return ((await pipeline.exec()) ?? []).map(([error, reply]) => {
      if (error) throw error;
      return reply as [string, string[]][];
    });
  });
  const found: FailureExampleView[] = [];
  replies.forEach((entries, i) => {
    for (const [id, fields] of entries) {
      const example = decodeFailureExample(fields);
      if (!example || example.kind !== kinds[i]) continue;
      if (cursor && !before(cursor, { id, kind: example.kind })) continue;
      if (filter.connectorId && example.connectorId !== filter.connectorId) continue;
      found.push(view(id, example));
    }
  });
  found.sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0));
  const items = found.slice(0, filter.limit);
  const last = items.at(-1);
  return {
    items,
    next_cursor: found.length > filter.limit && last ? `${last.id}:${last.kind}` : null,
  };
}

function view(id: string, example: FailureExample): FailureExampleView {
  return {
    id,
    at: new Date(example.atMs).toISOString(),
    kind: example.kind,
    protocol: example.protocol,
    client_status: example.clientStatus,
    proxy_status: example.proxyStatus,
    vendor_status: example.vendorStatus,
    connector_id: example.connectorId,
    proxy_id: example.proxyId,
    target: example.target,
    message: example.message,
  };
}
