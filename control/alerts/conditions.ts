/** Each kind's condition (condition.ts says what one is): every kind a rule may name has one. */
import type { AlertKind } from "../model/alerts.ts";
import type { Condition } from "./condition.ts";
import { controllerLease } from "./controller-lease.ts";
import { domainBlockRate } from "./domain-block-rate.ts";
import { failureFlood } from "./failure-flood.ts";
import { feedStale } from "./feed-stale.ts";
import { poolDepleted } from "./pool-depleted.ts";
import { quarantineStorm } from "./quarantine-storm.ts";
import { sequenceMoved } from "./sequence-moved.ts";
import { healthyShare } from "./healthy-share.ts";
import { jobBacklog } from "./job-backlog.ts";
import { tlsCaExpiry } from "./tls-ca-expiry.ts";
import { trafficLimit } from "./traffic-limit.ts";

const CONDITIONS: Record<AlertKind, Condition> = {
  traffic_limit: trafficLimit,
  healthy_share: healthyShare,
  job_backlog: jobBacklog,
  tls_ca_expiry: tlsCaExpiry,
  controller_lease: controllerLease,
  feed_stale: feedStale,
  domain_block_rate: domainBlockRate,
  pool_depleted: poolDepleted,
  sequence_moved: sequenceMoved,
  quarantine_storm: quarantineStorm,
  failure_flood: failureFlood,
};

export function conditionOf(kind: AlertKind): Condition | undefined {
  // A row of a kind this build does not know (written by a newer one) is left alone.
  return Object.hasOwn(CONDITIONS, kind) ? CONDITIONS[kind] : undefined;
}
