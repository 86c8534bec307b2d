/**
 * A pool job built as a worker builds it (control/jobs/handlers.ts), over a PRIVATE Postgres this
 * file starts and stops, the test bed's Redis, the provider emulator over TLS handing out real
 * tinyproxy exits, and an echo of the file's own:
 *
 * - a run that reads its connector from Postgres keeps the connector's settings in Redis, sealed
 *   (no secret in clear), rewritten only when they change; a record moved to another connector,
 *   or read under another install's secret, does not open;
 * - with Postgres stopped, a run goes on with the last-known settings: it refills from the
 *   provider with the credential's key, checks and routes; a depletion it cannot write is
 *   skipped, not thrown; a connector with no last-known settings is left alone, never purged; one
 *   warning per outage, and one info once Postgres answers again;
 * - after the outage the next run writes the depletion, and a deleted connector's purge takes
 *   its last-known settings with the pool.
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalPostgres } from "../../../scripts/local-stores.ts";
import { buildJobs, poolOutage } from "../../../control/jobs/handlers.ts";
import type { PoolJob } from "../../../control/jobs/pool.ts";
import { liveCount } from "../../../control/provider-api/pool/contract.ts";
import { CredentialSealer } from "../../../control/provider-api/pool/credentials.ts";
import { LastKnownSettings } from "../../../control/provider-api/pool/last-known.ts";
import type { PoolOutage } from "../../../control/provider-api/pool/outage.ts";
import { poolStoreOf, type RedisPoolStore } from "../../../control/provider-api/pool/store.ts";
import { JobKind } from "../../../shared/roles.ts";
import { type ApiHarness, startHarness } from "../../../testkit/api-harness.ts";
import { testCertificate } from "../../../testkit/certs.ts";
import { freePort } from "../../../testkit/ports.ts";
import { type Echo, startEcho } from "../../../testkit/upstreams/echo.ts";
import {
  PROVIDER_EMULATOR_JSON,
  type ProviderEmulator,
  startProviderEmulator,
} from "../../../testkit/upstreams/provider-emulator.ts";
import { startTinyproxy, type Tinyproxy } from "../../../testkit/upstreams/tinyproxy.ts";
import { writeCaFile } from "../../../testkit/vendors.ts";

const API_KEY = `pk-last-known-${Math.random().toString(36).slice(2, 10)}`;
const login = (i: number) => ({ username: `exit${i}`, password: `exit-secret-${i}` });

let folder: string;
let pg: LocalPostgres;
let echo: Echo;
let exits: Tinyproxy[];
let provider: ProviderEmulator;
let h: ApiHarness;
let store: RedisPoolStore;
let outage: PoolOutage;
let job: PoolJob;
let projectId: string;
let credentialId: string;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "ox-pool-last-known-"));
  // Postgres runs as its own user when we are root: it must be able to reach its folder.
  await chmod(folder, 0o755);
  pg = new LocalPostgres({ dir: join(folder, "postgres"), port: await freePort() });
  const caFile = await writeCaFile(folder, (await testCertificate()).ca);
  [echo, exits] = await Promise.all([
    startEcho(),
    Promise.all([1, 2, 3].map((i) => startTinyproxy({ auth: login(i) }))),
    pg.start(),
  ]);
  await pg.createDatabase("octoprox_pool_last_known");
  provider = await startProviderEmulator({
    tls: true,
    apiKey: API_KEY,
    exits: exits.map((exit, i) => ({ host: "127.0.0.1", port: exit.port, ...login(i + 1) })),
    perCall: 2,
    ttlSeconds: 600,
  });
  h = await startHarness({
    databaseUrl: pg.url("octoprox_pool_last_known"),
    env: {
      OCTOPROX_EGRESS_ALLOW_LOOPBACK: "true",
      OCTOPROX_EGRESS_CA_FILE: caFile,
      OCTOPROX_ECHO_URL: echo.url,
      OCTOPROX_POOL_INTERVAL: "1",
    },
  });
  store = poolStoreOf(h.deps);
  outage = poolOutage(h.deps);
  [job] = buildJobs([JobKind.pool], h.deps, { poolOutage: outage }) as PoolJob[];
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Last known", username: "last-known" },
  });
  projectId = project.body.id;
  const credential = await h.request("POST", `/api/v1/projects/${projectId}/credentials`, {
    token: h.tokens.editor,
    body: { name: "provider", provider: "provider_api", config: { api_key: API_KEY } },
  });
  expect(credential.status, credential.text).toBe(201);
  credentialId = credential.body.id;
}, 120_000);

afterAll(async () => {
  // Back up, whatever a failed test left, so the harness closes cleanly.
  await pg?.start().catch(() => {});
  await h?.close();
  await Promise.all([echo?.close(), provider?.close(), ...(exits ?? []).map((e) => e.close())]);
  await pg?.stop();
  if (folder) await rm(folder, { recursive: true, force: true });
});

const signal = () => AbortSignal.timeout(30_000);

function config(pool: Record<string, unknown> = {}) {
  return {
    fetch: {
      url: provider.fetchUrl,
      params: { count: "{count}" },
      auth: { type: "api_key", header: "X-Api-Key", value: "{credential.api_key}" },
      estimated_ips_per_call: 2,
      request_interval_ms: 0,
    },
    parser: {
      format: "json",
      items: PROVIDER_EMULATOR_JSON.items,
      fields: PROVIDER_EMULATOR_JSON.fields,
    },
    pool: { min_size: 2, target_size: 2, max_size: 4, depleted_after_empty: 1, ...pool },
  };
}

async function connector(name: string, pool: Record<string, unknown> = {}): Promise<string> {
  const made = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    token: h.tokens.editor,
    body: { name, kind: "provider_api", credential_id: credentialId, config: config(pool) },
  });
  expect(made.status, made.text).toBe(201);
  return made.body.id;
}

/** Every entry of the pool expires: the reaper runs with its clock an hour on. */
async function runDry(connectorId: string): Promise<void> {
  await store.maintain({ id: connectorId, projectId }, {
    nowMs: Date.now() + 3_600_000,
    reserve: null,
  });
  expect(liveCount(await store.counts(connectorId))).toBe(0);
  // The provider's leases end with them, so it hands the same exits out again.
  provider.releaseAll();
}

