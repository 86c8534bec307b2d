/**
 * One batch of observations written in one transaction: the raw log rows (`ip_observations`,
 * never deduplicated: a batch delivered again after its commit writes them twice, which is
 * accepted) and each connector's exit table (`connector_exit_ips`), whose every write only moves
 * forward, so batches may reach any worker in any order and leave the same table:
 *
 * - first seen is the least of what any batch saw, last seen the greatest;
 * - the state (country, region, city, ASN, claimed country, sources) is the newest
 *   observation's: a batch replaces it only with one newer than the state held, and two of the
 *   same millisecond are ordered by their content, so the same one wins whatever came first;
 * - observations and hand-outs are added.
 *
 * Observations naming no connector, or a connector deleted since (its exits went with it), are
 * logged rows only: the connector rows are read `for key share`, so a delete waits for the batch
 * or the batch finds the connector gone, and the cascade never fails a batch.
 *
 * Times go as text and are cast in SQL: the pool's drizzle passes timestamp arrays through
 * unserialised.
 *
 * Hand-outs the script left undecided (no record of the proxy) are decided here, from what
 * Postgres knows before the batch's rows: an exit that is the proxy's own (its address, its
 * attributed exit, or the exit its last logged observation saw) is not a hand-out; any other (new
 * to the connector, or one another proxy held) is.
 */
import type postgres from "postgres";
import { type Database, reservedTransaction } from "../../db/client.ts";
import { translatePostgresError } from "../../db/errors.ts";
import { HandOut } from "./hand-outs.ts";
import type { Observation } from "./observation.ts";

type Tx = postgres.ReservedSql;

export interface BatchWriteOutcome {
  /** Log rows written. */
  logged: number;
  /** Hand-outs counted (the script's and those decided here). */
  handOuts: number;
  /** Exit rows written or moved. */
  exits: number;
  /** Observations of a connector that is gone, or of none: in the log only. */
  withoutConnector: number;
}

/**
 * The state's content as one text, to order two states of the same millisecond the same way
 * everywhere (in a batch and against the table).
 */
const stateKey = (t: string) =>
  `md5(json_build_array(${t}.country, ${t}.region, ${t}.city, ${t}.asn, ${t}.claimed_country, ` +
  `${t}.sources)::text)`;

/**
 * Writes one batch (oldest first, each with its hand-out verdict) in one transaction. Answers
 * what it wrote; raises when Postgres refuses, so the batch stays pending for a later delivery.
 */
export async function writeObservations(
  database: Pick<Database, "sql">,
  observations: readonly Observation[],
  verdicts: readonly HandOut[],
): Promise<BatchWriteOutcome> {
  if (observations.length !== verdicts.length) throw new Error("One verdict per observation");
  if (observations.length === 0) return { logged: 0, handOuts: 0, exits: 0, withoutConnector: 0 };
  try {
    return await reservedTransaction(database.sql, async (tx) => {
      const handOuts = await decide(tx, observations, verdicts);
      const logged = await insertLog(tx, observations, handOuts);
      const { exits, kept } = await upsertExits(tx, observations, handOuts);
      return {
        logged,
        handOuts: handOuts.filter(Boolean).length,
        exits,
        withoutConnector: observations.length - kept,
      };
    });
  } catch (error) {
    throw translatePostgresError(error);
  }
}

/** Every verdict made: the undecided ones from the proxy's own exits. */
async function decide(
  tx: Tx,
  observations: readonly Observation[],
  verdicts: readonly HandOut[],
): Promise<boolean[]> {
  const decided = verdicts.map((verdict) => verdict === HandOut.yes);
  // Only exits of a connector are counted: with none there is no exit table to be new to.
  const open = verdicts.flatMap((verdict, index) =>
    verdict === HandOut.unknown && observations[index].connectorId !== null ? [index] : []
  );
  if (open.length === 0) return decided;
  const rows = await tx<{ n: number; own: boolean }[]>`
    select u.n::int as n,
      coalesce(u.ip = p.host, false) or coalesce(u.ip = p.location ->> 'ip', false)
        or coalesce(u.ip = last.ip, false) as own
    from unnest(
      ${open.map((index) => observations[index].proxyId!)}::uuid[],
      ${open.map((index) => observations[index].ip)}::text[],
      ${
    open.map((index) => new Date(observations[index].observedAt).toISOString())
  }::text[]::timestamptz[]
    ) with ordinality as u(proxy_id, ip, at, n)
    left join proxies p on p.id = u.proxy_id
    left join lateral (
      select o.ip from ip_observations o
      where o.proxy_id = u.proxy_id and o.observed_at <= u.at
      order by o.observed_at desc limit 1
    ) last on true`;
  for (const row of rows) decided[open[row.n - 1]] = !row.own;
  return decided;
}

