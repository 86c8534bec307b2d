/**
 * The controllers: the leader's job producers publish each health key at its own slot second of
 * the period, and the lease moves to the standby within a poll of a clean stop and within the
 * TTL plus a poll of a kill. No worker takes health here, so every entry the producer appends
 * stays in the stream with its id, the time Redis took it.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { slotSecond } from "../../control/jobs/slots.ts";
import { JobKind } from "../../shared/roles.ts";
import { Cluster, type Member } from "../../testkit/cluster.ts";
import { waitUntil } from "../../testkit/wait.ts";

const PERIOD_S = 5;
const LEASE_TTL_MS = 3_000;
const LEASE_REFRESH_MS = 200;
const LEASE_POLL_MS = 200;

let cluster: Cluster;
let first: Member;

beforeAll(async () => {
  cluster = await Cluster.create({
    env: {
      OCTOPROX_HEALTH_CHECK_INTERVAL: String(PERIOD_S),
      OCTOPROX_CONTROLLER_LEASE_TTL: String(LEASE_TTL_MS / 1000),
      OCTOPROX_CONTROLLER_LEASE_REFRESH: String(LEASE_REFRESH_MS / 1000),
      OCTOPROX_CONTROLLER_LEASE_POLL: String(LEASE_POLL_MS / 1000),
    },
  });
  await cluster.start("api");
  first = await cluster.start("controller");
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
});

function holderOf(member: Member, holder: string | null): boolean {
  return holder?.startsWith(`${member.instance}:`) ?? false;
}

async function leaseState(member: Member): Promise<Record<string, unknown> | undefined> {
  const snapshot = await cluster.snapshot(member);
  const runtimes = snapshot?.runtimes as Record<string, { lease?: Record<string, unknown> }>;
  return runtimes?.controller?.lease;
}

/** Polls the lease key every 10 ms until `done` holds it; answers when it left `from`. */
async function watchHandover(from: Member, to: Member, timeoutMs: number) {
  let leftAt: number | undefined;
  let holder: string | null = null;
  return await waitUntil(async () => {
    holder = await cluster.leaseHolder();
    const now = performance.now();
    if (leftAt === undefined && !holderOf(from, holder)) leftAt = now;
    return holderOf(to, holder) ? { leftAt: leftAt ?? now, takenAt: now } : undefined;
  }, { timeoutMs, intervalMs: 10, message: `the lease to reach ${to.instance}` }).catch(
    (error: Error) => {
      throw new Error(`The lease did not reach ${to.instance} (holder ${holder})`, {
        cause: error,
      });
    },
  );
}

describe("the leading controller", () => {
  it("publishes each periodic key at its own slot second of the period", async () => {
    const connector = await cluster.createConnector();
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) {
      ids.push(await cluster.addProxy(connector, `http://127.0.0.1:${20_000 + i}`));
    }
    // Run-now entries of the adds came before this; the compile follows within 0.1 s.
    const from = Date.now() + 500;
    // The proxies refuse, so after their first check they are suspects: their periodic keys go
    // on the first lane, at the same slot seconds.
    const streams = [
      cluster.keys.jobStream(JobKind.health),
      cluster.keys.jobFirstStream(JobKind.health),
    ];
    const periodic = async () =>
      (await Promise.all(streams.map((stream) => cluster.redis.xrange(stream, String(from), "+"))))
        .flat().map(([id, fields]) => ({
          ms: Number(id.split("-")[0]),
          key: fields[fields.indexOf("key") + 1],
        })).sort((a, b) => a.ms - b.ms);
    // Two whole periods: every key published twice.
    const entries = await cluster.until(async () => {
      const all = await periodic();
      return ids.every((id) => all.filter((e) => e.key === id).length >= 2) ? all : undefined;
    }, { timeoutMs: 4 * PERIOD_S * 1000, message: "every key published twice" });

    const slots = new Map(ids.map((id) => [id, slotSecond(JobKind.health, id, PERIOD_S)]));
    // Eight keys over five slots: spread over the period, so they went out at several seconds.
    expect(new Set(slots.values()).size).toBeGreaterThan(1);
    expect(new Set(entries.map((e) => Math.floor(e.ms / 1000) % PERIOD_S)).size)
      .toBeGreaterThan(1);
    for (const entry of entries) {
      expect(ids).toContain(entry.key);
      const second = Math.floor(entry.ms / 1000);
      const late = (second - slots.get(entry.key)! + PERIOD_S) % PERIOD_S;
      // At its slot second; or, by the producer's catch-up, in the first moments of the next
      // when the cycle for the slot second ran just past the boundary.
      if (late !== 0) {
        expect(late).toBe(1);
        expect(entry.ms % 1000).toBeLessThan(200);
      }
    }
    // Each key once a period: consecutive publications a period apart.
    for (const id of ids) {
      const seconds = entries.filter((e) => e.key === id).map((e) => Math.floor(e.ms / 1000));
      for (let i = 1; i < seconds.length; i++) {
        expect(Math.abs(seconds[i] - seconds[i - 1] - PERIOD_S)).toBeLessThanOrEqual(1);
      }
    }
  });

  it("moves to the standby within a poll of a clean stop, and within TTL plus a poll of a kill", async () => {
    expect(holderOf(first, await cluster.leaseHolder())).toBe(true);
    const second = await cluster.start("controller");
    await cluster.until(async () => (await leaseState(second))?.state === "standby", {
      message: "the second controller to stand by",
    });
    expect(holderOf(first, await cluster.leaseHolder())).toBe(true);

    // A clean stop releases the lease after the loops stopped; the standby polls every 0.2 s.
    const stopped = first.stop("SIGTERM");
    const clean = await watchHandover(first, second, 10_000);
    expect((await stopped).code).toBe(0);
    expect(clean.takenAt - clean.leftAt).toBeLessThanOrEqual(LEASE_POLL_MS + 300);
    const stats = await cluster.request("GET", "/api/v1/system/stats");
    expect(holderOf(second, stats.body.leader.data.instance)).toBe(true);
    // Its heartbeat shows the lead within a beat: the first term of its life.
    const leading = await cluster.until(async () => {
      const lease = await leaseState(second);
      return lease?.state === "leading" ? lease : undefined;
    }, { message: "the second controller's heartbeat to show the lead" });
    expect(leading.term).toBe(1);

    // A kill releases nothing: the key lives out its TTL from the last refresh.
    const third = await cluster.start("controller");
    await cluster.until(async () => (await leaseState(third))?.state === "standby", {
      message: "the third controller to stand by",
    });
    const hygiene = cluster.keys.jobStream(JobKind.indexHygiene);
    const killedAt = performance.now();
    await second.stop("SIGKILL");
    const killed = await watchHandover(second, third, 10_000);
    const tookMs = killed.takenAt - killedAt;
    // Well past a poll, so the key was waited out, not released (a slow last refresh may have
    // come a little more than a refresh interval before the kill)...
    expect(tookMs).toBeGreaterThanOrEqual(LEASE_TTL_MS - LEASE_REFRESH_MS - 800);
    // ...and within the TTL plus a poll, with room for a busy machine.
    expect(tookMs).toBeLessThanOrEqual(LEASE_TTL_MS + LEASE_POLL_MS + 800);
    await cluster.until(async () => (await leaseState(third))?.state === "leading", {
      message: "the third controller's heartbeat to show the lead",
    });

    // The new leader's producers run: index hygiene (every second) is published again.
    const published = await cluster.entriesAdded(hygiene);
    await cluster.until(async () => (await cluster.entriesAdded(hygiene)) > published, {
      message: "the new leader to publish index hygiene",
    });
  });
});
