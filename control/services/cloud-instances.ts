/**
 * A cloud connector's rows: one per instance, saved by the scale run that created it
 * (insert-or-skip on the instance's id), moved to draining and terminating by scale runs and
 * by an admin's delete, and deleted once the instance is gone. Each write is one transaction
 * announced by one change entry, as every proxy write is; a status write never moves a row back
 * (terminating stays terminating, so a stale run cannot undo a termination).
 */
import { and, asc, eq, inArray, notInArray, sql } from "drizzle-orm";
import type { Database } from "../../db/client.ts";
import { connectors, proxies } from "../../db/schema.ts";
import { ChangeKind, ConnectorKind, JobKind, ProxyStatus } from "../../shared/roles.ts";
import { read, type ServiceDeps, write } from "../core/store.ts";
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { ConflictError } from "../../shared/errors.ts";
import type { CloudScaleConfig } from "../model/cloud.ts";
import { readState } from "../cloud/scale/state.ts";
import { isFresh, readEntries } from "../cloud/scale/creating.ts";
import { scaleBackoffMs } from "../cloud/scale/backoff.ts";
import { missingIn } from "./scope.ts";

const proxyChange = (connectorId: string) => ({ kind: ChangeKind.proxy, ref: connectorId });

/** A cloud row as the scale run reads it. */
export interface InstanceRow {
  id: string;
  instanceId: string | null;
  /** The creation name (metadata `instance_name`). */
  name: string | null;
  status: ProxyStatus;
  host: string;
  createdAt: Date;
  statusChangedAt: Date;
}

/** Rows that count as the pool's instances: neither draining nor terminating. */
export function isActive(row: Pick<InstanceRow, "status">): boolean {
  return row.status !== ProxyStatus.draining && row.status !== ProxyStatus.terminating;
}

export async function readInstanceRows(
  db: Database["db"],
  connectorId: string,
  /** One row only (a rotation's re-read of its proxy). */
  onlyId?: string,
): Promise<InstanceRow[]> {
  const rows = await db.select({
    id: proxies.id,
    instanceId: proxies.instanceId,
    name: sql<string | null>`${proxies.metadata} ->> 'instance_name'`,
    status: proxies.status,
    host: proxies.host,
    createdAt: proxies.createdAt,
    statusChangedAt: proxies.statusChangedAt,
  }).from(proxies).where(and(
    eq(proxies.connectorId, connectorId),
    onlyId === undefined ? undefined : eq(proxies.id, onlyId),
  )).orderBy(asc(proxies.createdAt), asc(proxies.id));
  return rows.map((row) => ({ ...row, status: row.status as ProxyStatus }));
}

export interface NewInstanceRow {
  projectId: string;
  connectorId: string;
  instanceId: string;
  name: string;
  address: string;
  port: number;
  username: string;
  password: string;
  /** The connector's declared country when it declares exactly one; attribution fills the rest. */
  country: string | null;
}

/**
 * Saves a new instance's row, initializing, unless one with its instance id exists (a creator
 * that ran twice); answers the new row's id, or undefined when it was there. Its first health
 * check is asked at once, ahead of the periodic ones.
 */
export async function saveInstanceRow(
  deps: ServiceDeps,
  row: NewInstanceRow,
): Promise<string | undefined> {
  const id = await write(deps, async (tx) => {
    const inserted = await tx.insert(proxies).values({
      projectId: row.projectId,
      connectorId: row.connectorId,
      instanceId: row.instanceId,
      scheme: "http",
      host: row.address,
      port: row.port,
      username: row.username,
      password: row.password,
      country: row.country,
      countrySource: row.country === null ? null : "manual",
      metadata: { instance_name: row.name },
      status: ProxyStatus.initializing,
    }).onConflictDoNothing().returning({ id: proxies.id });
    const saved = inserted[0]?.id;
    return { result: saved, change: saved === undefined ? null : proxyChange(row.connectorId) };
  });
  if (id !== undefined) await deps.jobs.request(JobKind.health, [id], { first: true });
  return id;
}

/**
 * Moves rows to draining (from any status but draining and terminating) or to terminating (from
 * any but terminating); answers the ids moved. A row already there keeps its status_changed_at.
 */
export async function moveInstanceRows(
  deps: ServiceDeps,
  connectorId: string,
  ids: readonly string[],
  to: typeof ProxyStatus.draining | typeof ProxyStatus.terminating,
): Promise<string[]> {
  if (ids.length === 0) return [];
  const leaving = to === ProxyStatus.draining
    ? [ProxyStatus.draining, ProxyStatus.terminating]
    : [ProxyStatus.terminating];
  return await write(deps, async (tx) => {
    const moved = await tx.update(proxies)
      .set({ status: to, statusChangedAt: sql`now()`, updatedAt: sql`now()` })
      .where(and(
        eq(proxies.connectorId, connectorId),
        inArray(proxies.id, [...ids]),
        notInArray(proxies.status, leaving),
      ))
      .returning({ id: proxies.id });
    return {
      result: moved.map((row) => row.id),
      change: moved.length === 0 ? null : proxyChange(connectorId),
    };
  });
}

