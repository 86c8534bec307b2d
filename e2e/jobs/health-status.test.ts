/**
 * Periodic health checks in a whole control plane (an api, a controller, a worker), each proxy
 * checked every second, against an echo endpoint the test controls:
 *
 * - a proxy failing three checks in a row turns unhealthy (degraded after the first), and one
 *   passing check makes it healthy again;
 * - an echo outage changes no status and counts no failure, and the worker says so;
 * - GET /api/v1/system/stats shows the processes, the leader and the work streams;
 * - without a leader the periodic entries stop while run-now work goes on.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { JobKind, WORKER_JOB_KINDS } from "../../shared/roles.ts";
import { WORKERS_GROUP } from "../../shared/redis-keys.ts";
import { Cluster, type Member } from "../../testkit/cluster.ts";
import { type Echo, startEcho } from "../../testkit/upstreams/echo.ts";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";

let cluster: Cluster;
let controller: Member;
let worker: Member;
let echo: Echo;
let tinyproxies: Tinyproxy[];
let fault: FaultProxy;

beforeAll(async () => {
  echo = await startEcho();
  cluster = await Cluster.create({ env: { OCTOPROX_ECHO_URL: echo.url } });
  await cluster.start("api");
  [controller, worker, fault, ...tinyproxies] = await Promise.all([
    cluster.start("controller"),
    // Every kind but scale and provision, so the system stats have streams no worker takes to
    // show: scale's, which the test writes to, and provision's, which nobody writes to.
    cluster.start("worker", {
      env: {
        OCTOPROX_WORKER_JOBS: WORKER_JOB_KINDS.filter((kind) =>
          kind !== JobKind.scale && kind !== JobKind.provision
        ).join(","),
      },
    }),
    startFaultProxy(),
    startTinyproxy({ bindAddress: "127.0.0.3" }),
    startTinyproxy({ bindAddress: "127.0.0.4" }),
  ]);
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([echo?.close(), fault?.close(), ...(tinyproxies ?? []).map((t) => t.close())]);
});

const healthStream = () => cluster.keys.jobStream(JobKind.health);

describe("health status by the checks", () => {
  it("turns unhealthy at the third failure in a row, degraded after the first, then healthy", async () => {
    fault.setMode(FaultMode.pass);
    const connector = await cluster.createConnector();
    const id = await cluster.addProxy(connector, fault.url());
    await cluster.until(async () => (await cluster.status(id)) === "healthy", {
      message: "the proxy to turn healthy",
    });
    // A status is written before the change entry that announces it: wait for this one's, so it
    // is not taken for one of the moves counted below.
    await cluster.untilAnnounced();
    const lastChange = await cluster.lastChangeId();

    fault.setMode(FaultMode.refuse);
    // Soft health is written before the status, so a status read first never runs ahead of
    // the failure count read after it.
    const observe = async () => {
      const status = await cluster.status(id);
      const failures = Number((await cluster.softHealth(id))?.failures ?? 0);
      if (status === "unhealthy") expect(failures).toBeGreaterThanOrEqual(3);
      return { status, failures };
    };
    // Checks come a second apart, so the first read of a status comes long before the next
    // check could move the count on.
    const degraded = await cluster.until(async () => {
      const seen = await observe();
      return seen.status === "degraded" ? seen : undefined;
    }, { intervalMs: 20, message: "the first failure to make the proxy degraded" });
    expect(degraded.failures).toBe(1);
    const unhealthy = await cluster.until(async () => {
      const seen = await observe();
      return seen.status === "unhealthy" ? seen : undefined;
    }, { intervalMs: 20, message: "the third failure to make the proxy unhealthy" });
    expect(unhealthy.failures).toBe(3);

    fault.setMode(FaultMode.pass);
    await cluster.until(async () => (await cluster.status(id)) === "healthy", {
      message: "one passing check to make the proxy healthy again",
    });
    expect(await cluster.softHealth(id)).toMatchObject({ failures: "0", error: "" });
    // One change entry per status move: degraded, unhealthy, healthy (the last announced just
    // after the status is written).
    const moves = await cluster.until(async () => {
      const entries = await cluster.changes(lastChange);
      const ours = entries.filter((c) => c.ref === connector.connectorId);
      return ours.length >= 3 ? ours : undefined;
    }, { message: "the change entries of the three moves" });
    expect(moves).toHaveLength(3);
  });

  it("changes no status and counts no failure while the echo endpoint is out", async () => {
    const connector = await cluster.createConnector(); // no check URL: checked against the echo
    const ids = await Promise.all(tinyproxies.map((t) => cluster.addProxy(connector, t.url)));
    await cluster.until(async () => {
      const statuses = await Promise.all(ids.map((id) => cluster.status(id)));
      return statuses.every((status) => status === "healthy");
    }, { message: "the proxies to turn healthy" });
    // What the first checks announce may follow their rows (a slow machine's batches): the
    // connector's entries are counted until a check period and a half brings none.
    let announced = -1;
    let quietSinceMs = Date.now();
    await cluster.until(async () => {
      const count = (await cluster.changes()).filter((c) => c.ref === connector.connectorId)
        .length;
      if (count !== announced) {
        announced = count;
        quietSinceMs = Date.now();
      }
      return Date.now() - quietSinceMs >= 1_500;
    }, { message: "the first checks' announcements to settle" });
    const lastChange = await cluster.lastChangeId();
    const requestsBefore = [...echo.requests.values()].reduce((a, b) => a + b, 0);

    echo.setUp(false);
    try {
      const outageAt = Date.now();
      await cluster.logged(
        worker,
        "Echo endpoint does not answer; failed checks of it are not counted",
      );
      // Four periods of checks, more than the three failures that would make a proxy unhealthy.
      const watchUntil = outageAt + 4_000;
      while (Date.now() < watchUntil) {
        for (const id of ids) {
          expect(await cluster.status(id)).toBe("healthy");
          expect((await cluster.softHealth(id))?.failures).toBe("0");
        }
        // Sampling a window in which nothing may change: time passing is the check.
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      // The checks did go on through the proxies (each asked the echo, which said 500).
      const requestsDuring = [...echo.requests.values()].reduce((a, b) => a + b, 0);
      expect(requestsDuring - requestsBefore).toBeGreaterThanOrEqual(2 * ids.length);
    } finally {
      // Whatever happened, the next test finds the echo answering.
      echo.setUp(true);
    }
    await cluster.logged(worker, "Echo endpoint answers again; its checks count again");
    const statuses = await Promise.all(ids.map((id) => cluster.status(id)));
    expect(statuses).toEqual(ids.map(() => "healthy"));
    expect(
      (await cluster.changes(lastChange)).filter((c) => c.ref === connector.connectorId),
    ).toEqual([]);
  });

  it("shows the processes, the leader and the work streams on GET /api/v1/system/stats", async () => {
    // A stream no worker takes, with a group: three entries, one of them pending.
    const unhandled = cluster.keys.jobStream(JobKind.scale);
    await cluster.redis.xgroup("CREATE", unhandled, WORKERS_GROUP, "0", "MKSTREAM");
    const addedAt = Date.now();
    for (const key of ["a", "b", "c"]) await cluster.redis.xadd(unhandled, "*", "key", key);
    await cluster.redis.xreadgroup(
      "GROUP",
      WORKERS_GROUP,
      "e2e",
      "COUNT",
      1,
      "STREAMS",
      unhandled,
      ">",
    );

    const stats = await cluster.until(async () => {
      const answer = await cluster.request("GET", "/api/v1/system/stats");
      const roles = answer.body?.processes?.data?.by_role ?? {};
      return answer.status === 200 && roles.api && roles.controller && roles.worker
        ? answer.body
        : undefined;
    }, { message: "the stats to list every role" });
    const readAt = Date.now();

    expect(stats.processes.error).toBeNull();
    expect(stats.processes.data.total).toBe(3);
    for (const member of [cluster.api, controller, worker]) {
      const [listed] = stats.processes.data.by_role[member.role];
      expect(listed.instance).toBe(member.instance);
      // Heartbeats every 0.2 s: the last landed within the keys' life of three beats.
      expect(listed.heartbeat_age_ms).toBeGreaterThanOrEqual(0);
      expect(listed.heartbeat_age_ms).toBeLessThanOrEqual(600);
      expect(listed.snapshot).toMatchObject({ instance: member.instance, role: member.role });
    }
    const loopNames = (member: Member) =>
      (stats.processes.data.by_role[member.role][0].snapshot.loops as { name: string }[]).map(
        (loop) => loop.name,
      );
    expect(loopNames(controller)).toEqual(
      expect.arrayContaining(["feed_builder", "job_producer_health", "heartbeat"]),
    );
    expect(loopNames(worker)).toEqual(
      expect.arrayContaining(["job_runner_health", "job_runner_index_hygiene", "heartbeat"]),
    );

    expect(stats.leader.error).toBeNull();
    expect(stats.leader.data.instance).toBe(await cluster.leaseHolder());
    expect(stats.leader.data.instance.startsWith(`${controller.instance}:`)).toBe(true);
    expect(stats.leader.data.lease_ttl_ms).toBeGreaterThan(0);

    expect(stats.work_streams.error).toBeNull();
    const unhandledStats = stats.work_streams.data["jobs.scale"];
    expect(unhandledStats).toMatchObject({
      length: 3,
      pending: 1,
      backlog: 2,
      groupMissing: false,
    });
    expect(unhandledStats.oldestAgeMs).toBeGreaterThanOrEqual(0);
    expect(unhandledStats.oldestAgeMs).toBeLessThanOrEqual(readAt - addedAt + 1_000);
    // Streams nobody wrote to are shown empty, with their group missing.
    expect(stats.work_streams.data["jobs.provision"]).toMatchObject({
      length: 0,
      pending: 0,
      backlog: 0,
      oldestAgeMs: null,
      groupMissing: true,
    });
    // The health stream's group is the workers'.
    expect(stats.work_streams.data["jobs.health"].groupMissing).toBe(false);
    expect(stats.work_streams.data["jobs.health"].consumers).toBeGreaterThanOrEqual(1);
  });

  it("pauses periodic jobs without a leader while run-now work goes on", async () => {
    const stream = healthStream();
    const hygiene = cluster.keys.jobStream(JobKind.indexHygiene);
    // With a leader, health keys (every second, one per proxy) and index hygiene flow.
    const healthBefore = await cluster.entriesAdded(stream);
    const hygieneBefore = await cluster.entriesAdded(hygiene);
    await cluster.until(
      async () =>
        (await cluster.entriesAdded(stream)) > healthBefore &&
        (await cluster.entriesAdded(hygiene)) > hygieneBefore,
      { message: "periodic entries under the leader" },
    );

    await controller.stop("SIGTERM");
    expect(await cluster.leaseHolder()).toBeNull();
    const health = await cluster.entriesAdded(stream);
    const firstLane = cluster.keys.jobFirstStream(JobKind.health);
    const firstBefore = await cluster.entriesAdded(firstLane);
    const hygieneCount = await cluster.entriesAdded(hygiene);

    // A proxy added now is checked all the same: its run-now entry, on the first lane, is the
    // only one appended.
    const connector = await cluster.createConnector();
    const id = await cluster.addProxy(connector, tinyproxies[0].url);
    await cluster.until(async () => (await cluster.status(id)) === "healthy", {
      message: "the run-now check without a leader",
    });
    // Three periods of both kinds (1 s each) bring nothing periodic.
    const watchUntil = Date.now() + 3_000;
    while (Date.now() < watchUntil) {
      expect(await cluster.entriesAdded(stream)).toBe(health);
      expect(await cluster.entriesAdded(firstLane)).toBe(firstBefore + 1);
      expect(await cluster.entriesAdded(hygiene)).toBe(hygieneCount);
      // Sampling a window in which nothing may change: time passing is the check.
      await new Promise((resolve) => setTimeout(resolve, 100));
    }

    // A controller leads again, and the periodic entries come back.
    await cluster.start("controller");
    await cluster.until(
      async () =>
        (await cluster.entriesAdded(stream)) > health &&
        (await cluster.entriesAdded(hygiene)) > hygieneCount,
      { message: "periodic entries under the new leader" },
    );
    // The worker has waited for room after every index hygiene batch (one at a time) for the
    // whole file: those waits leave no listener behind on its loop's signal.
    expect(worker.stderr.join("\n")).not.toContain("MaxListenersExceededWarning");
  });
});
