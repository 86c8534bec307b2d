/**
 * pool: looks after one provider-API connector's pool (the key is its id), on a worker, under the
 * connector's fetch lead so one run at a time works on a pool (a run that finds the lead held
 * elsewhere is coalesced into that run and does nothing). A run:
 *
 * 1. reaps: entries past their expiry leave, available ones past their usable-until drain, stock
 *    is promoted to the gateway reserve (pool_maintain);
 * 2. takes the gateways' connect failures through the pool's proxies (their evidence, in Redis):
 *    each available entry they name turns suspect at once, out of the feed and of extraction;
 * 3. checks, in this order and at most MAX_CHECKS_PER_RUN: the entries due their first check (new
 *    ones, and those a released lease gave back to a connector that reuses them, once their
 *    cool-down passed), the suspects, then the available entries (routed and stock) checked
 *    longest ago, each at most once a pool period. Each goes through the proxy, as health checks
 *    do (the connector's healthcheck_url, else the install's echo). A new entry that passes is
 *    available (routed up to the reserve, else stock) and one that fails is removed; an available
 *    one that fails turns suspect, a suspect that passes goes back, and
 *    `pool.remove_after_failures` failures in a row remove it. While the echo itself is down,
 *    failed echo checks are not judged: their entries wait for the next run;
 * 4. plans a refill by capacity (control/provider-api/pool/refill-plan.ts): what will serve by
 *    the next run (new entries and those usable past one period; with `pool.max_concurrency`, the
 *    slots the gateways' transfers leave free, in proxies) below `min_size` fetches up to
 *    `target_size`, never past `max_size` live entries (the two marks make the hysteresis:
 *    between them nothing is fetched). A disabled connector is reaped but not refilled, and so
 *    is one a routing sequence does not stand on now;
 * 5. hands the need to the refiller (control/provider-api/fetch/refill.ts), whose fetches are paced,
 *    permitted and ledgered in Redis; new entries are checked in the same run;
 * 6. tells the sequence service when the connector's Empty streak made it depleted (and when a
 *    fetch found proxies again), and appends a runtime entry when the routed set changed, so the
 *    feed builder publishes the connector's section.
 *
 * A connector that is gone, or no longer a provider-API one, has its pool purged. While Postgres
 * does not answer, a run goes on with the connector's last-known settings, which the runs that
 * read Postgres keep in Redis (control/provider-api/pool/last-known.ts): it never purges then,
 * and without last-known settings it leaves the pool alone.
 */
import { and, eq } from "drizzle-orm";
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import { connectors, credentials, projectSequences } from "../../db/schema.ts";
import { errorText } from "../../shared/errors.ts";
import { type RedisKeys, STREAM_CAPS } from "../../shared/redis-keys.ts";
import { ConnectorKind, JobKind } from "../../shared/roles.ts";
import type { Logger } from "../core/logging.ts";
import type { Semaphore } from "../core/semaphore.ts";
import type { Job, WorkBatch } from "../core/job.ts";
import { EchoMonitor } from "./health.ts";
import { type ProviderApiConfig, readProviderApiConfig } from "../provider-api/config.ts";
import type {
  FetchLeader,
  ProviderApiConnector,
  Refiller,
} from "../provider-api/fetch-contract.ts";
import { RuntimeEntryKind } from "../services/quarantines.ts";
import { isUuid } from "../core/store.ts";
import { probe } from "../upstream/index.ts";
import type { UpstreamScheme } from "../../shared/proxy-protocol/types.ts";
import { type EntryRecord, EntryState, type PoolCounts } from "../provider-api/pool/contract.ts";
import type { CheckResult, RedisPoolStore } from "../provider-api/pool/store.ts";
import { isPostgresUnavailable } from "../../db/errors.ts";
import { type ConnectorSettings, LastKnownSettings } from "../provider-api/pool/last-known.ts";
import { PoolOutage } from "../provider-api/pool/outage.ts";
import { refillPlan } from "../provider-api/pool/refill-plan.ts";

