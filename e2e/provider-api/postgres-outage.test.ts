/**
 * Provider-API pools through a Postgres outage, with real processes: a control process (role
 * all: api, controller, worker; pool runs every second) whose database lives on a PRIVATE
 * Postgres this file starts and stops (no other test is disturbed), a gateway (Deno), two
 * provider emulators over HTTPS handing out real tinyproxy exits that live 8 s (usable 6 s), and
 * an origin that answers the address a request left from.
 *
 * One project, two connectors: `routed` (every proxy routed; its calls at least 3 s apart, so
 * its two proxies' lifetimes overlap by half) carries the gateway's clients; `stock` (nothing
 * routed, released proxies checked again at once) serves extraction. With Postgres stopped for
 * more than twice the proxies' lifetime, every proxy the pools held before it ends, so:
 *
 * - the clients keep getting 200 through the gateway, from proxies fetched during the outage;
 * - extraction keeps handing out proxies (its distribution key and connector list were read
 *   before the outage: the api serves them from memory while Postgres is away);
 * - both providers are called during the outage: the pool runs go on with their connectors'
 *   last-known settings, and the workers' snapshots (the System page's data) say so;
 * - once Postgres is back, the control process logs it, and the System page's count returns to 0.
 */
import { randomBytes } from "node:crypto";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LocalPostgres } from "../../scripts/local-stores.ts";
import { readSystemStats } from "../../control/metrics/system-stats.ts";
import type { EntryRecord } from "../../control/provider-api/pool/contract.ts";
import { testCertificate } from "../../testkit/certs.ts";
import { Cluster, type Gateway, type LogLine, type Member } from "../../testkit/cluster.ts";
import { exitOf, viaProxy } from "../../testkit/clients/proxy-client.ts";
import { freePort } from "../../testkit/ports.ts";
import { SteadyLoad } from "../../testkit/routing.ts";
import { TEST_ADMIN_DATABASE_URL } from "../../testkit/stores.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import {
  PROVIDER_EMULATOR_JSON,
  type ProviderEmulator,
  startProviderEmulator,
} from "../../testkit/upstreams/provider-emulator.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import {
  createCredential,
  createProject,
  type VendorProject,
  writeCaFile,
} from "../../testkit/vendors.ts";

const API_KEY = `pk-${randomBytes(6).toString("hex")}`;
const TTL_SECONDS = 8;
const SAFETY_MARGIN_SECONDS = 2;
/** Exits 127.0.0.51-55 are the routed connector's, 56-60 the stock connector's. */
const ROUTED_EXITS = [1, 2, 3, 4, 5];
const STOCK_EXITS = [6, 7, 8, 9, 10];

const AWAY = "Postgres unavailable: pool runs go on with their connectors' last-known settings";
const BACK = "Postgres answers again: pool runs read their connectors from it";

let folder: string;
let pg: LocalPostgres;
let cluster: Cluster;
let control: Member;
let gateway: Gateway;
let origin: Origin;
let exits: Tinyproxy[];
let routedProvider: ProviderEmulator;
let stockProvider: ProviderEmulator;

/** Exit i's login: each tinyproxy takes only its own. */
const login = (i: number) => ({ username: `exit${i}`, password: `exit-secret-${i}-${API_KEY}` });

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-pool-pg-"));
  // Postgres runs as its own user when we are root: it must be able to reach its folder.
  await chmod(folder, 0o755);
  pg = new LocalPostgres({ dir: join(folder, "postgres"), port: await freePort() });
  const caFile = await writeCaFile(folder, (await testCertificate()).ca);
  [origin, exits] = await Promise.all([
    startOrigin(),
    Promise.all(
      [...ROUTED_EXITS, ...STOCK_EXITS].map((i) =>
        startTinyproxy({ bindAddress: `127.0.0.${50 + i}`, auth: login(i) })
      ),
    ),
    pg.start(),
  ]);
  const emulator = (indexes: readonly number[]) =>
    startProviderEmulator({
      tls: true,
      apiKey: API_KEY,
      exits: indexes.map((i) => ({ host: "127.0.0.1", port: exits[i - 1].port, ...login(i) })),
      perCall: 1,
      ttlSeconds: TTL_SECONDS,
    });
  [routedProvider, stockProvider] = await Promise.all([
    emulator(ROUTED_EXITS),
    emulator(STOCK_EXITS),
  ]);
  cluster = await Cluster.create({
    databaseAdminUrl: pg.url(),
    env: {
      OCTOPROX_EGRESS_ALLOW_LOOPBACK: "true",
      OCTOPROX_EGRESS_CA_FILE: caFile,
      OCTOPROX_POOL_INTERVAL: "1",
    },
  });
  control = await cluster.start("all");
  gateway = await cluster.startGateway();
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  // Back up, whatever a failed test left, so the cluster can drop its database.
  await pg?.start().catch(() => {});
  await cluster?.close();
  await Promise.all([
    origin?.close(),
    routedProvider?.close(),
    stockProvider?.close(),
    ...(exits ?? []).map((exit) => exit.close()),
  ]);
  await pg?.stop();
  if (folder) await rm(folder, { recursive: true, force: true });
});

