/**
 * Usage reads: requests, successes, failures, bytes and latency per project, connector, proxy
 * and destination host, as all-time totals and as series over a window. Postgres first, in one
 * short session, then Redis, so a slow Redis never holds a pooled connection:
 *
 * - totals: a project's and a proxy's are their metric_totals row (a primary-key lookup, and
 *   they keep counting past the history's retention); a connector's and a host's are their
 *   history summed (a connector keeps no totals: its history outlives its proxies);
 * - series: the history in buckets of the window's width (floor(epoch / width) * width, the
 *   bucketing compaction writes), empty buckets as zeros;
 * - then the live window of a project, connector or proxy (what gateways added since the last
 *   flush) is added to its total and to the last bucket of a window ending now. Without Redis
 *   the totals alone, logged once. Hosts are read from the history only.
 */
import type postgres from "postgres";
import type { Database } from "../../db/client.ts";
import { translatePostgresError } from "../../db/errors.ts";
import type { LiveKind, LiveRead, LiveWindows } from "./live-windows.ts";
import type { Window } from "./ranges.ts";
import {
  addCounts,
  type Counts,
  countsOfRow,
  type SumRow,
  SUMS_SQL,
  type Usage,
  usageOf,
  ZERO_COUNTS,
} from "./usage-model.ts";

export interface UsageReaderOptions {
  database: Database;
  live: LiveWindows;
}

/** Which history a series or a total reads, and the entity's column there. */
const SERIES_TABLES = {
  project: { table: "project_metrics", column: "project_id" },
  connector: { table: "connector_metrics", column: "connector_id" },
  proxy: { table: "proxy_metrics", column: "proxy_id" },
} as const satisfies Record<LiveKind, { table: string; column: string }>;

export interface Totals {
  usage: Usage;
  /** Whether the live window was added (false: Redis did not answer). */
  live_included: boolean;
}

export interface SeriesPoint extends Usage {
  /** The bucket's start, ISO 8601. */
  t: string;
}

export interface Series {
  range: string;
  bucket_seconds: number;
  from: string;
  to: string;
  live_included: boolean;
  points: SeriesPoint[];
}

export interface HostUsage extends Usage {
  host: string;
}

export interface HostFilter {
  connectorId?: string;
  /** Part of a host name, case-insensitive. */
  search?: string;
  limit: number;
  offset: number;
}

/** Sums rows of a window's buckets into its points, zeros where a bucket has no row. */
function fillPoints(window: Window, rows: readonly (SumRow & { t: string | number })[]) {
  const widthMs = window.widthSeconds * 1000;
  const byStart = new Map<number, Counts>();
  for (const row of rows) byStart.set(Number(row.t) * 1000, countsOfRow(row));
  const points: { startMs: number; counts: Counts }[] = [];
  for (let start = window.fromMs; start < window.toMs; start += widthMs) {
    points.push({ startMs: start, counts: byStart.get(start) ?? { ...ZERO_COUNTS } });
  }
  return points;
}

function seriesOf(
  window: Window,
  points: { startMs: number; counts: Counts }[],
  liveIncluded: boolean,
): Series {
  return {
    range: window.range,
    bucket_seconds: window.widthSeconds,
    from: new Date(window.fromMs).toISOString(),
    to: new Date(window.toMs).toISOString(),
    live_included: liveIncluded,
    points: points.map((p) => ({ t: new Date(p.startMs).toISOString(), ...usageOf(p.counts) })),
  };
}

export class UsageReader {
  readonly #o: UsageReaderOptions;

  constructor(options: UsageReaderOptions) {
    this.#o = options;
  }