/** Checks one run makes at most (the rest wait for the next run, a period later at most). */
export const MAX_CHECKS_PER_RUN = 2000;

/** What a pool's depletion means to routing (control/services/sequences.ts). */
export interface Depletion {
  markDepleted(connectorId: string): Promise<void>;
  clearDepleted(connectorId: string): Promise<void>;
}

/** Told the pool's counts after each run (the pool-size gauges). */
export type PoolCountsSink = (connectorId: string, counts: PoolCounts) => void;

export interface PoolJobOptions {
  database: Pick<Database, "db">;
  redis: Redis;
  keys: RedisKeys;
  logger: Logger;
  store: RedisPoolStore;
  leader: FetchLeader;
  refiller: Refiller;
  depletion: Depletion;
  /** The probes in flight at once, shared with the process's health checks. */
  probes: Semaphore;
  echoUrl: string;
  /** One check's deadline. */
  timeoutMs: number;
  /** An available entry last checked longer ago than this is checked again (half the period). */
  recheckAfterMs: number;
  /** An available entry usable for less than this (one period) no longer counts for a refill. */
  usableMarginMs: number;
  /** Gateways' reports of what they hold count this long (a few of their seconds). */
  heldFreshMs: number;
  onCounts?: PoolCountsSink;
  /** Told when a gone connector's pool was purged (its per-connector counts can go). */
  onPurged?: (connectorId: string) => void;
  nowMs?: () => number;
  /** Where runs keep their connectors' last-known settings; made over `redis` unless given. */
  lastKnown?: LastKnownSettings;
  /** The worker's view of a Postgres outage (its snapshot reads it); one of its own unless given. */
  outage?: PoolOutage;
}

interface LoadedConnector {
  id: string;
  projectId: string;
  kind: string;
  enabled: boolean;
  pendingDeletion: boolean;
  depleted: boolean;
  healthcheckUrl: string | null;
  config: ProviderApiConfig | undefined;
  credential: Record<string, unknown>;
  /** Whether routing stands on it now: in no sequence, or its sequence's current one. */
  current: boolean;
}

export interface PoolRunResult {
  /**
   * The run did nothing: no such connector (purged), another holder had the lead, or Postgres
   * did not answer and the connector has no last-known settings.
   */
  skipped?: "gone" | "led_elsewhere" | "invalid_config" | "no_last_known";
  /** Check results applied (checks not judged during an echo outage are not counted). */
  checked: number;
  fetched: number;
  counts?: PoolCounts;
}

export class PoolJob implements Job {
  readonly kind = JobKind.pool;
  readonly #o: PoolJobOptions;
  readonly #echoUrl: URL;
  readonly #echo: EchoMonitor;
  readonly #now: () => number;
  readonly #warned = new Set<string>();
  readonly #lastKnown: LastKnownSettings;
  readonly #outage: PoolOutage;