async function poolConnector(
  project: VendorProject,
  credentialId: string,
  name: string,
  provider: ProviderEmulator,
  settings: { fetch: Record<string, unknown>; pool: Record<string, unknown> },
): Promise<string> {
  const answer = await cluster.request(
    "POST",
    `/api/v1/projects/${project.projectId}/connectors`,
    {
      name,
      kind: "provider_api",
      credential_id: credentialId,
      config: {
        fetch: {
          url: provider.fetchUrl,
          params: { count: "{count}" },
          auth: { type: "api_key", header: "X-Api-Key", value: "{credential.api_key}" },
          estimated_ips_per_call: 1,
          max_in_flight: 1,
          ...settings.fetch,
        },
        parser: {
          format: "json",
          items: PROVIDER_EMULATOR_JSON.items,
          fields: PROVIDER_EMULATOR_JSON.fields,
          safety_margin_seconds: SAFETY_MARGIN_SECONDS,
        },
        pool: settings.pool,
      },
    },
  );
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return answer.body.id as string;
}

async function entries(connectorId: string, set: "routed" | "stock"): Promise<EntryRecord[]> {
  const key = set === "routed"
    ? cluster.keys.poolRouted(connectorId)
    : cluster.keys.poolStock(connectorId);
  const ids = await cluster.redis.zrange(key, "0", "-1");
  if (ids.length === 0) return [];
  const raws = await cluster.redis.hmget(cluster.keys.poolEntries(connectorId), ...ids);
  return raws.filter((raw): raw is string => raw !== null).map((raw) => JSON.parse(raw));
}

/** The System page's pool figures, read as GET /system/stats reads them (from Redis). */
async function poolSettings() {
  return (await readSystemStats(cluster.redis, cluster.keys)).pool_settings.data;
}

