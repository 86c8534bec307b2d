/**
 * One metrics flush in a process of its own, as a worker runs it, for the `metrics` suite:
 * `tsx scripts/bench/metrics-flush-child.ts <database url> <redis url> <prefix> <flush id>`.
 * Prints one JSON line: the flush's outcome, its wall and CPU time, and the process's resident
 * memory before it and at its peak, so the parent judges the worker's time and memory alone.
 */
import { Writable } from "node:stream";
import { Redis } from "ioredis";
import { createLogger } from "../../control/core/logging.ts";
import { MetricsFlushJob } from "../../control/jobs/metrics-flush.ts";
import { createDatabase } from "../../db/client.ts";
import { redisKeys } from "../../shared/redis-keys.ts";

const [databaseUrl, redisUrl, prefix, flushId] = process.argv.slice(2);
if (!flushId) {
  throw new Error("usage: metrics-flush-child <database url> <redis url> <prefix> <id>");
}

const database = createDatabase(databaseUrl, { poolSize: 4 });
const redis = new Redis(redisUrl);
const logger = createLogger({
  level: "warn",
  instance: "bench",
  role: "worker",
  destination: new Writable({ write: (_chunk, _encoding, callback) => callback() }),
});
const job = new MetricsFlushJob({ database, redis, keys: redisKeys(prefix), logger });
try {
  // Connected and warm before the clock starts, as a worker is.
  await database.sql`select 1`;
  await redis.ping();
  const rssBefore = process.memoryUsage().rss;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const outcome = await job.flush(flushId);
  const wallMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  process.stdout.write(
    JSON.stringify({
      outcome,
      wallMs,
      cpuMs: (cpu.user + cpu.system) / 1000,
      rssBefore,
      maxRss: process.resourceUsage().maxRSS * 1024,
    }) + "\n",
  );
} finally {
  redis.disconnect();
  await database.close();
}
