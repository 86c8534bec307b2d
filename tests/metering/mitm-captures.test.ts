/**
 * The Inspector's capture writer against a real Redis (a prefix of this file's own): captures
 * written to their project's capped stream as the api reads them back; a project's first
 * MAX_CAPTURES_PER_PROJECT_PER_CYCLE of a cycle are wanted, the rest skipped and counted, and the
 * next cycle wants them again; a write Redis does not take drops its cycle, counted and logged once.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  MAX_CAPTURES_PER_PROJECT_PER_CYCLE,
  MitmCaptureLog,
} from "../../gateway/metering/mitm-captures.ts";
import { decodeMitmCapture, type MitmCapture } from "../../shared/mitm-captures.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import { freePort } from "../../testkit/ports.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";

let redis: Redis;
const prefix = testPrefix();
const keys = redisKeys(prefix);

beforeAll(() => {
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  await deletePrefix(TEST_REDIS_URL, prefix);
  redis.disconnect();
});

function capture(path: string): MitmCapture {
  return {
    atMs: Date.now(),
    method: "GET",
    host: "shop.example:443",
    path,
    status: 200,
    proxyStatus: "",
    firstByteMs: 3,
    totalMs: 4,
    connectorId: "c1",
    proxyId: "p1",
    bytesUp: 10,
    bytesDown: 20,
    requestHeaders: [["Cookie", "[scrubbed]"]],
    sentHeaders: [],
    responseHeaders: [["content-length", "20"]],
    ja3: "a".repeat(32),
    ja4: "t13d1516h2_8daaf6152771_e5627efa2ab1",
    sni: "shop.example",
    http2: "",
    mode: "plain",
  };
}

it("writes a project's sample of each cycle, skips the rest, wants them again next cycle", async () => {
  const log = new MitmCaptureLog({ redis, keys, writeTimeoutMs: 2_000 });
  const kept: MitmCapture[] = [];
  for (let i = 0; i < MAX_CAPTURES_PER_PROJECT_PER_CYCLE + 50; i++) {
    if (!log.wants("busy")) continue;
    kept.push(capture(`/${i}`));
    log.capture("busy", kept.at(-1)!);
  }
  expect(kept).toHaveLength(MAX_CAPTURES_PER_PROJECT_PER_CYCLE);
  // Another project has a sample of its own.
  expect(log.wants("quiet")).toBe(true);
  log.capture("quiet", capture("/quiet"));
  await log.publishNow();
  expect(log.stats()).toMatchObject({
    written: MAX_CAPTURES_PER_PROJECT_PER_CYCLE + 1,
    skipped: 50,
    dropped: 0,
  });
  const entries = await redis.xrange(keys.mitmRequests("busy"), "-", "+");
  expect(entries).toHaveLength(MAX_CAPTURES_PER_PROJECT_PER_CYCLE);
  expect(decodeMitmCapture(entries[0][1])).toEqual(
    capture("/0").atMs <= Date.now()
      ? { ...capture("/0"), atMs: decodeMitmCapture(entries[0][1])!.atMs }
      : undefined,
  );
  // A new cycle: wanted again.
  expect(log.wants("busy")).toBe(true);
  await log.close();
});

it("drops a cycle Redis does not take, counted, logged once", async () => {
  const away = new Redis(`redis://127.0.0.1:${await freePort()}`, {
    maxRetriesPerRequest: 0,
    lazyConnect: true,
    enableOfflineQueue: false,
  });
  const lines: string[] = [];
  const logger = { info: () => {}, error: (msg: string) => lines.push(msg) };
  const log = new MitmCaptureLog({ redis: away, keys, writeTimeoutMs: 500, logger });
  for (const cycle of [1, 2]) {
    for (let i = 0; i < 3; i++) if (log.wants("p")) log.capture("p", capture(`/${cycle}/${i}`));
    await log.publishNow();
  }
  expect(log.stats()).toMatchObject({ written: 0, dropped: 6, writeFailures: 2 });
  expect(lines).toEqual(["Interception captures not written; dropped"]);
  await log.close();
  away.disconnect();
});