  constructor(options: PoolJobOptions) {
    this.#o = options;
    this.#now = options.nowMs ?? Date.now;
    this.#echoUrl = new URL(options.echoUrl);
    this.#echo = new EchoMonitor(this.#echoUrl, options.timeoutMs, options.logger, this.#now);
    this.#lastKnown = options.lastKnown ?? new LastKnownSettings({
      redis: options.redis,
      keys: options.keys,
      sealer: options.store.sealer,
    });
    // Listed in the snapshot for three periods (a re-check is due after half of one).
    this.#outage = options.outage ??
      new PoolOutage({ logger: options.logger, windowMs: 6 * options.recheckAfterMs });
  }

  async run(batch: WorkBatch, signal: AbortSignal): Promise<void> {
    for (const key of batch.keys) {
      signal.throwIfAborted();
      if (!isUuid(key)) {
        this.#o.logger.warn({ key }, "Pool key skipped: not a connector id");
        continue;
      }
      await this.runOne(key.toLowerCase(), signal);
    }
  }

  /** One run over one connector's pool. */
  async runOne(connectorId: string, signal: AbortSignal): Promise<PoolRunResult> {
    const loaded = await this.#load(connectorId);
    // Postgres away and nothing last known: nothing to go on, and nothing is purged for it.
    if (loaded === "unavailable") return { skipped: "no_last_known", checked: 0, fetched: 0 };
    const connector = loaded;
    const store = this.#o.store;
    if (connector === undefined || connector.kind !== ConnectorKind.providerApi) {
      const purged = await store.purgeConnector(connectorId);
      if (purged > 0) {
        this.#o.logger.info({ connector: connectorId, entries: purged }, "Pool purged");
        await this.#announce(connectorId);
      }
      this.#o.onPurged?.(connectorId);
      return { skipped: "gone", checked: 0, fetched: 0 };
    }
    const config = connector.config;
    if (config === undefined) {
      this.#warnOnce(
        `config:${connectorId}`,
        { connector: connectorId },
        "Pool left alone: the connector's stored config no longer reads as a provider_api config",
      );
      return { skipped: "invalid_config", checked: 0, fetched: 0 };
    }
    const lead = await this.#o.leader.lead(connectorId, signal);
    if (lead === undefined) return { skipped: "led_elsewhere", checked: 0, fetched: 0 };
    const working = AbortSignal.any([signal, lead.signal]);
    const ref = { id: connectorId, projectId: connector.projectId };
    const reserve = config.pool.reserve_for_gateway;
    let routedChanged = false;
    let checked = 0;
    let fetched = 0;
    const removeAfterFailures = config.pool.remove_after_failures;
    try {
      const first = await this.#maintain(ref, reserve);
      routedChanged ||= first.changed;

      const evidence = await store.takeEvidence(ref, { removeAfterFailures });
      if (evidence.suspected > 0) {
        routedChanged ||= evidence.suspectedRouted > 0;
        this.#o.logger.info(
          { connector: connectorId, suspected: evidence.suspected },
          "Pool proxies suspect: gateways failed to reach them",
        );
      }

      const checks = await this.#checkDue(connector, working, "all");
      checked += checks.checked;
      routedChanged ||= checks.routedChanged;

      let counts = (await this.#maintain(ref, reserve)).counts;
      const pool = config.pool;
      const nowMs = this.#now();
      const [usable, held] = await Promise.all([
        store.usableCount(connectorId, nowMs + this.#o.usableMarginMs),
        pool.max_concurrency === null
          ? 0
          : store.heldByGateways(connectorId, nowMs - this.#o.heldFreshMs),
      ]);
      const { need } = refillPlan({ counts, usable, held, pool });
      if (connector.enabled && !connector.pendingDeletion && connector.current && need > 0) {
        const refill = await this.#o.refiller.refill(
          this.#fetchView(connector, config),
          need,
          lead,
          working,
        );
        fetched = refill.added;
        if (refill.depleted) await this.#o.depletion.markDepleted(connectorId);
        else if (
          connector.depleted && refill.byKind.success + refill.byKind.duplicate_only > 0
        ) {
          await this.#o.depletion.clearDepleted(connectorId);
        }
        if (refill.added > 0) {
          const again = await this.#checkDue(connector, working, "new");
          checked += again.checked;
          routedChanged ||= again.routedChanged;
        }
      }
      const last = await this.#maintain(ref, reserve);
      routedChanged ||= last.changed;
      counts = last.counts;
      this.#o.onCounts?.(connectorId, counts);
      return { checked, fetched, counts };
    } finally {
      if (routedChanged) await this.#announce(connectorId);
      await lead.release();
    }
  }

  async #maintain(
    ref: { id: string; projectId: string },
    reserve: number | null,
  ): Promise<{ counts: PoolCounts; changed: boolean }> {
    let changed = false;
    for (;;) {
      const pass = await this.#o.store.maintain(ref, { nowMs: this.#now(), reserve });
      // Any removal, drain or promotion may touch the routed set: the feed reads it again.
      changed ||= pass.expired + pass.drained + pass.promoted > 0;
      if (!pass.more) return { counts: pass.counts, changed };
    }
  }

  /**
   * Checks what is due (new entries; with "all", the suspects and the available entries checked
   * longest ago too), at most MAX_CHECKS_PER_RUN; answers how many and whether the routed set
   * may have changed.
   */
  async #checkDue(
    connector: LoadedConnector,
    signal: AbortSignal,
    which: "new" | "all",
  ): Promise<{ checked: number; routedChanged: boolean }> {
    const store = this.#o.store;
    const nowMs = this.#now();
    const fresh = await store.entries(
      connector.id,
      await store.checkingIds(connector.id, MAX_CHECKS_PER_RUN, nowMs),
    );
    const entries = [...fresh];
    if (which === "all") {
      entries.push(...await store.suspects(connector.id, MAX_CHECKS_PER_RUN - entries.length));
      entries.push(
        ...await store.dueRechecks(
          connector.id,
          nowMs - this.#o.recheckAfterMs,
          MAX_CHECKS_PER_RUN - entries.length,
        ),
      );
    }
    if (entries.length === 0) return { checked: 0, routedChanged: false };
    const results = await this.#checkAll(connector, entries, signal);
    const pool = connector.config?.pool;
    const applied = await store.markChecked(
      { id: connector.id, projectId: connector.projectId },
      results,
      {
        nowMs: this.#now(),
        reserve: pool?.reserve_for_gateway ?? null,
        removeAfterFailures: pool?.remove_after_failures,
      },
    );
    if (applied.suspected > 0) {
      this.#o.logger.info(
        { connector: connector.id, suspected: applied.suspected },
        "Pool proxies suspect: a re-check failed",
      );
    }
    return {
      checked: results.length,
      // A removal or a suspect may have been routed: the feed reads the routed set again.
      routedChanged: applied.routed + applied.suspected + applied.removed +
          applied.restoredRouted + applied.drained > 0,
    };
  }

  /**
   * Probes every entry; answers the results to apply. Failed echo checks are judged only when
   * the echo answered after them: during an echo outage their entries are left waiting.
   */
  async #checkAll(
    connector: LoadedConnector,
    entries: readonly EntryRecord[],
    signal: AbortSignal,
  ): Promise<CheckResult[]> {
    const usesEcho = connector.healthcheckUrl === null;
    const url = usesEcho ? this.#echoUrl : new URL(connector.healthcheckUrl as string);
    // New entries and suspects take probe slots ahead of re-checks (health checks' too).
    const outcomes = await Promise.all(entries.map((entry) =>
      this.#o.probes.run(async () => {
        const askedAt = this.#now();
        if (signal.aborted) return undefined;
        let ok = false;
        try {
          const { username, password } = this.#o.store.credentials(entry);
          const result = await probe({
            proxy: {
              scheme: entry.scheme as UpstreamScheme,
              host: entry.host,
              port: entry.port,
              username: username ?? undefined,
              password: password ?? undefined,
            },
            url,
            timeoutMs: this.#o.timeoutMs,
            signal,
          });
          ok = result.ok;
          if (ok && usesEcho) this.#echo.noteAnswer(askedAt);
        } catch {
          ok = false;
        }
        return { id: entry.id, passed: ok, endedAt: this.#now() };
      }, entry.state !== EntryState.available)
    ));
    const done = outcomes.filter((o): o is CheckResult & { endedAt: number } => o !== undefined);
    const failed = done.filter((o) => !o.passed);
    if (!usesEcho || failed.length === 0 || signal.aborted) return done;
    const up = await this.#echo.isUp(Math.max(...failed.map((o) => o.endedAt)));
    return up ? done : done.filter((o) => o.passed);
  }

  #fetchView(connector: LoadedConnector, config: ProviderApiConfig): ProviderApiConnector {
    return {
      id: connector.id,
      projectId: connector.projectId,
      config,
      credential: connector.credential,
    };
  }

  /**
   * The connector as a run needs it: read from Postgres (and kept in Redis as its last-known
   * settings when they changed), or, while Postgres does not answer, its last-known settings.
   * Undefined when Postgres has no such connector: only a read Postgres answered finds one gone.
   * "unavailable" when Postgres did not answer and no last-known settings could be read.
   */
  async #load(connectorId: string): Promise<LoadedConnector | undefined | "unavailable"> {
    let settings: ConnectorSettings | undefined;
    try {
      settings = await this.#read(connectorId);
    } catch (error) {
      // Anything but an outage is a fault of its own: the run fails as before.
      if (!isPostgresUnavailable(error)) throw error;
      this.#outage.failed(error);
      const known = await this.#lastKnown.read(connectorId);
      if (!known.found || known.settings.kind !== ConnectorKind.providerApi) {
        this.#outage.noLastKnown(connectorId, known.found ? "unreadable" : known.reason);
        return "unavailable";
      }
      this.#outage.ranOnLastKnown(connectorId);
      return loadedConnector(known.settings);
    }
    this.#outage.answered(connectorId);
    if (settings === undefined) return undefined;
    // Another kind's pool is purged at once: only a provider-API connector's pool runs on.
    if (settings.kind === ConnectorKind.providerApi) {
      await this.#lastKnown.save(settings, this.#now());
    }
    return loadedConnector(settings);
  }

  /** The connector's settings as Postgres holds them; undefined when it has no such connector. */
  async #read(connectorId: string): Promise<ConnectorSettings | undefined> {
    const db = this.#o.database.db;
    const [row] = await db.select({
      id: connectors.id,
      projectId: connectors.projectId,
      kind: connectors.kind,
      enabled: connectors.enabled,
      pendingDeletion: connectors.pendingDeletion,
      depletedAt: connectors.depletedAt,
      healthcheckUrl: connectors.healthcheckUrl,
      config: connectors.config,
      credential: credentials.config,
    }).from(connectors)
      .leftJoin(credentials, eq(credentials.id, connectors.credentialId))
      .where(eq(connectors.id, connectorId));
    if (row === undefined) return undefined;
    const [sequence] = await db.select({
      connectorIds: projectSequences.connectorIds,
      currentIndex: projectSequences.currentIndex,
      exhausted: projectSequences.exhausted,
    }).from(projectSequences).where(and(eq(projectSequences.projectId, row.projectId)));
    const inSequence = sequence !== undefined && sequence.connectorIds.includes(connectorId);
    const current = !inSequence ||
      (!sequence.exhausted && sequence.connectorIds[sequence.currentIndex] === connectorId);
    return {
      id: row.id,
      projectId: row.projectId,
      kind: row.kind,
      enabled: row.enabled,
      pendingDeletion: row.pendingDeletion,
      depleted: row.depletedAt !== null,
      healthcheckUrl: row.healthcheckUrl,
      config: row.config,
      credential: row.credential ?? {},
      current,
    };
  }

  /** A runtime entry: the feed builder publishes the connector's section again. */
  async #announce(connectorId: string): Promise<void> {
    try {
      await this.#o.redis.xadd(
        this.#o.keys.runtimeStream,
        "MAXLEN",
        "~",
        STREAM_CAPS.runtime,
        "*",
        "kind",
        RuntimeEntryKind.pool,
        "ref",
        connectorId,
      );
    } catch (error) {
      // The builder's next publish (any entry, a reconcile) reads the pool anyway.
      this.#o.logger.warn(
        { connector: connectorId, error: errorText(error) },
        "Pool change not announced; the feed picks it up at its next publish",
      );
    }
  }

  #warnOnce(key: string, fields: Record<string, unknown>, message: string): void {
    if (this.#warned.has(key)) return;
    this.#warned.add(key);
    this.#o.logger.warn(fields, message);
  }
}

/** A run's view of its connector's settings: the config read with the provider_api schema. */
function loadedConnector(settings: ConnectorSettings): LoadedConnector {
  return {
    id: settings.id,
    projectId: settings.projectId,
    kind: settings.kind,
    enabled: settings.enabled,
    pendingDeletion: settings.pendingDeletion,
    depleted: settings.depleted,
    healthcheckUrl: settings.healthcheckUrl,
    config: settings.kind === ConnectorKind.providerApi
      ? readProviderApiConfig(settings.config)
      : undefined,
    credential: settings.credential,
    current: settings.current,
  };
}
