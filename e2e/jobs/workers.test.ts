/**
 * Two worker processes sharing the health stream through the consumer group, and no
 * controller (so only the entries the test causes exist). A check held by a hanging upstream
 * (our fault proxy in `hang`, with a 30 s check timeout on worker A) stays with A while A lives,
 * however long past the claim timeout, since A keeps it alive; once A is killed, worker B takes
 * it after the claim timeout and completes it.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { JobKind } from "../../shared/roles.ts";
import { Cluster } from "../../testkit/cluster.ts";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";

const CLAIM_TIMEOUT_MS = 1_500;
const RECLAIM_INTERVAL_MS = 300;

let cluster: Cluster;
let echoUrl: string;
let fault: FaultProxy;

beforeAll(async () => {
  cluster = await Cluster.create({
    env: {
      OCTOPROX_CLAIM_TIMEOUT: String(CLAIM_TIMEOUT_MS / 1000),
      OCTOPROX_RECLAIM_INTERVAL: String(RECLAIM_INTERVAL_MS / 1000),
    },
  });
  const api = await cluster.start("api");
  echoUrl = `${api.url}/echo`;
  fault = await startFaultProxy({ mode: FaultMode.hang });
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await fault?.close();
});

describe("work held by workers", () => {
  it("stays with a live worker past the claim timeout; a dead worker's runs elsewhere", async () => {
    // A proxy added asks its first check on the health kind's first lane.
    const stream = cluster.keys.jobFirstStream(JobKind.health);
    const workerA = await cluster.start("worker", {
      env: { OCTOPROX_ECHO_URL: echoUrl, OCTOPROX_HEALTH_CHECK_TIMEOUT: "30" },
    });
    const consumerA = await cluster.consumerOf(workerA);

    // The run-now entry of the proxy added goes to A, the only worker, and hangs there.
    const connector = await cluster.createConnector();
    const id = await cluster.addProxy(connector, fault.url());
    const [held] = await cluster.until(async () => {
      const pending = await cluster.pending(stream);
      return pending.length === 1 && fault.connectionsOpen === 1 ? pending : undefined;
    }, { message: "worker A to hold the check" });
    expect(held).toMatchObject({ consumer: consumerA, deliveries: 1 });

    const workerB = await cluster.start("worker", { env: { OCTOPROX_ECHO_URL: echoUrl } });
    const consumerB = await cluster.consumerOf(workerB);
    expect(consumerB).not.toBe(consumerA);

    // Three claim timeouts with B reclaiming every 0.3 s: without A's keep-alive B would take
    // the entry within a claim timeout plus a reclaim interval (1.8 s) of its last delivery.
    const watchUntil = Date.now() + 3 * CLAIM_TIMEOUT_MS;
    while (Date.now() < watchUntil) {
      expect(await cluster.pending(stream)).toEqual([
        { id: held.id, consumer: consumerA, deliveries: 1 },
      ]);
      // Sampling a window in which nothing may change: time passing is the check.
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(await cluster.reclaimedBy(workerB)).toBe(0);
    expect(await cluster.softHealth(id)).toBeUndefined();

    // New connections pass (A's hung one stays hung); then A dies without a word.
    fault.setMode(FaultMode.pass);
    const killedAt = performance.now();
    await workerA.stop("SIGKILL");

    await cluster.until(
      async () =>
        (await cluster.status(id)) === "healthy" &&
        (await cluster.redis.xlen(stream)) === 0 &&
        (await cluster.pending(stream)).length === 0,
      { timeoutMs: 15_000, message: "worker B to complete the dead worker's entry" },
    );
    const tookMs = performance.now() - killedAt;
    // A's last keep-alive came at most a reclaim interval before the kill, so B could not take
    // the entry sooner than the claim timeout less that interval.
    expect(tookMs).toBeGreaterThanOrEqual(CLAIM_TIMEOUT_MS - RECLAIM_INTERVAL_MS);
    expect(tookMs).toBeLessThan(CLAIM_TIMEOUT_MS + 5_000);
    expect(await cluster.softHealth(id)).toMatchObject({ failures: "0" });
    await cluster.until(async () => (await cluster.reclaimedBy(workerB)) === 1, {
      message: "worker B's heartbeat to show the reclaim",
    });
  });
});
