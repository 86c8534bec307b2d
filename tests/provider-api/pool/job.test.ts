/**
 * The pool job over real stores and real proxies: a run checks the entries waiting for a check
 * through each proxy (a Debian tinyproxy that works, an address that refuses) against an echo of
 * the test's own. While the echo itself is down, failed checks are not judged: the entries wait.
 * Once it answers, the working proxy is routed and the refusing one leaves the pool. Routed
 * entries are re-checked every run: a proxy that dies turns suspect and leaves the routed set, a
 * pass brings it back, failures in a row remove it, and gateways' evidence makes it suspect before
 * its check. A run whose pool is at its minimum fetches nothing; the pool of a deleted connector
 * is purged.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { connectors } from "../../../db/schema.ts";
import { Semaphore } from "../../../control/core/semaphore.ts";
import { PoolJob } from "../../../control/jobs/pool.ts";
import { poolStoreOf } from "../../../control/provider-api/pool/store.ts";
import { FetchCoordinator } from "../../../control/provider-api/fetch/coordinator.ts";
import { ProviderRefiller } from "../../../control/provider-api/fetch/refill.ts";
import { type Echo, startEcho } from "../../../testkit/upstreams/echo.ts";
import { startTinyproxy, type Tinyproxy } from "../../../testkit/upstreams/tinyproxy.ts";
import { freePort } from "../../../testkit/ports.ts";
import { FaultMode, startFaultProxy } from "../../../testkit/upstreams/fault-proxy.ts";
import { type ApiHarness, startHarness } from "../../../testkit/api-harness.ts";

let h: ApiHarness;
let echo: Echo;
let exit: Tinyproxy;
let projectId: string;

beforeAll(async () => {
  [h, echo, exit] = await Promise.all([
    startHarness(),
    startEcho(),
    startTinyproxy({ auth: { username: "exit", password: "exit-secret" } }),
  ]);
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Pool job", username: "pool-job" },
  });
  projectId = project.body.id;
}, 60_000);

afterAll(async () => {
  await Promise.all([h?.close(), echo?.close(), exit?.close()]);
});

async function providerConnector(pool: Record<string, unknown>): Promise<string> {
  const made = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    token: h.tokens.editor,
    body: {
      name: `pool-${Math.random().toString(36).slice(2, 8)}`,
      kind: "provider_api",
      config: {
        fetch: { url: "https://provider.example/proxies" },
        parser: { format: "text", ttl_seconds: 600 },
        pool,
      },
    },
  });
  expect(made.status, made.text).toBe(201);
  return made.body.id;
}

/** The job's clock runs this far ahead of the wall clock (the echo's verdicts age by it). */
let aheadMs = 0;

function poolJob(recheckAfterMs = 60_000): PoolJob {
  const store = poolStoreOf(h.deps);
  const logger = h.deps.logger;
  const coordinator = new FetchCoordinator({ redis: h.deps.redis, keys: h.deps.keys, logger });
  return new PoolJob({
    database: h.deps.database,
    redis: h.deps.redis,
    keys: h.deps.keys,
    logger,
    store,
    leader: coordinator,
    refiller: new ProviderRefiller({ coordinator, pool: store, logger }),
    depletion: { markDepleted: async () => {}, clearDepleted: async () => {} },
    probes: new Semaphore(10),
    echoUrl: echo.url,
    timeoutMs: 2000,
    recheckAfterMs,
    usableMarginMs: 1000,
    heldFreshMs: 3000,
    nowMs: () => Date.now() + aheadMs,
  });
}

