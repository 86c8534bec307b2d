/**
 * The controller's compile: every definition the controller publishes from, read in one
 * read-only REPEATABLE READ transaction so all of it comes from one snapshot however many
 * writers commit meanwhile. Each compile makes the keys the job producers publish, so no
 * producer reads Postgres.
 */
import { and, asc, eq, notInArray } from "drizzle-orm";
import type { Db } from "../../db/client.ts";
import { connectors, proxies } from "../../db/schema.ts";
import { type JobKind, JobKind as K, ProxyStatus } from "../../shared/roles.ts";

export interface Compiled {
  /** Wall-clock time the compile's snapshot was taken. */
  compiledAt: number;
  /** The keys of each keyed periodic kind, in a stable order. */
  jobKeys: ReadonlyMap<JobKind, readonly string[]>;
}

/** Proxies leaving the pool are not checked: a check must never undo a drain. */
const LEAVING = [ProxyStatus.draining, ProxyStatus.terminating];

export async function compile(db: Db): Promise<Compiled> {
  return await db.transaction(async (tx) => {
    const compiledAt = Date.now();
    const health = await tx
      .select({ id: proxies.id })
      .from(proxies)
      .innerJoin(connectors, eq(connectors.id, proxies.connectorId))
      .where(and(eq(connectors.enabled, true), notInArray(proxies.status, LEAVING)))
      .orderBy(asc(proxies.createdAt), asc(proxies.id));
    const cloud = await tx
      .select({ id: connectors.id })
      .from(connectors)
      .where(eq(connectors.kind, "cloud"))
      .orderBy(asc(connectors.createdAt), asc(connectors.id));
    const jobKeys = new Map<JobKind, readonly string[]>([
      [K.health, health.map((row) => row.id)],
      // Static connectors do not sync; provider connectors add their keys when they arrive.
      [K.sync, []],
      [K.scale, cloud.map((row) => row.id)],
    ]);
    return { compiledAt, jobKeys };
  }, { isolationLevel: "repeatable read", accessMode: "read only" });
}
