/**
 * What a delivery sends, per channel format: `json`, our own body (the event and its rule), or
 * `slack`, `{text, blocks}` as Slack's incoming webhooks and their look-alikes read it. Made
 * when the delivery is owed and stored with it, so every try sends the same bytes' content.
 */
import type { AlertChannelFormat, AlertSeverity } from "../model/alerts.ts";

/** A raw query's jsonb: an object, or its text, depending on the pool's parsers. */
export function jsonOf<T>(value: T | string): T {
  return typeof value === "string" ? JSON.parse(value) as T : value;
}

export type DeliveryAction = "fired" | "resolved" | "test";

export interface AlertMessage {
  action: DeliveryAction;
  eventId: number | null;
  rule: { id: string; name: string; kind: string } | null;
  severity: AlertSeverity;
  subject: string;
  message: string;
  details: Record<string, unknown>;
  firedAt: string | null;
  resolvedAt: string | null;
}

function title(m: AlertMessage): string {
  const label = m.action === "resolved"
    ? "RESOLVED"
    : m.action === "test"
    ? "TEST"
    : m.severity.toUpperCase();
  return `[${label}] ${m.rule?.name ?? "Octoprox"}: ${m.message}`;
}

/** An email's subject and text, from a delivery's JSON payload (email channels take json). */
export function emailOf(payload: Record<string, unknown>): { subject: string; text: string } {
  const type = String(payload.type ?? "alert");
  const rule = payload.rule as { name?: string } | null | undefined;
  const label = type === "alert.resolved"
    ? "RESOLVED"
    : type === "alert.test"
    ? "TEST"
    : String(payload.severity ?? "alert").toUpperCase();
  const message = String(payload.message ?? "");
  return {
    subject: `[${label}] ${rule?.name ?? "Octoprox"}: ${message}`.slice(0, 250),
    text: `${message}\n\n${JSON.stringify(payload, null, 2)}\n`,
  };
}

export function payloadOf(format: AlertChannelFormat, m: AlertMessage): Record<string, unknown> {
  if (format === "slack") {
    const text = title(m);
    return {
      text,
      blocks: [{ type: "section", text: { type: "mrkdwn", text } }],
    };
  }
  return {
    type: `alert.${m.action}`,
    event_id: m.eventId,
    rule: m.rule,
    severity: m.severity,
    subject: m.subject,
    message: m.message,
    details: m.details,
    fired_at: m.firedAt,
    resolved_at: m.resolvedAt,
  };
}
