/**
 * job_backlog: a job kind whose stream holds more entries no worker has taken yet than the
 * threshold (length less pending, as the System page counts it). Only the kinds a worker runs.
 */
import { WORKER_JOB_KINDS } from "../../shared/roles.ts";
import { redisDeadline } from "../core/redis.ts";
import { workStreamStats } from "../core/work-streams.ts";
import type { Condition } from "./condition.ts";

export const jobBacklog: Condition = async (deps, rule) => {
  const threshold = rule.threshold ?? 0;
  const kinds = [...WORKER_JOB_KINDS];
  const stats = await redisDeadline(
    deps.settings.redisRequestTimeoutMs,
    () => workStreamStats(deps.redis, kinds.map((kind) => deps.keys.jobStream(kind))),
  );
  return kinds.flatMap((kind, i) => {
    const { backlog, oldestAgeMs } = stats[i];
    if (backlog <= threshold) return [];
    return [{
      subject: `job:${kind}`,
      message: `Job kind ${kind} has ${backlog} entries waiting for a worker (over ${threshold})`,
      details: { kind, backlog, oldest_age_ms: oldestAgeMs },
    }];
  });
};
