/**
 * tunnel_last_seen on a real Postgres and Redis: the newest sighting of each device (WireGuard by
 * public key, OpenVPN by id) across every gateway's published status moves its last_seen_at
 * forward, never back; a key or id no device has changes nothing; with nothing published the run leaves Postgres alone; index
 * hygiene drops carriers whose status expired.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newestSightings, TunnelLastSeenJob } from "../../control/jobs/tunnel-last-seen.ts";
import { IndexHygieneJob } from "../../control/jobs/housekeeping.ts";
import { type MetricsBed, startMetricsBed } from "../../testkit/metrics-bed.ts";
import type { JobQueue } from "../../control/core/job-queue.ts";

let bed: MetricsBed;
let projectId: string;

beforeAll(async () => {
  bed = await startMetricsBed();
  projectId = (await bed.seed(0, 0)).projectId;
});

afterAll(async () => {
  await bed?.close();
});

const key = (fill: string) => `${fill.repeat(42)}A=`;

async function device(name: string, publicKey: string, address: string): Promise<string> {
  const [row] = await bed.database.sql`
    insert into tunnel_devices
      (project_id, protocol, name, address, public_key, preshared_key_sealed)
    values (${projectId}, 'wireguard', ${name}, ${address}, ${publicKey}, 'sealed') returning id`;
  return row.id;
}

async function lastSeen(id: string): Promise<number | null> {
  const [row] = await bed.database.sql`select last_seen_at from tunnel_devices where id = ${id}`;
  return row.last_seen_at === null ? null : new Date(row.last_seen_at).getTime();
}

async function publish(
  instance: string,
  wireguard: Record<string, number>,
  ttlMs = 30_000,
  openvpn?: Record<string, number>,
) {
  await bed.redis.multi()
    .set(
      bed.keys.tunnelStatus(instance),
      // Without `openvpn`: as a gateway of the release before OpenVPN wrote it.
      JSON.stringify({ at: Date.now(), wireguard, ...(openvpn ? { openvpn } : {}) }),
      "PX",
      ttlMs,
    )
    .sadd(bed.keys.tunnelCarriers, instance)
    .exec();
}

function job() {
  return new TunnelLastSeenJob({
    database: bed.database,
    redis: bed.redis,
    keys: bed.keys,
    logger: bed.logger,
  });
}

describe("tunnel_last_seen", () => {
  it("moves each device to its newest sighting across gateways, never back", async () => {
    const phone = await device("phone", key("a"), "10.66.0.2");
    const laptop = await device("laptop", key("b"), "10.66.0.3");
    const t0 = Date.UTC(2026, 11, 6, 10, 0, 0);
    await publish("gw-1", { [key("a")]: t0, [key("b")]: t0 + 5_000, [key("z")]: t0 });
    await publish("gw-2", { [key("a")]: t0 + 9_000 });
    expect(Object.fromEntries((await newestSightings(bed.redis, bed.keys)).wireguard)).toEqual({
      [key("a")]: t0 + 9_000,
      [key("b")]: t0 + 5_000,
      [key("z")]: t0,
    });
    await job().run();
    expect(await lastSeen(phone)).toBe(t0 + 9_000);
    expect(await lastSeen(laptop)).toBe(t0 + 5_000);
    // An older sighting (a gateway that saw the device before another did) moves nothing.
    await publish("gw-2", { [key("a")]: t0 + 1_000 });
    await publish("gw-1", { [key("a")]: t0 + 2_000 });
    await job().run();
    expect(await lastSeen(phone)).toBe(t0 + 9_000);
  });

  it("moves an OpenVPN device by its id, the newest across gateways", async () => {
    const [row] = await bed.database.sql`
      insert into tunnel_devices (project_id, protocol, name, address, certificate,
        certificate_serial, private_key_sealed)
      values (${projectId}, 'openvpn', 'tablet', '10.67.0.2', 'pem', 'abc1', 'sealed')
      returning id`;
    const t0 = Date.UTC(2026, 11, 6, 11, 0, 0);
    await publish("gw-1", {}, 30_000, { [row.id]: t0, "not-a-uuid": t0 });
    await publish("gw-2", {}, 30_000, { [row.id]: t0 + 4_000 });
    await job().run();
    expect(await lastSeen(row.id)).toBe(t0 + 4_000);
    await publish("gw-2", {}, 30_000, { [row.id]: t0 + 1_000 });
    await job().run();
    expect(await lastSeen(row.id)).toBe(t0 + 4_000);
  });

  it("opens no Postgres session with nothing published, and hygiene drops expired carriers", async () => {
    await bed.redis.del(bed.keys.tunnelCarriers);
    let queried = false;
    const database = {
      ...bed.database,
      sql: new Proxy(bed.database.sql, {
        get(target, property, receiver) {
          queried = true;
          return Reflect.get(target, property, receiver);
        },
        apply(target, self, args) {
          queried = true;
          return Reflect.apply(target as never, self, args);
        },
      }),
    };
    await new TunnelLastSeenJob({ database, redis: bed.redis, keys: bed.keys, logger: bed.logger })
      .run();
    expect(queried).toBe(false);

    await publish("gw-gone", {}, 1);
    await publish("gw-live", {});
    await bed.redis.del(bed.keys.tunnelStatus("gw-gone"));
    const hygiene = new IndexHygieneJob({
      redis: bed.redis,
      keys: bed.keys,
      jobs: {} as JobQueue,
      logger: bed.logger,
    });
    expect(await hygiene.pruneInstances()).toBe(1);
    expect(await bed.redis.smembers(bed.keys.tunnelCarriers)).toEqual(["gw-live"]);
  });
});