const logged = (msg: string) => h.lines.filter((line) => line.msg === msg);
const AWAY = "Postgres unavailable: pool runs go on with their connectors' last-known settings";
const BACK = "Postgres answers again: pool runs read their connectors from it";
const LEFT_ALONE =
  "Pool left alone while Postgres is unavailable: no last-known settings of its connector";
const SKIPPED = "Pool write skipped: Postgres unavailable; a later run makes it";

let main: string;
let unknown: string;

describe("a connector's last-known settings", () => {
  it("are kept sealed, rewritten only when they change, and open for their connector alone", async () => {
    main = await connector("main");
    // Made while Postgres answers, never run: no settings are known of it.
    unknown = await connector("unknown");
    const first = await job.runOne(main, signal());
    expect(first.skipped).toBeUndefined();
    expect(first.fetched).toBe(2);
    const key = h.deps.keys.poolLastKnown(main);
    const stored = await h.deps.redis.hgetall(key);
    expect(Object.keys(stored).sort()).toEqual(["digest", "saved_at", "sealed"]);
    expect(JSON.stringify(stored)).not.toContain(API_KEY);

    // Nothing changed: the next run writes nothing (a rewrite would seal under a fresh nonce).
    await job.runOne(main, signal());
    expect(await h.deps.redis.hgetall(key)).toEqual(stored);
    // The name is not a setting a run needs; the pool's size is.
    const renamed = await h.request("PATCH", `/api/v1/projects/${projectId}/connectors/${main}`, {
      token: h.tokens.editor,
      body: { name: "main renamed" },
    });
    expect(renamed.status, renamed.text).toBe(200);
    await job.runOne(main, signal());
    expect(await h.deps.redis.hgetall(key)).toEqual(stored);
    const resized = await h.request("PATCH", `/api/v1/projects/${projectId}/connectors/${main}`, {
      token: h.tokens.editor,
      body: { config: config({ max_size: 5 }) },
    });
    expect(resized.status, resized.text).toBe(200);
    await job.runOne(main, signal());
    const rewritten = await h.deps.redis.hgetall(key);
    expect(rewritten.sealed).not.toBe(stored.sealed);
    expect(rewritten.digest).not.toBe(stored.digest);

    const lastKnown = new LastKnownSettings({
      redis: h.deps.redis,
      keys: h.deps.keys,
      sealer: store.sealer,
    });
    const read = await lastKnown.read(main);
    expect(read).toMatchObject({
      found: true,
      settings: {
        id: main,
        projectId,
        kind: "provider_api",
        enabled: true,
        pendingDeletion: false,
        depleted: false,
        current: true,
        credential: { api_key: API_KEY },
        config: { pool: { max_size: 5 } },
      },
    });
    // Moved under another connector, it does not open; nor under another install's secret.
    await h.deps.redis.hset(h.deps.keys.poolLastKnown(unknown), rewritten);
    expect(await lastKnown.read(unknown)).toEqual({ found: false, reason: "unreadable" });
    await h.deps.redis.del(h.deps.keys.poolLastKnown(unknown));
    const elsewhere = new LastKnownSettings({
      redis: h.deps.redis,
      keys: h.deps.keys,
      sealer: new CredentialSealer("another install's secret"),
    });
    expect(await elsewhere.read(main)).toEqual({ found: false, reason: "unreadable" });
    expect(await lastKnown.read(unknown)).toEqual({ found: false, reason: "none" });
  });
});

