/**
 * A metrics test bed: a fresh migrated database with projects, connectors and proxies in it, a
 * Redis prefix of its own, and gateway metering (the real RequestMetering and script, run under
 * Node) writing the windows a flush then takes.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { createDatabase, type Database } from "../db/client.ts";
import { migrate } from "../db/migrate.ts";
import { RequestMetering } from "../gateway/metering/metering.ts";
import type { LuaScript } from "../shared/lua/loader.ts";
import { type RedisKeys, redisKeys } from "../shared/redis-keys.ts";
import type { Logger } from "../control/core/logging.ts";
import { SUMS_SQL } from "../control/metrics/usage-model.ts";
import { loadMeteringScriptNode } from "./metering.ts";
import { type CapturedLine, captureLogger } from "./logger.ts";
import {
  createTestDatabase,
  deletePrefix,
  TEST_REDIS_URL,
  type TestDatabase,
  testPrefix,
} from "./stores.ts";

export interface SeededProject {
  projectId: string;
  connectorIds: string[];
  /** Proxy ids by connector, in order. */
  proxyIds: string[][];
}

export interface MetricsBed {
  database: Database;
  databaseUrl: string;
  redis: Redis;
  keys: RedisKeys;
  prefix: string;
  logger: Logger;
  lines: CapturedLine[];
  script: LuaScript;
  /** Inserts a project with `connectors` connectors of `proxies` proxies each. */
  seed(connectors?: number, proxies?: number): Promise<SeededProject>;
  /** Inserts a WireGuard device of the project (keys that open nothing); answers its id. */
  seedDevice(projectId: string): Promise<string>;
  /** A metering writer on this bed's Redis (publish with `publishNow`). */
  metering(): RequestMetering;
  close(): Promise<void>;
}

export interface BedOptions {
  /** Another Postgres (an outage test's private server); a fresh test database otherwise. */
  databaseUrl?: string;
}

export async function startMetricsBed(options: BedOptions = {}): Promise<MetricsBed> {
  let testDatabase: TestDatabase | undefined;
  let url = options.databaseUrl;
  if (url === undefined) {
    testDatabase = await createTestDatabase();
    url = testDatabase.url;
  }
  await migrate(url);
  const database = createDatabase(url, { poolSize: 5 });
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
  const prefix = testPrefix();
  const keys = redisKeys(prefix);
  const { logger, lines } = captureLogger("worker");
  const script = await loadMeteringScriptNode();
  const meters: RequestMetering[] = [];
  let seeded = 0;
  let devices = 0;
  return {
    database,
    databaseUrl: url,
    redis,
    keys,
    prefix,
    logger,
    lines,
    script,
    async seed(connectors = 1, proxies = 2) {
      seeded += 1;
      const sql = database.sql;
      const projectId = randomUUID();
      await sql`insert into projects (id, name, username, password)
        values (${projectId}, ${`project ${seeded} ${projectId}`},
          ${`user${seeded}_${projectId.slice(0, 8)}`}, 'password-1')`;
      const connectorIds: string[] = [];
      const proxyIds: string[][] = [];
      for (let c = 0; c < connectors; c++) {
        const connectorId = randomUUID();
        connectorIds.push(connectorId);
        await sql`insert into connectors (id, project_id, name, kind)
          values (${connectorId}, ${projectId}, ${`connector ${c}`}, 'static')`;
        const ids = Array.from({ length: proxies }, () => randomUUID());
        proxyIds.push(ids);
        if (ids.length > 0) {
          await sql`insert into proxies (id, project_id, connector_id, scheme, host, port, status)
            select id, ${projectId}, ${connectorId}, 'http', '10.0.' || ${c} || '.' || n, 3128,
              'healthy'
            from unnest(${ids}::uuid[]) with ordinality as u(id, n)`;
        }
      }
      return { projectId, connectorIds, proxyIds };
    },
    async seedDevice(projectId) {
      devices += 1;
      const deviceId = randomUUID();
      const address = `10.66.${Math.floor(devices / 250)}.${2 + (devices % 250)}`;
      await database.sql`insert into tunnel_devices (id, project_id, protocol, name, address,
          public_key, preshared_key_sealed)
        values (${deviceId}, ${projectId}, 'wireguard', ${`device ${devices}`}, ${address},
          ${`public-${deviceId}`}, 'sealed')`;
      return deviceId;
    },
    metering() {
      const m = new RequestMetering({
        redis,
        keys,
        script,
        instance: "gw-metrics-test",
        intervalMs: 3_600_000,
      });
      meters.push(m);
      return m;
    },
    async close() {
      await Promise.all(meters.map((m) => m.close()));
      redis.disconnect();
      await database.close();
      await deletePrefix(TEST_REDIS_URL, prefix).catch(() => {});
      await testDatabase?.drop();
    },
  };
}

export interface Transfer {
  projectId: string;
  connectorId: string;
  proxyId: string;
  /** The tunnel device the client was, if one. */
  deviceId?: string;
  host: string;
  sent: number;
  received: number;
  latencyMs: number;
  ok: boolean;
}

