/**
 * The transactional outbox (docs/architecture.md, "Change announcements"): a write's change entry
 * is inserted into `change_outbox` in the write's own transaction, so no committed write can
 * lose its announcement.
 *
 * After the commit the writer announces it at once (the change log) and deletes its row (with
 * the rows announced beside it, one delete every few milliseconds); that is every write's path
 * while the process lives and Redis answers. A row left behind (the
 * process died between the commit and the delete, or Redis refused the entry) is announced by
 * the relay: one loop in every api and worker process, of which one at a time works (a
 * transaction-scoped advisory lock), taking the rows older than a grace period in id order,
 * appending them to the change stream in that order and deleting them in the same transaction.
 * A relay that dies after appending and before its commit leaves the rows to be appended again:
 * at least once, in commit order. The controller's hourly reconcile stays as the last cover.
 */
import type { Redis } from "ioredis";
import { type Database, reservedTransaction, sqlLiteral } from "../../db/client.ts";
import { type CycleResult, Loop, type LoopSnapshot } from "../../shared/async/loop.ts";
import { errorText } from "../../shared/errors.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import type { ChangeKind } from "../../shared/roles.ts";
import type { Logger } from "./logging.ts";
import { appendChanges } from "./changelog.ts";

/** The advisory lock only one relay holds at a time. */
const RELAY_LOCK = "octoprox:outbox_relay";
/** Between passes, and the age a row reaches before a relay takes it (its writer goes first). */
export const RELAY_INTERVAL_MS = 250;
export const RELAY_GRACE_MS = 500;
/** Rows a relay pass takes at most. */
const RELAY_BATCH = 1_000;

/**
 * The insert of the change entry, the write's last statement (sent with its COMMIT, values as
 * literals); `took` gets its row's id.
 */
export function recordChange(
  change: { kind: ChangeKind; ref: string },
  took: (id: number) => void,
): { sql: string; took: (rows: readonly { id?: unknown }[]) => void } {
  return {
    sql: `insert into change_outbox (kind, ref) values (${sqlLiteral(change.kind)}, ` +
      `${sqlLiteral(change.ref)}) returning id`,
    took: (rows) => took(Number(rows[0]?.id)),
  };
}

/** Announced rows waiting for their delete, by database: deleted together, every few ms. */
const settling = new WeakMap<Database, { ids: number[]; timer: ReturnType<typeof setTimeout> }>();
/** How long an announced row waits for the delete it shares with the rows announced beside it. */
const SETTLE_DELAY_MS = 50;

/**
 * The writer announced its entry: its row goes, in one delete with the rows announced in the
 * same few milliseconds (a write pays no round trip for it). Never throws: a delete that fails,
 * or a process gone before it, leaves rows the relay announces once more (at least once).
 */
export function settleChange(database: Database, id: number): void {
  const pending = settling.get(database);
  if (pending !== undefined) {
    pending.ids.push(id);
    return;
  }
  const batch = { ids: [id], timer: setTimeout(() => flush(), SETTLE_DELAY_MS) };
  // A process ending does not wait for it.
  (batch.timer as { unref?: () => void }).unref?.();
  settling.set(database, batch);
  const flush = () => {
    settling.delete(database);
    database.sql`delete from change_outbox where id = any(${batch.ids}::bigint[])`
      .catch(() => {});
  };
}

export interface OutboxRelaySnapshot extends LoopSnapshot {
  /** Entries this process's relay appended to the change stream. */
  outbox_relayed: number;
  /** The oldest row's age at the last pass, seconds (0: none left). */
  outbox_lag_seconds: number;
  /** Rows in the outbox at the last pass. */
  outbox_pending: number;
}

export interface OutboxRelayOptions {
  database: Database;
  redis: Redis;
  keys: RedisKeys;
  logger: Logger;
  /** Each Redis step's deadline (the request deadline). */
  deadlineMs: number;
  /** Between passes (250 ms unless said). */
  intervalMs?: number;
  /** How old a row is before the relay takes it: its writer's own announcement comes first. */
  graceMs?: number;
}

export class OutboxRelay extends Loop<Logger> {
  readonly #o: OutboxRelayOptions;
  #relayed = 0;
  #lagSeconds = 0;
  #pending = 0;

  constructor(options: OutboxRelayOptions) {
    super({ name: "outbox_relay", logger: options.logger });
    this.#o = options;
  }

  protected override nextDuty(signal: AbortSignal): Promise<void> {
    return this.waitFor(this.#o.intervalMs ?? RELAY_INTERVAL_MS, signal);
  }

  /** One pass: what is due, appended and deleted in one transaction. */
  protected override async cycle(): Promise<CycleResult> {
    return (await this.relay()) > 0;
  }

  /** Appends the rows due in id order; answers how many. Raises when a store fails. */
  async relay(): Promise<number> {
    const graceMs = this.#o.graceMs ?? RELAY_GRACE_MS;
    const { redis, keys, deadlineMs } = this.#o;
    const relayed = await reservedTransaction(this.#o.database.sql, async (tx) => {
      const [lock] = await tx<{ held: boolean }[]>`
        select pg_try_advisory_xact_lock(hashtext(${RELAY_LOCK})) as held`;
      if (!lock.held) return 0;
      const rows = await tx<{ id: string; kind: string; ref: string }[]>`
        select id::text, kind, ref from change_outbox
        where created_at < now() - make_interval(secs => ${graceMs / 1000})
        order by id limit ${RELAY_BATCH}`;
      const [state] = await tx<{ pending: number; oldest_s: number | null }[]>`
        select count(*)::int as pending,
          extract(epoch from now() - min(created_at))::float8 as oldest_s
        from change_outbox`;
      this.#pending = state.pending - rows.length;
      this.#lagSeconds = state.oldest_s ?? 0;
      if (rows.length === 0) return 0;
      await appendChanges(redis, keys, deadlineMs, rows);
      await tx`delete from change_outbox where id = any(${rows.map((row) => row.id)}::bigint[])`;
      return rows.length;
    });
    if (relayed > 0) {
      this.#relayed += relayed;
      this.logger.info({ relayed }, "Change entries announced from the outbox");
    }
    return relayed;
  }

  override snapshot(): OutboxRelaySnapshot {
    return {
      ...super.snapshot(),
      outbox_relayed: this.#relayed,
      outbox_lag_seconds: this.#lagSeconds,
      outbox_pending: this.#pending,
    };
  }

  /** Said once per streak: the entries wait in Postgres, nothing is lost. */
  protected override cycleFailed(error: unknown, consecutiveFailures: number): void {
    if (consecutiveFailures !== 1) return;
    this.logger.warn(
      { error: errorText(error) },
      "Outbox relay failed: change entries wait for the next pass",
    );
  }
}
