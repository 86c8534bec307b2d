/**
 * How a service touches Postgres: every write in one transaction, its driver errors read as
 * catalogue errors (a unique index as DuplicateError, an outage as StoreUnavailableError), and
 * its change entry, when a row changed, written to the outbox in the write's own transaction and
 * announced right after the commit (control/core/outbox.ts: the relay announces what a writer
 * could not).
 */
import type { Database, Tx } from "../../db/client.ts";
import { translatePostgresError } from "../../db/errors.ts";
import type { ChangeEntry } from "./changelog.ts";
import { faultPoint } from "./faults.ts";
import { recordChange, settleChange } from "./outbox.ts";
import type { ControlDeps } from "./deps.ts";

/**
 * What the services need: the part of the process's deps they touch (the store, the change log,
 * the settings, the job queue for runs asked for after a commit, and the provider registry).
 */
export type ServiceDeps = Pick<
  ControlDeps,
  "database" | "changes" | "settings" | "jobs" | "providers"
>;

export interface WriteOutcome<T> {
  result: T;
  /** What changed, announced after the commit; null when the write changed no row. */
  change: ChangeEntry | null;
}

/** Runs a write in one transaction, then announces it. Never announces a rolled-back write. */
export async function write<T>(
  deps: Pick<ServiceDeps, "database" | "changes">,
  work: (tx: Tx) => Promise<WriteOutcome<T>>,
): Promise<T> {
  let outcome: WriteOutcome<T>;
  let outboxId: number | undefined;
  try {
    outcome = await deps.database.transaction(
      work,
      "",
      (done) =>
        done.change
          ? recordChange(done.change, (id) => {
            outboxId = id;
          })
          : undefined,
    );
  } catch (error) {
    throw translatePostgresError(error);
  }
  if (outcome.change && outboxId !== undefined) await announce(deps, outcome.change, outboxId);
  return outcome.result;
}

/**
 * Announces a committed change whose outbox row is `outboxId`, and settles the row. The change
 * log waits at most one request deadline and never throws; an entry it kept for its retry keeps
 * its row too, which the relay announces if the process goes first.
 */
export async function announce(
  deps: Pick<ServiceDeps, "database" | "changes">,
  change: ChangeEntry,
  outboxId: number,
): Promise<void> {
  faultPoint("after_commit");
  if (await deps.changes.append(change)) settleChange(deps.database, outboxId);
}

/** Runs a read, its driver errors read as catalogue errors. */
export async function read<T>(
  deps: Pick<ServiceDeps, "database">,
  work: (db: Database["db"]) => Promise<T>,
) {
  try {
    return await work(deps.database.db);
  } catch (error) {
    throw translatePostgresError(error);
  }
}

/** Postgres' way of saying "is a uuid", checked before a query would fail on the cast. */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(text: string): boolean {
  return UUID_PATTERN.test(text);
}
