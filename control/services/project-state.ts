/**
 * What a project leaves in Redis once its rows are gone (deleted through the api, pruned by
 * `octoprox apply`, or dropped by a backup import): its own keys and key families
 * (`projectOwned` in shared/redis-keys.ts: the request-rate bucket, sticky bindings, preflight
 * verdicts, demand minutes, idempotent extraction answers, failure examples, interception
 * captures), its and its connectors' traffic marks and blocks, its proxies' soft state and
 * quarantines, and its provider-API pools (their purge is asked of the pool job, which frees
 * their proxies for other projects). Nothing of it is read for a project that no longer exists,
 * but it would stay until Redis forgets it, and pools would hold their proxies until they expire.
 *
 * The footprint (connector and proxy ids) is read in the transaction that removes the rows, and
 * the keys are removed after its commit. A Redis that does not answer leaves them (logged):
 * the write stands.
 */
import { inArray } from "drizzle-orm";
import type postgres from "postgres";
import type { Tx } from "../../db/client.ts";
import { connectors, proxies } from "../../db/schema.ts";
import { errorText } from "../../shared/errors.ts";
import { ConnectorKind, JobKind } from "../../shared/roles.ts";
import { connectorSubject, projectSubject } from "../../shared/traffic-subjects.ts";
import type { ControlDeps } from "../core/deps.ts";

/** A removed project's ids, read before its rows go. */
export interface ProjectFootprint {
  projectIds: string[];
  connectorIds: string[];
  /** Provider-API connectors: their pools are purged by the pool job. */
  poolConnectorIds: string[];
  proxyIds: string[];
}

export const EMPTY_FOOTPRINT: ProjectFootprint = Object.freeze({
  projectIds: [],
  connectorIds: [],
  poolConnectorIds: [],
  proxyIds: [],
}) as ProjectFootprint;

/** Keys removed per command. */
const BATCH = 500;

function footprintOf(
  projectIds: string[],
  connectorRows: readonly { id: string; kind: string }[],
  proxyRows: readonly { id: string }[],
): ProjectFootprint {
  return {
    projectIds,
    connectorIds: connectorRows.map((row) => row.id),
    poolConnectorIds: connectorRows.filter((row) => row.kind === ConnectorKind.providerApi)
      .map((row) => row.id),
    proxyIds: proxyRows.map((row) => row.id),
  };
}

/** The footprint of `projectIds`, read inside the transaction about to remove them. */
export async function readFootprint(
  tx: Tx,
  projectIds: readonly string[],
): Promise<ProjectFootprint> {
  if (projectIds.length === 0) return EMPTY_FOOTPRINT;
  const connectorRows = await tx.select({ id: connectors.id, kind: connectors.kind })
    .from(connectors).where(inArray(connectors.projectId, [...projectIds]));
  const proxyRows = await tx.select({ id: proxies.id }).from(proxies)
    .where(inArray(proxies.projectId, [...projectIds]));
  return footprintOf([...projectIds], connectorRows, proxyRows);
}

/** Every project's footprint, on a raw transaction (a backup import replaces every row). */
export async function readInstallFootprint(tx: postgres.Sql): Promise<ProjectFootprint> {
  const projectRows = await tx<{ id: string }[]>`select id from projects`;
  const connectorRows = await tx<{ id: string; kind: string }[]>`select id, kind from connectors`;
  const proxyRows = await tx<{ id: string }[]>`select id from proxies`;
  return footprintOf(projectRows.map((row) => row.id), connectorRows, proxyRows);
}

/** What `before` holds that `after` does not: the ids a replacement of every row dropped. */
export function droppedFrom(before: ProjectFootprint, after: ProjectFootprint): ProjectFootprint {
  const minus = (all: string[], kept: string[]) => {
    const keep = new Set(kept);
    return all.filter((id) => !keep.has(id));
  };
  return {
    projectIds: minus(before.projectIds, after.projectIds),
    connectorIds: minus(before.connectorIds, after.connectorIds),
    poolConnectorIds: minus(before.poolConnectorIds, after.poolConnectorIds),
    proxyIds: minus(before.proxyIds, after.proxyIds),
  };
}

export type StateDeps = Pick<ControlDeps, "redis" | "keys" | "jobs" | "logger">;

/** Removes what the footprint's projects left in Redis; answers the keys removed. Never throws. */
export async function clearProjectState(
  deps: StateDeps,
  footprint: ProjectFootprint,
): Promise<number> {
  const empty = Object.values(footprint).every((ids: string[]) => ids.length === 0);
  if (empty) return 0;
  const { redis, keys } = deps;
  let removed = 0;
  try {
    const unlink = async (names: readonly string[]) => {
      for (let start = 0; start < names.length; start += BATCH) {
        removed += await redis.unlink(...names.slice(start, start + BATCH));
      }
    };
    for (const projectId of footprint.projectIds) {
      const owned = keys.projectOwned(projectId);
      await unlink(owned.keys);
      for (const pattern of owned.patterns) {
        for await (const found of redis.scanStream({ match: pattern, count: 1000 })) {
          if ((found as string[]).length > 0) await unlink(found as string[]);
        }
      }
    }
    await unlink(footprint.proxyIds.flatMap((id) => [
      keys.proxyHealth(id),
      keys.proxyRequests(id),
      keys.proxyLastExit(id),
    ]));
    await unlink(footprint.connectorIds.flatMap((id) => [
      keys.autoscaler(id),
      keys.scaleCreating(id),
    ]));
    const subjects = [
      ...footprint.projectIds.map(projectSubject),
      ...footprint.connectorIds.map(connectorSubject),
    ];
    for (let start = 0; start < subjects.length; start += BATCH) {
      const batch = subjects.slice(start, start + BATCH);
      removed += await redis.hdel(keys.trafficPending, ...batch);
      removed += await redis.hdel(keys.trafficBlocked, ...batch);
    }
    for (let start = 0; start < footprint.proxyIds.length; start += BATCH) {
      removed += await redis.zrem(
        keys.proxyQuarantined,
        ...footprint.proxyIds.slice(start, start + BATCH),
      );
    }
    // The pool job finds each connector gone and purges its pool, ownership included.
    if (footprint.poolConnectorIds.length > 0) {
      await deps.jobs.request(JobKind.pool, footprint.poolConnectorIds);
    }
  } catch (error) {
    deps.logger.warn(
      { projects: footprint.projectIds.length, removed, error: errorText(error) },
      "Removed projects' Redis state not cleared; it is never read, and goes as Redis forgets it",
    );
  }
  return removed;
}
