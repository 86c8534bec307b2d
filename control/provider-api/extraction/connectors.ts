/**
 * Which connectors of a project extraction takes from: its enabled `provider_api` connectors
 * whose `pool.reserve_for_gateway` is set (null routes every available proxy, leaving nothing
 * to extract). Read from Postgres into the process and served from there, so extraction never
 * waits on Postgres: a project's list older than CONNECTORS_FRESH_MS is served as it is while
 * one read refreshes it, and the last list read keeps serving while Postgres does not answer
 * (extraction goes on without Postgres). Only a project's first extraction in a process waits
 * for its read.
 */
import { asc, eq } from "drizzle-orm";
import { connectors } from "../../../db/schema.ts";
import { errorText } from "../../../shared/errors.ts";
import { ConnectorKind } from "../../../shared/roles.ts";
import type { Logger } from "../../core/logging.ts";
import { readProviderApiConfig } from "../config.ts";
import { read, type ServiceDeps } from "../../core/store.ts";

/** A project's connector list is read again once it is this old (at the next extraction). */
export const CONNECTORS_FRESH_MS = 3000;
const REFRESH_WARN_EVERY_MS = 30_000;

export interface ProjectConnector {
  id: string;
  /** Whether extraction takes from it now (see the module's comment). */
  eligible: boolean;
  /** `pool.reserve_for_gateway`: routed entries kept for the gateways; null when none is set. */
  reserve: number | null;
  /** `pool.reuse_after_release_seconds`: null retires what a lease gave back. */
  reuseAfterReleaseSeconds: number | null;
}

/** A project's connectors in creation order, as last read. */
export interface ProjectConnectors {
  all: ReadonlyMap<string, ProjectConnector>;
  eligible: readonly ProjectConnector[];
}

interface Entry {
  value: ProjectConnectors;
  readAtMs: number;
  refreshing?: Promise<ProjectConnectors>;
}

export interface ConnectorCacheOptions {
  deps: ServiceDeps;
  logger: Logger;
  now?: () => number;
  freshMs?: number;
}

export class ConnectorCache {
  readonly #deps: ServiceDeps;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #freshMs: number;
  readonly #projects = new Map<string, Entry>();
  #warnedAtMs = 0;

  constructor(options: ConnectorCacheOptions) {
    this.#deps = options.deps;
    this.#logger = options.logger;
    this.#now = options.now ?? Date.now;
    this.#freshMs = options.freshMs ?? CONNECTORS_FRESH_MS;
  }

  async get(projectId: string): Promise<ProjectConnectors> {
    const entry = this.#projects.get(projectId);
    if (entry === undefined) return await this.#refresh(projectId, undefined);
    if (this.#now() - entry.readAtMs >= this.#freshMs) {
      void this.#refresh(projectId, entry).catch((error) => this.#warn(projectId, error));
    }
    return entry.value;
  }

  /**
   * The list read now (a caller named a connector the list does not hold: it may be new). While
   * Postgres does not answer, the list in hand.
   */
  async reload(projectId: string): Promise<ProjectConnectors> {
    const entry = this.#projects.get(projectId);
    try {
      return await this.#refresh(projectId, entry);
    } catch (error) {
      if (entry === undefined) throw error;
      this.#warn(projectId, error);
      return entry.value;
    }
  }

  #refresh(projectId: string, entry: Entry | undefined): Promise<ProjectConnectors> {
    if (entry?.refreshing) return entry.refreshing;
    const refreshing = (async () => {
      try {
        const value = await this.#read(projectId);
        this.#projects.set(projectId, { value, readAtMs: this.#now() });
        return value;
      } finally {
        if (entry) entry.refreshing = undefined;
      }
    })();
    if (entry) entry.refreshing = refreshing;
    return refreshing;
  }

  async #read(projectId: string): Promise<ProjectConnectors> {
    const rows = await read(this.#deps, (db) =>
      db.select({
        id: connectors.id,
        kind: connectors.kind,
        enabled: connectors.enabled,
        pendingDeletion: connectors.pendingDeletion,
        config: connectors.config,
      }).from(connectors).where(eq(connectors.projectId, projectId))
        .orderBy(asc(connectors.createdAt), asc(connectors.id)));
    const all = new Map<string, ProjectConnector>();
    const eligible: ProjectConnector[] = [];
    for (const row of rows) {
      const config = row.kind === ConnectorKind.providerApi
        ? readProviderApiConfig(row.config)
        : undefined;
      const reserve = config?.pool.reserve_for_gateway ?? null;
      const connector: ProjectConnector = {
        id: row.id,
        reserve,
        reuseAfterReleaseSeconds: config?.pool.reuse_after_release_seconds ?? null,
        eligible: config !== undefined && row.enabled && !row.pendingDeletion && reserve !== null,
      };
      all.set(row.id, connector);
      if (connector.eligible) eligible.push(connector);
    }
    return { all, eligible };
  }

  #warn(projectId: string, error: unknown): void {
    const nowMs = this.#now();
    if (nowMs - this.#warnedAtMs < REFRESH_WARN_EVERY_MS) return;
    this.#warnedAtMs = nowMs;
    this.#logger.warn(
      { project: projectId, error: errorText(error) },
      "Extraction's connector list not read again; serving the last one read",
    );
  }
}
