/**
 * The pool job over real stores and real proxies: a run checks the entries waiting for a check
 * through each proxy (a Debian tinyproxy that works, an address that refuses) against an echo of
 * the test's own. While the echo itself is down, failed checks are not judged: the entries wait.
 * Once it answers, the working proxy is routed and the refusing one leaves the pool. A run whose
 * pool is at its minimum fetches nothing; the pool of a deleted connector is purged.
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

function poolJob(): PoolJob {
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
    recheckAfterMs: 60_000,
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
      draining: 0,
      extracted: 0,
    });
    expect(await h.deps.redis.exists(h.deps.keys.poolEntries(connectorId))).toBe(0);
  });
});
