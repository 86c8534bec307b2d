/**
 * Compaction and retention over real Postgres: minute rows fold into hours after a day, hours
 * into six hours after a week, six hours into days after 30 days (every count summed, a tunnel
 * device's encrypted DNS closed included), in one pass however long it did not run; two passes
 * at once fold each row exactly once and keep every sum; retentions trim a project's history
 * past its metrics_retention_days, the totals of entities that are gone, the history of tunnel
 * devices that are gone, and day-old flush records. Also the system snapshot's cadence and
 * retention.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompactionJob } from "../../control/jobs/compaction.ts";
import { SystemSnapshotJob } from "../../control/jobs/system-snapshot.ts";
import { DAY_MS, HISTORY_TABLES } from "../../control/metrics/tiers.ts";
import { createDatabase, type Database } from "../../db/client.ts";
import { type MetricsBed, type SeededProject, startMetricsBed } from "../../testkit/metrics-bed.ts";

let bed: MetricsBed;

beforeAll(async () => {
  bed = await startMetricsBed();
});

afterAll(async () => {
  await bed?.close();
});

const HOUR_MS = 3_600_000;
/** A fixed "now" on an hour boundary plus a bit, so tier cutoffs are easy to reason about. */
const NOW = Date.UTC(2026, 10, 20, 12, 30, 0);

function compaction(database: Database = bed.database, now = NOW): CompactionJob {
  return new CompactionJob({ database, logger: bed.logger, now: () => now });
}

/** Each project's one device, made with its first rows. */
const devices = new Map<string, string>();

/** Minute rows for every table of a project: `minutes` of them, a minute apart, ending at `endMs`. */
async function minuteRows(project: SeededProject, endMs: number, minutes: number) {
  const sql = bed.database.sql;
  const proxyId = project.proxyIds[0][0];
  const connectorId = project.connectorIds[0];
  let deviceId = devices.get(project.projectId);
  if (deviceId === undefined) {
    deviceId = await bed.seedDevice(project.projectId);
    devices.set(project.projectId, deviceId);
  }
  for (let i = 0; i < minutes; i++) {
    const at = new Date(endMs - (i + 1) * 60_000).toISOString();
    const n = i + 1;
    await sql`insert into proxy_metrics (project_id, proxy_id, status, bucket_start,
      bucket_seconds, requests, successes, failures, bytes_sent, bytes_received, latency_sum_ms)
      values (${project.projectId}, ${proxyId}, ${i === 0 ? "degraded" : "healthy"},
        ${at}::timestamptz, 60, ${n}, ${n}, 0, ${10 * n}, ${100 * n}, ${n * 1.5})`;
    await sql`insert into project_metrics (project_id, bucket_start, bucket_seconds, requests,
      successes, failures, bytes_sent, bytes_received, latency_sum_ms)
      values (${project.projectId}, ${at}::timestamptz, 60, ${n}, ${n}, 0, ${10 * n},
        ${100 * n}, ${n * 1.5})`;
    await sql`insert into connector_metrics (project_id, connector_id, bucket_start,
      bucket_seconds, requests, successes, failures, bytes_sent, bytes_received, latency_sum_ms)
      values (${project.projectId}, ${connectorId}, ${at}::timestamptz, 60, ${n}, ${n}, 0,
        ${10 * n}, ${100 * n}, ${n * 1.5})`;
    // A device's rows carry the encrypted DNS closed too, summed as the other counts.
    await sql`insert into tunnel_device_metrics (project_id, device_id, protocol, bucket_start,
      bucket_seconds, requests, successes, failures, bytes_sent, bytes_received, latency_sum_ms,
      encrypted_dns_closed)
      values (${project.projectId}, ${deviceId}, 'wireguard', ${at}::timestamptz, 60, ${n}, ${n},
        0, ${10 * n}, ${100 * n}, ${n * 1.5}, ${2 * n})`;
    await sql`insert into host_metrics (project_id, connector_id, host, bucket_start,
      bucket_seconds, requests, successes, failures, bytes_sent, bytes_received, latency_sum_ms)
      values (${project.projectId}, ${connectorId}, ${i % 2 ? "a.example" : "b.example"},
        ${at}::timestamptz, 60, ${n}, ${n}, 0, ${10 * n}, ${100 * n}, ${n * 1.5})`;
    await sql`insert into failure_metrics (project_id, connector_id, kind, vendor_status,
      bucket_start, bucket_seconds, count)
      values (${project.projectId}, ${i % 3 ? connectorId : null}, 'upstream_refused',
        ${i % 3 ? 403 : null}, ${at}::timestamptz, 60, ${n})`;
  }
}

