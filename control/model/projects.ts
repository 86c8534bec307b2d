/** Project bodies. Username and password rules are shared/project-credentials.ts's. */
import * as v from "valibot";
import {
  LOCATION_POLICIES,
  LOCATION_PREFLIGHTS,
  MAX_RETRIES_LIMIT,
  STRATEGIES,
} from "../../shared/roles.ts";
import {
  projectPasswordProblem,
  projectUsernameProblem,
} from "../../shared/project-credentials.ts";
import { booleanField, integerField, nameField, readOnly, textField } from "./common.ts";
import { TrafficConfigSchema } from "./connectors.ts";
import { parseCidr } from "../../shared/net/ip.ts";
import { conflictRuleField, locationSourcesField } from "./location.ts";
import { tlsMitmBrowserField, tlsMitmBypassField, tlsMitmModeField } from "./tls-mitm.ts";
import {
  blockBodyBytesField,
  blockRulesField,
  escalationField,
  retryField,
} from "./block-rules.ts";
import { domainRulesField } from "./domain-rules.ts";

const username = v.pipe(
  v.string("must be text"),
  v.trim(),
  v.check(
    (value) => projectUsernameProblem(value) === undefined,
    (issue) => projectUsernameProblem(String(issue.input)) ?? "is not a valid username",
  ),
);

const password = v.pipe(
  v.string("must be text"),
  v.check(
    (value) => projectPasswordProblem(value) === undefined,
    // The rule's message never repeats the password.
    (issue) => projectPasswordProblem(String(issue.input)) ?? "is not a valid password",
  ),
);

/**
 * A project's traffic quota: a connector's traffic_config's fields over all the project's
 * traffic, with the limit and its period required (a quota without them means nothing).
 */
const trafficQuota = v.pipe(
  v.custom<Record<string, unknown>>(
    (input) => typeof input === "object" && input !== null && !Array.isArray(input),
    "must be a JSON object",
  ),
  v.forward(
    v.check(
      (input) => typeof input.limit_bytes === "number",
      "is required: a quota is a number of bytes",
    ),
    ["limit_bytes"],
  ),
  v.forward(
    v.check((input) => input.period !== undefined, "is required (day, week or month)"),
    ["period"],
  ),
  TrafficConfigSchema,
);

/** Requests a second across every gateway, with a burst (the requests a second by default). */
const rateLimit = v.pipe(
  v.strictObject({
    requests_per_second: integerField(1, 1_000_000),
    burst: v.optional(integerField(1, 1_000_000)),
  }),
  v.transform((input) => ({
    requests_per_second: input.requests_per_second,
    burst: input.burst ?? input.requests_per_second,
  })),
);

/** CIDR blocks (a bare address is one host), trimmed, each parsed as the gateway parses it. */
export const cidrList = v.pipe(
  v.array(
    v.pipe(
      v.string("must be text"),
      v.trim(),
      v.check((text) => {
        try {
          parseCidr(text);
          return true;
        } catch {
          return false;
        }
      }, "must be a CIDR block such as 203.0.113.0/24 or 2001:db8::/32"),
    ),
    "must be a list of CIDR blocks",
  ),
  v.maxLength(1000, "must hold at most 1000 blocks"),
  v.transform((list) => [...new Set(list)]),
);

const fields = {
  name: nameField(),
  description: textField(2000),
  username,
  password,
  strategy: v.picklist(STRATEGIES, `must be one of ${STRATEGIES.join(", ")}`),
  location_policy: v.picklist(
    LOCATION_POLICIES,
    `must be one of ${LOCATION_POLICIES.join(", ")}`,
  ),
  /** Null: the install's (`/geo/settings`). */
  location_sources: v.nullable(locationSourcesField),
  /** Null: the install's. */
  location_conflict_rule: v.nullable(conflictRuleField),
  /** A mode other than off needs a source that can check an exit (services/projects.ts). */
  location_preflight: v.picklist(
    LOCATION_PREFLIGHTS,
    `must be one of ${LOCATION_PREFLIGHTS.join(", ")}`,
  ),
  session_ttl_seconds: integerField(1, 7 * 86_400),
  sticky_quarantine: booleanField,
  /** 0 keeps history forever. */
  metrics_retention_days: integerField(0, 3650),
  connection_timeout_seconds: integerField(1, 600),
  max_retries: integerField(0, MAX_RETRIES_LIMIT),
  traffic_quota: v.nullable(trafficQuota),
  rate_limit: v.nullable(rateLimit),
  max_connections: v.nullable(integerField(1, 1_000_000)),
  allowed_cidrs: cidrList,
  passwordless_cidrs: cidrList,
  /** The mode keeps the browser it uses and clears it otherwise (tls-mitm.ts). */
  tls_mitm_mode: tlsMitmModeField,
  tls_mitm_browser: tlsMitmBrowserField,
  tls_mitm_bypass: tlsMitmBypassField,
  /** Judging the target's answers (block-rules.ts). */
  block_rules: blockRulesField,
  retry: retryField,
  block_body_bytes: blockBodyBytesField,
  /** Cost-aware escalation between connector tiers; null: none (block-rules.ts). */
  escalation: escalationField,
  /** Per-domain routing: connectors named for some hosts, or a refusal. */
  domain_rules: domainRulesField,
};