describe("Postgres stopped", () => {
  it("runs go on with last-known settings: refill, check and route; nothing is purged", async () => {
    // An entry of the connector nothing is known of: it must outlive the outage.
    const kept = await store.add({ id: unknown, projectId }, [{
      key: "http|127.0.0.9|9|",
      scheme: "http",
      host: "127.0.0.9",
      port: 9,
      username: null,
      password: null,
      country: null,
      expiresAtMs: Date.now() + 600_000,
      usableUntilMs: Date.now() + 590_000,
    }], { nowMs: Date.now(), maxSize: 10 });
    expect(kept.added).toBe(1);
    await pg.stop();

    await runDry(main);
    const calls = provider.calls;
    const during = await job.runOne(main, signal());
    expect(during.skipped).toBeUndefined();
    expect(during.fetched).toBe(2);
    expect(during.counts).toMatchObject({ routed: 2, checking: 0 });
    expect(provider.calls).toBeGreaterThan(calls);
    // The provider was asked with the credential's key, known from Redis alone.
    expect(provider.requests.at(-1)?.headers["x-api-key"]).toBe(API_KEY);

    // The other connector: nothing to go on, so its pool is left as it is.
    expect(await job.runOne(unknown, signal())).toEqual({
      skipped: "no_last_known",
      checked: 0,
      fetched: 0,
    });
    expect(await job.runOne(unknown, signal())).toMatchObject({ skipped: "no_last_known" });
    expect((await store.counts(unknown)).checking).toBe(1);
    expect(logged(LEFT_ALONE)).toEqual([
      expect.objectContaining({ connector: unknown, reason: "none", level: "warn" }),
    ]);

    const snapshot = outage.snapshot();
    expect(snapshot.on_last_known).toEqual([main]);
    expect(snapshot.postgres_away_since).not.toBeNull();
  });

  it("skips a depletion it cannot write instead of failing the run", async () => {
    provider.setMode({ kind: "empty" });
    await runDry(main);
    for (let run = 0; run < 2; run++) {
      const dry = await job.runOne(main, signal());
      expect(dry.skipped).toBeUndefined();
      expect(dry.fetched).toBe(0);
    }
    expect(logged(SKIPPED)).toEqual([
      expect.objectContaining({ connector: main, write: "mark_depleted", level: "warn" }),
    ]);
    // One warning for the whole outage, however many runs met it.
    expect(logged(AWAY)).toHaveLength(1);
    expect(logged(BACK)).toHaveLength(0);
  });
});

describe("Postgres back", () => {
  it("reads Postgres again, writes the depletion, and purges the settings with the pool", async () => {
    await pg.start();
    const after = await job.runOne(main, signal());
    expect(after.skipped).toBeUndefined();
    expect(logged(BACK)).toHaveLength(1);
    expect(outage.snapshot()).toEqual({ postgres_away_since: null, on_last_known: [] });
    const [row] = await h.deps.database.sql<{ depleted_at: Date | null }[]>`
      select depleted_at from connectors where id = ${main}`;
    expect(row.depleted_at).not.toBeNull();

    // Read now, its settings are known too.
    await job.runOne(unknown, signal());
    expect(await h.deps.redis.exists(h.deps.keys.poolLastKnown(unknown))).toBe(1);

    // One pool holds an entry when its connector goes, the other none (two ways of purging):
    // both purges take the last-known settings with them.
    const held = await store.add({ id: unknown, projectId }, [{
      key: "http|127.0.0.9|10|",
      scheme: "http",
      host: "127.0.0.9",
      port: 10,
      username: null,
      password: null,
      country: null,
      expiresAtMs: Date.now() + 600_000,
      usableUntilMs: Date.now() + 590_000,
    }], { nowMs: Date.now(), maxSize: 10 });
    expect(held.added).toBe(1);
    expect(liveCount(await store.counts(main))).toBe(0);
    for (const id of [unknown, main]) {
      const deleted = await h.request("DELETE", `/api/v1/projects/${projectId}/connectors/${id}`, {
        token: h.tokens.editor,
      });
      expect(deleted.status, deleted.text).toBe(204);
      expect(await job.runOne(id, signal())).toMatchObject({ skipped: "gone" });
      expect(await h.deps.redis.exists(h.deps.keys.poolLastKnown(id))).toBe(0);
    }
    expect(await h.deps.redis.exists(h.deps.keys.poolEntries(unknown))).toBe(0);
  });
});
