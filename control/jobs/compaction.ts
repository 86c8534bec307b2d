/**
 * compaction (hourly, key `all`): per project, the tiers in order, one transaction a tier over
 * the six history tables (minutes into hours after a day, hours into six hours after a week,
 * six hours into days after 30 days), so a compaction that has not run for weeks catches up in
 * one pass. Each table, tier and project is one statement:
 *
 *   WITH moved AS (DELETE … RETURNING …), added AS (INSERT … SELECT … FROM moved GROUP BY
 *   <series>, <bucket>) SELECT count(*) FROM moved
 *
 * Under READ COMMITTED a second pass's DELETE waits for the first's row locks, then finds the
 * rows gone, so each source row is folded exactly once however many passes run. Counts add up;
 * latency is a sum, so the average stays weighted by requests. Two passes whose scans lock in
 * different orders can deadlock: Postgres aborts one, whose entry is delivered again.
 *
 * Then the retentions: each project's rows past its metrics_retention_days (0 keeps them; its
 * per-site judging counts by their UTC day too), the history of its tunnel devices that are gone
 * (that table has no foreign key to take it with them), the running totals of entities that are
 * gone, metric_flushes rows older than a day, and the raw observations and exit IPs past the
 * install's geo retentions (control/geo/observation-retention.ts).
 * Nothing is recorded about a run: each run checks what is due and does it.
 */
import { type Database, reservedTransaction } from "../../db/client.ts";
import { translatePostgresError } from "../../db/errors.ts";
import { JobKind } from "../../shared/roles.ts";
import type { Logger } from "../core/logging.ts";
import {
  bucketSql,
  COMPACTION_TIERS,
  DAY_MS,
  HISTORY_TABLES,
  type HistoryTable,
  type Tier,
  tierCutoffMs,
} from "../metrics/tiers.ts";
import type { Job, WorkBatch } from "../core/job.ts";
import { expireObservations } from "../geo/observation-retention.ts";
import { pruneAuditLog } from "../audit/log.ts";

export interface CompactionOptions {
  database: Database;
  logger: Logger;
  /** Days the audit log keeps its entries (OCTOPROX_AUDIT_RETENTION_DAYS; 0: forever). */
  auditRetentionDays?: number;
  now?: () => number;
}

/** How long a committed flush's record is kept: far longer than any redelivery takes. */
export const FLUSH_RECORD_MS = DAY_MS;

export interface CompactionOutcome {
  /** Source rows folded, per tier (by the width they had). */
  folded: Record<number, number>;
  /** Rows past their project's retention, and history rows of tunnel devices that are gone. */
  expired: number;
  totalsRemoved: number;
  flushRecordsRemoved: number;
  /** Raw observations past observation_retention_days. */
  observationsExpired: number;
  /** Exit IPs last seen before exit_ip_retention_days, when it is set. */
  exitIpsExpired: number;
  /** Audit entries past OCTOPROX_AUDIT_RETENTION_DAYS. */
  auditExpired: number;
}

/** The statement folding one table's rows of one project and tier ($1 project, $2 cutoff). */
function foldStatement(table: HistoryTable, tier: Tier): string {
  const series = table.series.join(", ");
  const counts = table.counts;
  const latest = table.latest.map((column) =>
    `(array_agg(${column} order by bucket_start desc))[1]`
  );
  const columns = [...table.series, ...table.latest, "bucket_start", "bucket_seconds", ...counts];
  const bucket = bucketSql("bucket_start", tier.toSeconds);
  const values = [
    ...table.series,
    ...latest,
    bucket,
    String(tier.toSeconds),
    ...counts.map((column) => `sum(${column})`),
  ];
  const returned = [...table.series, ...table.latest, "bucket_start", ...counts].join(", ");
  return `with moved as (
      delete from ${table.name}
      where project_id = $1 and bucket_seconds = ${tier.fromSeconds} and bucket_start < $2
      returning ${returned}
    ), added as (
      insert into ${table.name} (${columns.join(", ")})
      select ${values.join(", ")} from moved group by ${series}, ${bucket}
      returning 1
    )
    select count(*)::int as moved from moved`;
}

export class CompactionJob implements Job {
  readonly kind = JobKind.compaction;
  readonly #o: CompactionOptions;

