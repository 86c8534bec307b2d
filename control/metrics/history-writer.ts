/**
 * The metrics flush's Postgres side: whether a flush committed, and the commit itself: one transaction that records the flush first (a second delivery
 * finds it and writes nothing), then one multi-row insert per history table with the same
 * windows added to the running totals. Each table's windows are inserted with one parent
 * lookup, taking the FOR KEY SHARE lock a foreign key check would take, only earlier, so a
 * window whose parent was removed is dropped rather than failing the flush.
 */
import type postgres from "postgres";
import { reservedTransaction } from "../../db/client.ts";
import {
  ConnectorWindows,
  DeviceWindows,
  type EntityWindows,
  fieldNames,
  FieldType,
  type FieldTypes,
  ProjectWindows,
  ProxyWindows,
} from "../../shared/metric-windows.ts";
import { type EntityRows, type FailureRows, FlushRows, type HostRows } from "./flush-rows.ts";
import type { StagedWindow } from "./staging.ts";

type Sql = postgres.Sql;
type TxSql = postgres.ReservedSql;

/** Minute rows: the width every flush writes, which compaction folds into coarser tiers. */
export const FLUSH_BUCKET_SECONDS = 60;

/** The bucket a flush's windows land in: the minute its job entry was published in. */
export function flushBucket(flushId: string): Date {
  const ms = Number(flushId.split("-")[0]);
  const at = Number.isFinite(ms) && ms > 0 ? ms : Date.now();
  return new Date(Math.floor(at / 60_000) * 60_000);
}

export async function flushRecorded(sql: Sql, flushId: string): Promise<boolean> {
  const rows = await sql`select 1 from metric_flushes where flush_id = ${flushId}`;
  return rows.length > 0;
}

export interface CommitResult {
  /** False: another delivery of this flush committed it already; nothing written. */
  committed: boolean;
  /** Windows read back from the staging hash. */
  windows: number;
  /** Windows whose key this release cannot read: dropped. */
  unreadable: number;
  /** History rows written per table (windows of removed parents are dropped). */
  written: Record<
    "proxies" | "projects" | "connectors" | "devices" | "hosts" | "failures",
    number
  >;
}

/**
 * Records the flush and writes its windows, in one transaction, a page of the staging hash at
 * a time (one multi-row insert per table and page), so a worker holds one page of windows at
 * once however many the flush took. Each proxy's history row records the status its parent
 * lookup reads.
 */
export async function commitFlush(
  sql: Sql,
  flushId: string,
  bucketStart: Date,
  pages: AsyncIterable<readonly StagedWindow[]>,
): Promise<CommitResult> {
  return await reservedTransaction(sql, async (tx) => {
    const result: CommitResult = {
      committed: false,
      windows: 0,
      unreadable: 0,
      written: { proxies: 0, projects: 0, connectors: 0, devices: 0, hosts: 0, failures: 0 },
    };
    const recorded = await tx`
      insert into metric_flushes (flush_id) values (${flushId})
      on conflict do nothing returning flush_id`;
    if (recorded.length === 0) return result;
    result.committed = true;
    const written = result.written;
    for await (const page of pages) {
      const rows = new FlushRows();
      for (const window of page) rows.add(window);
      result.windows += rows.windows;
      result.unreadable += rows.unreadable;
      written.proxies += await insertEntities(tx, PROXY_HISTORY, bucketStart, rows.proxies);
      written.projects += await insertEntities(tx, PROJECT_HISTORY, bucketStart, rows.projects);
      written.connectors += await insertEntities(
        tx,
        CONNECTOR_HISTORY,
        bucketStart,
        rows.connectors,
      );
      written.devices += await insertEntities(tx, DEVICE_HISTORY, bucketStart, rows.devices);
      written.hosts += await insertHosts(tx, bucketStart, rows.hosts);
      written.failures += await insertFailures(tx, bucketStart, rows.failures);
    }
    return result;
  }) as CommitResult;
}

/**
 * An entity's history table: the window kind it is written from (each of the kind's fields
 * goes to the history's column, and the totals', of the same name), where its rows go, its
 * parent (locked as a foreign key check would lock it, so a window whose parent is gone is
 * dropped), the history's other columns and where each comes from (`w.` the window, `parent.`
 * the parent row), and the running totals it adds to (metric_totals holds a column for every
 * field of a totalled kind).
 */
