/** A project as the API answers it (control/api/present.ts's presentProject). */
import * as v from "valibot";
import { cidrList } from "../../model/projects.ts";
import { TLS_MITM_BROWSERS, TLS_MITM_MODES } from "../../model/tls-mitm.ts";
import { count, id, timestamp, TrafficConfigAnswer, TrafficUsageAnswer } from "./common.ts";

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
  /** off (raw tunnels), plain; match_ua and override_ua are refused in this build. */
  tls_mitm_mode: v.picklist(TLS_MITM_MODES),
  /** The browser override_ua presents; null under every other mode. */
  tls_mitm_browser: v.nullable(v.picklist(TLS_MITM_BROWSERS)),
  /** Hosts, `.suffixes` and IP addresses whose tunnels stay raw. */
  tls_mitm_bypass: v.array(v.string()),
  created_at: timestamp,
  updated_at: timestamp,
});
export type Project = v.InferOutput<typeof ProjectAnswer>;

export const ProjectListAnswer = v.array(ProjectAnswer);