/** Each table's sums and rows by width, for one project. */
async function shape(project: SeededProject) {
  const out: Record<string, { sums: Record<string, number>; widths: Record<string, number> }> = {};
  for (const table of HISTORY_TABLES) {
    const sums = await bed.database.sql.unsafe(
      `select ${
        table.counts.map((c) => `coalesce(sum(${c}), 0)::float8 as ${c}`).join(", ")
      } from ${table.name} where project_id = $1`,
      [project.projectId],
    );
    const widths = await bed.database.sql.unsafe(
      `select bucket_seconds, count(*)::int as n from ${table.name} where project_id = $1
        group by bucket_seconds`,
      [project.projectId],
    );
    out[table.name] = {
      sums: Object.fromEntries(Object.entries(sums[0]).map(([k, v]) => [k, Number(v)])),
      widths: Object.fromEntries(widths.map((r) => [String(r.bucket_seconds), r.n])),
    };
  }
  return out;
}

describe("compaction", () => {
  it("folds minutes older than a day into whole hours and keeps every sum", async () => {
    const project = await bed.seed(1, 1);
    // Three hours of minutes ending 25 h ago (all past the cutoff), and an hour of fresh ones.
    const oldEnd = NOW - 25 * HOUR_MS - 30 * 60_000;
    await minuteRows(project, oldEnd, 180);
    await minuteRows(project, NOW, 60);
    const before = await shape(project);
    const outcome = await compaction().compact();
    expect(outcome.folded[60]).toBeGreaterThanOrEqual(180 * HISTORY_TABLES.length);
    const after = await shape(project);
    for (const table of HISTORY_TABLES) {
      expect(after[table.name].sums).toEqual(before[table.name].sums);
      // The fresh hour stays in minutes; the old minutes became hour rows.
      expect(after[table.name].widths["60"]).toBe(60);
      expect(after[table.name].widths["3600"]).toBeGreaterThanOrEqual(3);
    }
    // A device's encrypted DNS closed folds with its other counts: 2n in each minute's row.
    const sumTo = (n: number) => (n * (n + 1)) / 2;
    expect(after.tunnel_device_metrics.sums.encrypted_dns_closed).toBe(
      2 * (sumTo(180) + sumTo(60)),
    );
    const hours = await bed.database.sql`select bucket_start::text, requests::int, status
      from proxy_metrics where project_id = ${project.projectId} and bucket_seconds = 3600
      order by bucket_start`;
    // Each row starts on an hour boundary; the newest minute's status is the row's.
    for (const row of hours) expect(new Date(row.bucket_start).getTime() % HOUR_MS).toBe(0);
    expect(hours.length).toBeGreaterThanOrEqual(3);
    expect(hours.length).toBeLessThanOrEqual(4);
    expect(hours.at(-1)!.status).toBe("degraded");
    // A second run finds nothing left to fold.
    expect((await compaction().compact()).folded[60]).toBe(0);
  });

  it("catches up weeks in one pass: minutes to hours to six hours to days", async () => {
    const project = await bed.seed(1, 1);
    // Six hours of minutes 40 days ago.
    await minuteRows(project, NOW - 40 * DAY_MS, 360);
    const before = await shape(project);
    const outcome = await compaction().compact();
    expect(outcome.folded[60]).toBeGreaterThan(0);
    expect(outcome.folded[3600]).toBeGreaterThan(0);
    expect(outcome.folded[21600]).toBeGreaterThan(0);
    const after = await shape(project);
    for (const table of HISTORY_TABLES) {
      expect(after[table.name].sums).toEqual(before[table.name].sums);
      expect(Object.keys(after[table.name].widths)).toEqual(["86400"]);
    }
  });

  it("two passes at once fold each row exactly once and keep the totals", async () => {
    const project = await bed.seed(1, 1);
    await minuteRows(project, NOW - 2 * DAY_MS, 600);
    const before = await shape(project);
    // Two workers: two pools, two sessions, the same project at the same time.
    const other = createDatabase(bed.databaseUrl, { poolSize: 2 });
    try {
      const results = await Promise.allSettled([
        compaction().compact(),
        compaction(other).compact(),
      ]);
      // A deadlock aborts one pass (its entry is delivered again): run it again then.
      for (const result of results) {
        if (result.status === "rejected") await compaction().compact();
      }
      const folded = results.reduce(
        (n, r) => n + (r.status === "fulfilled" ? r.value.folded[60] : 0),
        0,
      );
      const after = await shape(project);
      for (const table of HISTORY_TABLES) {
        expect(after[table.name].sums).toEqual(before[table.name].sums);
      }
      // Every minute row was folded once, by one of the passes: 600 per table of six.
      const rerun = await compaction().compact();
      expect(folded + rerun.folded[60]).toBe(600 * HISTORY_TABLES.length);
      expect(after.proxy_metrics.widths["60"]).toBeUndefined();
    } finally {
      await other.close();
    }
  });

  it("trims a project's history past its retention, and keeps all with 0", async () => {
    const short = await bed.seed(1, 1);
    const forever = await bed.seed(1, 1);
    await bed.database.sql`update projects set metrics_retention_days = 3
      where id = ${short.projectId}`;
    await bed.database.sql`update projects set metrics_retention_days = 0
      where id = ${forever.projectId}`;
    for (const project of [short, forever]) {
      await minuteRows(project, NOW - 5 * DAY_MS, 30);
      await minuteRows(project, NOW - 2 * DAY_MS, 30);
    }
    const outcome = await compaction().compact();
    expect(outcome.expired).toBeGreaterThan(0);
    const oldest = async (project: SeededProject) =>
      (await bed.database.sql`select min(bucket_start)::text as at from project_metrics
        where project_id = ${project.projectId}`)[0].at;
    expect(NOW - new Date(await oldest(short)).getTime()).toBeLessThan(3 * DAY_MS);
    expect(NOW - new Date(await oldest(forever)).getTime()).toBeGreaterThan(5 * DAY_MS);
  });

  it("removes the totals of entities that are gone, gone devices' history, and flush records older than a day", async () => {
    const project = await bed.seed(1, 2);
    const [kept, removed] = project.proxyIds[0];
    const sql = bed.database.sql;
    for (const id of [kept, removed]) {
      await sql`insert into metric_totals (entity_kind, entity_id, requests) values
        ('proxy', ${id}, 5)`;
    }
    await sql`insert into metric_totals (entity_kind, entity_id, requests) values
      ('project', ${project.projectId}, 10)`;
    await sql`delete from proxies where id = ${removed}`;
    // Devices: their history has no foreign key, so a gone device's goes with its totals here.
    const keptDevice = await bed.seedDevice(project.projectId);
    const goneDevice = await bed.seedDevice(project.projectId);
    for (const id of [keptDevice, goneDevice]) {
      await sql`insert into metric_totals (entity_kind, entity_id, requests) values
        ('tunnel_device', ${id}, 3)`;
      await sql`insert into tunnel_device_metrics (project_id, device_id, protocol, bucket_start,
        bucket_seconds, requests) values (${project.projectId}, ${id}, 'wireguard',
        ${new Date(NOW - 60_000).toISOString()}::timestamptz, 60, 3)`;
    }
    await sql`delete from tunnel_devices where id = ${goneDevice}`;
    await sql`insert into metric_flushes (flush_id, committed_at) values
      ('1-0', ${new Date(NOW - DAY_MS - 60_000).toISOString()}::timestamptz),
      ('2-0', ${new Date(NOW - 60_000).toISOString()}::timestamptz)`;
    const outcome = await compaction().compact();
    expect(outcome.totalsRemoved).toBe(2);
    const totals = await sql`select entity_id::text from metric_totals
      where entity_id in (${kept}, ${removed}, ${project.projectId}, ${keptDevice}, ${goneDevice})`;
    expect(totals.map((r) => r.entity_id).sort()).toEqual(
      [kept, project.projectId, keptDevice].sort(),
    );
    const history = await sql`select device_id::text from tunnel_device_metrics
      where project_id = ${project.projectId}`;
    expect(history.map((r) => r.device_id)).toEqual([keptDevice]);
    expect(outcome.expired).toBeGreaterThanOrEqual(1);
    const flushes = await sql`select flush_id from metric_flushes where flush_id in ('1-0', '2-0')`;
    expect(flushes.map((r) => r.flush_id)).toEqual(["2-0"]);
  });
});

