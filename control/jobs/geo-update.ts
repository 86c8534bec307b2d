/**
 * geo_update (key `all`, every OCTOPROX_GEO_UPDATER_INTERVAL): downloads the URL databases due
 * by their own interval, one after another, each swapped in whole only when its new file opens
 * (control/geo/refresh.ts: the old one is kept and `last_error` says why otherwise), then
 * deletes the files no database names any more. A new file of an enabled database asks for
 * `reattribute all` (refresh.ts announces it).
 *
 * Idempotent: a tick delivered twice finds nothing due the second time, and a file stored twice
 * is one row.
 */
import { JobKind } from "../../shared/roles.ts";
import type { ServiceDeps } from "../core/store.ts";
import type { Job, WorkBatch } from "../core/job.ts";
import type { Logger } from "../core/logging.ts";
import { deleteUnreferencedFiles, dueDatabases, refreshDatabase } from "../geo/refresh.ts";

export interface GeoUpdateOptions {
  deps: ServiceDeps;
  logger: Logger;
  now?: () => Date;
}

export interface GeoUpdateOutcome {
  updated: string[];
  unchanged: string[];
  failed: string[];
  filesDeleted: number;
}

export class GeoUpdateJob implements Job {
  readonly kind = JobKind.geoUpdate;
  readonly #o: GeoUpdateOptions;

  constructor(options: GeoUpdateOptions) {
    this.#o = options;
  }

  async run(_batch: WorkBatch, signal: AbortSignal): Promise<void> {
    await this.update(signal);
  }

  /** One tick's work: the due downloads, then the files left behind. */
  async update(signal?: AbortSignal): Promise<GeoUpdateOutcome> {
    const { deps, logger } = this.#o;
    const now = this.#o.now?.() ?? new Date();
    const outcome: GeoUpdateOutcome = { updated: [], unchanged: [], failed: [], filesDeleted: 0 };
    for (const row of await dueDatabases(deps, now)) {
      if (signal?.aborted) break;
      const refreshed = await refreshDatabase(deps, row, { at: now, signal });
      outcome[refreshed.outcome].push(row.name);
      if (refreshed.outcome === "failed") {
        // The reason names the host, the path and the format, never the URL's query or auth.
        logger.warn(
          { database: row.name, error: refreshed.row.lastError },
          "IP database download refused; the file in force is kept",
        );
      } else if (refreshed.outcome === "updated") {
        logger.info(
          {
            database: row.name,
            version: refreshed.row.version,
            size_bytes: refreshed.row.sizeBytes,
            entries: refreshed.row.entries,
          },
          "IP database updated",
        );
      }
    }
    outcome.filesDeleted = await deleteUnreferencedFiles(deps);
    if (outcome.filesDeleted > 0) {
      logger.info({ files: outcome.filesDeleted }, "IP database files no database names deleted");
    }
    return outcome;
  }
}