interface EntityTable {
  kind: EntityWindows<string, FieldTypes>;
  history: string;
  parent: string;
  parentColumns: readonly string[];
  columns: readonly (readonly [column: string, value: string])[];
  totals?: "proxy" | "project" | "tunnel_device";
}

const PROXY_HISTORY: EntityTable = {
  kind: ProxyWindows,
  history: "proxy_metrics",
  parent: "proxies",
  // A proxy's row records the status its parent lookup reads.
  parentColumns: ["project_id", "status"],
  columns: [["project_id", "parent.project_id"], ["proxy_id", "w.id"], [
    "status",
    "parent.status",
  ]],
  totals: "proxy",
};

const PROJECT_HISTORY: EntityTable = {
  kind: ProjectWindows,
  history: "project_metrics",
  parent: "projects",
  parentColumns: [],
  columns: [["project_id", "w.id"]],
  totals: "project",
};

/** A connector keeps no running totals: its usage reads the history, which outlives proxies. */
const CONNECTOR_HISTORY: EntityTable = {
  kind: ConnectorWindows,
  history: "connector_metrics",
  parent: "connectors",
  parentColumns: ["project_id"],
  columns: [["project_id", "parent.project_id"], ["connector_id", "w.id"]],
};

/**
 * One table for every tunnel protocol: the window names the device alone (metering does not
 * know its protocol), so the project and the protocol come from the device's row. Its counts
 * are the transfers and the encrypted DNS closed.
 */
const DEVICE_HISTORY: EntityTable = {
  kind: DeviceWindows,
  history: "tunnel_device_metrics",
  parent: "tunnel_devices",
  parentColumns: ["project_id", "protocol"],
  columns: [
    ["project_id", "parent.project_id"],
    ["device_id", "w.id"],
    ["protocol", "parent.protocol"],
  ],
  totals: "tunnel_device",
};

/** A table's counted columns: its window kind's fields, with each one's unnest array type. */
function countColumns(table: EntityTable): { name: string; array: string }[] {
  const fields = table.kind.fields;
  return fieldNames(fields).map((name) => ({
    name,
    array: fields[name] === FieldType.float ? "float8[]" : "bigint[]",
  }));
}

/**
 * One entity table's statement: $1 the ids, then the counts (a parameter per field of the
 * table's window kind, in its order), then the bucket's start and its width. Answers the history
 * rows written as `written`.
 */
function entityStatement(table: EntityTable): string {
  const fields = countColumns(table);
  const names = fields.map((f) => f.name);
  const counts = names.join(", ");
  const bucketAt = fields.length + 2;
  const parentColumns = ["p.id", ...table.parentColumns.map((c) => `p.${c}`)].join(", ");
  const columns = [...table.columns.map(([c]) => c), "bucket_start", "bucket_seconds", counts];
  const values = [
    ...table.columns.map(([, v]) => v),
    `$${bucketAt}::timestamptz`,
    `$${bucketAt + 1}::int`,
    ...names.map((c) => `w.${c}`),
  ];
  const arrays = ["$1::uuid[]", ...fields.map((f, i) => `$${i + 2}::${f.array}`)].join(", ");
  const totals = table.totals === undefined ? "" : `, totals as (
      insert into metric_totals as t (entity_kind, entity_id, ${counts})
      select '${table.totals}', w.id, ${names.map((c) => `w.${c}`).join(", ")}
      from w join parent on parent.id = w.id
      on conflict (entity_kind, entity_id) do update set
        ${names.map((c) => `${c} = t.${c} + excluded.${c}`).join(",\n        ")},
        updated_at = now()
      returning 1
    )`;
  return `with w as (
      select * from unnest(${arrays}) as w(id, ${counts})
    ), parent as (
      select ${parentColumns} from ${table.parent} p where p.id in (select id from w)
      for key share
    ), history as (
      insert into ${table.history} (${columns.join(", ")})
      select ${values.join(", ")} from w join parent on parent.id = w.id
      returning 1
    )${totals}
    select (select count(*) from history)::int as written`;
}

const ENTITY_TABLES: readonly EntityTable[] = [
  PROXY_HISTORY,
  PROJECT_HISTORY,
  CONNECTOR_HISTORY,
  DEVICE_HISTORY,
];

