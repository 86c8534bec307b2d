/**
 * One scale run of one cloud connector (docs/cloud.md): list when needed, read the creating hash
 * then the rows, settle what the listing shows, terminate what is terminating, then either drain
 * everything (disabled, pending deletion) or rotate, drain and scale towards the demand's target.
 *
 * Runs of one connector overlap as a rule (a create outlasts the period), and every rule holds
 * under overlap without locks: the read order (listing, then hash, then rows), the HOLD script
 * for entries, a re-read of the connector after an entry is written and of the rows before a
 * step creates, and idempotent termination.
 */
import { randomInt } from "node:crypto";
import { and, eq, inArray } from "drizzle-orm";
import type { Redis } from "ioredis";
import { connectors, credentials, metricTotals } from "../../db/schema.ts";
import { CloudCallError, errorText } from "../../shared/errors.ts";
import { ProxyWindows, readCounts, TRANSFER_FIELDS } from "../../shared/metric-windows.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { ConnectorKind, JobKind, ProxyStatus } from "../../shared/roles.ts";
import { connectorSubject } from "../../shared/traffic-subjects.ts";
import type { Logger } from "../core/logging.ts";
import { read, type ServiceDeps } from "../core/store.ts";
import type { CloudScaleConfig } from "../model/cloud.ts";
import { recordConnectorError } from "../services/connectors.ts";
import {
  deleteEmptiedConnector,
  deleteInstanceRows,
  type InstanceRow,
  isActive,
  moveInstanceRows,
  readInstanceRows,
  saveInstanceRow,
} from "../services/cloud-instances.ts";
import { blockedNow } from "../traffic/rules.ts";
import { cloudClientFor } from "../cloud/clients.ts";
import type { CloudClient, CloudInstance } from "../cloud/contract.ts";
import { instanceName } from "../cloud/naming.ts";
import { startupScript } from "../cloud/startup-script.ts";
import type { CloudProvider } from "../model/cloud.ts";
import {
  clearEntries,
  type CreatingEntry,
  entryExists,
  hasEntries,
  holdEntries,
  isFresh,
  readEntries,
  ROTATE_PREFIX,
  rotatePurpose,
  SCALE_PURPOSE,
} from "../cloud/scale/creating.ts";
import { scaleBackoffMs } from "../cloud/scale/backoff.ts";
import { levelTarget, nextLevel, readDemand, stepSize } from "../cloud/scale/demand.ts";
import type { ScaleMetrics } from "../cloud/scale/metrics.ts";
import { type AutoscalerState, readState, ScaleHold, writeState } from "../cloud/scale/state.ts";

/** A listing at least this often, whatever else happens: unrecorded instances end within it. */
export const LISTING_PERIOD_MS = 3_600_000;
/** Quiet checks in a row after which a draining instance is terminated. */
export const QUIET_CHECKS = 2;

export interface ScaleRunDeps {
  deps: ServiceDeps;
  redis: Redis;
  keys: RedisKeys;
  logger: Logger;
  metrics?: ScaleMetrics;
  /** The clock (tests move it). */
  now?: () => number;
  /** How a client is built (tests count calls); the one factory by default. */
  clientFor?: typeof cloudClientFor;
}

/** What a run did, for logs and tests. */
export interface ScaleOutcome {
  connectorId: string;
  listed: boolean;
  created: number;
  drained: number;
  terminated: number;
  unrecordedTerminated: number;
  deleted: boolean;
  hold: ScaleHold | undefined;
  target: number | undefined;
}

type ConnectorRow = typeof connectors.$inferSelect;

const LOGIN_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";

function randomText(length: number): string {
  let text = "";
  for (let i = 0; i < length; i++) text += LOGIN_ALPHABET[randomInt(LOGIN_ALPHABET.length)];
  return text;
}

export class ScaleRun {
  readonly #o: ScaleRunDeps;
  readonly #now: () => number;
  readonly #clientFor: typeof cloudClientFor;