const serverFields = {
  id: readOnly(),
  created_at: readOnly(),
  updated_at: readOnly(),
};

export const CreateProjectBody = v.strictObject({
  name: fields.name,
  username: fields.username,
  /** Generated when absent; the answer shows it. */
  password: v.optional(fields.password),
  description: v.optional(fields.description),
  strategy: v.optional(fields.strategy),
  location_policy: v.optional(fields.location_policy),
  location_sources: v.optional(fields.location_sources),
  location_conflict_rule: v.optional(fields.location_conflict_rule),
  location_preflight: v.optional(fields.location_preflight),
  session_ttl_seconds: v.optional(fields.session_ttl_seconds),
  sticky_quarantine: v.optional(fields.sticky_quarantine),
  metrics_retention_days: v.optional(fields.metrics_retention_days),
  connection_timeout_seconds: v.optional(fields.connection_timeout_seconds),
  max_retries: v.optional(fields.max_retries),
  traffic_quota: v.optional(fields.traffic_quota),
  rate_limit: v.optional(fields.rate_limit),
  max_connections: v.optional(fields.max_connections),
  allowed_cidrs: v.optional(fields.allowed_cidrs),
  passwordless_cidrs: v.optional(fields.passwordless_cidrs),
  tls_mitm_mode: v.optional(fields.tls_mitm_mode),
  tls_mitm_browser: v.optional(fields.tls_mitm_browser),
  tls_mitm_bypass: v.optional(fields.tls_mitm_bypass),
  block_rules: v.optional(fields.block_rules),
  retry: v.optional(fields.retry),
  block_body_bytes: v.optional(fields.block_body_bytes),
  escalation: v.optional(fields.escalation),
  domain_rules: v.optional(fields.domain_rules),
  ...serverFields,
});

export const UpdateProjectBody = v.strictObject({
  ...v.partial(v.strictObject(fields)).entries,
  ...serverFields,
});

/** Body field names as the projects service names them. */
export const PROJECT_FIELD_NAMES = {
  name: "name",
  username: "username",
  password: "password",
  description: "description",
  strategy: "strategy",
  location_policy: "locationPolicy",
  location_sources: "locationSources",
  location_conflict_rule: "locationConflictRule",
  location_preflight: "locationPreflight",
  session_ttl_seconds: "sessionTtlSeconds",
  sticky_quarantine: "stickyQuarantine",
  metrics_retention_days: "metricsRetentionDays",
  connection_timeout_seconds: "connectionTimeoutSeconds",
  max_retries: "maxRetries",
  traffic_quota: "trafficQuota",
  rate_limit: "rateLimit",
  max_connections: "maxConnections",
  allowed_cidrs: "allowedCidrs",
  passwordless_cidrs: "passwordlessCidrs",
  tls_mitm_mode: "tlsMitmMode",
  tls_mitm_browser: "tlsMitmBrowser",
  tls_mitm_bypass: "tlsMitmBypass",
  block_rules: "blockRules",
  retry: "retry",
  block_body_bytes: "blockBodyBytes",
  escalation: "escalation",
  domain_rules: "domainRules",
} as const;

/** The forms `GET /projects/ca-certificate` answers in. */
export const CA_CERTIFICATE_FORMATS = ["pem", "der", "spki"] as const;

/** `GET /projects/ca-certificate?format=`: PEM unless asked otherwise. */
export const CaCertificateQuery = v.object({
  format: v.optional(
    v.picklist(CA_CERTIFICATE_FORMATS, `must be one of ${CA_CERTIFICATE_FORMATS.join(", ")}`),
    "pem",
  ),
});
