/**
 * What the api shows of alerting's history: the events, newest first, and the deliveries with
 * each of their tries (the delivery log).
 */
import type { Database } from "../../db/client.ts";
import type { AlertSeverity } from "../model/alerts.ts";
import { type DeliveryAction, jsonOf } from "./payload.ts";

export type DeliveryState = "pending" | "delivered" | "failed";

export interface EventView {
  id: number;
  rule_id: string;
  rule_name: string;
  kind: string;
  subject: string;
  severity: AlertSeverity;
  message: string;
  details: Record<string, unknown>;
  fired_at: string;
  resolved_at: string | null;
}

export interface TryView {
  at: string;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
}

export interface DeliveryView {
  id: number;
  event_id: number | null;
  channel_id: string;
  channel_name: string;
  action: DeliveryAction;
  state: DeliveryState;
  attempts: number;
  next_attempt_at: string | null;
  created_at: string;
  finished_at: string | null;
  tries: TryView[];
}

/** A raw query's time (text, drizzle's parsers on the pool) as ISO 8601. */
const iso = (value: string | null) => value === null ? null : new Date(value).toISOString();

export async function listEvents(database: Database, limit: number): Promise<EventView[]> {
  const rows = await database.sql<
    (Omit<EventView, "id" | "fired_at" | "resolved_at"> & {
      id: string;
      fired_at: string;
      resolved_at: string | null;
    })[]
  >`
    select e.id::text, e.rule_id::text, r.name as rule_name, r.kind, e.subject, e.severity,
      e.message, e.details, e.fired_at, e.resolved_at
    from alert_events e join alert_rules r on r.id = e.rule_id
    order by e.id desc limit ${limit}`;
  return rows.map((row) => ({
    ...row,
    id: Number(row.id),
    details: jsonOf(row.details),
    fired_at: new Date(row.fired_at).toISOString(),
    resolved_at: iso(row.resolved_at),
  }));
}

export async function listDeliveries(
  database: Database,
  options: { limit: number; channelId?: string; id?: number },
): Promise<DeliveryView[]> {
  const channelId = options.channelId ?? null;
  const id = options.id ?? null;
  const rows = await database.sql<
    {
      id: string;
      event_id: string | null;
      channel_id: string;
      channel_name: string;
      action: DeliveryAction;
      state: DeliveryState;
      attempts: number;
      next_attempt_at: string;
      created_at: string;
      finished_at: string | null;
    }[]
  >`
    select d.id::text, d.event_id::text, d.channel_id::text, c.name as channel_name, d.action,
      d.state, d.attempts, d.next_attempt_at, d.created_at, d.finished_at
    from alert_deliveries d join alert_channels c on c.id = d.channel_id
    where (${channelId}::uuid is null or d.channel_id = ${channelId}::uuid)
      and (${id}::bigint is null or d.id = ${id}::bigint)
    order by d.id desc limit ${options.limit}`;
  const ids = rows.map((row) => row.id);
  const tries = ids.length === 0 ? [] : await database.sql<
    {
      delivery_id: string;
      at: string;
      duration_ms: number;
      status_code: number | null;
      error: string | null;
    }[]
  >`
    select delivery_id::text, at, duration_ms, status_code, error from alert_delivery_tries
    where delivery_id = any(${ids}::bigint[]) order by id`;
  const byDelivery = new Map<string, TryView[]>();
  for (const t of tries) {
    const list = byDelivery.get(t.delivery_id) ?? [];
    list.push({
      at: new Date(t.at).toISOString(),
      duration_ms: t.duration_ms,
      status_code: t.status_code,
      error: t.error,
    });
    byDelivery.set(t.delivery_id, list);
  }
  return rows.map((row) => ({
    id: Number(row.id),
    event_id: row.event_id === null ? null : Number(row.event_id),
    channel_id: row.channel_id,
    channel_name: row.channel_name,
    action: row.action,
    state: row.state,
    attempts: row.attempts,
    next_attempt_at: row.state === "pending" ? iso(row.next_attempt_at) : null,
    created_at: new Date(row.created_at).toISOString(),
    finished_at: iso(row.finished_at),
    tries: byDelivery.get(row.id) ?? [],
  }));
}
