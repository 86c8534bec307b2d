/**
 * Backups of a whole install: every definition row (users with their password hashes, API
 * tokens' hashes, projects with their passwords and connector sequences, distribution keys'
 * hashes, credentials, connectors, proxies) and, when asked, the metrics history, sealed with a
 * passphrase (backup-envelope.ts).
 *
 * The contents, before they are compressed (gzip) and sealed, are JSON lines: per table in
 * dependency order, one line `{"table": name, "rows": n}` then its n rows, each the row as
 * Postgres' to_jsonb writes it (every column, timestamps to the microsecond). An export reads
 * them in one repeatable-read snapshot, so the file is one consistent moment; an import puts
 * them back with jsonb_populate_recordset, so each value is read by its own column's type.
 *
 * An import replaces everything in one transaction: it empties every definition and history
 * table and the running totals, inserts the backup's rows (ids and timestamps kept) in batches,
 * moves the history ids' sequences past the restored ids, and recomputes the totals from the
 * restored history. Then one `all` change entry: every follower reads everything again.
 */
import { once } from "node:events";
import { promisify } from "node:util";
import { createGzip, gunzip } from "node:zlib";
import type postgres from "postgres";
import { reservedTransaction } from "../../db/client.ts";
import { schemaVersion } from "../../db/migrate.ts";
import { translatePostgresError } from "../../db/errors.ts";
import { BackupRefusedError } from "../../shared/errors.ts";
import { ChangeKind } from "../../shared/roles.ts";
import { recomputeTotals } from "../metrics/history-writer.ts";
import { HISTORY_TABLES } from "../metrics/tiers.ts";
import { type BackupEnvelope, openBackup, sealBackup } from "./envelope.ts";
import { announce, type ServiceDeps } from "../core/store.ts";
import { recordChange } from "../core/outbox.ts";
import { asActor, currentActor } from "../../db/actor.ts";
import { recordAuditNote } from "../audit/note.ts";
import {
  clearProjectState,
  droppedFrom,
  EMPTY_FOOTPRINT,
  readInstallFootprint,
  type StateDeps,
} from "../services/project-state.ts";

/**
 * The definition tables, parents before the rows that refer to them, and the configuration
 * file's revision fence, which belongs with the definitions it was applied to.
 */
export const DEFINITION_TABLES = [
  "users",
  "user_invites",
  "api_tokens",
  "projects",
  "distribution_keys",
  "credentials",
  "connectors",
  "proxies",
  "project_sequences",
  "config_revision",
  "provider_descriptors",
  "provider_audit_log",
  // The attribution settings and the admin's IP databases, with their files: an uploaded file
  // exists nowhere else.
  "geo_settings",
  "geo_files",
  "geo_databases",
  // Alerting's channels and rules, after the projects and connectors a rule names. A channel's
  // signing secret is sealed under the internal secret: restored into an install with another,
  // it no longer opens (its deliveries say so) and the channel is made again.
  "alert_channels",
  "alert_rules",
  "alert_rule_channels",
  // The install's WireGuard and OpenVPN identities and the projects' devices, their keys sealed
  // under the internal secret as they are at rest: restored into an install with another, they
  // no longer open (the feed leaves them out) until rotated.
  "wireguard_settings",
  "openvpn_settings",
  "tunnel_devices",
  // Who changed what: restored with the definitions it tells of (the import adds its own entry).
  "audit_log",
] as const;

/** What a table's rows are read in order of: its key (`id` unless named here). */
const ORDER_COLUMNS: Readonly<Record<string, string>> = {
  project_sequences: "project_id",
  alert_rule_channels: "rule_id, channel_id",
  geo_files: "checksum",
  connector_exit_ips: "connector_id, ip",
  domain_metrics: "project_id, day, site, connector, count",
};

export function backupOrderColumn(table: string): string {
  return ORDER_COLUMNS[table] ?? "id";
}

/**
 * The history tables a backup with history holds (metric_totals is recomputed instead), what
 * was seen of exits (the raw observations and each connector's exits), and the per-site judging
 * counts.
 */
export const BACKUP_HISTORY_TABLES: readonly string[] = [
  ...HISTORY_TABLES.map((t) => t.name),
  "ip_observations",
  "connector_exit_ips",
  "domain_metrics",
];

/**
 * Everything an import empties: the tables a backup holds, parents first (TRUNCATE locks them
 * in this order, the order every writer takes them in), and the totals it recomputes.
 * metric_flushes (which flushes this install's Redis already committed), system_metrics
 * (this install's own readings of its stores) and change_outbox (this install's announcements
 * not made yet) are not the backup's and stay.
 */
const REPLACED_TABLES = [
  ...DEFINITION_TABLES,
  ...BACKUP_HISTORY_TABLES,
  "metric_totals",
  // Alerting's events and deliveries are this install's own record of what it told whom, never
  // the backup's: a restore that replayed pending ones would notify of another time. They go
  // with the rules and channels they refer to.
  "alert_events",
  "alert_deliveries",
  "alert_delivery_tries",
];

/** Bodies up to this: the import route's bound, and what an export must stay within. */
export const MAX_BACKUP_BYTES = 512_000_000;