/** Meters finished transfers as the socket layer reports them: begin, bytes, finish. */
export function meter(metering: RequestMetering, transfers: readonly Transfer[]): void {
  for (const t of transfers) {
    const m = metering.begin({
      kind: "connect",
      client: { projectId: t.projectId, options: { user: "u" }, deviceId: t.deviceId },
      target: { host: t.host, port: 443 },
      upstream: {
        proxyId: t.proxyId,
        connectorId: t.connectorId,
        scheme: "http",
        host: "10.0.0.1",
        port: 3128,
        username: null,
        password: null,
      },
      latencyMs: t.latencyMs,
    });
    if (!m) throw new Error("metering gave no meter");
    m.bytes(t.sent, t.received);
    if (t.ok) {
      m.finish({ ok: true, latencyMs: t.latencyMs });
    } else {
      m.finish({ ok: false, phase: "idle" }, {
        kind: "transfer_broken",
        protocol: "connect",
        clientStatus: 200,
        proxyStatus: "",
        vendorStatus: null,
        message: "Upstream answer broke off",
      });
    }
  }
}

/** A device's connections closed as encrypted DNS, `count` of them, as the listener reports. */
export function closeEncryptedDns(
  metering: RequestMetering,
  projectId: string,
  deviceId: string,
  count: number,
): void {
  for (let i = 0; i < count; i++) {
    metering.encryptedDnsClosed({ projectId, options: { user: "u" }, deviceId });
  }
}

/** The sums a set of transfers must come to. */
export function sums(transfers: readonly Transfer[]) {
  let requests = 0, successes = 0, failures = 0, sent = 0, received = 0, latency = 0;
  for (const t of transfers) {
    requests += 1;
    if (t.ok) successes += 1;
    else failures += 1;
    sent += t.sent;
    received += t.received;
    latency += t.latencyMs;
  }
  return {
    requests,
    successes,
    failures,
    bytes_sent: sent,
    bytes_received: received,
    latency_sum_ms: latency,
  };
}

/** The usage object the api answers for a set of transfers (control/metrics/usage-model.ts). */
export function usageOfTransfers(transfers: readonly Transfer[]) {
  const s = sums(transfers);
  return {
    requests: s.requests,
    successes: s.successes,
    failures: s.failures,
    success_rate: s.requests ? Math.round((s.successes / s.requests) * 1e4) / 1e4 : null,
    bytes_sent: s.bytes_sent,
    bytes_received: s.bytes_received,
    avg_latency_ms: s.requests ? Math.round((s.latency_sum_ms / s.requests) * 10) / 10 : null,
  };
}

/** A row of counts as numbers, in the fields' own names. */
function counts(row: Record<string, unknown>) {
  return {
    requests: Number(row.requests),
    successes: Number(row.successes),
    failures: Number(row.failures),
    bytes_sent: Number(row.bytes_sent),
    bytes_received: Number(row.bytes_received),
    latency_sum_ms: Number(row.latency_sum_ms),
  };
}

/** The history a table holds for one column's value, summed. */
export async function historySums(
  database: Database,
  table:
    | "proxy_metrics"
    | "project_metrics"
    | "connector_metrics"
    | "tunnel_device_metrics"
    | "host_metrics",
  column: string,
  value: string,
) {
  const rows = await database.sql.unsafe(
    `select ${SUMS_SQL} from ${table} where ${column} = $1`,
    [value],
  );
  return counts(rows[0]);
}

export async function totalsOf(
  database: Database,
  kind: "proxy" | "project" | "tunnel_device",
  id: string,
) {
  const rows = await database.sql`select requests, successes, failures, bytes_sent,
    bytes_received, latency_sum_ms from metric_totals where entity_kind = ${kind}
    and entity_id = ${id}`;
  return rows[0] ? counts(rows[0]) : undefined;
}

/** A device's encrypted DNS closed: its history summed, and its totals' (undefined: no row). */
export async function encryptedDnsClosedOf(database: Database, deviceId: string) {
  const [history] = await database.sql`select coalesce(sum(encrypted_dns_closed), 0)::int as n
    from tunnel_device_metrics where device_id = ${deviceId}`;
  const [totals] = await database.sql`select encrypted_dns_closed::int as n from metric_totals
    where entity_kind = 'tunnel_device' and entity_id = ${deviceId}`;
  return { history: history.n as number, totals: totals?.n as number | undefined };
}

/** The next default sequence: ids made in one millisecond (or at one offset) stay distinct. */
let nextSequence = 100;

/**
 * A stream entry id at a given time, as Redis would give the producer's XADD. Without a
 * sequence, each call takes the next of this process, so two tests' ids never coincide: a test
 * that ends with `entryId(Date.now() + 7)` and the next test's `entryId()` may fall in the same
 * millisecond on a fast machine, and one flush id recorded twice reads as a redelivery.
 */
export function entryId(atMs = Date.now(), sequence = nextSequence++): string {
  return `${atMs}-${sequence}`;
}

export { deletePrefix, TEST_REDIS_URL };
