/**
 * Reads of what the observation ingest wrote: the raw log (newest first, by cursor: the log is
 * large, so pages are found by position, never counted), the exit table (paged), and per
 * connector what it claims against where its exits were seen. An exit is judged when it has both
 * a claimed country (what the vendor promised for it) and a seen one; it matches when they agree.
 * A connector appears once it has an exit.
 */
import type { Database } from "../../db/client.ts";
import type { ObservationSource } from "./observation.ts";

export interface ObservationFilter {
  projectId?: string;
  connectorId?: string;
  proxyId?: string;
  ip?: string;
}

export interface LogCursor {
  /** The last row's observed_at, epoch microseconds. */
  micros: string;
  id: string;
}

export interface ObservationRow {
  id: string;
  observed_at: string;
  ip: string;
  project_id: string | null;
  connector_id: string | null;
  proxy_id: string | null;
  source: ObservationSource;
  session_id: string | null;
  instance_id: string | null;
  country: string | null;
  region: string | null;
  city: string | null;
  asn: number | null;
  claimed_country: string | null;
  hand_out: boolean;
}

export interface ObservationLog {
  items: ObservationRow[];
  next_cursor: string | null;
}

type Sql = Database["sql"];

/** A timestamptz column as the answers write times: ISO 8601, UTC, milliseconds. */
const iso = (column: string) =>
  `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * The log, newest first, `limit` rows after `cursor`. A cursor holds the last row's time in
 * microseconds (exact, as Postgres keeps it) and its id, the order's tie-break.
 */
export async function readObservationLog(
  database: Pick<Database, "sql">,
  filter: ObservationFilter,
  limit: number,
  cursor?: LogCursor,
): Promise<ObservationLog> {
  const sql: Sql = database.sql;
  const rows = await sql<(ObservationRow & { micros: string })[]>`
    select id::text, ${sql.unsafe(iso("observed_at"))} as observed_at, ip, project_id::text,
      connector_id::text, proxy_id::text, source, session_id, instance_id, country, region, city,
      asn, claimed_country, hand_out,
      (extract(epoch from observed_at) * 1000000)::bigint::text as micros
    from ip_observations
    where (${filter.projectId ?? null}::uuid is null or project_id = ${filter.projectId ?? null})
      and (${filter.connectorId ?? null}::uuid is null
        or connector_id = ${filter.connectorId ?? null})
      and (${filter.proxyId ?? null}::uuid is null or proxy_id = ${filter.proxyId ?? null})
      and (${filter.ip ?? null}::text is null or ip = ${filter.ip ?? null})
      and (${cursor?.micros ?? null}::bigint is null
        or (observed_at, id) < (
          timestamptz 'epoch' + ${cursor?.micros ?? null}::bigint * interval '1 microsecond',
          ${cursor?.id ?? null}::bigint
        ))
    order by observed_at desc, id desc
    limit ${limit + 1}`;
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    items: page.map(({ micros: _micros, ...row }) => row),
    next_cursor: rows.length > limit && last !== undefined ? `${last.micros}-${last.id}` : null,
  };
}

export interface ExitIpRow {
  ip: string;
  connector_id: string;
  connector_name: string;
  project_id: string;
  country: string | null;
  region: string | null;
  city: string | null;
  asn: number | null;
  sources: string[];
  claimed_country: string | null;
  first_seen_at: string;
  last_seen_at: string;
  observations: number;
  hand_outs: number;
}

export interface ConnectorFilter {
  projectId?: string;
  connectorId?: string;
}

/** Every exit, last seen first, a page at a time; `country`: only those seen there. */
export async function readExitIps(
  database: Pick<Database, "sql">,
  filter: ConnectorFilter & { country?: string },
  page: { offset: number; limit: number },
): Promise<{ items: ExitIpRow[]; total: number }> {
  const sql: Sql = database.sql;
  const where = sql`
    (${filter.projectId ?? null}::uuid is null or e.project_id = ${filter.projectId ?? null})
    and (${filter.connectorId ?? null}::uuid is null
      or e.connector_id = ${filter.connectorId ?? null})
    and (${filter.country ?? null}::text is null or e.country = ${filter.country ?? null})`;
  const [{ total }] = await sql<{ total: number }[]>`
    select count(*)::int as total from connector_exit_ips e where ${where}`;
  const rows = await sql<ExitIpRow[]>`
    select e.ip, e.connector_id::text, c.name as connector_name, e.project_id::text, e.country,
      e.region, e.city, e.asn, e.sources, e.claimed_country,
      ${sql.unsafe(iso("e.first_seen_at"))} as first_seen_at,
      ${sql.unsafe(iso("e.last_seen_at"))} as last_seen_at,
      e.observations::float8 as observations, e.hand_outs::float8 as hand_outs
    from connector_exit_ips e join connectors c on c.id = e.connector_id
    where ${where}
    order by e.last_seen_at desc, e.connector_id, e.ip
    offset ${page.offset} limit ${page.limit}`;
  return { total, items: rows };
}

interface ConnectorFields {
  connector_id: string;
  connector_name: string;
  project_id: string;
  project_name: string;
  kind: string;
  provider: string;
}

interface Judged {
  exits_judged: number;
  exits_matching: number;
  accuracy: number | null;
}

export interface ConnectorExitsRow extends ConnectorFields, Judged {
  claimed_countries: string[];
  seen_countries: { country: string | null; exits: number }[];
  exits: number;
  observations: number;
  hand_outs: number;
  first_seen_at: string | null;
  last_seen_at: string | null;
}

export interface ConnectorAccuracyRow extends ConnectorFields, Judged {
  by_country: ({ claimed_country: string } & Judged)[];
}

/** Countries in order, the exits not placed (null) last. */
function byCountryNullLast(a: string | null, b: string | null): number {
  if (a === b) return 0;
  if (a === null) return 1;
  if (b === null) return -1;
  return a < b ? -1 : 1;
}

const accuracy = (judged: number, matching: number) => judged === 0 ? null : matching / judged;

interface Summary extends ConnectorFields {
  countries: string[];
  exits: number;
  observations: number;
  hand_outs: number;
  judged: number;
  matching: number;
  first_seen_at: string;
  last_seen_at: string;
}

interface ClaimCounts {
  connector_id: string;
  claimed_country: string | null;
  country: string | null;
  exits: number;
  judged: number;
  matching: number;
}

/** Each connector's exits summed, and its exits counted by claimed and seen country. */
async function connectorCounts(
  sql: Sql,
  filter: ConnectorFilter,
): Promise<{ summaries: Summary[]; claims: ClaimCounts[] }> {
  const where = sql`
    (${filter.projectId ?? null}::uuid is null or e.project_id = ${filter.projectId ?? null})
    and (${filter.connectorId ?? null}::uuid is null
      or e.connector_id = ${filter.connectorId ?? null})`;
  const judged = sql`e.country is not null and e.claimed_country is not null`;
  const summaries = await sql<Summary[]>`
    select c.id::text as connector_id, c.name as connector_name, c.project_id::text,
      p.name as project_name, c.kind, c.provider, c.countries,
      count(*)::int as exits, sum(e.observations)::float8 as observations,
      sum(e.hand_outs)::float8 as hand_outs,
      (count(*) filter (where ${judged}))::int as judged,
      (count(*) filter (where e.country = e.claimed_country))::int as matching,
      ${sql.unsafe(iso("min(e.first_seen_at)"))} as first_seen_at,
      ${sql.unsafe(iso("max(e.last_seen_at)"))} as last_seen_at
    from connector_exit_ips e
      join connectors c on c.id = e.connector_id
      join projects p on p.id = c.project_id
    where ${where}
    group by c.id, p.name
    order by lower(p.name), lower(c.name), c.id`;
  const claims = await sql<ClaimCounts[]>`
    select e.connector_id::text, e.claimed_country, e.country, count(*)::int as exits,
      (count(*) filter (where ${judged}))::int as judged,
      (count(*) filter (where e.country = e.claimed_country))::int as matching
    from connector_exit_ips e
    where ${where}
    group by e.connector_id, e.claimed_country, e.country`;
  return { summaries, claims };
}

function connectorFields(s: Summary): ConnectorFields {
  return {
    connector_id: s.connector_id,
    connector_name: s.connector_name,
    project_id: s.project_id,
    project_name: s.project_name,
    kind: s.kind,
    provider: s.provider,
  };
}

/** Per connector: its claimed countries against where its exits were seen. */
export async function readConnectorExits(
  database: Pick<Database, "sql">,
  filter: ConnectorFilter,
): Promise<ConnectorExitsRow[]> {
  const { summaries, claims } = await connectorCounts(database.sql, filter);
  return summaries.map((s) => {
    const mine = claims.filter((c) => c.connector_id === s.connector_id);
    const seen = new Map<string | null, number>();
    for (const c of mine) seen.set(c.country, (seen.get(c.country) ?? 0) + c.exits);
    const claimed = new Set(s.countries);
    for (const c of mine) if (c.claimed_country !== null) claimed.add(c.claimed_country);
    return {
      ...connectorFields(s),
      claimed_countries: [...claimed].sort(),
      seen_countries: [...seen].map(([country, exits]) => ({ country, exits }))
        .sort((a, b) => b.exits - a.exits || byCountryNullLast(a.country, b.country)),
      exits: s.exits,
      observations: s.observations,
      hand_outs: s.hand_outs,
      exits_judged: s.judged,
      exits_matching: s.matching,
      accuracy: accuracy(s.judged, s.matching),
      first_seen_at: s.first_seen_at,
      last_seen_at: s.last_seen_at,
    };
  });
}

/** Per connector, and per claimed country: the share of judged exits seen where claimed. */
export async function readAccuracy(
  database: Pick<Database, "sql">,
  filter: ConnectorFilter,
): Promise<ConnectorAccuracyRow[]> {
  const { summaries, claims } = await connectorCounts(database.sql, filter);
  return summaries.map((s) => {
    const byCountry = new Map<string, { judged: number; matching: number }>();
    for (const c of claims) {
      if (c.connector_id !== s.connector_id || c.claimed_country === null) continue;
      const counts = byCountry.get(c.claimed_country) ?? { judged: 0, matching: 0 };
      counts.judged += c.judged;
      counts.matching += c.matching;
      byCountry.set(c.claimed_country, counts);
    }
    return {
      ...connectorFields(s),
      exits_judged: s.judged,
      exits_matching: s.matching,
      accuracy: accuracy(s.judged, s.matching),
      by_country: [...byCountry].sort(([a], [b]) => a.localeCompare(b)).map((
        [claimed_country, counts],
      ) => ({
        claimed_country,
        exits_judged: counts.judged,
        exits_matching: counts.matching,
        accuracy: accuracy(counts.judged, counts.matching),
      })),
    };
  });
}
