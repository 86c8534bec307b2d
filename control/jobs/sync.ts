/**
 * sync: keeps a vendor connector's rows what its configuration and the vendor say, one connector
 * a batch (hourly at its slot second, and at once after the connector is created or edited).
 *
 * A run reads the connector, its credential and its rows; builds its provider (the registry's one
 * way, with the stored custom descriptors applied first); for a type whose exits a vendor call
 * lists (port pools with a call, list mirrors) asks the vendor, under the egress guard, and for
 * a port pool with discovery asks each slot for its exit through it; works out
 * the rows the pool should hold (control/vendors/rows.ts); then writes the edits and deletions
 * in one transaction and the additions, insert-or-skip, in one more (the proxies service).
 *
 * A vendor error records `last_error` and one more `consecutive_errors` on the connector, writes
 * no row, and fails the run, which is delivered again after the claim timeout. A connector whose
 * provider is gone is left alone (the feed leaves it out); one whose stored config its descriptor
 * refuses records that error.
 */
import { isIP } from "node:net";
import { and, eq, sql } from "drizzle-orm";
import type { Database } from "../../db/client.ts";
import { translatePostgresError } from "../../db/errors.ts";
import { connectors, credentials, proxies } from "../../db/schema.ts";
import { errorText } from "../../shared/errors.ts";
import type { DescriptorProvider } from "../../shared/vendors/provider.ts";
import { ConnectorKind, JobKind, ProxyStatus } from "../../shared/roles.ts";
import type { Logger } from "../core/logging.ts";
import { callOptions } from "../egress/call-options.ts";
import { refreshCustom } from "../vendors/catalogue.ts";
import { authToken, runCall, TokenCache } from "../egress/http-call.ts";
import { discoverExits } from "../vendors/discovery.ts";
import { desiredRows, planPool, type StoredRow } from "../vendors/rows.ts";
import { recordConnectorError } from "../services/connectors.ts";
import { writePool } from "../services/proxies.ts";
import { isUuid, type ServiceDeps } from "../core/store.ts";
import type { Job, WorkBatch } from "../core/job.ts";
import type { Attributor } from "../geo/attribution.ts";
import { ObservationSource } from "../geo/observation.ts";

export interface SyncJobOptions {
  deps: ServiceDeps;
  logger: Logger;
  /** Where the exits discovery found go once the rows exist; none: not attributed. */
  attributor?: Attributor;
}

export interface SyncOutcome {
  connectorId: string;
  edited: number;
  deleted: number;
  added: number;
}

/** A connector's rows and what they are built from, read in one short session. */
export interface PoolState {
  connector: typeof connectors.$inferSelect;
  credential: Record<string, unknown> | null;
  rows: StoredRow[];
}

export async function readPoolState(
  db: Database["db"],
  connectorId: string,
): Promise<PoolState | undefined> {
  const [connector] = await db.select().from(connectors).where(eq(connectors.id, connectorId));
  if (!connector || connector.kind !== ConnectorKind.vendor) return undefined;
  const credential = connector.credentialId === null ? null : (await db
    .select({ config: credentials.config }).from(credentials)
    .where(and(
      eq(credentials.id, connector.credentialId),
      eq(credentials.projectId, connector.projectId),
    )))[0]?.config ?? null;
  const rows = await db.select({
    id: proxies.id,
    scheme: proxies.scheme,
    host: proxies.host,
    port: proxies.port,
    username: proxies.username,
    password: proxies.password,
    country: proxies.country,
    metadata: proxies.metadata,
  }).from(proxies).where(eq(proxies.connectorId, connectorId));
  return { connector, credential, rows };
}

export class SyncJob implements Job {
  readonly kind: typeof JobKind.sync | typeof JobKind.provision = JobKind.sync;
  protected readonly o: SyncJobOptions;
  /** Vendor tokens, per credential digest, for the life of the worker. */
  protected readonly tokens = new TokenCache();

  constructor(options: SyncJobOptions) {
    this.o = options;
  }

  async run(batch: WorkBatch, signal: AbortSignal): Promise<void> {
    for (const key of batch.keys) {
      signal.throwIfAborted();
      if (!isUuid(key)) {
        // Delivering it again would not make it a connector.
        this.o.logger.warn({ key }, "Sync key skipped: not a connector id");
        continue;
      }
      await this.sync(key.toLowerCase(), signal);
    }
  }

