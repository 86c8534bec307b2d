/**
 * Alert rules and channels as the api and the dashboard take them: the kinds of condition a rule
 * may watch (which take a threshold, in what unit and range, and which a scope), and the bodies.
 * Checks that span fields (a threshold the kind needs or refuses, a scope it takes) are in
 * `checkRule`, each naming its field.
 */
import * as v from "valibot";
import { type FieldIssue, ValidationError } from "../../shared/errors.ts";
import {
  booleanField,
  integerField,
  nameField,
  queryInteger,
  readOnly,
  textField,
  uuidField,
} from "./common.ts";
import { ALERT_KIND_NAMES, ALERT_SEVERITIES, type AlertKind, kindInfo } from "./alert-kinds.ts";

export { ALERT_KIND_NAMES, ALERT_KINDS, ALERT_SEVERITIES, kindInfo } from "./alert-kinds.ts";
export type { AlertKind, AlertKindInfo, AlertSeverity } from "./alert-kinds.ts";

const kindField = v.picklist(ALERT_KIND_NAMES, `must be one of ${ALERT_KIND_NAMES.join(", ")}`);
const severityField = v.picklist(ALERT_SEVERITIES, `must be one of ${ALERT_SEVERITIES.join(", ")}`);
const thresholdField = v.nullable(
  v.pipe(v.number("must be a number"), v.finite("must be a finite number")),
);
/** Up to 30 days; 0 lets a condition fire again as soon as it is seen again. */
const quietField = integerField(0, 30 * 86_400);
const channelIdsField = v.pipe(
  v.array(uuidField, "must be a list of channel ids"),
  v.maxLength(20, "must hold at most 20 channels"),
);

const RULE_FIELDS = {
  name: nameField(),
  kind: kindField,
  /** Narrows the rule to one project (and its connectors); absent or null: every project. */
  project_id: v.optional(v.nullable(uuidField)),
  /** Narrows the rule to one connector. */
  connector_id: v.optional(v.nullable(uuidField)),
  threshold: v.optional(thresholdField),
  severity: v.optional(severityField, "warning"),
  quiet_period_seconds: v.optional(quietField, 3600),
  channel_ids: v.optional(channelIdsField, []),
};

export const CreateAlertRuleBody = v.strictObject({
  ...RULE_FIELDS,
  id: readOnly(),
  created_at: readOnly(),
});

export const PatchAlertRuleBody = v.strictObject({
  name: v.optional(RULE_FIELDS.name),
  project_id: RULE_FIELDS.project_id,
  connector_id: RULE_FIELDS.connector_id,
  threshold: RULE_FIELDS.threshold,
  severity: v.optional(severityField),
  quiet_period_seconds: v.optional(quietField),
  channel_ids: v.optional(channelIdsField),
  kind: readOnly("cannot change: make a new rule"),
  id: readOnly(),
});

/** A rule as it will be stored, before `checkRule`. */
export interface RuleShape {
  kind: AlertKind;
  project_id: string | null;
  connector_id: string | null;
  threshold: number | null;
}

/** The checks that span fields, each naming its field; a 422 with every one at fault. */
export function checkRule(rule: RuleShape): void {
  const info = kindInfo(rule.kind);
  const issues: FieldIssue[] = [];
  const range = info.threshold;
  if (range === undefined && rule.threshold !== null) {
    issues.push({ field: "body.threshold", message: `${rule.kind} takes no threshold` });
  } else if (range !== undefined) {
    const message = `must be a number from ${range.min} to ${range.max} (${range.unit})`;
    if (rule.threshold === null || rule.threshold < range.min || rule.threshold > range.max) {
      issues.push({ field: "body.threshold", message });
    }
  }
  if (!info.scoped) {
    for (const field of ["project_id", "connector_id"] as const) {
      if (rule[field] !== null) {
        issues.push({
          field: `body.${field}`,
          message: `${rule.kind} watches the whole install and takes no scope`,
        });
      }
    }
  } else if (rule.project_id !== null && rule.connector_id !== null) {
    issues.push({ field: "body.connector_id", message: "give a project or a connector, not both" });
  }
  if (issues.length > 0) throw new ValidationError(issues);
}

