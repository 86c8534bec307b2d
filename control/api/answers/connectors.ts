/** Connectors and a provider-API connector's pool as the API answers them. */
import * as v from "valibot";
import { CONNECTOR_KINDS } from "../../../shared/roles.ts";
import { CONNECTOR_FIELDS } from "../../model/connectors.ts";
import {
  count,
  id,
  jsonObject,
  nullableTimestamp,
  RateLimitConfigAnswer,
  timestamp,
  TrafficConfigAnswer,
  TrafficUsageAnswer,
} from "./common.ts";

export const ConnectorAnswer = v.strictObject({
  id,
  project_id: id,
  name: v.string(),
  kind: v.picklist(CONNECTOR_KINDS),
  /** A vendor connector's descriptor id (`provider_api` for one of that kind). */
  provider: v.nullable(v.string()),
  /** A vendor connector's config (proxy_type, slots, session_mode, its fields), secrets masked. */
  config: jsonObject,
  credential_id: v.nullable(id),
  enabled: CONNECTOR_FIELDS.enabled,
  weight: CONNECTOR_FIELDS.weight,
  tier: CONNECTOR_FIELDS.tier,
  countries: v.array(v.string()),
  domain_allow: v.array(v.string()),
  domain_deny: v.array(v.string()),
  healthcheck_url: v.nullable(v.string()),
  rate_limit_config: v.nullable(RateLimitConfigAnswer),
  traffic_config: v.nullable(TrafficConfigAnswer),
  traffic_usage: v.nullable(TrafficUsageAnswer),
  pending_deletion: v.boolean(),
  last_error: v.nullable(v.string()),
  consecutive_errors: count,
  proxy_count: count,
  created_at: timestamp,
  updated_at: timestamp,
});
export type Connector = v.InferOutput<typeof ConnectorAnswer>;

export const ConnectorListAnswer = v.array(ConnectorAnswer);

/** What a list of connectors to pick from needs of each. */
export type ConnectorSummary = Pick<Connector, "id" | "name" | "kind">;

/** A provider-API connector's activity pool (control/provider-api/pool/view.ts); no address. */
export const PoolAnswer = v.strictObject({
  connector_id: id,
  /** The pool generation the fetch counts belong to; null before any fetch lead made one. */
  generation: v.nullable(v.string()),
  counts: v.strictObject({
    checking: count,
    routed: count,
    stock: count,
    /** Available, but failed a check or gateways failed to reach them: in no feed until a pass. */
    suspect: count,
    draining: count,
    extracted: count,
  }),
  /** Checking, routed, stock and suspect: what the pool's sizes count. */
  live: count,
  pool: v.nullable(v.strictObject({
    min_size: count,
    target_size: count,
    max_size: count,
    reserve_for_gateway: v.nullable(count),
  })),
  fetch: v.strictObject({
    success: count,
    empty: count,
    duplicate_only: count,
    error: count,
    rate_limited: count,
    empty_streak: count,
    error_streak: count,
    backoff_until: nullableTimestamp,
    in_flight: count,
    ledger_used: count,
    ledger_pending: count,
    max_total: v.nullable(count),
  }),
  depleted_at: nullableTimestamp,
});
export type PoolView = v.InferOutput<typeof PoolAnswer>;

/** A cloud connector's instances and what its last scale run decided (services/cloud-instances.ts). */
export const CloudInstancesAnswer = v.strictObject({
  connector_id: id,
  provider: v.string(),
  enabled: v.boolean(),
  pending_deletion: v.boolean(),
  min_proxies: v.nullable(count),
  max_proxies: v.nullable(count),
  /** What the last scale run aimed at; null before the first run. */
  target: v.nullable(count),
  /** What held its step: at_target, backoff, traffic_blocked, cooldown, initializing, creating, no_traffic, watching, disabled; null when it stepped. */
  hold: v.nullable(v.string()),
  demand_level: v.nullable(v.picklist(["low", "medium", "high"])),
  demand_per_minute: v.nullable(v.number()),
  last_run_at: nullableTimestamp,
  last_listing_at: nullableTimestamp,
  last_scaled_at: nullableTimestamp,
  last_error: v.nullable(v.string()),
  consecutive_errors: count,
  backoff_until: nullableTimestamp,
  creating: v.array(v.strictObject({
    name: v.string(),
    purpose: v.string(),
    started_at: timestamp,
    stale: v.boolean(),
  })),
  instances: v.array(v.strictObject({
    proxy_id: id,
    instance_id: v.nullable(v.string()),
    name: v.nullable(v.string()),
    address: v.string(),
    status: v.string(),
    created_at: timestamp,
    age_seconds: count,
    rotates_at: nullableTimestamp,
    quiet_checks: v.nullable(count),
  })),
});

/** What a cloud connector's form offers (control/cloud/options.ts). */
export const ConnectorOptionsAnswer = v.strictObject({
  aws_regions: v.array(v.string()),
  aws_instance_types: v.array(v.string()),
  gcp_zones: v.array(v.string()),
  gcp_machine_types: v.array(v.string()),
  azure_locations: v.array(v.string()),
  azure_vm_sizes: v.array(v.string()),
  countries: v.array(v.string()),
});
