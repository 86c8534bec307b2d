/** Alert rules and channels as the API answers them: snake_case, times as ISO, no secret. */
import type { AlertRule } from "../alerts/rules.ts";
import type { ChannelRow } from "../alerts/channels.ts";
import type { AlertChannelFormat, AlertChannelType } from "../model/alerts.ts";

export function presentAlertRule(rule: AlertRule) {
  return {
    id: rule.id,
    name: rule.name,
    kind: rule.kind,
    project_id: rule.projectId,
    connector_id: rule.connectorId,
    threshold: rule.threshold,
    severity: rule.severity,
    quiet_period_seconds: rule.quietPeriodSeconds,
    channel_ids: rule.channelIds,
    created_at: rule.createdAt.toISOString(),
    updated_at: rule.updatedAt.toISOString(),
  };
}

export function presentAlertChannel(row: ChannelRow) {
  return {
    id: row.id,
    name: row.name,
    type: row.type as AlertChannelType,
    format: row.format as AlertChannelFormat,
    url: row.url,
    allow_private_address: row.allowPrivateAddress,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  };
}
