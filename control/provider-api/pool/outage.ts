/**
 * A worker's view of a Postgres outage as its pool runs meet it: which pools run on their
 * connectors' last-known settings (control/provider-api/pool/last-known.ts), for the worker's
 * snapshot and the System page, and the log lines, one of each kind per outage rather than one
 * per run (a run every few seconds for every pool would bury the log):
 *
 * - a warning when a run first finds Postgres away and goes on with last-known settings;
 * - an info when a run reads Postgres again;
 * - a warning per connector that has no last-known settings to go on with (its pool is left
 *   alone), and per connector and write (a depletion mark or clear) that could not be made.
 */
import { isPostgresUnavailable } from "../../../db/errors.ts";
import { errorText } from "../../../shared/errors.ts";
import type { Logger } from "../../core/logging.ts";

/** Connectors a worker lists at most (a snapshot is written every heartbeat). */
export const MAX_LISTED = 1000;

/** What a worker's snapshot says of it (`runtimes.worker.pool_settings`). */
export interface PoolOutageSnapshot {
  /** When this worker's pool runs first found Postgres away; null while it answers. */
  postgres_away_since: string | null;
  /**
   * Connectors whose latest run on this worker, within the window, went on with last-known
   * settings (at most MAX_LISTED, sorted).
   */
  on_last_known: string[];
}

export interface PoolOutageOptions {
  logger: Logger;
  /** A connector stays listed this long after its last run on last-known settings (a few periods). */
  windowMs: number;
  nowMs?: () => number;
}

export class PoolOutage {
  readonly #o: PoolOutageOptions;
  readonly #now: () => number;
  /** Connector id to its latest run on last-known settings (ms). */
  readonly #onLastKnown = new Map<string, number>();
  /** What was logged this outage, by key: each once. */
  readonly #told = new Set<string>();
  #awaySince: number | undefined;
  /** Runs that went on with last-known settings this outage. */
  #runs = 0;

  constructor(options: PoolOutageOptions) {
    this.#o = options;
    this.#now = options.nowMs ?? Date.now;
  }

  /** Whether this worker's runs last found Postgres away. */
  get away(): boolean {
    return this.#awaySince !== undefined;
  }

  /** A run read its connector from Postgres. */
  answered(connectorId: string): void {
    this.#onLastKnown.delete(connectorId);
    // A skipped write is told again in the next outage, even one this worker's reads never met.
    if (this.#told.size > 0) this.#told.clear();
    if (this.#awaySince === undefined) return;
    this.#o.logger.info(
      { away_ms: this.#now() - this.#awaySince, runs_on_last_known: this.#runs },
      "Postgres answers again: pool runs read their connectors from it",
    );
    this.#awaySince = undefined;
    this.#runs = 0;
  }

  /** A run's read of its connector found Postgres away. */
  failed(error: unknown): void {
    if (this.#awaySince !== undefined) return;
    this.#awaySince = this.#now();
    this.#o.logger.warn(
      { error: errorText(error) },
      "Postgres unavailable: pool runs go on with their connectors' last-known settings",
    );
  }

  /** A run went on with its connector's last-known settings. */
  ranOnLastKnown(connectorId: string): void {
    this.#runs++;
    this.#onLastKnown.set(connectorId, this.#now());
  }

  /** A run found no last-known settings it could read: its pool is left alone this cycle. */
  noLastKnown(connectorId: string, reason: "none" | "unreadable"): void {
    this.#onLastKnown.delete(connectorId);
    this.#tellOnce(
      `none:${connectorId}`,
      { connector: connectorId, reason },
      "Pool left alone while Postgres is unavailable: no last-known settings of its connector",
    );
  }

  /**
   * `write` (a Postgres write of a pool run) made safe for the outage: one that fails because
   * Postgres is away is skipped and logged, not thrown, so the run goes on; a later run that
   * finds the same state makes it (docs/provider-api.md, "When a store is away").
   */
  skipWhileAway(
    what: string,
    write: (connectorId: string) => Promise<unknown>,
  ): (connectorId: string) => Promise<void> {
    return async (connectorId) => {
      try {
        await write(connectorId);
      } catch (error) {
        if (!isPostgresUnavailable(error)) throw error;
        this.#tellOnce(
          `${what}:${connectorId}`,
          { connector: connectorId, write: what, error: errorText(error) },
          "Pool write skipped: Postgres unavailable; a later run makes it",
        );
      }
    };
  }

  snapshot(): PoolOutageSnapshot {
    const since = this.#now() - this.#o.windowMs;
    const listed: string[] = [];
    for (const [connectorId, atMs] of this.#onLastKnown) {
      // A connector this worker no longer runs (another does, or it is gone) ages out.
      if (atMs < since) this.#onLastKnown.delete(connectorId);
      else listed.push(connectorId);
    }
    return {
      postgres_away_since: this.#awaySince === undefined
        ? null
        : new Date(this.#awaySince).toISOString(),
      on_last_known: listed.sort().slice(0, MAX_LISTED),
    };
  }

  #tellOnce(key: string, fields: Record<string, unknown>, message: string): void {
    if (this.#told.has(key)) return;
    this.#told.add(key);
    this.#o.logger.warn(fields, message);
  }
}