describe("the system snapshot", () => {
  it("stores a reading at most once per interval, with sizes, Redis and counts", async () => {
    const project = await bed.seed(2, 3);
    let now = NOW;
    const job = new SystemSnapshotJob({
      database: bed.database,
      redis: bed.redis,
      keys: bed.keys,
      logger: bed.logger,
      intervalMs: 300_000,
      retentionDays: 7,
      now: () => now,
    });
    await bed.redis.set(bed.keys.feedHead, "x");
    expect(await job.snapshot()).toBe(true);
    // Published twice, redelivered: no second row within nine tenths of the interval.
    now += 200_000;
    expect(await job.snapshot()).toBe(false);
    now += 80_000;
    expect(await job.snapshot()).toBe(true);
    const rows = await bed.database.sql`select * from system_metrics order by recorded_at`;
    expect(rows).toHaveLength(2);
    const row = rows[1];
    expect(Number(row.database_bytes)).toBeGreaterThan(1_000_000);
    expect(Number(row.table_bytes.proxies)).toBeGreaterThan(0);
    expect(Number(row.redis_used_memory_bytes)).toBeGreaterThan(0);
    expect(Number(row.redis_prefix_keys)).toBeGreaterThanOrEqual(1);
    expect(row.projects).toBeGreaterThanOrEqual(1);
    expect(row.connectors).toBeGreaterThanOrEqual(2);
    expect(row.proxies_by_status.healthy).toBeGreaterThanOrEqual(6);
    expect(row.proxies_by_status.terminating).toBe(0);
    void project;
    // Retention after a stored reading: readings past 7 days go.
    now += 8 * DAY_MS;
    expect(await job.snapshot()).toBe(true);
    const left = await bed.database.sql`select count(*)::int as n from system_metrics`;
    expect(left[0].n).toBe(1);
  });
});
