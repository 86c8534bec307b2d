/**
 * Extraction leases ending: released by their holder, or ended once their end has passed (by the
 * index_hygiene job every minute, and by the api's extractions as they come, a few at a time).
 * Either way each entry the lease still holds is retired: handed out once, it is never routed or
 * handed out again. Only a connector with `pool.reuse_after_release_seconds` set takes it back,
 * to be checked again after that cool-down, and a `pool` run is asked for such connectors.
 * One script per lease (shared/lua/extract_release.lua) decides, so a release, a sweep and a
 * renewal never both win.
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../../shared/redis-keys.ts";
import { JobKind } from "../../../shared/roles.ts";
import { runScript } from "../../core/scripts.ts";
import type { JobQueue } from "../../core/job-queue.ts";

export const LeaseEnd = {
  ended: "ended",
  missing: "missing",
  otherProject: "other_project",
  notEnded: "not_ended",
} as const;
export type LeaseEnd = (typeof LeaseEnd)[keyof typeof LeaseEnd];

export interface LeaseEndResult {
  outcome: LeaseEnd;
  /** The lease's project (when it existed). */
  projectId: string;
  /** Entries returned to checking (connectors that reuse released proxies). */
  returned: number;
  /** Entries retired: never routed or handed out again. */
  retired: number;
  /** Connectors that entries were returned to. */
  connectorIds: string[];
}

export interface LeaseStores {
  redis: Redis;
  keys: RedisKeys;
}

/** The connector ids a lease's entries (`<connector>/<entry>`) are of, in first-seen order. */
function connectorsOf(entriesJson: string | null): string[] {
  if (entriesJson === null) return [];
  const refs = JSON.parse(entriesJson) as string[];
  return [...new Set(refs.map((ref) => ref.slice(0, ref.indexOf("/"))))];
}

/**
 * Ends a lease: `projectId` limits it to that project's lease (undefined: any, for sweeps),
 * `onlyEnded` to a lease whose end has passed.
 */
export async function endLease(
  stores: LeaseStores,
  leaseId: string,
  options: { projectId?: string; onlyEnded: boolean; nowMs: number },
): Promise<LeaseEndResult> {
  const { redis, keys } = stores;
  // The lease names its entries' connectors; the script checks the list is still whole.
  for (let attempt = 0; attempt < 3; attempt++) {
    const connectors = connectorsOf(await redis.hget(keys.extractLease(leaseId), "entries"));
    const reply = await runScript(
      redis,
      "extract_release",
      [
        keys.extractLease(leaseId),
        keys.extractLeases,
        ...connectors.flatMap((
          c,
        ) => [keys.poolEntries(c), keys.poolExtracted(c), keys.poolChecking(c)]),
      ],
      [options.nowMs, leaseId, options.projectId ?? "", options.onlyEnded ? 1 : 0, ...connectors],
    ) as (string | number)[];
    const status = Number(reply[0]);
    const projectId = String(reply[1] ?? "");
    if (status === -3) continue;
    const outcome = status === 1
      ? LeaseEnd.ended
      : status === 0
      ? LeaseEnd.missing
      : status === -1
      ? LeaseEnd.otherProject
      : LeaseEnd.notEnded;
    return {
      outcome,
      projectId,
      returned: Number(reply[2] ?? 0),
      retired: Number(reply[3] ?? 0),
      connectorIds: reply.slice(4).map(String),
    };
  }
  throw new Error(`Lease ${leaseId} changed while it was being ended`);
}

export interface SweepResult {
  /** Leases ended, by project. */
  byProject: Map<string, number>;
  leases: number;
  /** Entries returned to checking. */
  entries: number;
  /** Entries retired. */
  retired: number;
}

/**
 * Ends leases whose end has passed, oldest end first, at most `limit`, and asks a `pool` run for
 * the connectors entries went back to. A run that asks nothing of Redis is one call.
 */
export async function returnEndedLeases(
  stores: LeaseStores & { jobs: Pick<JobQueue, "request"> },
  options: { nowMs: number; limit: number },
): Promise<SweepResult> {
  const result: SweepResult = { byProject: new Map(), leases: 0, entries: 0, retired: 0 };
  const due = await stores.redis.zrangebyscore(
    stores.keys.extractLeases,
    "-inf",
    options.nowMs,
    "LIMIT",
    0,
    options.limit,
  );
  const connectors = new Set<string>();
  for (const leaseId of due) {
    const ended = await endLease(stores, leaseId, { onlyEnded: true, nowMs: options.nowMs });
    if (ended.outcome !== LeaseEnd.ended) continue;
    result.leases += 1;
    result.entries += ended.returned;
    result.retired += ended.retired;
    result.byProject.set(ended.projectId, (result.byProject.get(ended.projectId) ?? 0) + 1);
    for (const id of ended.connectorIds) connectors.add(id);
  }
  if (connectors.size > 0) await stores.jobs.request(JobKind.pool, connectors);
  return result;
}
