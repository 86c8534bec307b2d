/**
 * tunnel_last_seen, every 10 seconds, install-wide: reads every carrier's published tunnel status
 * (gateway/tunnel-plane/status.ts), takes the newest sighting per device, and moves each device's
 * last sighting forward in one statement per protocol. A WireGuard status names a device by its
 * public key, the only thing a gateway knows it by; the statement matches the key itself, so the
 * worker needs no map of devices. An OpenVPN status names a device by its id. A sighting never moves one backward, and with nothing published
 * the run opens no Postgres session. The audit log ignores the column: a sighting is bookkeeping.
 */
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { JobKind } from "../../shared/roles.ts";
import { readTunnelStatus } from "../../shared/tunnel-status.ts";
import type { Job } from "../core/job.ts";
import type { Logger } from "../core/logging.ts";

export interface TunnelLastSeenOptions {
  database: Database;
  redis: Redis;
  keys: RedisKeys;
  logger: Logger;
}

export interface Sightings {
  /** The newest sighting per WireGuard public key. */
  wireguard: Map<string, number>;
  /** The newest sighting per OpenVPN device id. */
  openvpn: Map<string, number>;
}

/** The newest sighting per device across every carrier's status. */
export async function newestSightings(redis: Redis, keys: RedisKeys): Promise<Sightings> {
  const newest: Sightings = { wireguard: new Map(), openvpn: new Map() };
  const carriers = await redis.smembers(keys.tunnelCarriers);
  if (carriers.length === 0) return newest;
  const texts = await redis.mget(...carriers.map((instance) => keys.tunnelStatus(instance)));
  for (const text of texts) {
    const status = readTunnelStatus(text);
    if (status === undefined) continue;
    for (const protocol of ["wireguard", "openvpn"] as const) {
      const into = newest[protocol];
      for (const [key, ms] of Object.entries(status[protocol])) {
        if (ms > (into.get(key) ?? 0)) into.set(key, ms);
      }
    }
  }
  return newest;
}

/** Text arrays of keys and their sighting times, as the statements take them. */
function columns(sightings: Map<string, number>): [string[], string[]] {
  const keys = [...sightings.keys()];
  return [keys, keys.map((key) => new Date(sightings.get(key)!).toISOString())];
}

export class TunnelLastSeenJob implements Job {
  readonly kind = JobKind.tunnelLastSeen;
  readonly #o: TunnelLastSeenOptions;

  constructor(options: TunnelLastSeenOptions) {
    this.#o = options;
  }

  async run(): Promise<void> {
    const sightings = await newestSightings(this.#o.redis, this.#o.keys);
    if (sightings.wireguard.size === 0 && sightings.openvpn.size === 0) return;
    const sql = this.#o.database.sql;
    let moved = 0;
    // Text arrays, cast in the statement: the pool prepares nothing, so types are not inferred.
    if (sightings.wireguard.size > 0) {
      const [keys, seen] = columns(sightings.wireguard);
      moved += (await sql`
        update tunnel_devices d set last_seen_at = v.seen
        from unnest(${sql.array(keys)}::text[], ${sql.array(seen)}::text[]::timestamptz[])
          as v(public_key, seen)
        where d.protocol = 'wireguard' and d.public_key = v.public_key
          and (d.last_seen_at is null or d.last_seen_at < v.seen)`).count;
    }
    if (sightings.openvpn.size > 0) {
      // Ids that are not uuids (another release's, or garbage) match nothing rather than fail.
      const [ids, seen] = columns(sightings.openvpn);
      moved += (await sql`
        update tunnel_devices d set last_seen_at = v.seen
        from unnest(${sql.array(ids)}::text[], ${sql.array(seen)}::text[]::timestamptz[])
          as v(id, seen)
        where d.protocol = 'openvpn' and d.id::text = v.id
          and (d.last_seen_at is null or d.last_seen_at < v.seen)`).count;
    }
    if (moved > 0) this.#o.logger.debug({ devices: moved }, "Devices seen");
  }
}
