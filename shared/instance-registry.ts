/**
 * The keys every process's heartbeat writes (control processes and gateways alike), in one
 * MULTI: its registry key (the process is listed while it lives; the value says its role,
 * version, start and how long the keys live), its snapshot key (what it reports; its age is read
 * off its remaining TTL, so no two hosts' clocks are compared) and its id in the instance index.
 * Both keys live `ttl_ms` (three beats), so a process that dies leaves the list soon; a clean
 * stop withdraws them at once.
 */
import type { GatewayRedis } from "./redis/contract.ts";
import type { RedisKeys } from "./redis-keys.ts";

/** What every process's snapshot starts with, control process or gateway. */
export interface InstanceIdentity {
  instance: string;
  role: string;
  version: string;
  pid: number;
  hostname: string;
  started_at: string;
  beat_at: string;
  ready: boolean;
  /** Every reason not to serve (empty when ready). */
  reasons: string[];
}

/** The registry key's value. */
export interface InstanceRegistration {
  role: string;
  version: string;
  started_at: string;
  ttl_ms: number;
}

type InstanceKeys = Pick<RedisKeys, "instance" | "instanceSnapshot" | "instanceIndex">;

async function execOrThrow(
  multi: { exec(): Promise<[Error | null, unknown][] | null> },
): Promise<void> {
  const replies = await multi.exec();
  const failed = replies?.find(([error]) => error !== null);
  if (!replies || failed) throw failed?.[0] ?? new Error("Transaction discarded");
}

/** Writes the registry and snapshot keys and lists the process; raises the first error. */
export function writeInstanceKeys(
  redis: GatewayRedis,
  keys: InstanceKeys,
  instance: string,
  registration: InstanceRegistration,
  snapshotJson: string,
): Promise<void> {
  return execOrThrow(
    redis.multi()
      .set(keys.instance(instance), JSON.stringify(registration), "PX", registration.ttl_ms)
      .set(keys.instanceSnapshot(instance), snapshotJson, "PX", registration.ttl_ms)
      .sadd(keys.instanceIndex, instance),
  );
}

/** Removes the process's keys, so peers see it leave at once; raises the first error. */
export function withdrawInstanceKeys(
  redis: GatewayRedis,
  keys: InstanceKeys,
  instance: string,
): Promise<void> {
  return execOrThrow(
    redis.multi()
      .del(keys.instance(instance), keys.instanceSnapshot(instance))
      .srem(keys.instanceIndex, instance),
  );
}
