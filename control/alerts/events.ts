/**
 * Firing and resolving, once however many processes see a condition. A firing is one insert
 * that only one process can win: at most one open event per rule and subject (the partial
 * unique index alert_events_open_key), none within the quiet period of the last one fired, and
 * none when the subject was resolved after the evaluation began reading (its reading is older
 * than that resolve). A resolve is one conditional update, of events fired before the evaluation
 * began reading (a fresher firing is not undone by a stale reading). Each winner writes its
 * deliveries in the same transaction, so a committed event always has them.
 */
import type postgres from "postgres";
import { type Database, reservedTransaction } from "../../db/client.ts";
import type { AlertSeverity } from "../model/alerts.ts";
import type { AlertRule } from "./rules.ts";
import type { Firing } from "./condition.ts";
import { type AlertMessage, type DeliveryAction, jsonOf, payloadOf } from "./payload.ts";
import type { AlertChannelFormat } from "../model/alerts.ts";

type TxSql = postgres.ReservedSql;

interface EventRow {
  id: string;
  subject: string;
  severity: AlertSeverity;
  message: string;
  details: Record<string, unknown>;
  /** Times come back as text from a raw query (drizzle's parsers on the pool). */
  fired_at: string;
  resolved_at: string | null;
}

const isoOf = (text: string) => new Date(text).toISOString();

function messageOf(rule: AlertRule, action: DeliveryAction, event: EventRow): AlertMessage {
  return {
    action,
    eventId: Number(event.id),
    rule: { id: rule.id, name: rule.name, kind: rule.kind },
    severity: event.severity,
    subject: event.subject,
    message: event.message,
    details: jsonOf(event.details),
    firedAt: isoOf(event.fired_at),
    resolvedAt: event.resolved_at === null ? null : isoOf(event.resolved_at),
  };
}

/** One delivery per channel of the rule, in the event's transaction. */
async function owe(tx: TxSql, rule: AlertRule, action: DeliveryAction, event: EventRow) {
  if (rule.channelIds.length === 0) return;
  const channels = await tx<{ id: string; format: AlertChannelFormat }[]>`
    select id::text, format from alert_channels where id = any(${rule.channelIds}::uuid[])`;
  const message = messageOf(rule, action, event);
  for (const channel of channels) {
    await tx`insert into alert_deliveries (event_id, channel_id, action, payload)
      values (${event.id}, ${channel.id}, ${action},
        ${JSON.stringify(payloadOf(channel.format, message))}::jsonb)`;
  }
}

/** The database's clock now: when an evaluation begins reading. */
export async function databaseNow(database: Database): Promise<string> {
  const [row] = await database.sql<{ now: string }[]>`select clock_timestamp()::text as now`;
  return row.now;
}

/** Fires `firing` for `rule` unless open, quiet or resolved since `readSince`; answers the event's id. */
export async function fire(
  database: Database,
  rule: AlertRule,
  firing: Firing,
  readSince: string,
): Promise<number | undefined> {
  return await reservedTransaction(database.sql, async (tx) => {
    const [event] = await tx<EventRow[]>`
      insert into alert_events (rule_id, subject, severity, message, details)
      select ${rule.id}, ${firing.subject}, ${rule.severity}, ${firing.message},
        ${JSON.stringify(firing.details)}::jsonb
      where not exists (
        select 1 from alert_events
        where rule_id = ${rule.id} and subject = ${firing.subject}
          and (fired_at > now() - make_interval(secs => ${rule.quietPeriodSeconds})
            or resolved_at >= ${readSince}::timestamptz)
      )
      on conflict (rule_id, subject) where resolved_at is null do nothing
      returning id::text, subject, severity, message, details, fired_at, resolved_at`;
    if (event === undefined) return undefined;
    await owe(tx, rule, "fired", event);
    return Number(event.id);
  });
}

/**
 * Resolves the rule's open events fired before `readSince` whose subject is not in `firing`;
 * answers their ids.
 */
export async function resolveOthers(
  database: Database,
  rule: AlertRule,
  firing: readonly string[],
  readSince: string,
): Promise<number[]> {
  return await reservedTransaction(database.sql, async (tx) => {
    const events = await tx<EventRow[]>`
      update alert_events set resolved_at = now()
      where rule_id = ${rule.id} and resolved_at is null and fired_at < ${readSince}::timestamptz
        and not (subject = any(${[...firing]}::text[]))
      returning id::text, subject, severity, message, details, fired_at, resolved_at`;
    for (const event of events) await owe(tx, rule, "resolved", event);
    return events.map((event) => Number(event.id));
  });
}

/** Open events by severity, every severity named (the firing gauge). */
export async function firingBySeverity(
  database: Database,
): Promise<Record<AlertSeverity, number>> {
  const rows = await database.sql<{ severity: AlertSeverity; count: number }[]>`
    select severity, count(*)::int as count from alert_events
    where resolved_at is null group by severity`;
  const counts: Record<AlertSeverity, number> = { info: 0, warning: 0, critical: 0 };
  for (const row of rows) if (row.severity in counts) counts[row.severity] = row.count;
  return counts;
}
