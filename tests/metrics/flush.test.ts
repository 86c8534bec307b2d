/**
 * The metrics flush against real Postgres and Redis, windows written by the gateway's own
 * metering: exact history and totals (a tunnel device's with its row's project and protocol,
 * and its connections closed as encrypted DNS), and the spec's cases: a redelivery of the same
 * entry, a give-up before and after the commit, two flushes at once, a parent removed meanwhile
 * (a device too), and a Postgres outage in the middle of a flush (a private server this file
 * stops). No count is lost or written twice.
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MetricsFlushJob } from "../../control/jobs/metrics-flush.ts";
import { commitFlush, flushBucket } from "../../control/metrics/history-writer.ts";
import { FlushStaging } from "../../control/metrics/staging.ts";
import { LocalPostgres } from "../../scripts/local-stores.ts";
import { freePort } from "../../testkit/ports.ts";
import { StoreUnavailableError } from "../../shared/errors.ts";
import {
  ConnectorWindows,
  DeviceWindows,
  ProjectWindows,
  ProxyWindows,
  readCounts,
  TRANSFER_FIELDS,
  windowKey,
} from "../../shared/metric-windows.ts";
import {
  closeEncryptedDns,
  encryptedDnsClosedOf,
  entryId,
  historySums,
  meter,
  type MetricsBed,
  type SeededProject,
  startMetricsBed,
  sums,
  totalsOf,
  type Transfer,
} from "../../testkit/metrics-bed.ts";

let bed: MetricsBed;

beforeAll(async () => {
  bed = await startMetricsBed();
});

afterAll(async () => {
  await bed?.close();
});

function job(b: MetricsBed = bed): MetricsFlushJob {
  return new MetricsFlushJob({
    database: b.database,
    redis: b.redis,
    keys: b.keys,
    logger: b.logger,
  });
}

/** Transfers spread over a project's proxies and two hosts, with a failure and a fraction. */
function traffic(project: SeededProject, count: number, seed = 1): Transfer[] {
  const transfers: Transfer[] = [];
  for (let i = 0; i < count; i++) {
    const c = i % project.connectorIds.length;
    const round = Math.floor(i / project.connectorIds.length);
    const proxies = project.proxyIds[c];
    transfers.push({
      projectId: project.projectId,
      connectorId: project.connectorIds[c],
      proxyId: proxies[round % proxies.length],
      host: round % 3 === 0 ? "example.com" : "api.example.org",
      sent: 100 + i * seed,
      received: 1000 + 7 * i,
      latencyMs: 10.25 + i,
      ok: i % 5 !== 4,
    });
  }
  return transfers;
}

async function metered(transfers: readonly Transfer[], b: MetricsBed = bed): Promise<void> {
  const m = b.metering();
  meter(m, transfers);
  expect(await m.publishNow()).toBe(true);
}

async function expectHistory(project: SeededProject, transfers: readonly Transfer[]) {
  const mine = (filter: (t: Transfer) => boolean) => sums(transfers.filter(filter));
  expect(await historySums(bed.database, "project_metrics", "project_id", project.projectId))
    .toEqual(mine(() => true));
  expect(await totalsOf(bed.database, "project", project.projectId)).toEqual(mine(() => true));
  for (const [c, connectorId] of project.connectorIds.entries()) {
    expect(await historySums(bed.database, "connector_metrics", "connector_id", connectorId))
      .toEqual(mine((t) => t.connectorId === connectorId));
    for (const proxyId of project.proxyIds[c]) {
      const expected = mine((t) => t.proxyId === proxyId);
      expect(await historySums(bed.database, "proxy_metrics", "proxy_id", proxyId))
        .toEqual(expected);
      expect(await totalsOf(bed.database, "proxy", proxyId)).toEqual(
        expected.requests > 0 ? expected : undefined,
      );
    }
  }
  const hosts = await bed.database.sql`select host, sum(requests)::int as requests
    from host_metrics where project_id = ${project.projectId} group by host order by host`;
  const byHost = new Map<string, number>();
  for (const t of transfers) byHost.set(t.host, (byHost.get(t.host) ?? 0) + 1);
  expect(hosts.map((r) => [r.host, r.requests])).toEqual(
    [...byHost.entries()].sort(([a], [b]) => a.localeCompare(b)),
  );
}

