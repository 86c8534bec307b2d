/**
 * Usage reads: requests, successes, failures, bytes and latency per project, connector, proxy,
 * tunnel device and destination host, as all-time totals and as series over a window. Postgres
 * first, in one short session, then Redis, so a slow Redis never holds a pooled connection:
 *
 * - totals: a project's, a proxy's and a tunnel device's are their metric_totals row (a
 *   primary-key lookup, and they keep counting past the history's retention); a connector's and
 *   a host's are their history summed (a connector keeps no totals: its history outlives its
 *   proxies);
 * - series: the history in buckets of the window's width (floor(epoch / width) * width, the
 *   bucketing compaction writes), empty buckets as zeros; a device's of its protocol alone;
 * - then the live window of a project, connector, proxy or device (what gateways added since
 *   the last flush) is added to its total and to the last bucket of a window ending now. Without
 *   Redis the totals alone, logged once. Hosts are read from the history only.
 *
 * A tunnel device's totals and series also carry its connections closed as encrypted DNS (its
 * counts' shape, usage-model.ts); every other entity's keep the transfer counts alone.
 */
import type postgres from "postgres";
import type { Database } from "../../db/client.ts";
import { translatePostgresError } from "../../db/errors.ts";
import type { LiveKind, LiveRead, LiveWindows } from "./live-windows.ts";
import type { Window } from "./ranges.ts";
import {
  type Counts,
  type CountsOf,
  countsOfRow,
  type CountsShape,
  countsShape,
  type DeviceUsage,
  type SumRow,
  SUMS_SQL,
  TRANSFER_SHAPE,
  type Usage,
  type UsageOf,
  usageOf,
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
  device: { table: "tunnel_device_metrics", column: "device_id" },
} as const satisfies Record<LiveKind, { table: string; column: string }>;

/** The kinds with running totals, and their `metric_totals.entity_kind`. */
const TOTALS_KINDS = {
  project: "project",
  proxy: "proxy",
  device: "tunnel_device",
} as const satisfies Partial<Record<LiveKind, string>>;
type TotalledKind = keyof typeof TOTALS_KINDS;

export interface Totals<U extends Usage = Usage> {
  usage: U;
  /** Whether the live window was added (false: Redis did not answer). */
  live_included: boolean;
}

export type SeriesPoint<U extends Usage = Usage> = U & {
  /** The bucket's start, ISO 8601. */
  t: string;
};

export interface Series<U extends Usage = Usage> {
  range: string;
  bucket_seconds: number;
  from: string;
  to: string;
  live_included: boolean;
  points: SeriesPoint<U>[];
}

/** A tunnel device's series: its points carry the encrypted DNS closed too. */
export type DeviceSeries = Series<DeviceUsage>;

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
function fillPoints<C extends Counts>(
  shape: CountsShape<C, Usage>,
  window: Window,
  rows: readonly (SumRow & { t: string | number })[],
) {
  const widthMs = window.widthSeconds * 1000;
  const byStart = new Map<number, C>();
  for (const row of rows) byStart.set(Number(row.t) * 1000, shape.ofRow(row));
  const points: { startMs: number; counts: C }[] = [];
  for (let start = window.fromMs; start < window.toMs; start += widthMs) {
    points.push({ startMs: start, counts: byStart.get(start) ?? shape.zero() });
  }
  return points;
}

