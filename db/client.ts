/**
 * One Postgres pool per process: a postgres.js client and the drizzle database over it.
 * Build it once in the node and pass it down; never open a second pool for the same URL.
 */
import postgres from "postgres";
import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import { sql as sqlTemplate } from "drizzle-orm";
import { type Actor, ACTOR_SETTING, currentActor } from "./actor.ts";
import { isPostgresUnavailable } from "./errors.ts";
import * as schema from "./schema.ts";

export type Db = PostgresJsDatabase<typeof schema>;
/** A transaction handle: the same query API as `Db`. */
export type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

export interface Database {
  readonly sql: postgres.Sql;
  readonly db: Db;
  /** One transaction (drizzleTransaction): the only way the control plane opens one. */
  transaction<T>(work: (tx: Tx) => Promise<T>, mode?: string, last?: LastStatement<T>): Promise<T>;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  poolSize?: number;
  applicationName?: string;
  /** How long a connection attempt may take before the query fails as unavailable. */
  connectTimeoutMs?: number;
}

export function createDatabase(url: string, options: DatabaseOptions = {}): Database {
  const sql = postgres(url, {
    max: options.poolSize ?? 10,
    idle_timeout: 30,
    connect_timeout: Math.max(1, Math.ceil((options.connectTimeoutMs ?? 2000) / 1000)),
    // The driver's default reconnect delay grows to 20 s, and queries queue behind it: a route
    // would hang instead of answering 503, and recovery would lag the database by as much.
    // Short and capped, a query in an outage fails within a second and the pool heals at once.
    backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 0.5),
    onnotice: () => {},
    connection: { application_name: options.applicationName ?? "octoprox" },
  });
  const db = drizzle(sql, { schema });
  let closed: Promise<void> | undefined;
  return {
    sql,
    db,
    transaction: (work, mode, last) => drizzleTransaction(sql, work, mode, last),
    close() {
      closed ??= sql.end({ timeout: 5 }).catch(() => {});
      return closed;
    },
  };
}

/** The mode of a transaction that reads one consistent snapshot and writes nothing. */
export const READ_SNAPSHOT = "isolation level repeatable read read only";

/**
 * A last statement of a transaction (the outbox's insert): SQL text whose values are literals
 * (sqlLiteral), sent with the COMMIT as one simple-protocol message, one round trip and one
 * message for both; `took` gets its rows. Undefined: none.
 */
export type LastStatement<T> = (
  result: T,
) => { sql: string; took?: (rows: readonly postgres.Row[]) => void } | undefined;

/**
 * A string as an SQL literal, for the few statements sent as text with the BEGIN or the COMMIT
 * (an escape string: its meaning does not hang on standard_conforming_strings).
 */
export function sqlLiteral(value: string): string {
  if (value.includes("\u0000")) throw new Error("An SQL literal cannot hold a NUL character");
  return `E'${value.replaceAll("\\", "\\\\").replaceAll("'", "''")}'`;
}

/**
 * Names the writer from here to the end of a transaction whose writer only its own reads tell
 * (an invitation's link names its user): the audit triggers read the setting at each statement.
 */
export async function nameTransactionWriter(tx: Tx, actor: Actor): Promise<void> {
  await tx.execute(
    sqlTemplate`select set_config(${ACTOR_SETTING}, ${JSON.stringify(actor)}, true)`,
  );
}

/** The rows of a simple-protocol message's first statement. */
function firstRows(answer: unknown): readonly postgres.Row[] {
  const results = answer as readonly unknown[];
  return (Array.isArray(results[0]) ? results[0] : results) as readonly postgres.Row[];
}

/** The error a query on a transaction's lost connection fails with, as the driver names it. */
function connectionClosed(): Error {
  return Object.assign(new Error("CONNECTION_CLOSED: the transaction's connection was lost"), {
    code: "CONNECTION_CLOSED",
  });
}

