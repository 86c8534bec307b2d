/** Alert rules, channels, events and the delivery log as the API answers them. */
import * as v from "valibot";
import {
  ALERT_CHANNEL_FORMATS,
  ALERT_CHANNEL_TYPES,
  ALERT_KIND_NAMES,
  ALERT_SEVERITIES,
} from "../../model/alerts.ts";
import { count, id, jsonObject, nullableTimestamp, timestamp } from "./common.ts";

export const AlertRuleAnswer = v.strictObject({
  id,
  name: v.string(),
  kind: v.picklist(ALERT_KIND_NAMES),
  project_id: v.nullable(id),
  connector_id: v.nullable(id),
  threshold: v.nullable(v.number()),
  severity: v.picklist(ALERT_SEVERITIES),
  quiet_period_seconds: count,
  channel_ids: v.array(id),
  created_at: timestamp,
  updated_at: timestamp,
});
export const AlertRuleListAnswer = v.array(AlertRuleAnswer);

const CHANNEL_FIELDS = {
  id,
  name: v.string(),
  type: v.picklist(ALERT_CHANNEL_TYPES),
  format: v.picklist(ALERT_CHANNEL_FORMATS),
  url: v.string(),
  allow_private_address: v.boolean(),
  created_at: timestamp,
  updated_at: timestamp,
};
export const AlertChannelAnswer = v.strictObject(CHANNEL_FIELDS);
export const AlertChannelListAnswer = v.array(AlertChannelAnswer);
/** The create answer: the channel and its signing secret, shown this once. */
export const CreatedAlertChannelAnswer = v.strictObject({ ...CHANNEL_FIELDS, secret: v.string() });

export const AlertEventAnswer = v.strictObject({
  id: count,
  rule_id: id,
  rule_name: v.string(),
  kind: v.string(),
  subject: v.string(),
  severity: v.picklist(ALERT_SEVERITIES),
  message: v.string(),
  details: jsonObject,
  fired_at: timestamp,
  resolved_at: nullableTimestamp,
});
export const AlertEventListAnswer = v.array(AlertEventAnswer);

export const AlertDeliveryAnswer = v.strictObject({
  id: count,
  event_id: v.nullable(count),
  channel_id: id,
  channel_name: v.string(),
  action: v.picklist(["fired", "resolved", "test"]),
  state: v.picklist(["pending", "delivered", "failed"]),
  attempts: count,
  next_attempt_at: nullableTimestamp,
  created_at: timestamp,
  finished_at: nullableTimestamp,
  tries: v.array(v.strictObject({
    at: timestamp,
    duration_ms: count,
    status_code: v.nullable(count),
    error: v.nullable(v.string()),
  })),
});
export const AlertDeliveryListAnswer = v.array(AlertDeliveryAnswer);

export type AlertRule = v.InferOutput<typeof AlertRuleAnswer>;
export type AlertChannel = v.InferOutput<typeof AlertChannelAnswer> & { secret?: string };
export type AlertEvent = v.InferOutput<typeof AlertEventAnswer>;
export type AlertDelivery = v.InferOutput<typeof AlertDeliveryAnswer>;