  constructor(options: CompactionOptions) {
    this.#o = options;
  }

  async run(_batch: WorkBatch, signal: AbortSignal): Promise<void> {
    const outcome = await this.compact(signal);
    const folded = Object.values(outcome.folded).reduce((a, b) => a + b, 0);
    if (folded + outcome.expired + outcome.totalsRemoved + outcome.flushRecordsRemoved > 0) {
      this.#o.logger.info({ ...outcome }, "Metrics history compacted");
    } else if (outcome.observationsExpired + outcome.exitIpsExpired + outcome.auditExpired > 0) {
      this.#o.logger.info(
        { ...outcome },
        "Observations or audit entries past their retention removed",
      );
    }
  }

  async compact(signal?: AbortSignal): Promise<CompactionOutcome> {
    try {
      return await this.#compact(signal);
    } catch (error) {
      throw translatePostgresError(error);
    }
  }

  async #compact(signal?: AbortSignal): Promise<CompactionOutcome> {
    const sql = this.#o.database.sql;
    const nowMs = (this.#o.now ?? Date.now)();
    const outcome: CompactionOutcome = {
      folded: Object.fromEntries(COMPACTION_TIERS.map((t) => [t.fromSeconds, 0])),
      expired: 0,
      totalsRemoved: 0,
      flushRecordsRemoved: 0,
      observationsExpired: 0,
      exitIpsExpired: 0,
      auditExpired: 0,
    };
    const projects = await sql<{ id: string; retention: number }[]>`
      select id::text, metrics_retention_days as retention from projects order by id`;
    for (const project of projects) {
      for (const tier of COMPACTION_TIERS) {
        signal?.throwIfAborted();
        // Whole target buckets only, so a later pass never starts a second row for one.
        const cutoff = new Date(tierCutoffMs(tier, nowMs));
        const moved = await reservedTransaction(sql, async (tx) => {
          let count = 0;
          for (const table of HISTORY_TABLES) {
            const rows = await tx.unsafe(foldStatement(table, tier), [
              project.id,
              cutoff.toISOString(),
            ]);
            count += Number(rows[0]?.moved ?? 0);
          }
          return count;
        });
        outcome.folded[tier.fromSeconds] += Number(moved);
      }
      if (project.retention > 0) {
        const before = new Date(nowMs - project.retention * DAY_MS).toISOString();
        for (const table of HISTORY_TABLES) {
          const result = await sql.unsafe(
            `delete from ${table.name} where project_id = $1 and bucket_start < $2`,
            [project.id, before],
          );
          outcome.expired += result.count;
        }
        const day = new Date(nowMs - project.retention * DAY_MS).toISOString().slice(0, 10);
        const sites = await sql`
          delete from domain_metrics where project_id = ${project.id} and day < ${day}::date`;
        outcome.expired += sites.count;
      }
      // A proxy's history goes with it; a device's, keyed without a foreign key, goes here.
      const devices = await sql`
        delete from tunnel_device_metrics m where m.project_id = ${project.id}
          and not exists (select 1 from tunnel_devices d where d.id = m.device_id)`;
      outcome.expired += devices.count;
    }
    signal?.throwIfAborted();
    // Totals keep counting past the history's retention, but not past their entity.
    const gone = await sql`
      delete from metric_totals t
      where (t.entity_kind = 'proxy' and not exists (select 1 from proxies p where p.id = t.entity_id))
        or (t.entity_kind = 'project'
          and not exists (select 1 from projects p where p.id = t.entity_id))
        or (t.entity_kind = 'tunnel_device'
          and not exists (select 1 from tunnel_devices d where d.id = t.entity_id))`;
    outcome.totalsRemoved = gone.count;
    const flushes = await sql`delete from metric_flushes where committed_at < ${
      new Date(nowMs - FLUSH_RECORD_MS).toISOString()
    }::timestamptz`;
    outcome.flushRecordsRemoved = flushes.count;
    const geo = await expireObservations(this.#o.database, nowMs, signal);
    outcome.observationsExpired = geo.observationsExpired;
    outcome.exitIpsExpired = geo.exitIpsExpired;
    const auditDays = this.#o.auditRetentionDays ?? 0;
    if (auditDays > 0) outcome.auditExpired = await pruneAuditLog(this.#o.database, auditDays);
    return outcome;
  }
}
