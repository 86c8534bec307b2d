/**
 * The kinds of condition an alert rule may watch: which take a threshold (in what unit and
 * range) and which a scope, and which this release refuses. Plain data, so the dashboard reads
 * the same catalogue the api validates with.
 */

export const ALERT_SEVERITIES = ["info", "warning", "critical"] as const;
export type AlertSeverity = (typeof ALERT_SEVERITIES)[number];

export interface AlertKindInfo {
  /** What fires, in one line (the dashboard and the docs show it). */
  about: string;
  /** The threshold it takes, when it takes one: required then, and within the range. */
  threshold?: { min: number; max: number; unit: string };
  /** Whether a project or connector may narrow it (otherwise it watches the install). */
  scoped: boolean;
}

/** Every kind a rule may name, in the order the dashboard lists them. */
export const ALERT_KINDS = {
  traffic_limit: {
    about: "A connector or project past its traffic limit's warning line, at it, or blocked",
    scoped: true,
  },
  healthy_share: {
    about: "A connector's share of healthy proxies under the threshold",
    threshold: { min: 0, max: 100, unit: "percent" },
    scoped: true,
  },
  job_backlog: {
    about: "A job kind's waiting entries (not yet taken by a worker) over the threshold",
    threshold: { min: 1, max: 10_000_000, unit: "entries" },
    scoped: false,
  },
  tls_ca_expiry: {
    about: "The TLS interception CA ending within the threshold",
    threshold: { min: 1, max: 36_500, unit: "days" },
    scoped: false,
  },
  pool_depleted: {
    about: "A provider-API connector with no proxy left to route (depleted)",
    scoped: true,
  },
  sequence_moved: {
    about: "A project's connector sequence off its first connector, or past its last",
    scoped: true,
  },
  quarantine_storm: {
    about: "A connector with at least the threshold of its proxies quarantined at once",
    threshold: { min: 1, max: 1_000_000, unit: "proxies" },
    scoped: true,
  },
  failure_flood: {
    about: "A project's failures of one kind in the last 15 minutes at or over the threshold",
    threshold: { min: 1, max: 10_000_000, unit: "failures" },
    scoped: true,
  },
  feed_stale: {
    about: "A gateway that has not applied the feed's head, compiled longer ago than the " +
      "threshold",
    threshold: { min: 1, max: 86_400, unit: "seconds" },
    scoped: false,
  },
  controller_lease: {
    about: "No controller holding the lease (the feed and the job timers stopped)",
    scoped: false,
  },
  domain_block_rate: {
    about: "A site's answers judged blocked or rate-limited today over the threshold " +
      "(20 judged at least)",
    threshold: { min: 0, max: 100, unit: "percent" },
    scoped: true,
  },
} as const satisfies Record<string, AlertKindInfo>;

export type AlertKind = keyof typeof ALERT_KINDS;
export const ALERT_KIND_NAMES = Object.keys(ALERT_KINDS) as AlertKind[];

export function kindInfo(kind: AlertKind): AlertKindInfo {
  return ALERT_KINDS[kind];
}