/** Rows read a page at a time on export, and inserted a batch at a time on import. */
const PAGE_ROWS = 2_000;
const BATCH_ROWS = 5_000;
const BATCH_BYTES = 8 * 1024 * 1024;

export function backupTables(includeHistory: boolean): string[] {
  return [...DEFINITION_TABLES, ...(includeHistory ? BACKUP_HISTORY_TABLES : [])];
}

/** `octoprox-backup-2025-01-31T12-00-00Z.json`, from the backup's creation time. */
export function backupFileName(createdAt: string): string {
  const stamp = createdAt.replace(/\.\d+Z$/, "Z").replaceAll(":", "-");
  return `octoprox-backup-${stamp}.json`;
}

export interface ExportOptions {
  passphrase: string;
  includeHistory: boolean;
}

export interface ExportResult {
  envelope: BackupEnvelope;
  rows: Record<string, number>;
}

/** Gzip's output, collected as it comes; write() waits while gzip has too much in hand. */
class Compressor {
  readonly #gzip = createGzip();
  readonly #chunks: Buffer[] = [];
  readonly #ended: Promise<unknown>;

  constructor() {
    this.#gzip.on("data", (chunk: Buffer) => this.#chunks.push(chunk));
    this.#ended = once(this.#gzip, "end");
  }