export const ALERT_CHANNEL_TYPES = ["webhook", "email"] as const;
export const ALERT_CHANNEL_FORMATS = ["json", "slack"] as const;
export type AlertChannelFormat = (typeof ALERT_CHANNEL_FORMATS)[number];

const CHANNEL_SCHEMES = ["http:", "https:", "mailto:"];

/** A webhook's http(s) URL, or an email channel's `mailto:address`. */
const channelUrl = v.pipe(
  textField(2000),
  v.check(
    (text) => URL.canParse(text) && CHANNEL_SCHEMES.includes(new URL(text).protocol),
    "must be an http:// or https:// URL (a webhook), or mailto:address (an email channel)",
  ),
  // A URL the check above refused is not checked again here (a pipe runs every check).
  v.check((text) => {
    if (!URL.canParse(text)) return true;
    const url = new URL(text);
    return url.username === "" && url.password === "";
  }, "may not carry credentials; the signature says who sent it"),
);

export const CreateAlertChannelBody = v.strictObject({
  name: nameField(),
  /** `email` needs OCTOPROX_SMTP_URL on the install, and a `mailto:` URL. */
  type: v.optional(
    v.picklist(ALERT_CHANNEL_TYPES, `must be one of ${ALERT_CHANNEL_TYPES.join(", ")}`),
    "webhook",
  ),
  format: v.optional(
    v.picklist(ALERT_CHANNEL_FORMATS, `must be one of ${ALERT_CHANNEL_FORMATS.join(", ")}`),
    "json",
  ),
  url: v.optional(channelUrl),
  /** The admin's explicit leave to deliver to a loopback, private or link-local address. */
  allow_private_address: v.optional(booleanField, false),
  id: readOnly(),
  secret: readOnly("is generated by the server"),
});

export const PatchAlertChannelBody = v.strictObject({
  name: v.optional(nameField()),
  format: v.optional(
    v.picklist(ALERT_CHANNEL_FORMATS, `must be one of ${ALERT_CHANNEL_FORMATS.join(", ")}`),
  ),
  url: v.optional(channelUrl),
  allow_private_address: v.optional(booleanField),
  type: readOnly("cannot change: make a new channel"),
  id: readOnly(),
  secret: readOnly("cannot be set; make a new channel for a new secret"),
});

export type AlertChannelType = (typeof ALERT_CHANNEL_TYPES)[number];

/** One address, as a `mailto:` URL's path holds it. */
const MAIL_ADDRESS = /^[^@\s,;<>]+@[^@\s,;<>]+\.[^@\s,;<>]+$/;

/** The address of an email channel's `mailto:` URL, or undefined when it holds none (or more). */
export function mailAddressOf(url: string): string | undefined {
  if (!URL.canParse(url)) return undefined;
  const parsed = new URL(url);
  if (parsed.protocol !== "mailto:" || parsed.search !== "") return undefined;
  const address = decodeURIComponent(parsed.pathname);
  return MAIL_ADDRESS.test(address) ? address : undefined;
}

/** What a channel's type asks of its other fields, each refusal naming its field. */
export function checkChannel(channel: {
  type: AlertChannelType;
  format: AlertChannelFormat;
  url: string;
  allow_private_address: boolean;
}): void {
  const issues: FieldIssue[] = [];
  if (channel.type === "webhook") {
    if (new URL(channel.url).protocol === "mailto:") {
      issues.push({ field: "body.url", message: "a webhook's URL is http:// or https://" });
    }
  } else {
    if (mailAddressOf(channel.url) === undefined) {
      issues.push({
        field: "body.url",
        message: "an email channel's URL is mailto: and one address (mailto:ops@example.com)",
      });
    }
    if (channel.format !== "json") {
      issues.push({ field: "body.format", message: "an email channel takes format json" });
    }
    if (channel.allow_private_address) {
      issues.push({
        field: "body.allow_private_address",
        message: "is for webhooks: mail goes through OCTOPROX_SMTP_URL",
      });
    }
  }
  if (issues.length > 0) throw new ValidationError(issues);
}

/** The history lists' paging: newest first, at most `limit`. */
export const AlertListQuery = v.object({ limit: queryInteger(1, 500, 100) });