describe("Postgres stopped under provider-API pools", () => {
  it(
    "keeps the pools refilled from their providers, routed and extracted, on last-known settings",
    async () => {
      // Only ever this file's own server.
      expect(pg.url()).not.toBe(TEST_ADMIN_DATABASE_URL);
      const project = await createProject(cluster);
      const credentialId = await createCredential(cluster, project.projectId, "provider_api", {
        api_key: API_KEY,
      });
      const routed = await poolConnector(project, credentialId, "routed", routedProvider, {
        // One proxy a call, the calls at least half a usable life apart: the two routed proxies
        // never end together, so the gateway always has one while the other is replaced.
        fetch: { request_interval_ms: ((TTL_SECONDS - SAFETY_MARGIN_SECONDS) * 1000) / 2 },
        pool: { min_size: 2, target_size: 2, max_size: 4 },
      });
      const stock = await poolConnector(project, credentialId, "stock", stockProvider, {
        fetch: { request_interval_ms: 0 },
        pool: {
          min_size: 2,
          target_size: 2,
          max_size: 4,
          reserve_for_gateway: 0,
          reuse_after_release_seconds: 0,
        },
      });
      await cluster.until(
        async () =>
          (await entries(routed, "routed")).length === 2 &&
          (await entries(stock, "stock")).length === 2,
        { message: "both pools filled", timeoutMs: 30_000 },
      );
      const routedExits = new Set(ROUTED_EXITS.map((i) => `127.0.0.${50 + i}`));
      await cluster.until(async () => {
        const answer = await viaProxy(gateway.proxyPort, project.credentials, `${origin.url}/ip`);
        return answer.status === 200 && routedExits.has(exitOf(answer) as string);
      }, { message: "the gateway to route the pool's proxies" });

      // Extraction's key and connector list are read once while Postgres answers.
      const made = await cluster.request(
        "POST",
        `/api/v1/projects/${project.projectId}/distribution-keys`,
        { name: "outage" },
      );
      expect(made.status, JSON.stringify(made.body)).toBe(201);
      const extract = async (path: string, body: unknown) => {
        const response = await fetch(
          `${cluster.apiUrl}/api/v1/projects/${project.projectId}/extract${path}`,
          {
            method: "POST",
            headers: {
              authorization: `Bearer ${made.body.key}`,
              "content-type": "application/json",
            },
            body: JSON.stringify(body),
          },
        );
        return { status: response.status, body: await response.json() };
      };
      /**
       * One proxy extracted and released, once the stock holds one usable for another second;
       * then the next pool run checks it again (back in stock). Answers whether one was handed
       * out: a proxy that reached its usable-until meanwhile leaves the answer short.
       */
      const extractOne = async (): Promise<boolean> => {
        await cluster.until(
          async () =>
            (await entries(stock, "stock")).some((e) => e.usable_until > Date.now() + 1000),
          { message: "stock to extract", timeoutMs: 15_000 },
        );
        const taken = await extract("", { count: 1 });
        expect(taken.status, JSON.stringify(taken.body)).toBe(200);
        if (taken.body.returned !== 1) return false;
        const released = await extract(`/${taken.body.lease.id}/release`, {});
        expect(released.status, JSON.stringify(released.body)).toBe(200);
        const [{ id }] = taken.body.proxies;
        await cluster.until(
          async () => (await cluster.redis.zscore(cluster.keys.poolChecking(stock), id)) === null,
          { message: "the released proxy checked again" },
        );
        return true;
      };
      expect(await extractOne()).toBe(true);

      const load = new SteadyLoad([gateway], project.credentials, `${origin.url}/ip`);
      try {
        await cluster.until(() => load.leastOk >= 5, { message: "requests before the outage" });
        expect(await poolSettings()).toMatchObject({ on_last_known: 0 });

        const before = {
          ok: load.leastOk,
          routedCalls: routedProvider.calls,
          stockCalls: stockProvider.calls,
        };
        await pg.stop();
        const stoppedAt = Date.now();
        const away = await cluster.logged(control, AWAY, { timeoutMs: 10_000 });
        // Both pools run on their last-known settings, and the System page's data says so.
        const during = await cluster.until(async () => {
          const pools = await poolSettings();
          return pools?.on_last_known === 2 ? pools : undefined;
        }, { message: "both pools on last-known settings in the System page's data" });
        expect(during.connector_ids).toEqual([routed, stock].sort());
        expect(during.workers_without_postgres).toBe(1);
        // The admin API reads its user from Postgres: what the System page's own request gets.
        const systemStatus = (await cluster.request("GET", "/api/v1/system/stats")).status;

        // Twice the proxies' lifetime: every proxy held before the outage has ended.
        let extracted = 0;
        let short = 0;
        while (Date.now() - stoppedAt < 2 * TTL_SECONDS * 1000 + 1000) {
          if (await extractOne()) extracted++;
          else short++;
        }
        const fetchedDuring = await entries(routed, "routed");
        const outage = {
          ok: load.leastOk - before.ok,
          routedCalls: routedProvider.calls - before.routedCalls,
          stockCalls: stockProvider.calls - before.stockCalls,
        };
        await pg.start();
        const startedAt = Date.now();
        const outageMs = startedAt - stoppedAt;
        const back = await cluster.logged(control, BACK, { timeoutMs: 15_000 });
        const loggedAt = (line: LogLine) => Date.parse(String(line.time));

        console.log(
          `Postgres away ${(outageMs / 1000).toFixed(1)} s: ${outage.ok} requests answered 200 ` +
            `through the gateway, ${load.failures.length} failed; ${extracted} extractions ` +
            `(${short} short); ` +
            `provider calls ${outage.routedCalls} (routed pool) and ${outage.stockCalls} ` +
            `(stock pool); GET /system/stats answered ${systemStatus} during it; ` +
            `the worker warned ${loggedAt(away) - stoppedAt} ms after the stop and logged ` +
            `Postgres back ${
              loggedAt(back) - startedAt
            } ms after the start (${back.away_ms} ms away)`,
        );
        expect(load.failures).toEqual([]);
        expect(outage.ok).toBeGreaterThan(50);
        expect(extracted).toBeGreaterThan(5);
        // Every proxy routed now was fetched during the outage, from calls made during it.
        expect(fetchedDuring.length).toBeGreaterThan(0);
        for (const entry of fetchedDuring) expect(entry.fetched_at).toBeGreaterThan(stoppedAt);
        expect(outage.routedCalls).toBeGreaterThanOrEqual(3);
        expect(outage.stockCalls).toBeGreaterThan(0);

        // Back: the runs read Postgres again, and the System page's count goes to 0. A run whose
        // read failed as Postgres came back goes on with last-known settings once more and is
        // listed until its connector's next run reads Postgres: the page is read until none is.
        const stats = await cluster.until(async () => {
          const answer = await cluster.request("GET", "/api/v1/system/stats");
          if (answer.status !== 200) return undefined;
          return answer.body.pool_settings.data.on_last_known === 0 ? answer.body : undefined;
        }, { message: "the System page's data again, with no pool on last-known settings" });
        expect(stats.pool_settings.data).toEqual({
          on_last_known: 0,
          connector_ids: [],
          workers_without_postgres: 0,
        });
        await cluster.until(() => load.leastOk >= before.ok + outage.ok + 5, {
          message: "requests after the outage",
        });
      } finally {
        await load.stop();
      }
      expect(load.failures).toEqual([]);
      expect(control.alive()).toBe(true);
    },
    120_000,
  );
});