  get #sql(): postgres.Sql {
    return this.#o.database.sql;
  }

  async #postgres<T>(work: (sql: postgres.Sql) => Promise<T>): Promise<T> {
    try {
      return await work(this.#sql);
    } catch (error) {
      throw translatePostgresError(error);
    }
  }

  /** All-time totals of projects or proxies (metric_totals), by id. */
  async #stored(kind: "project" | "proxy", ids: readonly string[]): Promise<Map<string, Counts>> {
    const rows = await this.#postgres((sql) =>
      sql<(SumRow & { id: string })[]>`
        select entity_id::text as id, requests::text, successes::text, failures::text,
          bytes_sent::text, bytes_received::text, latency_sum_ms
        from metric_totals where entity_kind = ${kind} and entity_id = any(${ids as string[]}::uuid[])`
    );
    return new Map(rows.map((row) => [row.id, countsOfRow(row)]));
  }

  /** Connectors' history summed over everything retained, by id. */
  async #connectorSums(ids: readonly string[]): Promise<Map<string, Counts>> {
    const rows = await this.#postgres((sql) =>
      sql.unsafe<(SumRow & { id: string })[]>(
        `select connector_id::text as id, ${SUMS_SQL} from connector_metrics
        where connector_id = any($1::uuid[]) group by connector_id`,
        [ids as string[]],
      )
    );
    return new Map(rows.map((row) => [row.id, countsOfRow(row)]));
  }

  /** The live windows of entities of one kind (soft: empty, not included, without Redis). */
  live(kind: LiveKind, ids: readonly string[]): Promise<LiveRead> {
    return this.#o.live.read(kind, ids);
  }

  /** Totals of entities of one kind, live windows added. */
  async totals(kind: LiveKind, ids: readonly string[]): Promise<{
    totals: Map<string, Counts>;
    liveIncluded: boolean;
  }> {
    const stored = kind === "connector"
      ? await this.#connectorSums(ids)
      : await this.#stored(kind, ids);
    const live = await this.#o.live.read(kind, ids);
    const totals = new Map<string, Counts>();
    for (const id of ids) {
      const base = stored.get(id) ?? { ...ZERO_COUNTS };
      const window = live.counts.get(id);
      totals.set(id, window ? addCounts(base, window) : base);
    }
    return { totals, liveIncluded: live.included };
  }

  async total(kind: LiveKind, id: string): Promise<Totals> {
    const { totals, liveIncluded } = await this.totals(kind, [id]);
    return { usage: usageOf(totals.get(id)!), live_included: liveIncluded };
  }

  /** One entity's series over a window. */
  async series(kind: LiveKind, id: string, window: Window): Promise<Series> {
    const { table, column } = SERIES_TABLES[kind];
    const width = window.widthSeconds;
    const rows = await this.#postgres((sql) =>
      sql.unsafe<(SumRow & { t: string })[]>(
        `select (floor(extract(epoch from bucket_start) / ${width}) * ${width})::bigint::text as t,
          ${SUMS_SQL}
        from ${table}
        where ${column} = $1 and bucket_seconds <= ${width}
          and bucket_start >= $2 and bucket_start < $3
        group by 1 order by 1`,
        [id, new Date(window.fromMs).toISOString(), new Date(window.toMs).toISOString()],
      )
    );
    const points = fillPoints(window, rows);
    let liveIncluded = true;
    if (window.live && points.length > 0) {
      const live = await this.#o.live.read(kind, [id]);
      liveIncluded = live.included;
      const counts = live.counts.get(id);
      const last = points[points.length - 1];
      if (counts) last.counts = addCounts(last.counts, counts);
    }
    return seriesOf(window, points, liveIncluded);
  }

  /**
   * A project's destination hosts over a window (undefined: everything retained), most
   * requested first, paged; `total` counts every host that matched.
   */
  async hosts(
    projectId: string,
    window: Window | undefined,
    filter: HostFilter,
  ): Promise<{ items: HostUsage[]; total: number }> {
    const conditions = ["project_id = $1"];
    const params: (string | number)[] = [projectId];
    if (window) {
      params.push(new Date(window.fromMs).toISOString(), new Date(window.toMs).toISOString());
      conditions.push(`bucket_start >= $${params.length - 1}`, `bucket_start < $${params.length}`);
    }
    if (filter.connectorId) {
      params.push(filter.connectorId);
      conditions.push(`connector_id = $${params.length}`);
    }
    if (filter.search) {
      params.push(`%${filter.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
      conditions.push(`host ilike $${params.length}`);
    }
    params.push(filter.limit, filter.offset);
    const rows = await this.#postgres((sql) =>
      sql.unsafe<(SumRow & { host: string; total: number })[]>(
        `select host, ${SUMS_SQL}, (count(*) over ())::int as total
        from host_metrics where ${conditions.join(" and ")}
        group by host order by sum(requests) desc, host
        limit $${params.length - 1} offset $${params.length}`,
        params,
      )
    );
    return {
      items: rows.map((row) => ({ host: row.host, ...usageOf(countsOfRow(row)) })),
      total: rows[0]?.total ?? (filter.offset > 0 ? await this.#hostCount(conditions, params) : 0),
    };
  }

  /** The matching host count when the page asked for lies past the last host. */
  async #hostCount(conditions: string[], params: (string | number)[]): Promise<number> {
    const rows = await this.#postgres((sql) =>
      sql.unsafe<{ n: number }[]>(
        `select count(distinct host)::int as n from host_metrics where ${conditions.join(" and ")}`,
        params.slice(0, -2),
      )
    );
    return rows[0]?.n ?? 0;
  }

  /** Series of named hosts of a project over a window (history only). */
  async hostSeries(
    projectId: string,
    hosts: readonly string[],
    window: Window,
  ): Promise<{ host: string; series: Series }[]> {
    const width = window.widthSeconds;
    const rows = await this.#postgres((sql) =>
      sql.unsafe<(SumRow & { t: string; host: string })[]>(
        `select host, (floor(extract(epoch from bucket_start) / ${width}) * ${width})::bigint::text
          as t, ${SUMS_SQL}
        from host_metrics
        where project_id = $1 and host = any($2::text[]) and bucket_seconds <= ${width}
          and bucket_start >= $3 and bucket_start < $4
        group by host, 2 order by host, 2`,
        [
          projectId,
          hosts as string[],
          new Date(window.fromMs).toISOString(),
          new Date(window.toMs).toISOString(),
        ],
      )
    );
    return hosts.map((host) => ({
      host,
      series: seriesOf(window, fillPoints(window, rows.filter((r) => r.host === host)), true),
    }));
  }

  /** Each connector's history summed over a window (undefined: everything retained). */
  async connectorSums(
    projectId: string,
    window: Window | undefined,
  ): Promise<Map<string, Counts>> {
    const params: string[] = [projectId];
    let range = "";
    if (window) {
      params.push(new Date(window.fromMs).toISOString(), new Date(window.toMs).toISOString());
      range = "and bucket_start >= $2 and bucket_start < $3";
    }
    const rows = await this.#postgres((sql) =>
      sql.unsafe<(SumRow & { id: string })[]>(
        `select connector_id::text as id, ${SUMS_SQL} from connector_metrics
        where project_id = $1 ${range} group by connector_id`,
        params,
      )
    );
    return new Map(rows.map((row) => [row.id, countsOfRow(row)]));
  }
}
