/**
 * Run-now health work, with no controller at all (so no periodic entry ever lands): an api and a
 * worker process, upstream proxies that are real processes (tinyproxy, our fault proxy).
 *
 * - A proxy added is checked within a second: initializing, then healthy.
 * - A key appended twice and read together runs once and moves the status once.
 * - A batch that fails on every delivery is given up at the delivery after the fifth.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { JobKind } from "../../shared/roles.ts";
import { Cluster, type Member } from "../../testkit/cluster.ts";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";

let cluster: Cluster;
let worker: Member;
let tinyproxy: Tinyproxy;
let fault: FaultProxy;

beforeAll(async () => {
  cluster = await Cluster.create();
  const api = await cluster.start("api");
  [worker, tinyproxy, fault] = await Promise.all([
    cluster.start("worker", { env: { OCTOPROX_ECHO_URL: `${api.url}/echo` } }),
    startTinyproxy({ bindAddress: "127.0.0.2" }),
    startFaultProxy(),
  ]);
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await tinyproxy?.close();
  await fault?.close();
});

describe("run-now health checks", () => {
  it("checks a proxy added within a second: initializing, then healthy", async () => {
    const connector = await cluster.createConnector();
    const startedAt = performance.now();
    const answer = await cluster.request(
      "POST",
      `/api/v1/projects/${connector.projectId}/proxies`,
      { connector_id: connector.connectorId, url: tinyproxy.url },
    );
    expect(answer.status).toBe(201);
    expect(answer.body.status).toBe("initializing");
    const id = answer.body.id as string;

    await cluster.until(async () => (await cluster.status(id)) === "healthy", {
      timeoutMs: 5_000,
      intervalMs: 10,
      message: "the added proxy to turn healthy",
    });
    const elapsedMs = performance.now() - startedAt;
    expect(elapsedMs).toBeLessThan(1_000);

    const soft = await cluster.softHealth(id);
    expect(soft).toMatchObject({ failures: "0", error: "" });
    expect(Number(soft?.latency_ms)).toBeGreaterThanOrEqual(0);
    // The check went through tinyproxy: the echo saw its outgoing address.
    expect(await tinyproxy.log()).toContain("/echo");
    // The entry was completed: acknowledged and deleted.
    const stream = cluster.keys.jobStream(JobKind.health);
    expect(await cluster.redis.xlen(stream)).toBe(0);
    expect(await cluster.pending(stream)).toEqual([]);
  });

  it("runs a key appended twice and read together once, and moves its status once", async () => {
    fault.setMode(FaultMode.pass);
    const connector = await cluster.createConnector();
    const id = await cluster.addProxy(connector, fault.url());
    await cluster.until(async () => (await cluster.status(id)) === "healthy", {
      message: "the proxy to turn healthy",
    });
    const before = await cluster.proxyRow(id);
    // The turn to healthy is committed; its announcement may still be on its way.
    await cluster.untilAnnounced();
    const lastChange = await cluster.lastChangeId();
    const connectionsBefore = fault.connectionsSeen;

    fault.setMode(FaultMode.refuse);
    // One transaction: the worker's read, blocked or not, gets both entries together.
    const stream = cluster.keys.jobStream(JobKind.health);
    await cluster.redis.multi().xadd(stream, "*", "key", id).xadd(stream, "*", "key", id).exec();

    await cluster.until(
      async () =>
        (await cluster.status(id)) === "degraded" &&
        (await cluster.redis.xlen(stream)) === 0 &&
        (await cluster.pending(stream)).length === 0,
      { message: "the duplicated key to be handled" },
    );
    // One check: one connection to the proxy, one failure counted, one status move announced.
    expect(fault.connectionsSeen - connectionsBefore).toBe(1);
    expect((await cluster.softHealth(id))?.failures).toBe("1");
    await cluster.untilAnnounced();
    expect(await cluster.changes(lastChange)).toEqual([
      expect.objectContaining({ kind: "proxy", ref: connector.connectorId }),
    ]);
    const after = await cluster.proxyRow(id);
    expect(after.status_changed_at.getTime()).toBeGreaterThan(before.status_changed_at.getTime());
  });

  it("gives a batch up at the delivery after the fifth, having failed five times", async () => {
    const connector = await cluster.createConnector();
    const id = await cluster.addProxy(connector, tinyproxy.url);
    await cluster.until(async () => (await cluster.status(id)) === "healthy", {
      message: "the proxy to turn healthy",
    });
    const failuresBefore = await runnerFailures(worker);

    // A real cause that outlasts every delivery: the proxy's soft-health key holds a string, so
    // the batch's HGET fails with WRONGTYPE each time, before any probe or write.
    await cluster.redis.set(cluster.keys.proxyHealth(id), "not a hash");
    const stream = cluster.keys.jobStream(JobKind.health);
    await cluster.redis.xadd(stream, "*", "key", id);

    // Five deliveries at least a claim timeout (1.5 s) apart, then the give-up.
    const seen: number[] = [];
    await cluster.until(async () => {
      const [entry] = await cluster.pending(stream);
      if (entry) seen.push(entry.deliveries);
      return entry === undefined && (await cluster.redis.xlen(stream)) === 0 &&
        worker.logs().some((line) => line.msg === "Giving up a batch after its last delivery");
    }, { timeoutMs: 40_000, intervalMs: 50, message: "the batch to be given up" });

    const giveUps = worker.logs().filter((line) =>
      line.msg === "Giving up a batch after its last delivery"
    );
    expect(giveUps).toHaveLength(1);
    expect(giveUps[0]).toMatchObject({ keys: [id], deliveries: 6, stream: "jobs.health" });
    // Deliveries counted up one by one, each pending for a claim timeout, the fifth included;
    // the sixth is pending only for the moment the give-up takes.
    expect(seen).toContain(5);
    expect(Math.max(...seen)).toBeLessThanOrEqual(6);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    // Each of the five deliveries ran the handler, which failed: five failures in the stats,
    // and one entry dropped (the heartbeat shows it within a beat).
    const runner = await cluster.until(async () => {
      const loop = await runnerSnapshot(worker);
      return loop?.dropped === 1 ? loop : undefined;
    }, { message: "the worker's heartbeat to show the dropped entry" });
    expect(Number(runner.failures) - failuresBefore).toBe(5);
    // Nothing was written for the proxy.
    expect(await cluster.status(id)).toBe("healthy");
  });
});

async function runnerSnapshot(member: Member): Promise<Record<string, unknown> | undefined> {
  const snapshot = await cluster.snapshot(member);
  const loops = (snapshot?.loops ?? []) as Record<string, unknown>[];
  return loops.find((loop) => loop.name === "job_runner_health");
}

async function runnerFailures(member: Member): Promise<number> {
  return Number((await runnerSnapshot(member))?.failures ?? 0);
}