async function liveWindow(
  kind: typeof ProjectWindows | typeof ConnectorWindows | typeof DeviceWindows,
  id: string,
) {
  return readCounts(TRANSFER_FIELDS, await bed.redis.hgetall(windowKey(bed.keys, kind, id)));
}

async function flushRows(flushId: string): Promise<number> {
  const rows = await bed.database.sql`select count(*)::int as n from metric_flushes
    where flush_id = ${flushId}`;
  return rows[0].n;
}

describe("the metrics flush", () => {
  it("moves every window into the history and the totals exactly, and clears Redis", async () => {
    const project = await bed.seed(2, 3);
    const transfers = traffic(project, 40);
    await metered(transfers);
    const flushId = entryId();
    const outcome = await job().flush(flushId);
    expect(outcome.result).toBe("committed");
    await expectHistory(project, transfers);
    // Minute rows in the entry's minute, the proxies' statuses recorded.
    const buckets = await bed.database.sql`select distinct bucket_start, bucket_seconds, status
      from proxy_metrics where project_id = ${project.projectId}`;
    expect(buckets.map((r) => [new Date(r.bucket_start).getTime(), r.bucket_seconds, r.status]))
      .toEqual([
        [flushBucket(flushId).getTime(), 60, "healthy"],
      ]);
    expect(await flushRows(flushId)).toBe(1);
    expect(await bed.redis.exists(bed.keys.metricsTaken(flushId))).toBe(0);
    expect(await liveWindow(ProjectWindows, project.projectId)).toMatchObject({ requests: 0 });
    // A later flush with nothing metered takes nothing and records nothing.
    const idle = entryId(Date.now() + 1);
    expect((await job().flush(idle)).result).toBe("empty");
    expect(await flushRows(idle)).toBe(0);
    await expectHistory(project, transfers);
  });

  it("a redelivery of a committed flush only clears its staging and writes nothing", async () => {
    const project = await bed.seed(1, 2);
    const transfers = traffic(project, 10);
    await metered(transfers);
    const flushId = entryId();
    expect((await job().flush(flushId)).result).toBe("committed");
    // Counts metered after the commit wait for the next flush, not this one's redelivery.
    const later = traffic(project, 4, 3);
    await metered(later);
    expect((await job().flush(flushId)).result).toBe("recorded");
    await expectHistory(project, transfers);
    expect((await job().flush(entryId(Date.now() + 5))).result).toBe("committed");
    await expectHistory(project, [...transfers, ...later]);
  });

  it("a redelivery after a delivery died past its take commits what both took, once", async () => {
    const project = await bed.seed(1, 2);
    const [proxyA, proxyB] = project.proxyIds[0];
    const first = traffic(project, 12).map((t) => ({ ...t, proxyId: proxyA }));
    await metered(first);
    const flushId = entryId();
    // The first delivery took the windows and died before its commit.
    const staging = new FlushStaging({ redis: bed.redis, keys: bed.keys });
    expect((await staging.take(flushId)).staged).toBeGreaterThan(0);
    // Meanwhile metering wrote again: to windows staged already (recreated) and a new one.
    const second = traffic(project, 6, 2).map((t) => ({ ...t, proxyId: proxyB }));
    await metered(second);
    const outcome = await job().flush(flushId);
    expect(outcome.result).toBe("committed");
    // The redelivery took what was not staged yet (proxy B's window) and committed all once;
    // the recreated windows wait for the next flush.
    expect(outcome.take!.staged).toBe(1);
    expect(await historySums(bed.database, "proxy_metrics", "proxy_id", proxyA))
      .toEqual(sums(first));
    expect(await historySums(bed.database, "proxy_metrics", "proxy_id", proxyB))
      .toEqual(sums(second));
    expect(await totalsOf(bed.database, "project", project.projectId)).toEqual(sums(first));
    expect(await flushRows(flushId)).toBe(1);
    expect((await job().flush(entryId(Date.now() + 1))).result).toBe("committed");
    await expectHistory(project, [...first, ...second]);
  });

  it("a window staged already is never overwritten: one recreated meanwhile waits for the next flush", async () => {
    const project = await bed.seed(1, 1);
    const first = traffic(project, 3);
    await metered(first);
    const flushId = entryId();
    const staging = new FlushStaging({ redis: bed.redis, keys: bed.keys });
    await staging.take(flushId);
    const second = traffic(project, 2, 5);
    await metered(second);
    // The same windows again: all staged under this flush already.
    const retake = await staging.take(flushId);
    expect(retake).toMatchObject({ staged: 0 });
    expect(retake.skipped).toBeGreaterThan(0);
    // The recreated project window is still live and listed.
    expect(await liveWindow(ProjectWindows, project.projectId)).toMatchObject({ requests: 2 });
    expect(
      await bed.redis.sismember(
        bed.keys.metricIndex("project"),
        windowKey(
          bed.keys,
          ProjectWindows,
          project.projectId,
        ),
      ),
    ).toBe(1);
    // Committing the staged hash alone writes the first transfers only.
    await commitFlush(bed.database.sql, flushId, flushBucket(flushId), staging.read(flushId));
    await staging.clear(flushId);
    await expectHistory(project, first);
    expect((await job().flush(entryId(Date.now() + 3))).result).toBe("committed");
    await expectHistory(project, [...first, ...second]);
  });

  it("a give-up before the commit hands the counts back, by field type, for the next flush", async () => {
    const project = await bed.seed(1, 2);
    const deviceId = await bed.seedDevice(project.projectId);
    const transfers = traffic(project, 9).map((t, i) => (i < 3 ? { ...t, deviceId } : t));
    const m = bed.metering();
    meter(m, transfers);
    closeEncryptedDns(m, project.projectId, deviceId, 4);
    expect(await m.publishNow()).toBe(true);
    const flushId = entryId();
    const staging = new FlushStaging({ redis: bed.redis, keys: bed.keys });
    await staging.take(flushId);
    expect(await liveWindow(ProjectWindows, project.projectId)).toMatchObject({ requests: 0 });
    await job().giveUp({ ids: [flushId], keys: ["all"], deliveries: 6 });
    expect(await bed.redis.exists(bed.keys.metricsTaken(flushId))).toBe(0);
    expect(await flushRows(flushId)).toBe(0);
    // Back in the live windows, the latency sum with its fraction (HINCRBYFLOAT).
    expect(await liveWindow(ProjectWindows, project.projectId)).toEqual(sums(transfers));
    const connector = project.connectorIds[0];
    expect(await liveWindow(ConnectorWindows, connector)).toEqual(sums(transfers));
    // A device's window with its own field too.
    expect(
      readCounts(
        DeviceWindows.fields,
        await bed.redis.hgetall(windowKey(bed.keys, DeviceWindows, deviceId)),
      ),
    ).toEqual({ ...sums(transfers.slice(0, 3)), encrypted_dns_closed: 4 });
    // And metering keeps adding to them as to any window: integers stay integers.
    const more = traffic(project, 2, 9);
    await metered(more);
    expect((await job().flush(entryId(Date.now() + 7))).result).toBe("committed");
    await expectHistory(project, [...transfers, ...more]);
    expect(await encryptedDnsClosedOf(bed.database, deviceId)).toEqual({ history: 4, totals: 4 });
    // A second give-up of the same flush finds nothing to give back.
    await job().giveUp({ ids: [flushId], keys: ["all"], deliveries: 7 });
    await expectHistory(project, [...transfers, ...more]);
  });

  it("a give-up after the commit clears the staging and gives nothing back", async () => {
    const project = await bed.seed(1, 2);
    const transfers = traffic(project, 8);
    await metered(transfers);
    const flushId = entryId();
    // A delivery committed and died before its clear.
    const staging = new FlushStaging({ redis: bed.redis, keys: bed.keys });
    await staging.take(flushId);
    await commitFlush(bed.database.sql, flushId, flushBucket(flushId), staging.read(flushId));
    expect(await bed.redis.exists(bed.keys.metricsTaken(flushId))).toBe(1);
    await job().giveUp({ ids: [flushId], keys: ["all"], deliveries: 6 });
    expect(await bed.redis.exists(bed.keys.metricsTaken(flushId))).toBe(0);
    expect(await liveWindow(ProjectWindows, project.projectId)).toMatchObject({ requests: 0 });
    expect((await job().flush(entryId(Date.now() + 2))).result).toBe("empty");
    await expectHistory(project, transfers);
  });

  it("two flushes at once take disjoint windows and each commits once", async () => {
    const project = await bed.seed(3, 1500);
    const transfers = traffic(project, 9000);
    await metered(transfers);
    const a = entryId(Date.now(), 0);
    const b = entryId(Date.now(), 1);
    const outcomes = await Promise.all([job().flush(a), job().flush(b)]);
    const windows = outcomes.reduce((n, o) => n + o.windows, 0);
    const distinct = (key: (t: Transfer) => string) => new Set(transfers.map(key)).size;
    // Proxies, connectors, the project, hosts, and the failure keys of the failed transfers.
    const failed = transfers.filter((t) => !t.ok);
    expect(windows).toBe(
      distinct((t) => t.proxyId) + distinct((t) => t.connectorId) + 1 +
        distinct((t) => `${t.connectorId}:${t.host}`) +
        new Set(failed.map((t) => t.connectorId)).size,
    );
    // Each took what the other had not (one may find nothing left), and committed once.
    for (const o of outcomes) expect(["committed", "empty"]).toContain(o.result);
    await expectHistory(project, transfers);
    for (const id of [a, b]) {
      const outcome = outcomes.find((o) => o.flushId === id)!;
      expect(await flushRows(id)).toBe(outcome.result === "committed" ? 1 : 0);
    }
  });

  it("drops the windows of entities removed meanwhile and writes the rest", async () => {
    const project = await bed.seed(2, 2);
    const transfers = traffic(project, 16);
    await metered(transfers);
    const [gone] = project.proxyIds[0];
    await bed.database.sql`delete from proxies where id = ${gone}`;
    const outcome = await job().flush(entryId());
    expect(outcome.result).toBe("committed");
    expect(outcome.written!.proxies).toBe(3);
    expect(await historySums(bed.database, "proxy_metrics", "proxy_id", gone)).toMatchObject({
      requests: 0,
    });
    expect(await totalsOf(bed.database, "proxy", gone)).toBeUndefined();
    // The project and connectors still count the removed proxy's requests.
    expect(await totalsOf(bed.database, "project", project.projectId)).toEqual(sums(transfers));
    const removedConnector = project.connectorIds[1];
    await metered(traffic(project, 4));
    await bed.database.sql`delete from connectors where id = ${removedConnector}`;
    expect((await job().flush(entryId(Date.now() + 1))).result).toBe("committed");
    expect(await historySums(bed.database, "connector_metrics", "connector_id", removedConnector))
      .toMatchObject({ requests: 0 });
  });

  it("writes a tunnel device's window with the project and protocol of its row, and its totals", async () => {
    const project = await bed.seed(1, 2);
    const deviceId = await bed.seedDevice(project.projectId);
    const fromDevice = traffic(project, 6).map((t) => ({ ...t, deviceId }));
    const byUsername = traffic(project, 4, 2);
    const m = bed.metering();
    meter(m, [...fromDevice, ...byUsername]);
    // Three of the device's connections closed as encrypted DNS: no requests.
    closeEncryptedDns(m, project.projectId, deviceId, 3);
    expect(await m.publishNow()).toBe(true);
    const flushId = entryId();
    const outcome = await job().flush(flushId);
    expect(outcome.result).toBe("committed");
    expect(outcome.written!.devices).toBe(1);
    expect(await historySums(bed.database, "tunnel_device_metrics", "device_id", deviceId))
      .toEqual(sums(fromDevice));
    expect(await totalsOf(bed.database, "tunnel_device", deviceId)).toEqual(sums(fromDevice));
    expect(await encryptedDnsClosedOf(bed.database, deviceId)).toEqual({ history: 3, totals: 3 });
    // No other table holds it: the project's totals count no request for it.
    expect(await totalsOf(bed.database, "project", project.projectId))
      .toEqual(sums([...fromDevice, ...byUsername]));
    // The window names the device alone: the row's project and protocol are the device's.
    const rows = await bed.database.sql`select project_id::text, protocol, bucket_start,
      bucket_seconds from tunnel_device_metrics where device_id = ${deviceId}`;
    expect(rows.map((r) => [r.project_id, r.protocol, new Date(r.bucket_start).getTime()]))
      .toEqual([[project.projectId, "wireguard", flushBucket(flushId).getTime()]]);
    expect(rows[0].bucket_seconds).toBe(60);
    // The project, its connector and proxies count the device's transfers as any client's.
    await expectHistory(project, [...fromDevice, ...byUsername]);
    expect(await liveWindow(DeviceWindows, deviceId)).toMatchObject({ requests: 0 });
    // A window of encrypted DNS closed alone is a row of its own, added to the totals.
    closeEncryptedDns(m, project.projectId, deviceId, 2);
    expect(await m.publishNow()).toBe(true);
    expect((await job().flush(entryId(Date.now() + 60_000))).written!.devices).toBe(1);
    expect(await encryptedDnsClosedOf(bed.database, deviceId)).toEqual({ history: 5, totals: 5 });
    expect(await totalsOf(bed.database, "tunnel_device", deviceId)).toEqual(sums(fromDevice));
  });

  it("drops the window of a device deleted before the flush, and writes the rest", async () => {
    const project = await bed.seed(1, 1);
    const kept = await bed.seedDevice(project.projectId);
    const gone = await bed.seedDevice(project.projectId);
    const keptTraffic = traffic(project, 3).map((t) => ({ ...t, deviceId: kept }));
    const goneTraffic = traffic(project, 2, 4).map((t) => ({ ...t, deviceId: gone }));
    await metered([...keptTraffic, ...goneTraffic]);
    await bed.database.sql`delete from tunnel_devices where id = ${gone}`;
    const outcome = await job().flush(entryId());
    expect(outcome.result).toBe("committed");
    expect(outcome.written!.devices).toBe(1);
    expect(await historySums(bed.database, "tunnel_device_metrics", "device_id", gone))
      .toMatchObject({ requests: 0 });
    expect(await totalsOf(bed.database, "tunnel_device", gone)).toBeUndefined();
    expect(await historySums(bed.database, "tunnel_device_metrics", "device_id", kept))
      .toEqual(sums(keptTraffic));
    // Taken from Redis all the same, and still counted for the project.
    expect(await bed.redis.exists(windowKey(bed.keys, DeviceWindows, gone))).toBe(0);
    expect(await totalsOf(bed.database, "project", project.projectId))
      .toEqual(sums([...keptTraffic, ...goneTraffic]));
  });

  it("drops windows whose keys this release cannot read, and flushes the rest", async () => {
    const project = await bed.seed(1, 1);
    const transfers = traffic(project, 2);
    await metered(transfers);
    const bogus = bed.keys.metricWindow("proxy", "not-a-uuid");
    await bed.redis.hset(bogus, "requests", "5");
    await bed.redis.sadd(bed.keys.metricIndex("proxy"), bogus);
    const outcome = await job().flush(entryId());
    expect(outcome).toMatchObject({ result: "committed", unreadable: 1 });
    await expectHistory(project, transfers);
    expect(bed.lines.some((l) => l.msg.includes("cannot read"))).toBe(true);
  });

  it("a proxy window is staged with every field, absent ones as zero", async () => {
    const project = await bed.seed(1, 1);
    const proxyId = project.proxyIds[0][0];
    const key = windowKey(bed.keys, ProxyWindows, proxyId);
    await bed.redis.hset(key, "requests", "2", "bytes_sent", "11");
    await bed.redis.sadd(bed.keys.metricIndex("proxy"), key);
    expect((await job().flush(entryId())).result).toBe("committed");
    expect(await totalsOf(bed.database, "proxy", proxyId)).toEqual({
      requests: 2,
      successes: 0,
      failures: 0,
      bytes_sent: 11,
      bytes_received: 0,
      latency_sum_ms: 0,
    });
  });
});

