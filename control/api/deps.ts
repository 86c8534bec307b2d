/**
 * What the admin API is built from. The node builds each of these once per process and hands
 * them to `createApp`; tests build the same from their own stores.
 */
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import type { ControlSettings } from "../../shared/settings.ts";
import type { ChangeLog } from "../core/changelog.ts";
import type { Logger } from "../core/logging.ts";
import type { JobQueue } from "../jobs/queue.ts";

export interface Readiness {
  ready: boolean;
  /** Every reason not to serve, such as `postgres: no answer to the last heartbeat`. */
  reasons: string[];
}

export interface ProcessInfo {
  instance: string;
  role: string;
  version: string;
  startedAt: string;
}

export interface ApiDeps {
  settings: ControlSettings;
  database: Database;
  redis: Redis;
  keys: RedisKeys;
  changes: ChangeLog;
  jobs: JobQueue;
  logger: Logger;
  process: ProcessInfo;
  /** The node's readiness, from its last heartbeat and its runtimes. */
  readiness(): Readiness;
}
