/**
 * Deliveries in Postgres: owing a test, claiming the due ones (`for update skip locked`, so
 * processes never take the same row; a claim pushes the row's next try a lease ahead, so a
 * process that dies mid-send leaves it to be tried again), and recording each try.
 */
import type { Database } from "../../db/client.ts";
import type { AlertChannelFormat, AlertChannelType } from "../model/alerts.ts";
import { jsonOf, payloadOf } from "./payload.ts";
import type { ChannelRow } from "./channels.ts";

/** Longer than a send's deadline: a claim outlives the try it was taken for. */
export const CLAIM_LEASE_MS = 60_000;
/** Rows a claim takes at most. */
const CLAIM_BATCH = 20;

export interface ClaimedDelivery {
  id: number;
  channel_id: string;
  action: string;
  payload: Record<string, unknown>;
  attempts: number;
  /** As Postgres writes it (a raw query's times are text). */
  created_at: string;
  url: string;
  type: AlertChannelType;
  format: AlertChannelFormat;
  allow_private_address: boolean;
  secret_sealed: string;
}

/** A test message to `channel`, due at once; answers the delivery's id. */
export async function oweTest(database: Database, channel: ChannelRow): Promise<number> {
  const payload = payloadOf(channel.format as AlertChannelFormat, {
    action: "test",
    eventId: null,
    rule: null,
    severity: "info",
    subject: "test",
    message: `A test delivery to channel ${channel.name}`,
    details: {},
    firedAt: null,
    resolvedAt: null,
  });
  const [row] = await database.sql<{ id: string }[]>`
    insert into alert_deliveries (channel_id, action, payload)
    values (${channel.id}, 'test', ${JSON.stringify(payload)}::jsonb)
    returning id::text`;
  return Number(row.id);
}

/** Takes the due deliveries no other process holds, with their channels. */
export async function claimDue(database: Database): Promise<ClaimedDelivery[]> {
  const rows = await database.sql<(ClaimedDelivery & { id: string })[]>`
    with due as (
      select id from alert_deliveries
      where state = 'pending' and next_attempt_at <= now()
      order by next_attempt_at limit ${CLAIM_BATCH}
      for update skip locked
    )
    update alert_deliveries d
    set next_attempt_at = now() + make_interval(secs => ${CLAIM_LEASE_MS / 1000})
    from due, alert_channels c
    where d.id = due.id and c.id = d.channel_id
    returning d.id::text, d.channel_id::text, d.action, d.payload, d.attempts, d.created_at,
      c.url, c.type, c.format, c.allow_private_address, c.secret_sealed`;
  return rows.map((row) => ({ ...row, id: Number(row.id), payload: jsonOf(row.payload) }));
}

export interface TryOutcome {
  durationMs: number;
  statusCode: number | null;
  error: string | null;
  delivered: boolean;
  /** The next try's time; undefined with `delivered` false: given up. */
  nextTryAtMs?: number;
}

/** Logs the try and moves the delivery on: delivered, due again later, or given up. */
export async function recordTry(database: Database, id: number, outcome: TryOutcome) {
  const state = outcome.delivered
    ? "delivered"
    : outcome.nextTryAtMs === undefined
    ? "failed"
    : "pending";
  const next = outcome.nextTryAtMs === undefined
    ? null
    : new Date(outcome.nextTryAtMs).toISOString();
  await database.sql`
    with tried as (
      insert into alert_delivery_tries (delivery_id, duration_ms, status_code, error)
      values (${id}, ${outcome.durationMs}, ${outcome.statusCode}, ${outcome.error})
    )
    update alert_deliveries set attempts = attempts + 1, state = ${state},
      next_attempt_at = coalesce(${next}::timestamptz, next_attempt_at),
      finished_at = case when ${state} = 'pending' then null else now() end
    where id = ${id}`;
}