describe("the metrics flush through a Postgres outage", () => {
  let folder: string;
  let pg: LocalPostgres;
  let own: MetricsBed;

  beforeAll(async () => {
    folder = await mkdtemp(join(tmpdir(), "ox-flush-pg-"));
    await chmod(folder, 0o755);
    pg = new LocalPostgres({ dir: join(folder, "postgres"), port: await freePort() });
    await pg.start();
    await pg.createDatabase("flush");
    own = await startMetricsBed({ databaseUrl: pg.url("flush") });
  });

  afterAll(async () => {
    await pg?.start().catch(() => {});
    await own?.close();
    await pg?.stop();
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  it("loses no count and writes none twice: the entry stays pending, the next delivery commits", async () => {
    const project = await own.seed(1, 3);
    const transfers = traffic(project, 30);
    await metered(transfers, own);
    const flushId = entryId();
    const flusher = job(own);
    // With Postgres stopped before a delivery starts, it takes nothing: the windows stay live.
    await pg.stop();
    await expect(flusher.flush(flushId)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await own.redis.exists(own.keys.metricsTaken(flushId))).toBe(0);
    expect(
      Number(
        await own.redis.hget(
          windowKey(own.keys, ProjectWindows, project.projectId),
          "requests",
        ),
      ),
    ).toBe(30);
    // A delivery that took the windows, then met Postgres gone (stopped while it ran).
    await pg.start();
    const staging = new FlushStaging({ redis: own.redis, keys: own.keys });
    await staging.take(flushId);
    await pg.stop();
    await expect(flusher.flush(flushId)).rejects.toBeInstanceOf(StoreUnavailableError);
    // A give-up can't tell whether it committed: it raises too, and gives nothing back.
    await expect(flusher.giveUp({ ids: [flushId], keys: ["all"], deliveries: 6 })).rejects
      .toBeInstanceOf(StoreUnavailableError);
    // The counts wait in the staging hash, no longer in the live windows.
    expect(await own.redis.hlen(own.keys.metricsTaken(flushId))).toBeGreaterThan(0);
    expect(await own.redis.exists(windowKey(own.keys, ProjectWindows, project.projectId)))
      .toBe(0);
    const more = traffic(project, 5, 4);
    await metered(more, own);
    await pg.start();
    expect((await flusher.flush(flushId)).result).toBe("committed");
    const requests = async () =>
      (await totalsOf(own.database, "project", project.projectId))?.requests;
    expect(await requests()).toBe(30);
    expect((await flusher.flush(flushId)).result).toBe("recorded");
    expect(await requests()).toBe(30);
    // What was metered during the outage goes with the next flush.
    expect((await flusher.flush(entryId(Date.now() + 1))).result).toBe("committed");
    expect(await requests()).toBe(35);
  });
});
