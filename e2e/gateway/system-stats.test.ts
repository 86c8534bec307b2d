/**
 * Gateways on the System page: a real control plane (role all) and two real gateways, each
 * writing its instance snapshot every heartbeat. `GET /api/v1/system/stats` lists both with their
 * heartbeat age and the feed each routes on against the feed head in Redis. One gateway is then
 * frozen (SIGSTOP) while a write makes the controller publish a newer feed: the page shows the
 * other current and the frozen one behind on its old digest (its keys outlive its last beat by
 * three intervals); thawed (SIGCONT), it applies the head and the page shows it current again.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";

let cluster: Cluster;
let steady: Gateway;
let frozen: Gateway;
let stopped = false;

beforeAll(async () => {
  cluster = await Cluster.create();
  await cluster.start("all");
  [steady, frozen] = await Promise.all([
    cluster.startGateway({ env: { OCTOPROX_HEARTBEAT_INTERVAL: "0.5" } }),
    // A slow beat: its keys live 30 s after its last one, long enough to read it frozen.
    cluster.startGateway({ env: { OCTOPROX_HEARTBEAT_INTERVAL: "10" } }),
  ]);
});

afterAll(async () => {
  if (stopped) frozen?.child.kill("SIGCONT");
  await cluster?.close();
});

interface FeedGateway {
  instance: string;
  applied_digest: string | null;
  current: boolean;
  apply_age_ms: number | null;
  heartbeat_age_ms: number | null;
}

async function stats() {
  const answer = await cluster.request("GET", "/api/v1/system/stats");
  expect(answer.status).toBe(200);
  return answer.body;
}

function gatewayOf(body: { feed: { data: { gateways: FeedGateway[] } } }, gateway: Gateway) {
  return body.feed.data.gateways.find((entry) => entry.instance === gateway.instance);
}

async function createProject(): Promise<void> {
  const name = `sys${randomBytes(4).toString("hex")}`;
  const created = await cluster.request("POST", "/api/v1/projects", {
    name,
    username: name,
    password: `pw-${randomBytes(8).toString("hex")}`,
  });
  expect(created.status).toBe(201);
}

describe("gateways on the System page", () => {
  it("lists every gateway with its heartbeat and shows the one that has not applied the head", {
    timeout: 120_000,
  }, async () => {
    // A feed with something in it, applied by both.
    await createProject();
    const both = await cluster.until(async () => {
      const body = await stats();
      const head = body.feed.data?.head?.digest;
      const listed = [steady, frozen].map((gateway) => gatewayOf(body, gateway));
      return head !== undefined && listed.every((entry) => entry?.current) ? body : undefined;
    }, { timeoutMs: 30_000, message: "both gateways listed, on the feed head" });
    expect(both.feed.error).toBeNull();
    expect(both.feed.data.behind).toBe(0);
    const gateways = both.processes.data.by_role.gateway;
    expect(gateways.map((entry: { instance: string }) => entry.instance).sort()).toEqual(
      [steady.instance, frozen.instance].sort(),
    );
    for (const entry of gateways) {
      expect(entry.role).toBe("gateway");
      expect(entry.heartbeat_age_ms).toBeGreaterThanOrEqual(0);
      expect(entry.snapshot).toMatchObject({
        role: "gateway",
        ready: true,
        isolates_configured: 1,
        feed: { applied_digest: both.feed.data.head.digest },
      });
      expect(entry.snapshot.isolates).toHaveLength(1);
      expect(entry.snapshot.isolates[0]).toMatchObject({
        isolate: 0,
        metering: { consecutive_failures: 0 },
        failure_log: { consecutive_failures: 0 },
      });
      expect(entry.snapshot.loop_lag.samples).toBeGreaterThan(0);
      expect(entry.snapshot.feed.apply_age_ms).toBeGreaterThanOrEqual(0);
    }
    const oldHead = both.feed.data.head.digest;

    // Frozen: it neither reads the feed nor beats, and its last beat stays listed a while.
    frozen.child.kill("SIGSTOP");
    stopped = true;
    await createProject();
    const behind = await cluster.until(async () => {
      const body = await stats();
      const head = body.feed.data?.head?.digest;
      return head !== undefined && head !== oldHead && gatewayOf(body, steady)?.current
        ? body
        : undefined;
    }, { timeoutMs: 15_000, message: "a newer head, applied by the running gateway" });
    expect(gatewayOf(behind, frozen)).toMatchObject({
      applied_digest: oldHead,
      current: false,
    });
    expect(gatewayOf(behind, steady)).toMatchObject({
      applied_digest: behind.feed.data.head.digest,
      current: true,
    });
    expect(behind.feed.data.behind).toBe(1);
    // Still listed, from the beat before it froze.
    expect(behind.processes.data.by_role.gateway).toHaveLength(2);

    // Thawed: it reads the head, applies it and says so at its next beat.
    frozen.child.kill("SIGCONT");
    stopped = false;
    await cluster.until(async () => {
      const body = await stats();
      return gatewayOf(body, frozen)?.current && body.feed.data.behind === 0;
    }, { timeoutMs: 30_000, message: "the thawed gateway on the head" });
  });

  it("withdraws a gateway that stops cleanly at once", { timeout: 60_000 }, async () => {
    await steady.stop("SIGTERM");
    const body = await stats();
    expect(gatewayOf(body, steady)).toBeUndefined();
    expect(
      body.processes.data.by_role.gateway.map((entry: { instance: string }) => entry.instance),
    ).toEqual([frozen.instance]);
  });
});