/** Deletes rows whose instances are gone. */
export async function deleteInstanceRows(
  deps: ServiceDeps,
  connectorId: string,
  ids: readonly string[],
): Promise<number> {
  if (ids.length === 0) return 0;
  return await write(deps, async (tx) => {
    const deleted = await tx.delete(proxies)
      .where(and(eq(proxies.connectorId, connectorId), inArray(proxies.id, [...ids])))
      .returning({ id: proxies.id });
    return {
      result: deleted.length,
      change: deleted.length === 0 ? null : proxyChange(connectorId),
    };
  });
}

/**
 * Deletes a cloud connector pending deletion once nothing of it is left: no rows. The run has
 * already found no creating entries and an empty listing. Answers whether it was deleted.
 */
export async function deleteEmptiedConnector(
  deps: ServiceDeps,
  connectorId: string,
): Promise<boolean> {
  return await write(deps, async (tx) => {
    const [connector] = await tx.select({ id: connectors.id }).from(connectors)
      .where(and(
        eq(connectors.id, connectorId),
        eq(connectors.kind, ConnectorKind.cloud),
        eq(connectors.pendingDeletion, true),
      )).for("update");
    if (!connector) return { result: false, change: null };
    const [left] = await tx.select({ id: proxies.id }).from(proxies)
      .where(eq(proxies.connectorId, connectorId)).limit(1);
    if (left) return { result: false, change: null };
    await tx.delete(connectors).where(eq(connectors.id, connectorId));
    return { result: true, change: { kind: ChangeKind.connector, ref: connectorId } };
  });
}

/** A cloud connector's instances as the connector page, the CLI and the api show them. */
export interface InstancesView {
  connector_id: string;
  provider: string;
  enabled: boolean;
  pending_deletion: boolean;
  min_proxies: number | null;
  max_proxies: number | null;
  /** What the last scale run aimed at, and what held its step (null: it stepped). */
  target: number | null;
  hold: string | null;
  demand_level: "low" | "medium" | "high" | null;
  demand_per_minute: number | null;
  last_run_at: string | null;
  last_listing_at: string | null;
  last_scaled_at: string | null;
  last_error: string | null;
  consecutive_errors: number;
  /** While the connector backs off after cloud errors: when it may call the cloud again. */
  backoff_until: string | null;
  /** Instances being created (the creating hash). */
  creating: { name: string; purpose: string; started_at: string; stale: boolean }[];
  instances: {
    proxy_id: string;
    instance_id: string | null;
    name: string | null;
    address: string;
    status: string;
    created_at: string;
    age_seconds: number;
    /** When it is replaced (rotation), once a scale run has drawn it. */
    rotates_at: string | null;
    /** A draining instance's checks in a row with its counters standing still. */
    quiet_checks: number | null;
  }[];
}

const iso = (ms: number | undefined) => ms === undefined ? null : new Date(ms).toISOString();

export async function instancesView(
  deps: ServiceDeps & { redis: Redis; keys: RedisKeys },
  projectId: string,
  connectorId: string,
  nowMs: number = Date.now(),
): Promise<InstancesView> {
  const { connector, rows } = await read(deps, async (db) => {
    const [connector] = await db.select().from(connectors)
      .where(and(eq(connectors.projectId, projectId), eq(connectors.id, connectorId)));
    if (!connector) return missingIn(db, projectId, "Connector");
    if (connector.kind !== ConnectorKind.cloud) {
      throw new ConflictError("Only a cloud connector has instances");
    }
    return { connector, rows: await readInstanceRows(db, connectorId) };
  });
  const [state, entries] = await Promise.all([
    readState(deps.redis, deps.keys, connectorId),
    readEntries(deps.redis, deps.keys, connectorId),
  ]);
  const config = connector.config as Partial<CloudScaleConfig>;
  const backoff = connector.lastErrorAt === null
    ? undefined
    : connector.lastErrorAt.getTime() + scaleBackoffMs(connector.consecutiveErrors);
  return {
    connector_id: connector.id,
    provider: connector.provider,
    enabled: connector.enabled,
    pending_deletion: connector.pendingDeletion,
    min_proxies: config.min_proxies ?? null,
    max_proxies: config.max_proxies ?? null,
    target: state.target ?? null,
    hold: state.hold ?? null,
    demand_level: state.ranAtMs === undefined ? null : state.level,
    demand_per_minute: state.demandPerMinute ?? null,
    last_run_at: iso(state.ranAtMs),
    last_listing_at: iso(state.listedAtMs),
    last_scaled_at: iso(state.scaledAtMs),
    last_error: connector.lastError,
    consecutive_errors: connector.consecutiveErrors,
    backoff_until: backoff !== undefined && backoff > nowMs ? iso(backoff) : null,
    creating: entries.map((entry) => ({
      name: entry.name,
      purpose: entry.purpose,
      started_at: new Date(entry.atMs).toISOString(),
      stale: !isFresh(entry, nowMs),
    })),
    instances: rows.map((row) => ({
      proxy_id: row.id,
      instance_id: row.instanceId,
      name: row.name,
      address: row.host,
      status: row.status,
      created_at: row.createdAt.toISOString(),
      age_seconds: Math.max(0, Math.floor((nowMs - row.createdAt.getTime()) / 1000)),
      rotates_at: iso(state.rotateAtMs.get(row.id)),
      quiet_checks: state.drains.get(row.id)?.quietChecks ?? null,
    })),
  };
}