  /** One connector's sync; undefined when there was nothing to sync. */
  async sync(
    connectorId: string,
    signal?: AbortSignal,
    extraGroups: readonly string[] = [],
  ): Promise<SyncOutcome | undefined> {
    const deps = this.o.deps;
    const built = await this.build(connectorId);
    if (built === undefined) return undefined;
    const { state, provider } = built;
    let items: Record<string, unknown>[] | undefined;
    if (provider.type.call !== undefined) {
      try {
        items = await this.listExits(provider, signal);
      } catch (error) {
        if (signal?.aborted) throw error;
        await recordConnectorError(deps, connectorId, errorText(error));
        throw error;
      }
    }
    let desired = desiredRows(provider, state.connector.countries, state.rows, items, extraGroups);
    if (provider.type.discovery !== undefined) {
      const found = await discoverExits(provider, desired, state.rows, signal);
      if (signal?.aborted) throw signal.reason;
      // An exit discovered outside the pool's countries leaves it.
      const declared = state.connector.countries;
      desired = declared.length === 0
        ? found.rows
        : found.rows.filter((row) => row.country === null || declared.includes(row.country));
      if (found.failed > 0) {
        this.o.logger.warn(
          { connector: connectorId, failed: found.failed, discovered: found.discovered },
          "Exit discovery failed for some slots: they keep the exits they had",
        );
      }
    }
    const plan = planPool(desired, state.rows);
    const written = await writePool(deps, state.connector, plan, {
      addedStatus: provider.dynamic ? ProxyStatus.healthy : ProxyStatus.initializing,
    });
    await recordConnectorError(deps, connectorId, null);
    if (provider.type.discovery !== undefined) await this.attributeExits(connectorId);
    const outcome = {
      connectorId,
      edited: written.edited,
      deleted: written.deleted,
      added: written.added.length,
    };
    if (outcome.edited + outcome.deleted + outcome.added > 0) {
      this.o.logger.info(outcome, "Vendor pool synced");
    }
    return outcome;
  }

  /**
   * Hands the exits discovery found to attribution, once the rows exist: each slot's exit and
   * the vendor's word for it are judged by the one rule. A failure is logged: the next sync, or
   * the slot's health check, sees the exit again.
   */
  protected async attributeExits(connectorId: string): Promise<void> {
    const attributor = this.o.attributor;
    if (attributor === undefined) return;
    try {
      const rows = await this.o.deps.database.db.select({
        id: proxies.id,
        exit: sql<string | null>`${proxies.metadata} ->> 'exit'`,
      }).from(proxies).where(eq(proxies.connectorId, connectorId));
      const seenAt = new Date();
      const seen = rows.filter((row) => row.exit !== null && isIP(row.exit) !== 0)
        .map((row) => ({ proxyId: row.id, ip: row.exit, seenAt }));
      await attributor.apply(seen, ObservationSource.sync);
    } catch (error) {
      this.o.logger.warn(
        { connector: connectorId, error: errorText(error) },
        "Discovered exits not attributed; the next sync sees them again",
      );
    }
  }

  /** The connector's state and provider, or undefined when it has none to sync. */
  protected async build(
    connectorId: string,
  ): Promise<{ state: PoolState; provider: DescriptorProvider } | undefined> {
    const deps = this.o.deps;
    let state: PoolState | undefined;
    try {
      state = await readPoolState(deps.database.db, connectorId);
      await refreshCustom(deps.database.db, deps.providers);
    } catch (error) {
      throw translatePostgresError(error);
    }
    if (state === undefined || !state.connector.enabled || state.connector.pendingDeletion) {
      return undefined;
    }
    const result = deps.providers.descriptorProvider(state.connector, state.credential);
    if (!result.ok) {
      if (result.reason === "invalid") {
        await recordConnectorError(deps, connectorId, `configuration: ${result.message}`);
      }
      this.o.logger.warn(
        { connector: connectorId, provider: state.connector.provider, error: result.message },
        "Vendor pool not synced: its provider cannot be built",
      );
      return undefined;
    }
    return { state, provider: result.provider };
  }

  /** The vendor's exits (list mode, or a port pool whose exits a call lists). */
  private async listExits(
    provider: DescriptorProvider,
    signal?: AbortSignal,
  ): Promise<Record<string, unknown>[]> {
    const call = provider.type.call!;
    const options = callOptions(this.o.deps.settings, signal);
    const context = { credential: provider.credential, connector: provider.config };
    const token = await authToken(provider.descriptor, context, this.tokens, options);
    const items = await runCall(call, {
      ...context,
      auth: token === undefined ? null : { token },
    }, options);
    const entries: Record<string, unknown>[] = [];
    for (const item of items as unknown[]) {
      if (item !== null && typeof item === "object" && !Array.isArray(item)) {
        entries.push(item as Record<string, unknown>);
      }
    }
    return entries;
  }
}
