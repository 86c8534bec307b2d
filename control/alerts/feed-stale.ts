/**
 * feed_stale: a listed gateway that has not applied the routing feed's head although the head
 * was compiled more than the threshold (seconds) ago, as the System page lists them: its
 * follower cannot read, verify or apply what every other gateway routes on. A feed that does not
 * change is not stale however old it is.
 */
import { readSystemStats } from "../metrics/system-stats.ts";
import type { Condition } from "./condition.ts";

export const feedStale: Condition = async (deps, rule, nowMs) => {
  const thresholdMs = (rule.threshold ?? 0) * 1000;
  const { feed } = await readSystemStats(deps.redis, deps.keys);
  if (feed.error !== null) throw new Error(`the feed could not be read: ${feed.error}`);
  const head = feed.data?.head;
  if (!head) return [];
  const headAgeMs = nowMs - new Date(head.compiled_at).getTime();
  if (headAgeMs <= thresholdMs) return [];
  return (feed.data?.gateways ?? []).filter((gateway) => !gateway.current).map((gateway) => ({
    subject: `gateway:${gateway.instance}`,
    message: `Gateway ${gateway.instance} has not applied the routing feed compiled ` +
      `${Math.round(headAgeMs / 1000)} s ago`,
    details: {
      instance: gateway.instance,
      applied_digest: gateway.applied_digest,
      head_digest: head.digest,
      head_compiled_at: head.compiled_at,
    },
  }));
};