function seriesOf<C extends Counts, U extends Usage>(
  shape: CountsShape<C, U>,
  window: Window,
  points: { startMs: number; counts: C }[],
  liveIncluded: boolean,
): Series<U> {
  return {
    range: window.range,
    bucket_seconds: window.widthSeconds,
    from: new Date(window.fromMs).toISOString(),
    to: new Date(window.toMs).toISOString(),
    live_included: liveIncluded,
    points: points.map((p) => ({ t: new Date(p.startMs).toISOString(), ...shape.usage(p.counts) })),
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

  /** All-time totals of projects, proxies or tunnel devices (metric_totals), by id. */
  async #stored<K extends TotalledKind>(
    kind: K,
    ids: readonly string[],
  ): Promise<Map<string, CountsOf<K>>> {
    const shape = countsShape(kind);
    const rows = await this.#postgres((sql) =>
      sql.unsafe<(SumRow & { id: string })[]>(
        `select entity_id::text as id, ${shape.totalsSql}
        from metric_totals where entity_kind = $1 and entity_id = any($2::uuid[])`,
        [TOTALS_KINDS[kind], ids as string[]],
      )
    );
    return new Map(rows.map((row) => [row.id, shape.ofRow(row)]));
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
  live<K extends LiveKind>(kind: K, ids: readonly string[]): Promise<LiveRead<CountsOf<K>>> {
    return this.#o.live.read(kind, ids);
  }

  /** Totals of entities of one kind, live windows added. */
  async totals<K extends LiveKind>(kind: K, ids: readonly string[]): Promise<{
    totals: Map<string, CountsOf<K>>;
    liveIncluded: boolean;
  }> {
    const shape = countsShape(kind);
    const stored = kind === "connector"
      ? await this.#connectorSums(ids) as Map<string, CountsOf<K>>
      : await this.#stored(kind as K & TotalledKind, ids);
    const live = await this.#o.live.read(kind, ids);
    const totals = new Map<string, CountsOf<K>>();
    for (const id of ids) {
      const base = stored.get(id) ?? shape.zero();
      const window = live.counts.get(id);
      totals.set(id, window ? shape.add(base, window) : base);
    }
    return { totals, liveIncluded: live.included };
  }

  async total<K extends LiveKind>(kind: K, id: string): Promise<Totals<UsageOf<K>>> {
    const { totals, liveIncluded } = await this.totals(kind, [id]);
    return { usage: countsShape(kind).usage(totals.get(id)!), live_included: liveIncluded };
  }

  /** One entity's series over a window. */
  series(kind: Exclude<LiveKind, "device">, id: string, window: Window): Promise<Series> {
    return this.#series(kind, id, window);
  }

  /**
   * A tunnel device's series over a window: its rows of `protocol` alone (one table serves
   * every protocol), its live window added as any entity's.
   */
  deviceSeries(deviceId: string, protocol: string, window: Window): Promise<DeviceSeries> {
    return this.#series("device", deviceId, window, protocol);
  }

  async #series<K extends LiveKind>(
    kind: K,
    id: string,
    window: Window,
    protocol?: string,
  ): Promise<Series<UsageOf<K>>> {
    const shape = countsShape(kind);
    const { table, column } = SERIES_TABLES[kind];
    const width = window.widthSeconds;
    const params = [id, new Date(window.fromMs).toISOString(), new Date(window.toMs).toISOString()];
    if (protocol !== undefined) params.push(protocol);
    const rows = await this.#postgres((sql) =>
      sql.unsafe<(SumRow & { t: string })[]>(
        `select (floor(extract(epoch from bucket_start) / ${width}) * ${width})::bigint::text as t,
          ${shape.sumsSql}
        from ${table}
        where ${column} = $1 and bucket_seconds <= ${width}
          and bucket_start >= $2 and bucket_start < $3
          ${protocol === undefined ? "" : "and protocol = $4"}
        group by 1 order by 1`,
        params,
      )
    );
    const points = fillPoints(shape, window, rows);
    let liveIncluded = true;
    if (window.live && points.length > 0) {
      const live = await this.#o.live.read(kind, [id]);
      liveIncluded = live.included;
      const counts = live.counts.get(id);
      const last = points[points.length - 1];
      if (counts) last.counts = shape.add(last.counts, counts);
    }
    return seriesOf(shape, window, points, liveIncluded);
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
      series: seriesOf(
        TRANSFER_SHAPE,
        window,
        fillPoints(TRANSFER_SHAPE, window, rows.filter((r) => r.host === host)),
        true,
      ),
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