  async write(text: string): Promise<void> {
    if (!this.#gzip.write(text)) await once(this.#gzip, "drain");
  }

  async end(): Promise<Buffer[]> {
    this.#gzip.end();
    await this.#ended;
    return this.#chunks;
  }

  destroy(): void {
    this.#gzip.destroy();
  }
}

/** Reads every row of the backup's tables in one snapshot and seals them. */
export async function exportBackup(
  deps: ServiceDeps,
  options: ExportOptions,
): Promise<ExportResult> {
  const version = await schemaVersion();
  const tables = backupTables(options.includeHistory);
  const compressor = new Compressor();
  const rows: Record<string, number> = {};
  let createdAt: Date;
  try {
    createdAt = await reservedTransaction(
      deps.database.sql,
      async (tx) => {
        // The snapshot's own time, so created_at says which moment the rows are of.
        const [{ ms }] = await tx<{ ms: number }[]>`
          select (extract(epoch from now()) * 1000)::float8 as ms`;
        for (const table of tables) {
          const [{ n }] = await tx.unsafe<{ n: number }[]>(
            `select count(*)::int as n from ${table}`,
          );
          await compressor.write(`${JSON.stringify({ table, rows: n })}\n`);
          let written = 0;
          const query = tx.unsafe<{ row: string }[]>(
            `select to_jsonb(t)::text as row from ${table} t order by ${backupOrderColumn(table)}`,
          );
          for await (const page of query.cursor(PAGE_ROWS)) {
            written += page.length;
            await compressor.write(`${page.map((r) => r.row).join("\n")}\n`);
          }
          // One snapshot: the count and the rows cannot differ.
          if (written !== n) throw new Error(`${table}: counted ${n} rows, read ${written}`);
          rows[table] = n;
        }
        return new Date(Math.floor(Number(ms)));
      },
      "isolation level repeatable read read only",
    );
  } catch (error) {
    compressor.destroy();
    throw translatePostgresError(error);
  }
  const contents = await compressor.end();
  const sealedBytes = Math.ceil(contents.reduce((sum, chunk) => sum + chunk.length, 0) / 3) * 4;
  // A file no import would take is no backup: say so rather than hand it out.
  if (sealedBytes > MAX_BACKUP_BYTES - 64 * 1024) {
    throw new BackupRefusedError(
      `This backup would be about ${Math.round(sealedBytes / 1e6)} MB, more than an import ` +
        `takes (${MAX_BACKUP_BYTES / 1e6} MB)` +
        (options.includeHistory ? ": export it without include_history" : ""),
    );
  }
  const envelope = await sealBackup(options.passphrase, {
    schemaVersion: version,
    createdAt,
    includeHistory: options.includeHistory,
  }, contents);
  return { envelope, rows };
}

/** One table's part of the contents: its rows' byte ranges, a batch each. */
interface Section {
  table: string;
  rows: number;
  batches: { start: number; end: number }[];
}

/** The sections of the opened contents, checked against the tables they must hold, in order. */
function readSections(contents: Buffer, tables: readonly string[]): Section[] {
  const unreadable = (why: string) =>
    new BackupRefusedError(`The backup's contents cannot be read (${why}); nothing was changed`);
  const sections: Section[] = [];
  let position = 0;
  const nextLine = (): { start: number; end: number } | undefined => {
    if (position >= contents.length) return undefined;
    const newline = contents.indexOf(10, position);
    const end = newline === -1 ? contents.length : newline;
    const line = { start: position, end };
    position = end + 1;
    return line;
  };
  for (const table of tables) {
    const line = nextLine();
    let head: { table?: unknown; rows?: unknown } | undefined;
    try {
      head = line && JSON.parse(contents.toString("utf8", line.start, line.end));
    } catch {
      head = undefined;
    }
    if (head?.table !== table || !Number.isInteger(head.rows) || (head.rows as number) < 0) {
      throw unreadable(`expected the rows of ${table}`);
    }
    const section: Section = { table, rows: head.rows as number, batches: [] };
    let batch: { start: number; end: number; rows: number } | undefined;
    for (let i = 0; i < section.rows; i++) {
      const row = nextLine();
      if (!row || row.end === row.start) throw unreadable(`${table} has fewer rows than it says`);
      if (batch && (batch.rows >= BATCH_ROWS || row.end - batch.start > BATCH_BYTES)) {
        section.batches.push({ start: batch.start, end: batch.end });
        batch = undefined;
      }
      batch ??= { start: row.start, end: row.end, rows: 0 };
      batch.end = row.end;
      batch.rows++;
    }
    if (batch) section.batches.push({ start: batch.start, end: batch.end });
    sections.push(section);
  }
  if (nextLine() !== undefined) throw unreadable("it holds more than its tables");
  return sections;
}

export interface ImportOptions {
  passphrase: string;
  backup: unknown;
}

export interface ImportResult {
  schemaVersion: number;
  restored: Record<string, number>;
}

/** Postgres' classes for a value or a row that does not fit: data exception, integrity. */
function doesNotFit(error: unknown): string | undefined {
  for (let link = error, depth = 0; link != null && depth < 8; depth++) {
    const code = (link as { code?: unknown }).code;
    if (typeof code === "string" && /^2[23][0-9A-Z]{3}$/.test(code)) return code;
    link = (link as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * Replaces every row with the backup's, in one transaction, then announces `all`. Refuses
 * (BackupRefusedError, nothing changed) a file that is not a backup, one of another schema
 * version, and one the passphrase does not open.
 */
export async function importBackup(
  deps: ServiceDeps & StateDeps,
  options: ImportOptions,
): Promise<ImportResult> {
  const version = await schemaVersion();
  const { header, contents: sealed } = await openBackup(
    options.passphrase,
    options.backup,
    version,
  );
  let contents: Buffer;
  try {
    contents = await promisify(gunzip)(sealed);
  } catch (error) {
    throw new BackupRefusedError(
      "The backup's contents cannot be read (not compressed as a backup is); nothing was changed",
      { cause: error },
    );
  }
  const sections = readSections(contents, backupTables(header.include_history));

  let table = "";
  let dropped = EMPTY_FOOTPRINT;
  let outboxId: number | undefined;
  const restored = Object.fromEntries(sections.map((s) => [s.table, s.rows]));
  // The import is one audit entry (below), not an entry for each row it writes.
  const actor = currentActor();
  const importing = () =>
    reservedTransaction(
      deps.database.sql,
      async (tx) => {
        const before = await readInstallFootprint(tx);
        await tx.unsafe(`truncate ${REPLACED_TABLES.join(", ")}`);
        for (const section of sections) {
          table = section.table;
          for (const { start, end } of section.batches) {
            // Rows are one a line and JSON escapes every newline inside a value.
            const batch = `[${contents.toString("utf8", start, end).replaceAll("\n", ",")}]`;
            await tx.unsafe(
              `insert into ${table} select * from jsonb_populate_recordset(null::${table}, $1::jsonb)`,
              [batch],
            );
          }
        }
        table = "";
        await restartSequences(tx);
        await recomputeTotals(tx);
        dropped = droppedFrom(before, await readInstallFootprint(tx));
        await recordAuditNote(tx, {
          entity: "backup",
          action: "import",
          after: {
            created_at: header.created_at,
            include_history: header.include_history,
            restored,
          },
        });
      },
      "",
      () =>
        recordChange({ kind: ChangeKind.all, ref: "*" }, (id) => {
          outboxId = id;
        }),
    );
  try {
    await (actor === undefined ? importing() : asActor({ ...actor, summary: true }, importing));
  } catch (error) {
    const code = doesNotFit(error);
    if (code !== undefined && table !== "") {
      throw new BackupRefusedError(
        `The backup's rows of ${table} do not fit this install (Postgres refused them with ` +
          `${code}); nothing was changed`,
        { cause: error },
      );
    }
    throw translatePostgresError(error);
  }
  // After the commit: controllers compile everything again and gateways follow; what the
  // projects, connectors and proxies the backup did not hold left in Redis goes.
  if (outboxId !== undefined) await announce(deps, { kind: ChangeKind.all, ref: "*" }, outboxId);
  await clearProjectState(deps, dropped);
  return { schemaVersion: version, restored };
}

/** Tables with serial ids: theirs go on after the restored ones (1 for an empty table). */
async function restartSequences(tx: postgres.Sql): Promise<void> {
  const serial = BACKUP_HISTORY_TABLES.filter((table) =>
    table !== "connector_exit_ips" && table !== "domain_metrics"
  );
  for (const table of [...serial, "provider_audit_log", "audit_log"]) {
    await tx.unsafe(
      `select setval(pg_get_serial_sequence('${table}', 'id'),
         coalesce((select max(id) from ${table}), 0) + 1, false)`,
    );
  }
}
