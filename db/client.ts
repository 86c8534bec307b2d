/**
 * One Postgres pool per process: a postgres.js client and the drizzle database over it.
 * Build it once in the node and pass it down; never open a second pool for the same URL.
 */
import postgres from "postgres";
import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
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