async function insertLog(
  tx: Tx,
  observations: readonly Observation[],
  handOuts: readonly boolean[],
): Promise<number> {
  const result = await tx`
    insert into ip_observations (observed_at, ip, project_id, connector_id, proxy_id, source,
      session_id, instance_id, country, region, city, asn, claimed_country, hand_out)
    select observed_at, ip, project_id, connector_id, proxy_id, source, session_id, instance_id,
      country, region, city, asn, claimed_country, hand_out = 1
    from unnest(
      ${observations.map((o) => new Date(o.observedAt).toISOString())}::text[]::timestamptz[],
      ${observations.map((o) => o.ip)}::text[],
      ${observations.map((o) => o.projectId) as string[]}::uuid[],
      ${observations.map((o) => o.connectorId) as string[]}::uuid[],
      ${observations.map((o) => o.proxyId) as string[]}::uuid[],
      ${observations.map((o) => o.source)}::text[],
      ${observations.map((o) => o.sessionId ?? null) as string[]}::text[],
      ${observations.map((o) => o.instanceId ?? null) as string[]}::text[],
      ${observations.map((o) => o.country) as string[]}::text[],
      ${observations.map((o) => o.region) as string[]}::text[],
      ${observations.map((o) => o.city) as string[]}::text[],
      ${observations.map((o) => o.asn) as number[]}::int[],
      ${observations.map((o) => o.claimedCountry) as string[]}::text[],
      ${handOuts.map((yes) => yes ? 1 : 0)}::int[]
    ) as u(observed_at, ip, project_id, connector_id, proxy_id, source, session_id, instance_id,
      country, region, city, asn, claimed_country, hand_out)`;
  return result.count;
}

/** Writes the exits of the batch's known connectors: the rows written, the observations kept. */
async function upsertExits(
  tx: Tx,
  observations: readonly Observation[],
  handOuts: readonly boolean[],
): Promise<{ exits: number; kept: number }> {
  const indexes = observations.flatMap((o, index) => o.connectorId === null ? [] : [index]);
  if (indexes.length === 0) return { exits: 0, kept: 0 };
  const pick = <T>(value: (o: Observation, index: number) => T) =>
    indexes.map((index) => value(observations[index], index));
  // Rows are written in key order, so two batches over the same exits lock them alike.
  const [row] = await tx<{ exits: number; kept: number }[]>`
    with o as (
      select u.*, u.sources_text::jsonb as sources from unnest(
        ${pick((o) => o.connectorId!)}::uuid[],
        ${pick((o) => o.ip)}::text[],
        ${pick((o) => new Date(o.observedAt).toISOString())}::text[]::timestamptz[],
        ${pick((o) => o.country) as string[]}::text[],
        ${pick((o) => o.region) as string[]}::text[],
        ${pick((o) => o.city) as string[]}::text[],
        ${pick((o) => o.asn) as number[]}::int[],
        ${pick((o) => o.claimedCountry) as string[]}::text[],
        ${pick((o) => JSON.stringify(o.sources))}::text[],
        ${pick((_o, index) => handOuts[index] ? 1 : 0)}::int[]
      ) as u(connector_id, ip, observed_at, country, region, city, asn, claimed_country,
        sources_text, hand_out)
    ), parent as (
      select c.id, c.project_id from connectors c
      where c.id in (select connector_id from o) order by c.id for key share
    ), seen as (
      select connector_id, ip, min(observed_at) as first_seen_at, max(observed_at) as last_seen_at,
        count(*) as observations, sum(hand_out) as hand_outs
      from o where connector_id in (select id from parent) group by connector_id, ip
    ), latest as (
      select distinct on (connector_id, ip) connector_id, ip, observed_at as state_at, country,
        region, city, asn, claimed_country, sources
      from o order by connector_id, ip, observed_at desc, ${tx.unsafe(stateKey("o"))} desc
    ), written as (
      insert into connector_exit_ips as e (connector_id, ip, project_id, first_seen_at,
        last_seen_at, state_at, country, region, city, asn, claimed_country, sources,
        observations, hand_outs)
      select s.connector_id, s.ip, parent.project_id, s.first_seen_at, s.last_seen_at,
        l.state_at, l.country, l.region, l.city, l.asn, l.claimed_country, l.sources,
        s.observations, s.hand_outs
      from seen s
        join latest l on l.connector_id = s.connector_id and l.ip = s.ip
        join parent on parent.id = s.connector_id
      order by s.connector_id, s.ip
      on conflict (connector_id, ip) do update set
        project_id = excluded.project_id,
        first_seen_at = least(e.first_seen_at, excluded.first_seen_at),
        last_seen_at = greatest(e.last_seen_at, excluded.last_seen_at),
        observations = e.observations + excluded.observations,
        hand_outs = e.hand_outs + excluded.hand_outs,
        ${tx.unsafe(newerState())}
      returning 1
    )
    select (select count(*) from written)::int as exits,
      (select count(*) from o where connector_id in (select id from parent))::int as kept`;
  return row;
}

/** The SET clause of the state: each column replaced only by a newer state. */
function newerState(): string {
  const newer = `(excluded.state_at, ${stateKey("excluded")}) > (e.state_at, ${stateKey("e")})`;
  return ["state_at", "country", "region", "city", "asn", "claimed_country", "sources"]
    .map((column) => `${column} = case when ${newer} then excluded.${column} else e.${column} end`)
    .join(",\n      ");
}
