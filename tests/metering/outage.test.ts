/**
 * Metering through a Redis outage during traffic, on a private redis-server (LocalRedis) that is
 * stopped and started again on the same port while transfers go on:
 *
 * - an outage of 20 s with a Redis that keeps its data (an unreachable Redis, as in a partition
 *   or a restart with persistence): the windows end up holding exactly what the clients sent
 *   and received over the whole run;
 * - a Redis that comes back empty (no persistence): what it held before is gone, and what it
 *   holds after is exactly everything metered less what it had confirmed before it stopped.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MeteringPart } from "../../gateway/metering/apply.ts";
import { RequestMetering } from "../../gateway/metering/metering.ts";
import type { LuaScript } from "../../shared/lua/loader.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import { LocalRedis } from "../../scripts/local-stores.ts";
import { freePort } from "../../testkit/ports.ts";
import { testPrefix } from "../../testkit/stores.ts";
import { waitUntil } from "../../testkit/wait.ts";
import {
  Clock,
  expectSameCounts,
  GatedClient,
  loadMeteringScriptNode,
  minus,
  partCounts,
  readRedis,
  Tally,
  TrafficGenerator,
} from "../../testkit/metering.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let folder: string;
let script: LuaScript;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "octoprox-metering-"));
  script = await loadMeteringScriptNode();
});

afterAll(async () => {
  await rm(folder, { recursive: true, force: true });
});

interface OutageRun {
  tally: Tally;
  stored: Awaited<ReturnType<typeof readRedis>>;
  confirmedBeforeStop: MeteringPart[];
  confirmed: MeteringPart[];
  transfersDuringOutage: number;
  maxPendingRowsDuringOutage: number;
  failuresDuringOutage: number;
}

async function outage(options: { outageMs: number; persist: boolean }): Promise<OutageRun> {
  const server = new LocalRedis({
    dir: join(folder, options.persist ? "kept" : "empty"),
    port: await freePort(),
    persist: options.persist,
  });
  await server.start();
  // As the gateway's client: one retry per command, reconnecting every 100 ms.
  const client = new Redis(server.url, {
    maxRetriesPerRequest: 1,
    connectTimeout: 1_000,
    retryStrategy: () => 100,
  });
  client.on("error", () => {});
  const gated = new GatedClient(client);
  const keys = redisKeys(testPrefix());
  const clock = new Clock();
  const tally = new Tally(keys, { now: clock.now });
  const confirmed: MeteringPart[] = [];
  const metering = new RequestMetering({
    redis: gated,
    keys,
    script,
    instance: "gw-outage",
    intervalMs: 200,
    sendTimeoutMs: 500,
    closeTimeoutMs: 10_000,
    now: clock.now,
    onConfirmed: (part) => confirmed.push(part),
  });
  const traffic = new TrafficGenerator(metering, tally, clock);
  try {
    metering.start();
    traffic.start();
    await waitUntil(() => confirmed.length > 0, { message: "a first part confirmed" });
    expect(confirmed.length).toBeGreaterThan(0);

    // The outage begins as a reply is lost: Redis applied the part, the gateway never heard.
    await gated.loseNextReply();
    let confirmedBeforeStop: MeteringPart[];
    if (options.persist) {
      // Whatever is in flight when Redis goes away: the batch identities sort it out.
      confirmedBeforeStop = [...confirmed];
      await server.stop();
    } else {
      // Nothing in flight, so what the old Redis confirmed is known exactly.
      await gated.hold();
      confirmedBeforeStop = [...confirmed];
      await server.stop({ kill: true });
      gated.release();
    }

    const transfersAtStop = traffic.transfers;
    const failuresAtStop = metering.stats().failures;
    let maxPendingRows = 0;
    const until = Date.now() + options.outageMs;
    while (Date.now() < until) {
      // The outage lasts its time whatever happens in it: the pause is the outage, sampled.
      await sleep(250);
      maxPendingRows = Math.max(maxPendingRows, metering.stats().pendingRows);
    }
    const transfersDuringOutage = traffic.transfers - transfersAtStop;
    const failuresDuringOutage = metering.stats().failures - failuresAtStop;
    expect(metering.stats().owedParts).toBeGreaterThan(0);

    await server.start();
    await waitUntil(() => metering.stats().owedParts === 0, {
      timeoutMs: 15_000,
      message: "the parts owed through the outage to be sent once Redis is back",
    });
    await traffic.stop();
    await metering.close();
    expect(metering.stats().owedParts).toBe(0);

    const reader = new Redis(server.url, { maxRetriesPerRequest: 1 });
    try {
      return {
        tally,
        stored: await readRedis(reader, keys),
        confirmedBeforeStop,
        confirmed,
        transfersDuringOutage,
        maxPendingRowsDuringOutage: maxPendingRows,
        failuresDuringOutage,
      };
    } finally {
      reader.disconnect();
    }
  } finally {
    await traffic.stop();
    await metering.close();
    client.disconnect();
    await server.stop();
  }
}

describe("metering through a Redis outage during traffic", () => {
  it(
    "counts exactly what the clients sent and received across a 20 s outage",
    { timeout: 120_000 },
    async () => {
      const run = await outage({ outageMs: 20_000, persist: true });
      expect(run.transfersDuringOutage).toBeGreaterThan(1_000);
      expect(run.failuresDuringOutage).toBeGreaterThan(10);
      // Memory follows entities, not requests: thousands of transfers, a few hundred rows.
      expect(run.maxPendingRowsDuringOutage).toBeLessThan(700);
      expectSameCounts(run.stored, run.tally.counts);
      // Every part Redis confirmed, added up, is exactly the traffic: nothing lost or doubled.
      expectSameCounts(partCounts(run.confirmed), run.tally.counts);
    },
  );

  it(
    "counts everything metered after the last confirmation once, when Redis comes back empty",
    { timeout: 60_000 },
    async () => {
      const run = await outage({ outageMs: 3_000, persist: false });
      expect(run.transfersDuringOutage).toBeGreaterThan(100);
      expect(run.confirmedBeforeStop.length).toBeGreaterThan(0);
      expectSameCounts(run.stored, minus(run.tally.counts, partCounts(run.confirmedBeforeStop)));
      expectSameCounts(partCounts(run.confirmed), run.tally.counts);
    },
  );
});