  constructor(options: ScaleRunDeps) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
    this.#clientFor = options.clientFor ?? cloudClientFor;
  }

  async run(connectorId: string, signal: AbortSignal): Promise<ScaleOutcome> {
    const { redis, keys } = this.#o;
    const outcome: ScaleOutcome = {
      connectorId,
      listed: false,
      created: 0,
      drained: 0,
      terminated: 0,
      unrecordedTerminated: 0,
      deleted: false,
      hold: undefined,
      target: undefined,
    };
    const now = this.#now();
    const read0 = await this.#readConnector(connectorId);
    if (read0 === undefined) {
      await this.#forget(connectorId);
      outcome.deleted = true;
      return outcome;
    }
    const { connector, credential } = read0;
    if (connector.kind !== ConnectorKind.cloud) return outcome;
    const state = await readState(redis, keys, connectorId);
    const log = this.#o.logger.child({ connector: connectorId });

    let client: CloudClient;
    try {
      client = this.#clientFor(
        this.#o.deps.settings,
        connector.provider,
        credential,
        connector.config,
      );
    } catch (error) {
      log.warn(
        { error: errorText(error) },
        "Cloud connector not scaled: its settings do not parse",
      );
      await this.#recordError(connectorId, `configuration: ${errorText(error)}`, connector);
      return outcome;
    }
    const provider = client.provider;
    const config = connector.config as unknown as CloudScaleConfig;

    // Listing, then the creating hash, then the rows: in any other order a creator starting or
    // finishing between two reads looks unrecorded.
    const creatingBefore = await hasEntries(redis, keys, connectorId);
    const listDue = connector.pendingDeletion || creatingBefore ||
      state.listedAtMs === undefined || now - state.listedAtMs >= LISTING_PERIOD_MS;
    let listed: CloudInstance[] | undefined;
    if (listDue) {
      try {
        listed = await this.#call(provider, "list", () => client.list(connectorId, signal));
        state.listedAtMs = now;
        outcome.listed = true;
      } catch (error) {
        if (signal.aborted) throw error;
        log.warn({ error: errorText(error) }, "Listing the connector's cloud instances failed");
      }
    }
    let entries = await readEntries(redis, keys, connectorId);
    let rows = await read(this.#o.deps, (db) => readInstanceRows(db, connectorId));

    if (listed !== undefined) {
      const settled = await this.#settle(client, connectorId, listed, entries, rows, now, signal);
      outcome.unrecordedTerminated = settled.terminated;
      entries = settled.entries;
    }

    // Terminating rows: the instance first, then its row.
    outcome.terminated += await this.#terminateRows(
      client,
      connector,
      rows.filter((row) => row.status === ProxyStatus.terminating),
      signal,
    );
    rows = rows.filter((row) => row.status !== ProxyStatus.terminating);

    if (!connector.enabled || connector.pendingDeletion) {
      outcome.hold = ScaleHold.disabled;
      outcome.target = 0;
      const active = rows.filter(isActive).map((row) => row.id);
      outcome.drained += (await moveInstanceRows(
        this.#o.deps,
        connectorId,
        active,
        ProxyStatus.draining,
      )).length;
      rows = rows.map((row) =>
        active.includes(row.id) ? { ...row, status: ProxyStatus.draining } : row
      );
      outcome.terminated += await this.#watchDrains(client, connector, rows, state, signal);
      if (connector.pendingDeletion) {
        const left = await read(this.#o.deps, (db) => readInstanceRows(db, connectorId));
        if (
          listed !== undefined && listed.length === 0 && entries.length === 0 && left.length === 0
        ) {
          outcome.deleted = await deleteEmptiedConnector(this.#o.deps, connectorId);
          if (outcome.deleted) {
            log.info("Cloud connector deleted: none of its instances is left");
            await this.#forget(connectorId);
            return outcome;
          }
        } else if (outcome.terminated + outcome.unrecordedTerminated > 0) {
          // The listing that finds nothing left comes with the next run: ask it now.
          await this.#o.deps.jobs.request(JobKind.scale, [connectorId]);
        }
      }
      this.#finishState(state, outcome, now, undefined);
      await writeState(redis, keys, connectorId, state);
      return outcome;
    }

    // Rotation: each due instance is replaced, its replacement created first; it drains once
    // the replacement passed its checks.
    if (await this.#settleRotations(connector, rows, entries) > 0) {
      rows = await read(this.#o.deps, (db) => readInstanceRows(db, connectorId));
      entries = await readEntries(redis, keys, connectorId);
    }
    outcome.created += await this.#rotate(
      client,
      connector,
      config,
      rows,
      entries,
      state,
      now,
      signal,
    );
    rows = await read(this.#o.deps, (db) => readInstanceRows(db, connectorId));
    entries = await readEntries(redis, keys, connectorId);
    outcome.terminated += await this.#watchDrains(client, connector, rows, state, signal);
    rows = rows.filter((row) => row.status !== ProxyStatus.terminating);

    const step = await this.#scale(client, connector, config, rows, entries, state, now, signal);
    outcome.created += step.created;
    outcome.drained += step.drained;
    outcome.hold = step.hold;
    outcome.target = step.target;
    this.#finishState(state, outcome, now, step.demandPerMinute);
    // Rows another run deleted take their watches with them.
    const ids = new Set(rows.map((row) => row.id));
    for (const id of state.rotateAtMs.keys()) if (!ids.has(id)) state.rotateAtMs.delete(id);
    for (const id of state.drains.keys()) if (!ids.has(id)) state.drains.delete(id);
    await writeState(redis, keys, connectorId, state);
    return outcome;
  }

  #finishState(
    state: AutoscalerState,
    outcome: ScaleOutcome,
    now: number,
    demandPerMinute: number | undefined,
  ): void {
    state.hold = outcome.hold;
    state.target = outcome.target;
    state.demandPerMinute = demandPerMinute;
    state.ranAtMs = now;
  }

  /** The connector and its credential's config, or undefined when the connector is gone. */
  async #readConnector(
    connectorId: string,
  ): Promise<{ connector: ConnectorRow; credential: Record<string, unknown> | null } | undefined> {
    return await read(this.#o.deps, async (db) => {
      const [connector] = await db.select().from(connectors).where(eq(connectors.id, connectorId));
      if (!connector) return undefined;
      const credential = connector.credentialId === null ? null : (await db
        .select({ config: credentials.config }).from(credentials)
        .where(and(
          eq(credentials.id, connector.credentialId),
          eq(credentials.projectId, connector.projectId),
        )))[0]?.config ?? null;
      return { connector, credential };
    });
  }

  /** A connector gone: its autoscaler hash and creating hash go too. */
  async #forget(connectorId: string): Promise<void> {
    await this.#o.redis.del(
      this.#o.keys.autoscaler(connectorId),
      this.#o.keys.scaleCreating(connectorId),
    );
  }

  /** A cloud call, counted (and its failure counted) by cloud and operation. */
  async #call<T>(provider: CloudProvider, operation: string, call: () => Promise<T>): Promise<T> {
    const metrics = this.#o.metrics;
    try {
      const result = await call();
      metrics?.call(provider, operation, undefined);
      return result;
    } catch (error) {
      metrics?.call(provider, operation, error instanceof CloudCallError ? error.failure : "other");
      throw error;
    }
  }

  async #recordError(connectorId: string, text: string, connector?: ConnectorRow): Promise<void> {
    // A configuration error recorded already is not counted again every run.
    if (connector !== undefined && connector.lastError === text) return;
    await recordConnectorError(this.#o.deps, connectorId, text, new Date(this.#now()));
  }

  /**
   * Settles what the listing shows: every listed instance with neither a row nor a fresh entry
   * is terminated (its creator died or lost Redis before saving a row), then every stale entry
   * is cleared, except those whose instance's termination failed.
   */
  async #settle(
    client: CloudClient,
    connectorId: string,
    listed: readonly CloudInstance[],
    entries: readonly CreatingEntry[],
    rows: readonly InstanceRow[],
    now: number,
    signal: AbortSignal,
  ): Promise<{ terminated: number; entries: CreatingEntry[] }> {
    const recorded = new Set(rows.map((row) => row.instanceId).filter((id) => id !== null));
    const fresh = new Set(entries.filter((e) => isFresh(e, now)).map((e) => e.name));
    const failed = new Set<string>();
    let terminated = 0;
    for (const instance of listed) {
      if (recorded.has(instance.id) || fresh.has(instance.name)) continue;
      this.#o.logger.warn(
        { connector: connectorId, instance: instance.name },
        "Terminating a cloud instance with no row",
      );
      try {
        await this.#call(client.provider, "terminate", () => client.terminate(instance.id, signal));
        terminated++;
        this.#o.metrics?.unrecorded(client.provider);
      } catch (error) {
        if (signal.aborted) throw error;
        // Tried again by the next listing: no connector error, no back-off.
        failed.add(instance.name);
        this.#o.logger.warn(
          { connector: connectorId, instance: instance.name, error: errorText(error) },
          "Terminating a cloud instance with no row failed",
        );
      }
    }
    const stale = entries.filter((e) => !isFresh(e, now) && !failed.has(e.name));
    await clearEntries(this.#o.redis, this.#o.keys, connectorId, stale.map((e) => e.name));
    const cleared = new Set(stale.map((e) => e.name));
    return { terminated, entries: entries.filter((e) => !cleared.has(e.name)) };
  }

  /** Terminates each row's instance, then deletes the rows whose instances are gone. */
  async #terminateRows(
    client: CloudClient,
    connector: ConnectorRow,
    rows: readonly InstanceRow[],
    signal: AbortSignal,
  ): Promise<number> {
    const gone: string[] = [];
    for (const row of rows) {
      if (row.instanceId !== null) {
        try {
          await this.#call(
            client.provider,
            "terminate",
            () => client.terminate(row.instanceId as string, signal),
          );
        } catch (error) {
          if (signal.aborted) throw error;
          this.#o.logger.warn(
            { connector: connector.id, instance: row.name, error: errorText(error) },
            "Terminating a cloud instance failed: its row stays terminating",
          );
          await this.#recordError(connector.id, errorText(error));
          continue;
        }
      }
      gone.push(row.id);
    }
    const deleted = await deleteInstanceRows(this.#o.deps, connector.id, gone);
    if (deleted > 0) {
      this.#o.logger.info(
        { connector: connector.id, count: deleted },
        "Cloud instances terminated",
      );
    }
    return deleted;
  }

  /**
   * Draining rows: each is terminated once its counters (flushed totals plus the live window)
   * stood still over QUIET_CHECKS checks in a row. A flush takes counts out of the window a few
   * seconds before it commits them to the totals, so one equal reading can hide traffic; two in
   * a row, a period apart, cannot.
   */
  async #watchDrains(
    client: CloudClient,
    connector: ConnectorRow,
    rows: readonly InstanceRow[],
    state: AutoscalerState,
    signal: AbortSignal,
  ): Promise<number> {
    const draining = rows.filter((row) => row.status === ProxyStatus.draining);
    if (draining.length === 0) return 0;
    const readings = await this.#readings(draining.map((row) => row.id));
    const quiet: string[] = [];
    for (const row of draining) {
      const reading = readings.get(row.id) ?? "0:0";
      const watch = state.drains.get(row.id);
      if (watch === undefined || watch.reading !== reading) {
        state.drains.set(row.id, { reading, quietChecks: 0 });
        continue;
      }
      watch.quietChecks++;
      if (watch.quietChecks >= QUIET_CHECKS) quiet.push(row.id);
    }
    if (quiet.length === 0) return 0;
    const moved = await moveInstanceRows(
      this.#o.deps,
      connector.id,
      quiet,
      ProxyStatus.terminating,
    );
    for (const id of moved) state.drains.delete(id);
    const ids = new Set(moved);
    return await this.#terminateRows(
      client,
      connector,
      draining.filter((row) => ids.has(row.id)).map((row) => ({
        ...row,
        status: ProxyStatus.terminating,
      })),
      signal,
    );
  }

  /** Each proxy's counters as one text: flushed totals plus its live window. */
  async #readings(ids: readonly string[]): Promise<Map<string, string>> {
    const totals = await read(this.#o.deps, (db) =>
      db.select({
        id: metricTotals.entityId,
        requests: metricTotals.requests,
        bytesSent: metricTotals.bytesSent,
        bytesReceived: metricTotals.bytesReceived,
      }).from(metricTotals).where(and(
        eq(metricTotals.entityKind, "proxy"),
        inArray(metricTotals.entityId, [...ids]),
      )));
    const pipeline = this.#o.redis.pipeline();
    for (const id of ids) pipeline.hgetall(this.#o.keys.metricWindow(ProxyWindows.name, id));
    const live = (await pipeline.exec()) ?? [];
    const byId = new Map(totals.map((row) => [row.id, row]));
    const readings = new Map<string, string>();
    ids.forEach((id, i) => {
      const [error, reply] = live[i] ?? [null, {}];
      if (error) throw error;
      const window = readCounts(TRANSFER_FIELDS, (reply ?? {}) as Record<string, string>);
      const total = byId.get(id);
      const requests = (total?.requests ?? 0) + window.requests;
      const bytes = (total?.bytesSent ?? 0) + (total?.bytesReceived ?? 0) + window.bytes_sent +
        window.bytes_received;
      readings.set(id, `${requests}:${bytes}`);
    });
    return readings;
  }

  /** Whether the connector holds for cloud errors at `now`. */
  #backingOff(connector: ConnectorRow, now: number): boolean {
    if (connector.consecutiveErrors <= 0 || connector.lastErrorAt === null) return false;
    return now < connector.lastErrorAt.getTime() + scaleBackoffMs(connector.consecutiveErrors);
  }

  /**
   * Rotation: each active instance is replaced at a random time between the connector's
   * rotation periods, counted from its creation. A proxy whose rotate:<id> entry exists is not
   * rotated again; the HOLD script makes one of the runs that reach it together the one.
   */
  async #rotate(
    client: CloudClient,
    connector: ConnectorRow,
    config: CloudScaleConfig,
    rows: readonly InstanceRow[],
    entries: readonly CreatingEntry[],
    state: AutoscalerState,
    now: number,
    signal: AbortSignal,
  ): Promise<number> {
    let created = 0;
    const minMs = config.min_rotation_period_minutes * 60_000;
    const maxMs = config.max_rotation_period_minutes * 60_000;
    const held = new Set(entries.map((e) => e.purpose));
    for (const row of rows.filter(isActive)) {
      let at = state.rotateAtMs.get(row.id);
      if (at === undefined) {
        at = row.createdAt.getTime() + minMs + Math.floor(Math.random() * (maxMs - minMs + 1));
        state.rotateAtMs.set(row.id, at);
      }
      if (now < at || held.has(rotatePurpose(row.id))) continue;
      // A failing cloud is not asked again for every due instance within its back-off.
      if (this.#backingOff(connector, now)) break;
      const replaced = await this.#replace(client, connector, config, row, now, signal);
      if (replaced === "stop") break;
      if (replaced) {
        created++;
        state.rotateAtMs.delete(row.id);
        this.#o.metrics?.rotation(client.provider);
      }
    }
    return created;
  }

  /** One rotation: entry, re-reads, the replacement, then the old row drained. */
  async #replace(
    client: CloudClient,
    connector: ConnectorRow,
    config: CloudScaleConfig,
    row: InstanceRow,
    now: number,
    signal: AbortSignal,
  ): Promise<boolean | "stop"> {
    const { redis, keys } = this.#o;
    const purpose = rotatePurpose(row.id);
    const name = instanceName(client.provider, config.instance_name, now);
    if (!await holdEntries(redis, keys, connector.id, purpose, [name], now)) return false;
    if (!await this.#stillScaling(connector.id)) {
      await clearEntries(redis, keys, connector.id, [name]);
      return "stop";
    }
    // A run that replaced the proxy drains the row before it clears its entry: a rotation
    // written after that finds the row drained and creates nothing.
    const [current] = await read(this.#o.deps, (db) => readInstanceRows(db, connector.id, row.id));
    if (current === undefined || !isActive(current)) {
      await clearEntries(redis, keys, connector.id, [name]);
      return false;
    }
    const saved = await this.#create(client, connector, config, name, signal, true);
    if (saved === "failed") return "stop";
    if (saved !== undefined) {
      this.#o.logger.info(
        { connector: connector.id, replacing: row.name, by: name },
        "Cloud instance rotating: its replacement runs; it drains once that passed its checks",
      );
    }
    return saved !== undefined;
  }

  /**
   * Rotations whose replacement has a row: once the replacement passed its first check the old
   * instance drains and the entry is cleared; a replacement that failed its checks (unhealthy,
   * or leaving) drains itself instead, and the old instance stays until its next rotation. Until
   * then the entry stands, so no other run rotates the proxy again, and the old instance serves:
   * a rotation never leaves the pool without the instance it replaces.
   */
  async #settleRotations(
    connector: ConnectorRow,
    rows: readonly InstanceRow[],
    entries: readonly CreatingEntry[],
  ): Promise<number> {
    const byName = new Map(rows.filter((row) => row.name !== null).map((row) => [row.name, row]));
    let settled = 0;
    for (const entry of entries) {
      if (!entry.purpose.startsWith(ROTATE_PREFIX)) continue;
      const replacement = byName.get(entry.name);
      // Its create is under way, or its creator died: the entry's staleness settles that.
      if (replacement === undefined) continue;
      const oldId = entry.purpose.slice(ROTATE_PREFIX.length);
      const old = rows.find((row) => row.id === oldId);
      if (replacement.status === ProxyStatus.healthy) {
        await moveInstanceRows(this.#o.deps, connector.id, [oldId], ProxyStatus.draining);
        await clearEntries(this.#o.redis, this.#o.keys, connector.id, [entry.name]);
        settled++;
        this.#o.logger.info(
          { connector: connector.id, replaced: old?.name ?? oldId, by: entry.name },
          "Cloud instance rotated: its replacement passed its checks, it drains",
        );
      } else if (replacement.status === ProxyStatus.unhealthy || !isActive(replacement)) {
        await moveInstanceRows(
          this.#o.deps,
          connector.id,
          [replacement.id],
          ProxyStatus.draining,
        );
        await clearEntries(this.#o.redis, this.#o.keys, connector.id, [entry.name]);
        settled++;
        this.#o.logger.warn(
          { connector: connector.id, replacing: old?.name ?? oldId, by: entry.name },
          "A rotation's replacement failed its checks: it drains, and the instance stays",
        );
      }
    }
    return settled;
  }

  /**
   * Re-reads the connector after an entry is written: gone, disabled or pending deletion, it
   * creates nothing. A deletion run reads the connector before the hash, so either it finds
   * the entry and waits, or this read sees the removal: no instance outlives its connector.
   */
  async #stillScaling(connectorId: string): Promise<boolean> {
    const again = await this.#readConnector(connectorId);
    if (again !== undefined && again.connector.enabled && !again.connector.pendingDeletion) {
      return true;
    }
    this.#o.logger.info(
      { connector: connectorId },
      "Creating no instance: the connector was disabled or removed",
    );
    return false;
  }

  /**
   * One create under an entry written already: the launch, the check that the entry still
   * stands, the row, then the entry cleared. Answers the new row's id, undefined when no row
   * was saved (the entry was gone: a later listing terminates the instance), or "failed" (the
   * error is recorded on the connector, which backs off). A create cut short by a stop leaves
   * its entry, as a crash does.
   */
  async #create(
    client: CloudClient,
    connector: ConnectorRow,
    config: CloudScaleConfig,
    name: string,
    signal: AbortSignal,
    /** A rotation's replacement keeps its entry until it passed its checks (settleRotations). */
    keepEntry = false,
  ): Promise<string | undefined | "failed"> {
    const { redis, keys } = this.#o;
    const login = {
      username: `ox${randomText(10)}`,
      password: randomText(24),
      port: this.#o.deps.settings.cloud.proxyPort,
    };
    let instance: CloudInstance & { address: string };
    try {
      instance = await this.#call(client.provider, "create", () =>
        client.create({
          name,
          connectorId: connector.id,
          tags: config.tags,
          startupScript: startupScript(login),
        }, signal));
    } catch (error) {
      if (signal.aborted) throw error;
      await clearEntries(redis, keys, connector.id, [name]);
      this.#o.logger.warn(
        { connector: connector.id, instance: name, error: errorText(error) },
        "Creating a cloud instance failed",
      );
      await this.#recordError(connector.id, errorText(error));
      return "failed";
    }
    if (!await entryExists(redis, keys, connector.id, name)) {
      this.#o.logger.warn(
        { connector: connector.id, instance: name },
        "Saving no row: the instance's creating entry is gone (a later listing terminates it)",
      );
      return undefined;
    }
    let id: string | undefined;
    try {
      id = await saveInstanceRow(this.#o.deps, {
        projectId: connector.projectId,
        connectorId: connector.id,
        instanceId: instance.id,
        name,
        address: instance.address,
        port: login.port,
        username: login.username,
        password: login.password,
        country: null,
      });
    } catch (error) {
      await clearEntries(redis, keys, connector.id, [name]);
      await this.#recordError(connector.id, `saving the instance's row: ${errorText(error)}`);
      return "failed";
    }
    if (!keepEntry) await clearEntries(redis, keys, connector.id, [name]);
    if (connector.consecutiveErrors > 0) {
      await recordConnectorError(this.#o.deps, connector.id, null);
    }
    this.#o.logger.info(
      { connector: connector.id, instance: name, address: instance.address },
      "Cloud instance created",
    );
    return id;
  }

  /** The scaling step, or what holds it. */
  async #scale(
    client: CloudClient,
    connector: ConnectorRow,
    config: CloudScaleConfig,
    rows: readonly InstanceRow[],
    entries: readonly CreatingEntry[],
    state: AutoscalerState,
    now: number,
    signal: AbortSignal,
  ): Promise<
    {
      created: number;
      drained: number;
      hold: ScaleHold | undefined;
      target: number;
      demandPerMinute: number;
    }
  > {
    const { redis, keys } = this.#o;
    const settings = this.#o.deps.settings;
    const active = rows.filter(isActive);
    const min = config.min_proxies;
    const max = Math.max(config.max_proxies, min);
    const windowMinutes = settings.scaleDemandWindowMinutes;
    const demand = await readDemand(redis, keys, connector.projectId, windowMinutes, now);
    state.level = nextLevel(state.level, demand.ratePerMinute / Math.max(active.length, 1));
    state.watchedSinceMs ??= now;
    const target = Math.min(max, Math.max(min, levelTarget(state.level, min, max)));
    const result = {
      created: 0,
      drained: 0,
      hold: undefined as ScaleHold | undefined,
      target,
      demandPerMinute: demand.ratePerMinute,
    };
    const hold = async (): Promise<ScaleHold | undefined> => {
      if (active.length === target) return ScaleHold.atTarget;
      if (this.#backingOff(connector, now)) return ScaleHold.backoff;
      const blocked = await redis.hget(keys.trafficBlocked, connectorSubject(connector.id));
      if (blockedNow(blocked, now) !== undefined) return ScaleHold.trafficBlocked;
      if (state.scaledAtMs !== undefined && now - state.scaledAtMs < settings.scaleCooldownMs) {
        return ScaleHold.cooldown;
      }
      if (active.some((row) => row.status === ProxyStatus.initializing)) {
        return ScaleHold.initializing;
      }
      if (entries.some((e) => e.purpose === SCALE_PURPOSE)) return ScaleHold.creating;
      if (active.length < target && active.length >= min && demand.lastMinute < 1) {
        return ScaleHold.noTraffic;
      }
      if (active.length > target && now - state.watchedSinceMs! < windowMinutes * 60_000) {
        return ScaleHold.watching;
      }
      return undefined;
    };
    result.hold = await hold();
    if (result.hold !== undefined) return result;

    if (active.length > target) {
      const count = Math.min(active.length - target, stepSize("down", min, max));
      // The ones doing worst go first, then the oldest (the nearest their rotation).
      const rank = (row: InstanceRow) =>
        row.status === ProxyStatus.unhealthy ? 0 : row.status === ProxyStatus.degraded ? 1 : 2;
      const retired = [...active].sort((a, b) =>
        rank(a) - rank(b) || a.createdAt.getTime() - b.createdAt.getTime()
      ).slice(0, count);
      result.drained = (await moveInstanceRows(
        this.#o.deps,
        connector.id,
        retired.map((row) => row.id),
        ProxyStatus.draining,
      )).length;
      state.scaledAtMs = now;
      this.#o.metrics?.step(client.provider, "down", result.drained);
      this.#o.logger.info(
        { connector: connector.id, from: active.length, target, draining: result.drained },
        "Scaling down: instances drain",
      );
      return result;
    }

    const count = Math.min(target - active.length, stepSize("up", min, max));
    const names = Array.from(
      { length: count },
      () => instanceName(client.provider, config.instance_name, now),
    );
    if (!await holdEntries(redis, keys, connector.id, SCALE_PURPOSE, names, now)) {
      result.hold = ScaleHold.creating;
      return result;
    }
    if (!await this.#stillScaling(connector.id)) {
      await clearEntries(redis, keys, connector.id, names);
      result.hold = ScaleHold.disabled;
      return result;
    }
    // Another run's whole step saves its rows before it clears its entries: a step that ended
    // between this run's read of the rows and its write shows here.
    const again = (await read(this.#o.deps, (db) => readInstanceRows(db, connector.id)))
      .filter(isActive);
    if (again.length !== active.length) {
      this.#o.logger.debug(
        { connector: connector.id },
        "Skipping scaling: the connector's instances changed since the run read them",
      );
      await clearEntries(redis, keys, connector.id, names);
      result.hold = ScaleHold.creating;
      return result;
    }
    this.#o.logger.info(
      { connector: connector.id, from: active.length, target, creating: count },
      "Scaling up: creating instances",
    );
    for (let i = 0; i < names.length; i++) {
      if (i > 0) {
        // A step longer than an entry's freshness keeps its entries fresh; one whose entries
        // went stale while another run's step began ends here.
        const rest = names.slice(i);
        if (!await holdEntries(redis, keys, connector.id, SCALE_PURPOSE, rest, this.#now())) {
          this.#o.logger.warn(
            { connector: connector.id },
            "Ending a scaling step: another run is creating instances",
          );
          await clearEntries(redis, keys, connector.id, rest);
          break;
        }
      }
      let saved: string | undefined | "failed";
      try {
        saved = await this.#create(client, connector, config, names[i], signal);
      } catch (error) {
        // A stop: the creates never started lose their entries; the one cut short keeps its.
        await clearEntries(redis, keys, connector.id, names.slice(i + 1));
        throw error;
      }
      if (saved === "failed") {
        await clearEntries(redis, keys, connector.id, names.slice(i + 1));
        break;
      }
      if (saved !== undefined) result.created++;
    }
    // A step that created nothing (its cloud refused) is no scaling action: the back-off, not
    // the cooldown, spaces the next try.
    if (result.created > 0) state.scaledAtMs = now;
    this.#o.metrics?.step(client.provider, "up", result.created);
    return result;
  }
}
