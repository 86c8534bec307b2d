/**
 * One Postgres pool per process: a postgres.js client and the drizzle database over it.
 * Build it once in the node and pass it down; never open a second pool for the same URL.
 */
import postgres from "postgres";
import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import { isPostgresUnavailable } from "./errors.ts";
import * as schema from "./schema.ts";

export type Db = PostgresJsDatabase<typeof schema>;
/** A transaction handle: the same query API as `Db`. */
export type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

export interface Database {
  readonly sql: postgres.Sql;
  readonly db: Db;
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
    close() {
      closed ??= sql.end({ timeout: 5 }).catch(() => {});
      return closed;
    },
  };
}

/**
 * One transaction on a connection of its own, for work that streams or batches through the
 * driver directly (`begin` takes the mode, such as `isolation level repeatable read read only`).
 *
 * Not postgres.js's sql.begin: when the connection is lost mid-transaction, begin sends its
 * ROLLBACK on the closed connection, and the driver (3.4.9) writes it to a null socket from a
 * timer, an exception no caller can catch, which ends the process. Here a lost connection gets
 * no ROLLBACK and is not handed back: Postgres rolled the transaction back when the connection
 * went, and the pool reconnects a closed connection on its next use.
 */
export async function reservedTransaction<T>(
  sql: postgres.Sql,
  work: (tx: postgres.ReservedSql) => Promise<T>,
  mode = "",
): Promise<T> {
  const tx = await sql.reserve();
  try {
    await tx.unsafe(`begin ${mode}`);
    const result = await work(tx);
    await tx.unsafe("commit");
    tx.release();
    return result;
  } catch (error) {
    if (!isPostgresUnavailable(error)) {
      await tx.unsafe("rollback").catch(() => {});
      tx.release();
    }
    throw error;
  }
}