describe("the pool job's checks", () => {
  it("leaves entries waiting while the echo is down, then routes the good and drops the bad", async () => {
    // min_size 0: the pool never runs short, so no fetch is attempted.
    const connectorId = await providerConnector({ min_size: 0, target_size: 1, max_size: 5 });
    const store = poolStoreOf(h.deps);
    const nowMs = Date.now();
    const refusing = await freePort();
    const added = await store.add({ id: connectorId, projectId }, [
      {
        key: `http|127.0.0.1|${exit.port}|exit`,
        scheme: "http",
        host: "127.0.0.1",
        port: exit.port,
        username: "exit",
        password: "exit-secret",
        country: null,
        expiresAtMs: nowMs + 600_000,
        usableUntilMs: nowMs + 590_000,
      },
      {
        key: `http|127.0.0.1|${refusing}|`,
        scheme: "http",
        host: "127.0.0.1",
        port: refusing,
        username: null,
        password: null,
        country: null,
        expiresAtMs: nowMs + 600_000,
        usableUntilMs: nowMs + 590_000,
      },
    ], { nowMs, maxSize: 5 });
    expect(added.added).toBe(2);
    const job = poolJob();

    echo.setUp(false);
    const asked = [...echo.requests.values()].reduce((a, b) => a + b, 0);
    const during = await job.runOne(connectorId, AbortSignal.timeout(30_000));
    // The working proxy's check reached the echo (which failed it): nothing was judged.
    expect([...echo.requests.values()].reduce((a, b) => a + b, 0)).toBeGreaterThan(asked);
    expect(during.checked).toBe(0);
    expect(during.fetched).toBe(0);
    expect(during.counts).toMatchObject({ checking: 2, routed: 0 });

    // Back up; a verdict of "down" stands ten seconds, so the next run comes after it.
    echo.setUp(true);
    aheadMs = 11_000;
    const after = await job.runOne(connectorId, AbortSignal.timeout(30_000));
    expect(after.checked).toBe(2);
    expect(after.counts).toMatchObject({ checking: 0, routed: 1, stock: 0 });
    const [routed] = await store.routed(connectorId, Date.now());
    expect(routed.id).toBe(added.ids[0]);
    expect(routed.checked_at).not.toBeNull();
    // The refusing proxy left, and its ownership with it.
    expect(await store.entries(connectorId, [added.ids[1]])).toEqual([]);
  });

  it("re-checks routed entries: a dead proxy turns suspect, comes back on a pass, leaves after failures in a row", async () => {
    const auth = { username: "fault", password: "fault-secret" };
    const fault = await startFaultProxy({ auth });
    try {
      const connectorId = await providerConnector({
        min_size: 0,
        target_size: 1,
        max_size: 5,
        remove_after_failures: 3,
      });
      const ref = { id: connectorId, projectId };
      const store = poolStoreOf(h.deps);
      const nowMs = Date.now();
      const { ids: [id] } = await store.add(ref, [{
        key: `http|127.0.0.1|${fault.port}|fault`,
        scheme: "http",
        host: "127.0.0.1",
        port: fault.port,
        ...auth,
        country: null,
        expiresAtMs: nowMs + 600_000,
        usableUntilMs: nowMs + 590_000,
      }], { nowMs, maxSize: 5 });
      // Every run re-checks what the one before checked.
      const job = poolJob(0);
      const run = () => job.runOne(connectorId, AbortSignal.timeout(30_000));
      const routedIds = async () => (await store.routed(connectorId, Date.now())).map((e) => e.id);

      expect((await run()).counts).toMatchObject({ routed: 1 });
      const seen = fault.connectionsSeen;
      expect((await run()).counts).toMatchObject({ routed: 1, suspect: 0 });
      expect(fault.connectionsSeen).toBeGreaterThan(seen);

      // It dies: the next run finds it, and the feed's routed set no longer has it.
      fault.setMode(FaultMode.refuse);
      expect((await run()).counts).toMatchObject({ routed: 0, suspect: 1 });
      expect(await routedIds()).toEqual([]);
      // It comes back: a pass puts it back in the routed set.
      fault.setMode(FaultMode.pass);
      expect((await run()).counts).toMatchObject({ routed: 1, suspect: 0 });
      expect(await routedIds()).toEqual([id]);

      // Gateways failing to reach it make it suspect before any check: a run takes their
      // evidence first, and with the proxy dead, its failed checks then remove it.
      fault.setMode(FaultMode.refuse);
      await h.deps.redis.hincrby(h.deps.keys.poolEvidence(connectorId), id, 4);
      expect((await run()).counts).toMatchObject({ routed: 0, suspect: 1 });
      expect((await store.entries(connectorId, [id]))[0].failures).toBe(2);
      expect((await run()).counts).toMatchObject({ routed: 0, suspect: 0, checking: 0 });
      expect(await store.entries(connectorId, [id])).toEqual([]);
    } finally {
      await fault.close();
    }
  });

  it("purges the pool of a connector that is gone", async () => {
    const connectorId = await providerConnector({ min_size: 0, target_size: 1, max_size: 5 });
    const store = poolStoreOf(h.deps);
    const nowMs = Date.now();
    await store.add({ id: connectorId, projectId }, [{
      key: "http|203.0.113.9|8080|",
      scheme: "http",
      host: "203.0.113.9",
      port: 8080,
      username: null,
      password: null,
      country: null,
      expiresAtMs: nowMs + 600_000,
      usableUntilMs: nowMs + 590_000,
    }], { nowMs, maxSize: 5 });
    await h.deps.database.db.delete(connectors).where(eq(connectors.id, connectorId));
    const run = await poolJob().runOne(connectorId, AbortSignal.timeout(10_000));
    expect(run.skipped).toBe("gone");
    expect(await store.counts(connectorId)).toEqual({
      checking: 0,
      routed: 0,
      stock: 0,
      suspect: 0,
      draining: 0,
      extracted: 0,
    });
    expect(await h.deps.redis.exists(h.deps.keys.poolEntries(connectorId))).toBe(0);
  });
});
