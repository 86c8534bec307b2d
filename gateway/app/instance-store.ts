/**
 * Where the heartbeat (heartbeat.ts) writes the process's keys: the instance registry in Redis
 * (shared/instance-registry.ts), over the routing core's client, each call under the request
 * deadline so a Redis that is gone cannot hold a beat or the stop.
 */
import type { GatewayRedis } from "../../shared/redis/contract.ts";
import { withdrawInstanceKeys, writeInstanceKeys } from "../../shared/instance-registry.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { withDeadline } from "../../shared/async/deadline.ts";
import type { InstanceStore } from "./heartbeat.ts";

export function redisInstanceStore(
  redis: GatewayRedis,
  keys: RedisKeys,
  instance: string,
  deadlineMs: number,
): InstanceStore {
  return {
    write: (registration, snapshotJson) =>
      withDeadline(
        "heartbeat write",
        deadlineMs,
        () => writeInstanceKeys(redis, keys, instance, registration, snapshotJson),
      ),
    withdraw: () =>
      withDeadline(
        "heartbeat withdrawal",
        deadlineMs,
        () => withdrawInstanceKeys(redis, keys, instance),
      ),
  };
}