/** The driver's connection as a query's `onexecute` sees it: the pool calls `onclose` on close. */
interface WatchedConnection {
  onclose?: (() => void) | null;
}

/**
 * The reserved connection's queries, refused once the connection is lost: postgres.js (3.4.9)
 * would write a query on a closed connection to a null socket from a timer, an exception no
 * caller can catch, which ends the process (and leaves the connection unusable).
 */
function guarded(tx: postgres.ReservedSql, lost: () => boolean): postgres.ReservedSql {
  return new Proxy(tx, {
    apply(target, self, args) {
      if (lost()) throw connectionClosed();
      return Reflect.apply(target, self, args);
    },
    get(target, key) {
      const value = Reflect.get(target, key);
      if (key !== "unsafe" || typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (lost()) throw connectionClosed();
        return value.apply(target, args);
      };
    },
  });
}

/**
 * One transaction on a connection of its own (`mode`, such as
 * `isolation level repeatable read read only`). Every transaction of the control plane runs
 * through here, never postgres.js's sql.begin or drizzle's transaction (which uses it).
 *
 * When the connection is lost mid-transaction, sql.begin sends its ROLLBACK on the closed
 * connection, and the driver (3.4.9) writes it to a null socket from a timer: an exception no
 * caller can catch, which ends the process. Here the connection's close is watched: a lost
 * connection gets no further query (each fails as CONNECTION_CLOSED), no ROLLBACK, and is not
 * handed back. Postgres rolled the transaction back when the connection went, and the pool
 * reconnects a closed connection on its next use.
 */
export async function reservedTransaction<T>(
  sql: postgres.Sql,
  work: (tx: postgres.ReservedSql) => Promise<T>,
  mode = "",
  last?: LastStatement<T>,
): Promise<T> {
  const reserved = await sql.reserve();
  let lost = false;
  let connection: WatchedConnection | undefined;
  const tx = guarded(reserved, () => lost);
  // The driver hands the query its connection; the pool reports its close there, here too.
  const watch = (watched: WatchedConnection) => {
    connection = watched;
    watched.onclose = () => {
      lost = true;
    };
  };
  /** Hands a live connection back, no longer watched by this transaction. */
  const release = () => {
    if (connection) connection.onclose = null;
    reserved.release();
  };
  try {
    // The writer, for the audit triggers, named in the BEGIN's own message: no round trip.
    const actor = mode.includes("read only") ? undefined : currentActor();
    const naming = actor === undefined
      ? ""
      : `; select set_config('${ACTOR_SETTING}', ${sqlLiteral(JSON.stringify(actor))}, true)`;
    await reserved.unsafe(`begin ${mode}${naming}`, [], { onexecute: watch } as never).simple();
    const result = await work(tx);
    const statement = last?.(result);
    if (statement === undefined) await tx.unsafe("commit");
    else {
      // Sent whether or not its rows are wanted (an optional call would skip its argument).
      const answer = await tx.unsafe(`${statement.sql}; commit`).simple();
      statement.took?.(firstRows(answer));
    }
    release();
    return result;
  } catch (error) {
    if (!lost && !isPostgresUnavailable(error)) {
      await reserved.unsafe("rollback").catch(() => {});
      release();
    }
    throw error;
  }
}

/** A drizzle transaction over reservedTransaction: the same query API as `Db`. */
export function drizzleTransaction<T>(
  sql: postgres.Sql,
  work: (tx: Tx) => Promise<T>,
  mode = "",
  last?: LastStatement<T>,
): Promise<T> {
  return reservedTransaction(
    sql,
    (tx) => {
      // drizzle reads the client's type parsers from `options`, which a reserved connection
      // shares with its pool (already set up by the pool's own drizzle instance).
      Object.assign(tx, { options: sql.options });
      return work(drizzle(tx as unknown as postgres.Sql) as unknown as Tx);
    },
    mode,
    last,
  );
}
