/**
 * The attribution jobs.
 *
 * `reattribute` judges stored exits again, with the databases and settings in force: asked for
 * by a new database file or a settings change (`all`), a project's edit of how it judges
 * (`project:<id>`), the feed head found gone, and an admin's `POST /geo/reattribute`. A batch
 * of asks runs one pass per scope, and `all` covers every other scope of its batch. A pass reads
 * its rows a page at a time (by id) and writes each page in one transaction, forward only, so a
 * pass that overlaps a health check's write leaves the newer one.
 *
 * `enrich` looks up one proxy's exit through the proxy itself (the echo) and hands it to the
 * attributor: asked for a static proxy added without a country set by hand, so its country is
 * known before its first check counts.
 */
import { and, asc, eq, gt, inArray, isNotNull, or, type SQL, sql } from "drizzle-orm";
import { connectors, credentials, proxies } from "../../db/schema.ts";
import type { GeoLocation } from "../../shared/geo/contract.ts";
import { errorText } from "../../shared/errors.ts";
import { JobKind, ProxyStatus } from "../../shared/roles.ts";
import type { UpstreamScheme } from "../../shared/proxy-protocol/types.ts";
import { fillPlaceholders } from "../../shared/feed/placeholders.ts";
import type { Job, WorkBatch } from "../core/job.ts";
import type { Logger } from "../core/logging.ts";
import { isUuid, read, type ServiceDeps } from "../core/store.ts";
import type { Semaphore } from "../core/semaphore.ts";
import type { Attributor } from "../geo/attribution.ts";
import { ObservationSource } from "../geo/observation.ts";
import { probe } from "../upstream/probe.ts";

/** Rows judged and written per transaction. */
export const REATTRIBUTE_PAGE_ROWS = 1000;

export const ALL_SCOPE = "all";

/** The scopes a batch of asks stands for: `all` alone when asked, else each project once. */
export function scopesOf(keys: readonly string[]): { all: boolean; projects: string[] } {
  if (keys.includes(ALL_SCOPE)) return { all: true, projects: [] };
  const projects = new Set<string>();
  for (const key of keys) {
    const id = key.startsWith("project:") ? key.slice("project:".length) : "";
    if (isUuid(id)) projects.add(id.toLowerCase());
  }
  return { all: false, projects: [...projects].sort() };
}

export interface ReattributeJobOptions {
  deps: Pick<ServiceDeps, "database">;
  attributor: Attributor;
  logger: Logger;
  pageRows?: number;
}

export class ReattributeJob implements Job {
  readonly kind = JobKind.reattribute;
  readonly #o: ReattributeJobOptions;
  /** Rows judged and rows written, since start (the job stats show runs; these show size). */
  judged = 0;
  written = 0;

  constructor(options: ReattributeJobOptions) {
    this.#o = options;
  }

  async run(batch: WorkBatch, signal: AbortSignal): Promise<void> {
    const scopes = scopesOf(batch.keys);
    if (!scopes.all && scopes.projects.length === 0) {
      this.#o.logger.warn({ keys: batch.keys }, "Re-attribution asked for no known scope");
      return;
    }
    const startedAt = performance.now();
    let judged = 0;
    let moved = 0;
    const pageRows = this.#o.pageRows ?? REATTRIBUTE_PAGE_ROWS;
    let after: string | undefined;
    for (;;) {
      signal.throwIfAborted();
      const ids = await this.#page(scopes, after, pageRows);
      if (ids.length === 0) break;
      after = ids[ids.length - 1];
      const seenAt = new Date();
      const results = await this.#o.attributor.apply(
        ids.map((proxyId) => ({ proxyId, ip: null, seenAt })),
      );
      judged += results.length;
      for (const entry of results) {
        if (entry.written) this.written++;
        if (entry.written && entry.moved) moved++;
      }
      if (ids.length < pageRows) break;
    }
    this.judged += judged;
    this.#o.logger.info({
      scope: scopes.all ? ALL_SCOPE : scopes.projects.map((id) => `project:${id}`),
      judged,
      moved,
      ms: Math.round(performance.now() - startedAt),
    }, "Exits re-attributed");
  }

  /** The next page of rows that have something to judge: an exit seen, or a country claimed. */
  #page(
    scopes: { all: boolean; projects: string[] },
    after: string | undefined,
    limit: number,
  ): Promise<string[]> {
    const conditions: SQL[] = [
      or(
        sql`${proxies.location} ->> 'ip' is not null`,
        isNotNull(proxies.vendorCountry),
        isNotNull(proxies.country),
      )!,
    ];
    if (!scopes.all) conditions.push(inArray(proxies.projectId, scopes.projects));
    if (after !== undefined) conditions.push(gt(proxies.id, after));
    return read(
      this.#o.deps,
      async (db) =>
        (await db.select({ id: proxies.id }).from(proxies).where(and(...conditions))
          .orderBy(asc(proxies.id)).limit(limit)).map((row) => row.id),
    );
  }
}

export interface EnrichJobOptions {
  deps: Pick<ServiceDeps, "database">;
  attributor: Attributor;
  logger: Logger;
  /** The echo the lookup asks through the proxy (the health checks' echo). */
  echoUrl: string;
  timeoutMs: number;
  /** The worker's probe bound, shared with the health checks. */
  probes: Semaphore;
}

export class EnrichJob implements Job {
  readonly kind = JobKind.enrich;
  readonly #o: EnrichJobOptions;
  readonly #echoUrl: URL;

  constructor(options: EnrichJobOptions) {
    this.#o = options;
    this.#echoUrl = new URL(options.echoUrl);
  }

  async run(batch: WorkBatch, signal: AbortSignal): Promise<void> {
    const ids = batch.keys.filter(isUuid);
    if (ids.length === 0) return;
    const rows = await read(this.#o.deps, (db) =>
      db.select({
        id: proxies.id,
        scheme: proxies.scheme,
        host: proxies.host,
        port: proxies.port,
        username: proxies.username,
        password: proxies.password,
        status: proxies.status,
        connectorConfig: connectors.config,
        credentialConfig: credentials.config,
      }).from(proxies)
        .innerJoin(connectors, eq(connectors.id, proxies.connectorId))
        .leftJoin(credentials, eq(credentials.id, connectors.credentialId))
        .where(inArray(proxies.id, ids)));
    for (const row of rows) {
      if (row.status === ProxyStatus.draining || row.status === ProxyStatus.terminating) continue;
      const sources = {
        connector: row.connectorConfig,
        credential: row.credentialConfig ?? undefined,
      };
      let exit: { ip: string; place?: GeoLocation } | undefined;
      try {
        const result = await this.#o.probes.run(() =>
          probe({
            proxy: {
              scheme: row.scheme as UpstreamScheme,
              host: row.host,
              port: row.port,
              username: fillPlaceholders(row.username, sources) ?? undefined,
              password: fillPlaceholders(row.password, sources) ?? undefined,
            },
            url: this.#echoUrl,
            timeoutMs: this.#o.timeoutMs,
            signal,
          })
        );
        if (result.ok && result.exitIp !== undefined) {
          exit = { ip: result.exitIp, place: result.exitPlace };
        }
      } catch (error) {
        // The proxy's first health check sees the exit when it answers.
        this.#o.logger.debug({ proxy_id: row.id, error: errorText(error) }, "Exit lookup failed");
      }
      if (exit === undefined) continue;
      await this.#o.attributor.apply([{
        proxyId: row.id,
        ip: exit.ip,
        seenAt: new Date(),
        endpoint: exit.place ?? null,
      }], ObservationSource.enrich);
    }
  }
}
