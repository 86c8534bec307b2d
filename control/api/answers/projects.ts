/** A project as the API answers it (control/api/present.ts's presentProject). */
import { DOMAIN_RULE_ACTIONS } from "../../../shared/routing/domain-rules.ts";
import { PRESET_NAMES, RULE_MODES, VERDICTS } from "../../../shared/blocking/rules.ts";
import * as v from "valibot";
import { cidrList } from "../../model/projects.ts";
import { TLS_MITM_BROWSERS, TLS_MITM_MODES } from "../../model/tls-mitm.ts";
import { count, id, timestamp, TrafficConfigAnswer, TrafficUsageAnswer } from "./common.ts";

const HeaderConditionAnswer = v.strictObject({
  name: v.string(),
  value: v.optional(v.string()),
  pattern: v.optional(v.string()),
});

/** A block rule as stored: a preset by name, or conditions of the operator's own. */
const BlockRuleAnswer = v.strictObject({
  name: v.string(),
  mode: v.picklist(RULE_MODES),
  preset: v.optional(v.picklist(PRESET_NAMES)),
  status: v.optional(v.array(v.number())),
  header: v.optional(HeaderConditionAnswer),
  body_contains: v.optional(v.array(v.string())),
  domains: v.optional(v.array(v.string())),
  verdict: v.picklist(VERDICTS),
  cool_down_seconds: v.number(),
});

const RetryAnswer = v.strictObject({
  attempts: v.number(),
  methods: v.array(v.string()),
  max_total_seconds: v.number(),
  rebind_sticky: v.boolean(),
});

export const ProjectAnswer = v.strictObject({
  id,
  name: v.string(),
  description: v.string(),
  username: v.string(),
  /** The proxy password clients present: editors and admins only. */
  password: v.optional(v.string()),
  strategy: v.string(),
  location_policy: v.string(),
  location_preflight: v.string(),
  location_sources: v.nullable(v.array(v.string())),
  location_conflict_rule: v.nullable(v.string()),
  session_ttl_seconds: count,
  sticky_quarantine: v.boolean(),
  metrics_retention_days: count,
  connection_timeout_seconds: count,
  max_retries: count,
  /** The project's traffic quota (a connector's traffic_config over all its traffic). */
  traffic_quota: v.nullable(TrafficConfigAnswer),
  traffic_usage: v.nullable(TrafficUsageAnswer),
  rate_limit: v.nullable(v.strictObject({ requests_per_second: count, burst: count })),
  max_connections: v.nullable(count),
  allowed_cidrs: cidrList,
  passwordless_cidrs: cidrList,
  /** off (raw tunnels), plain, match_ua, override_ua. */
  tls_mitm_mode: v.picklist(TLS_MITM_MODES),
  /** The browser override_ua presents; null under every other mode. */
  tls_mitm_browser: v.nullable(v.picklist(TLS_MITM_BROWSERS)),
  /** Hosts, `.suffixes` and IP addresses whose tunnels stay raw. */
  tls_mitm_bypass: v.array(v.string()),
  /** Rules judging the target's answers, in order. */
  block_rules: v.array(BlockRuleAnswer),
  /** How a judged answer is retried on another exit; null: the defaults. */
  retry: v.nullable(RetryAnswer),
  /** How much of a body the markers are looked for in; null: 8 KiB. */
  block_body_bytes: v.nullable(count),
  /** Cost-aware escalation between connector tiers; null: none. */
  escalation: v.nullable(v.strictObject({
    up_after_blocks: count,
    probe_after_seconds: count,
    down_after_probes: count,
  })),
  /** Per-domain routing rules, in order. */
  domain_rules: v.array(v.strictObject({
    domains: v.array(v.string()),
    action: v.picklist(DOMAIN_RULE_ACTIONS),
    connectors: v.optional(v.array(v.string())),
    reason: v.optional(v.string()),
  })),
  created_at: timestamp,
  updated_at: timestamp,
});
export type Project = v.InferOutput<typeof ProjectAnswer>;

/** A shipped rule, as `GET /api/v1/block-rules/presets` answers it. */
export const PresetAnswer = v.strictObject({
  name: v.picklist(PRESET_NAMES),
  about: v.string(),
  status: v.optional(v.array(v.number())),
  header: v.optional(HeaderConditionAnswer),
  body_contains: v.optional(v.array(v.string())),
  verdict: v.picklist(VERDICTS),
  cool_down_seconds: count,
});
export const PresetListAnswer = v.array(PresetAnswer);

export const ProjectListAnswer = v.array(ProjectAnswer);
