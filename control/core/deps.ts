/**
 * What every part of a control process is built from, once per process by the node: the
 * settings, one Postgres pool, one Redis client with its key catalogue, the change log, the
 * run-now job queue, the logger and the provider registry. Roles take this bag (or a part of it) rather than each
 * listing the same fields again.
 */
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import type { ProviderRegistry } from "../../shared/vendors/registry.ts";
import type { ControlSettings } from "../../shared/settings.ts";
import type { JobQueue } from "./job-queue.ts";
import type { ChangeLog } from "./changelog.ts";
import type { Logger } from "./logging.ts";

export interface ControlDeps {
  settings: ControlSettings;
  database: Database;
  redis: Redis;
  keys: RedisKeys;
  changes: ChangeLog;
  jobs: JobQueue;
  logger: Logger;
  /** The provider descriptors this process knows, and how a connector's provider is built. */
  providers: ProviderRegistry;
}