const STATEMENTS = new Map<EntityTable, string>(ENTITY_TABLES.map((t) => [t, entityStatement(t)]));

/**
 * The running totals the flushes would have added up from the history now held: for each
 * entity table that keeps totals, its rows summed per entity (the column the window's id fills)
 * that still exists (a device's history has no foreign key to go with it), replacing every
 * total. For a restore, which brings history but not totals; run it inside the restore's
 * transaction. Answers the rows written.
 */
export async function recomputeTotals(tx: Sql): Promise<number> {
  await tx`delete from metric_totals`;
  let written = 0;
  for (const table of ENTITY_TABLES) {
    if (table.totals === undefined) continue;
    const entity = table.columns.find(([, value]) => value === "w.id")![0];
    const names = countColumns(table).map((f) => f.name);
    const result = await tx.unsafe(
      `insert into metric_totals (entity_kind, entity_id, ${names.join(", ")})
       select '${table.totals}', ${entity}, ${names.map((c) => `sum(${c})`).join(", ")}
       from ${table.history} where ${entity} in (select id from ${table.parent})
       group by ${entity}`,
    );
    written += result.count;
  }
  return written;
}

async function insertEntities(
  tx: TxSql,
  table: EntityTable,
  bucket: Date,
  rows: EntityRows,
): Promise<number> {
  if (rows.ids.length === 0) return 0;
  const result = await tx.unsafe(STATEMENTS.get(table)!, [
    rows.ids,
    ...rows.counts,
    bucket.toISOString(),
    FLUSH_BUCKET_SECONDS,
  ] as never[]);
  return Number(result[0]?.written ?? 0);
}

async function insertHosts(tx: TxSql, bucket: Date, rows: HostRows): Promise<number> {
  const at = bucket.toISOString();
  if (rows.hosts.length === 0) return 0;
  // HostWindows' fields, in their order (TRANSFER_FIELDS).
  const [requests, successes, failures, sent, received, latency] = rows.counts;
  const result = await tx`
    with w as (
      select * from unnest(
        ${rows.projectIds}::uuid[], ${rows.connectorIds}::uuid[], ${rows.hosts}::text[],
        ${requests}::bigint[], ${successes}::bigint[], ${failures}::bigint[], ${sent}::bigint[],
        ${received}::bigint[], ${latency}::float8[]
      ) as w(project_id, connector_id, host, requests, successes, failures, bytes_sent,
        bytes_received, latency)
    ), parent as (
      select c.id, c.project_id from connectors c
      where c.id in (select connector_id from w) for key share
    ), project as (
      select p.id from projects p where p.id in (select project_id from w) for key share
    )
    insert into host_metrics (project_id, connector_id, host, bucket_start, bucket_seconds,
      requests, successes, failures, bytes_sent, bytes_received, latency_sum_ms)
    select w.project_id, w.connector_id, w.host, ${at}::timestamptz, ${FLUSH_BUCKET_SECONDS}, w.requests,
      w.successes, w.failures, w.bytes_sent, w.bytes_received, w.latency
    from w join parent on parent.id = w.connector_id and parent.project_id = w.project_id
      join project on project.id = w.project_id`;
  return result.count;
}

async function insertFailures(tx: TxSql, bucket: Date, rows: FailureRows): Promise<number> {
  const at = bucket.toISOString();
  if (rows.kinds.length === 0) return 0;
  const result = await tx`
    with w as (
      select * from unnest(
        ${rows.projectIds}::uuid[], ${rows.connectorIds as string[]}::uuid[],
        ${rows.kinds}::text[], ${rows.vendorStatuses as number[]}::int[], ${rows.counts}::bigint[]
      ) as w(project_id, connector_id, kind, vendor_status, count)
    ), project as (
      select p.id from projects p where p.id in (select project_id from w) for key share
    ), parent as (
      select c.id from connectors c where c.id in (select connector_id from w) for key share
    )
    insert into failure_metrics (project_id, connector_id, kind, vendor_status, bucket_start,
      bucket_seconds, count)
    select w.project_id, w.connector_id, w.kind, w.vendor_status, ${at}::timestamptz,
      ${FLUSH_BUCKET_SECONDS}, w.count
    from w join project on project.id = w.project_id
      left join parent on parent.id = w.connector_id
    where w.connector_id is null or parent.id is not null`;
  return result.count;
}
