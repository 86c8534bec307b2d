/**
 * controller_lease: no controller holds the lease (none running, or the last one lost it and no
 * standby took it yet), read as the System page reads it. Without a leader no feed is compiled
 * and no periodic job is asked for. Redis away: the condition cannot tell, and throws.
 */
import { readSystemStats } from "../metrics/system-stats.ts";
import type { Condition } from "./condition.ts";

export const controllerLease: Condition = async (deps) => {
  const { leader } = await readSystemStats(deps.redis, deps.keys);
  if (leader.error !== null) throw new Error(`the lease could not be read: ${leader.error}`);
  if (leader.data !== null) return [];
  return [{
    subject: "controller",
    message: "No controller holds the lease: the routing feed and the job timers are stopped",
    details: {},
  }];
};
