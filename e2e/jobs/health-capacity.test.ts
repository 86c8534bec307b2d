/**
 * A worker's health batches waiting on hung proxies do not hold up other checks while it has
 * probe slots free. A batch ends with its slowest check, so a hung proxy keeps its batch running
 * for the whole check timeout; with fewer batch slots than probe slots, batches each holding one
 * hung proxy filled every batch slot with most probes idle, and a proxy added then waited a
 * timeout for its first check (in the single-instance shape, 10,000 new proxies with 5% hanging
 * stalled for 12 s of every 30). An api and a worker with four probe slots, no controller (so no
 * periodic entry lands), a long timeout, real upstream processes.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { JobKind } from "../../shared/roles.ts";
import { Cluster } from "../../testkit/cluster.ts";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";

/** Far longer than the test waits for the passing proxy: its check must not wait on one. */
const CHECK_TIMEOUT_S = 60;
const PROBES = 4;

let cluster: Cluster;
let tinyproxy: Tinyproxy;
let hang: FaultProxy;

beforeAll(async () => {
  cluster = await Cluster.create();
  const api = await cluster.start("api");
  [, tinyproxy, hang] = await Promise.all([
    cluster.start("worker", {
      env: {
        OCTOPROX_ECHO_URL: `${api.url}/echo`,
        OCTOPROX_HEALTH_CHECK_TIMEOUT: String(CHECK_TIMEOUT_S),
        OCTOPROX_HEALTH_CHECK_CONCURRENCY: String(PROBES),
      },
    }),
    startTinyproxy({ bindAddress: "127.0.0.2" }),
    startFaultProxy({ mode: FaultMode.hang }),
  ]);
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await tinyproxy?.close();
  await hang?.close();
});

describe("health batches waiting on hung proxies", () => {
  it("leave a proxy added meanwhile to be checked at once while probe slots are free", async () => {
    const connector = await cluster.createConnector();
    // A proxy added is asked a check on the health kind's first lane.
    const stream = cluster.keys.jobFirstStream(JobKind.health);
    // One hung proxy per batch: each added once the one before is held by the worker.
    const hungCount = PROBES - 1;
    for (let i = 0; i < hungCount; i++) {
      const url = new URL(hang.url());
      url.username = `hung${i}`;
      url.password = "p";
      await cluster.addProxy(connector, url.href);
      await cluster.until(async () => (await cluster.pending(stream)).length === i + 1, {
        message: `the worker to hold hung proxy ${i + 1}'s check`,
      });
    }
    const heldIds = (await cluster.pending(stream)).map((entry) => entry.id).sort();
    const id = await cluster.addProxy(connector, tinyproxy.url);
    await cluster.until(async () => (await cluster.status(id)) === "healthy", {
      timeoutMs: 10_000,
      message: "the passing proxy to be checked beside the hung ones",
    });
    // The hung ones are still being checked: their batches are running, not given up. The
    // passing proxy's entry is acknowledged just after its verdict is written, so wait for it.
    const heldNow = async () => (await cluster.pending(stream)).map((entry) => entry.id).sort();
    await cluster.until(async () => (await heldNow()).length === hungCount, {
      message: "the passing proxy's entry to be acknowledged",
    });
    expect(await heldNow()).toEqual(heldIds);
  });
});
