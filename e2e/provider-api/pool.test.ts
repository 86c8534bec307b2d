/**
 * A provider-API connector through real processes: an api, a controller, two workers (each
 * with OCTOPROX_EGRESS_ALLOW_LOOPBACK and the test CA, pool runs every second), two gateways
 * (gateway/main.ts under Deno), the provider emulator over HTTPS handing out real tinyproxy
 * exits (each with its own login and outgoing address) with lifetimes, and an origin that
 * answers the address a request left from.
 *
 * - the pool fills from the provider, each proxy is checked through itself, and both gateways
 *   route clients through the proxies it handed out; no proxy password is in Redis in clear;
 * - a proxy past its usable-until takes no new request on either gateway, even though no feed
 *   removed it (the controller is stopped first, so the gateways keep the feed that routes it);
 * - with `pool.max_concurrency`, a proxy takes no more transfers at once on a gateway than that,
 *   and a pool whose proxies' slots the gateways hold grows before requests find them full;
 * - a routed proxy that dies under traffic takes no new request on either gateway within two
 *   pool intervals and a feed publish (the gateways' own failures are evidence the next pool
 *   run acts on), and its pool drops it while clients keep being served by the other;
 * - `fetch.max_total` holds across both workers: the provider hands out no more than it, however
 *   often the pool runs short, and never more calls at once than `fetch.max_in_flight`;
 * - a Redis wipe starts a new pool generation, and the pool refills from the provider;
 * - extraction hands out stock only: the extracted proxies work directly with the credentials
 *   the answer gives, neither gateway routes them, and once released they retire: never handed
 *   out or routed again;
 * - a sequence of two provider-API connectors moves to the second once the first one's provider
 *   answers empty `depleted_after_empty` times in a row, and the gateway follows.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { testCertificate } from "../../testkit/certs.ts";
import { Cluster, type Gateway, type Member } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import {
  PROVIDER_EMULATOR_JSON,
  type ProviderEmulator,
  startProviderEmulator,
} from "../../testkit/upstreams/provider-emulator.ts";
import { connectVia, exitOf, viaProxy } from "../../testkit/clients/proxy-client.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { FaultMode, startFaultProxy } from "../../testkit/upstreams/fault-proxy.ts";
import { JobKind } from "../../shared/roles.ts";
import type { EntryRecord } from "../../control/provider-api/pool/contract.ts";
import {
  createCredential,
  createProject,
  type VendorProject,
  writeCaFile,
} from "../../testkit/vendors.ts";

const API_KEY = `pk-${randomBytes(6).toString("hex")}`;

let folder: string;
let caFile: string;
let cluster: Cluster;
let controller: Member;
let origin: Origin;
let exits: Tinyproxy[];
let gateways: Gateway[];
const emulators: ProviderEmulator[] = [];

/** Exit i's login: each tinyproxy takes only its own. */
const login = (i: number) => ({ username: `exit${i}`, password: `exit-secret-${i}-${API_KEY}` });

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-pool-"));
  caFile = await writeCaFile(folder, (await testCertificate()).ca);
  [origin, ...exits] = await Promise.all([
    startOrigin(),
    ...[1, 2, 3, 4, 5, 6].map((i) =>
      startTinyproxy({ bindAddress: `127.0.0.${30 + i}`, auth: login(i) })
    ),
  ]);
  cluster = await Cluster.create({
    env: {
      OCTOPROX_EGRESS_ALLOW_LOOPBACK: "true",
      OCTOPROX_EGRESS_CA_FILE: caFile,
      OCTOPROX_POOL_INTERVAL: "1",
    },
  });
  await cluster.start("api");
  controller = await cluster.start("controller");
  await Promise.all([cluster.start("worker"), cluster.start("worker")]);
  gateways = await Promise.all([cluster.startGateway(), cluster.startGateway()]);
}, 120_000);

/** The connectors a test made, deleted after it. */
const made: { projectId: string; connectorId: string }[] = [];

// One proxy is in one pool across the install, and the tests' providers hand out the same exits:
// each test deletes its connectors, and the pools' purges free their proxies for the next.
afterEach(async () => {
  for (const { projectId, connectorId } of made.splice(0)) {
    const deleted = await cluster.request(
      "DELETE",
      `/api/v1/projects/${projectId}/connectors/${connectorId}`,
    );
    expect([204, 404]).toContain(deleted.status);
    await cluster.until(
      async () => (await cluster.redis.exists(cluster.keys.poolEntries(connectorId))) === 0,
      { message: `the pool of ${connectorId} purged` },
    );
  }
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([
    origin?.close(),
    ...(exits ?? []).map((exit) => exit.close()),
    ...emulators.map((emulator) => emulator.close()),
  ]);
  if (folder) await rm(folder, { recursive: true, force: true });
});

/** An emulator handing out `exitIndexes`' tinyproxies (with their logins). */
async function emulator(
  exitIndexes: readonly number[],
  settings: { perCall?: number; ttlSeconds?: number } = {},
): Promise<ProviderEmulator> {
  const made = await startProviderEmulator({
    tls: true,
    apiKey: API_KEY,
    exits: exitIndexes.map((i) => ({
      host: "127.0.0.1",
      port: exits[i - 1].port,
      ...login(i),
      country: "DE",
    })),
    perCall: settings.perCall ?? 2,
    ttlSeconds: settings.ttlSeconds ?? 600,
  });
  emulators.push(made);
  return made;
}

interface PoolSetup {
  project: VendorProject;
  connectorId: string;
  provider: ProviderEmulator;
}

async function poolConnector(
  provider: ProviderEmulator,
  config: {
    fetch?: Record<string, unknown>;
    parser?: Record<string, unknown>;
    pool?: Record<string, unknown>;
  },
): Promise<PoolSetup> {
  const project = await createProject(cluster);
  const credentialId = await createCredential(cluster, project.projectId, "provider_api", {
    api_key: API_KEY,
  });
  const answer = await cluster.request(
    "POST",
    `/api/v1/projects/${project.projectId}/connectors`,
    {
      name: `pool-${randomBytes(3).toString("hex")}`,
      kind: "provider_api",
      credential_id: credentialId,
      config: {
        fetch: {
          url: provider.fetchUrl,
          params: { count: "{count}" },
          auth: { type: "api_key", header: "X-Api-Key", value: "{credential.api_key}" },
          estimated_ips_per_call: 2,
          request_interval_ms: 0,
          max_in_flight: 2,
          ...config.fetch,
        },
        parser: {
          format: "json",
          items: PROVIDER_EMULATOR_JSON.items,
          fields: PROVIDER_EMULATOR_JSON.fields,
          safety_margin_seconds: 5,
          ...config.parser,
        },
        pool: { min_size: 2, target_size: 3, max_size: 10, ...config.pool },
      },
    },
  );
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  made.push({ projectId: project.projectId, connectorId: answer.body.id });
  return { project, connectorId: answer.body.id as string, provider };
}

async function routedEntries(connectorId: string): Promise<EntryRecord[]> {
  const ids = await cluster.redis.zrange(cluster.keys.poolRouted(connectorId), "0", "-1");
  if (ids.length === 0) return [];
  const raws = await cluster.redis.hmget(cluster.keys.poolEntries(connectorId), ...ids);
  return raws.filter((raw): raw is string => raw !== null).map((raw) => JSON.parse(raw));
}

/** The exits the origin saw through `gateway` over `probes` requests (null: refused). */
async function exitsThrough(
  gateway: Gateway,
  project: VendorProject,
  probes: number,
): Promise<(string | number)[]> {
  const seen: (string | number)[] = [];
  for (let i = 0; i < probes; i++) {
    const answer = await viaProxy(gateway.proxyPort, project.credentials, `${origin.url}/ip`, {
      timeoutMs: 10_000,
    });
    seen.push(answer.status === 200 ? exitOf(answer) : answer.status);
  }
  return seen;
}

/** Asks a pool run of the connector now and waits until a worker took and finished it. */
async function poolRunNow(connectorId: string): Promise<void> {
  const stream = cluster.keys.jobStream(JobKind.pool);
  await cluster.redis.xadd(stream, "*", "key", connectorId);
  await cluster.until(
    async () =>
      (await cluster.redis.xlen(stream)) === 0 && (await cluster.pending(stream)).length === 0,
    { message: `a pool run of ${connectorId}` },
  );
}

describe("a provider-API pool", () => {
  it("fills from the provider, checks each proxy and routes it on every gateway", async () => {
    const provider = await emulator([1, 2, 3]);
    const { project, connectorId } = await poolConnector(provider, {});
    const handedOut = new Set(["127.0.0.31", "127.0.0.32", "127.0.0.33"]);
    for (const gateway of gateways) {
      await cluster.until(async () => {
        const seen = await exitsThrough(gateway, project, 3);
        return seen.every((exit) => typeof exit === "string" && handedOut.has(exit))
          ? seen
          : undefined;
      }, { message: "both gateways to route through the provider's proxies" });
    }
    const routed = await routedEntries(connectorId);
    expect(routed.length).toBeGreaterThanOrEqual(2);
    expect(routed.every((entry) => entry.state === "available" && entry.checked_at !== null))
      .toBe(true);
    // The provider was asked with the credential's key and the count the pool needed.
    const asked = provider.requests[0];
    expect(asked.headers["x-api-key"]).toBe(API_KEY);
    expect(new URL(asked.url, "https://x").searchParams.get("count")).toMatch(/^\d+$/);
    // No exit's password, and not the provider's key, is anywhere in Redis in clear.
    const dump = await dumpPrefix();
    for (const i of [1, 2, 3]) expect(dump).not.toContain(login(i).password);
    expect(dump).not.toContain(API_KEY);
  });

  it("takes no new request through a proxy past its usable-until, on either gateway", async () => {
    // Lives 12 s, usable for 7 (a 5 s safety margin): one exit, so nothing replaces it.
    const provider = await emulator([4], { perCall: 1, ttlSeconds: 12 });
    const { project, connectorId } = await poolConnector(provider, {
      fetch: { estimated_ips_per_call: 1 },
      pool: { min_size: 1, target_size: 1, max_size: 1 },
    });
    for (const gateway of gateways) {
      await cluster.until(async () => {
        const [exit] = await exitsThrough(gateway, project, 1);
        return exit === "127.0.0.34" ? exit : undefined;
      }, { message: "both gateways to route through exit 4", timeoutMs: 30_000 });
    }
    const [entry] = await routedEntries(connectorId);
    // No more publishes from here on: the gateways keep the feed that routes the proxy.
    await controller.stop();
    await cluster.until(() => Date.now() > entry.usable_until + 50 ? true : undefined, {
      message: "the proxy's usable-until to pass",
      timeoutMs: 20_000,
    });
    for (const gateway of gateways) {
      const refused = await exitsThrough(gateway, project, 3);
      expect(refused).toEqual([503, 503, 503]);
    }
    controller = await cluster.start("controller");
  });

  it("holds each proxy to max_concurrency on a gateway, and grows the pool when its slots are held", async () => {
    const provider = await emulator([4, 5, 6], { perCall: 1 });
    const { project, connectorId } = await poolConnector(provider, {
      fetch: { estimated_ips_per_call: 1 },
      pool: { min_size: 1, target_size: 1, max_size: 3, max_concurrency: 1 },
    });
    const gateway = gateways[0];
    const heldExit = await cluster.until(async () => {
      const [exit] = await exitsThrough(gateway, project, 1);
      return typeof exit === "string" ? exit : undefined;
    }, { message: "the gateway to route the pool's one proxy", timeoutMs: 30_000 });
    expect(await routedEntries(connectorId)).toHaveLength(1);

    // An idle tunnel holds the one proxy's one slot on this gateway.
    const target = new URL(origin.url);
    const tunnel = await connectVia(gateway.proxyPort, project.credentials, target.host);
    try {
      expect(tunnel.status).toBe(200);
      // The gateway reports what it holds; with no slot free the pool grows, though it holds
      // as many proxies as its target.
      await cluster.until(async () => (await routedEntries(connectorId)).length >= 2 || undefined, {
        message: "the pool to grow for the held slot",
        timeoutMs: 30_000,
      });
      const [report] = Object.values(
        await cluster.redis.hgetall(cluster.keys.poolHeld(connectorId)),
      );
      expect(report).toMatch(/^1:\d+$/);
      // Once the gateway routes the new proxy, requests go there: the held one is at its limit.
      await cluster.until(async () => {
        const [exit] = await exitsThrough(gateway, project, 1);
        return typeof exit === "string" && exit !== heldExit ? exit : undefined;
      }, { message: "the gateway to route the new proxy" });
      for (const exit of await exitsThrough(gateway, project, 4)) {
        expect(typeof exit).toBe("string");
        expect(exit).not.toBe(heldExit);
      }
    } finally {
      tunnel.socket?.destroy();
    }
  });

  it("stops choosing a routed proxy that dies, on both gateways, within two pool intervals and a publish", async () => {
    const POOL_INTERVAL_MS = 1000;
    // What one feed publish and its apply take here at most, with room for a loaded machine.
    const PUBLISH_ALLOWANCE_MS = 1500;
    const dyingLogin = { username: "dying", password: `dying-secret-${API_KEY}` };
    const dying = await startFaultProxy({ auth: dyingLogin, bindAddress: "127.0.0.40" });
    const stopTraffic = new AbortController();
    try {
      const provider = await startProviderEmulator({
        tls: true,
        apiKey: API_KEY,
        exits: [
          { host: "127.0.0.1", port: dying.port, ...dyingLogin, country: "DE" },
          { host: "127.0.0.1", port: exits[4].port, ...login(5), country: "DE" },
        ],
        perCall: 2,
        ttlSeconds: 600,
      });
      emulators.push(provider);
      const { project, connectorId } = await poolConnector(provider, {
        pool: { min_size: 2, target_size: 2, max_size: 2 },
      });
      for (const gateway of gateways) {
        await cluster.until(async () => {
          const seen = new Set(await exitsThrough(gateway, project, 4));
          return seen.has("127.0.0.40") && seen.has("127.0.0.35") ? true : undefined;
        }, { message: "both gateways to route through both proxies", timeoutMs: 30_000 });
      }
      const [dyingEntry] = (await routedEntries(connectorId)).filter((e) => e.port === dying.port);
      expect(dyingEntry).toBeDefined();

      // Clients keep asking through both gateways; the proxy dies under them.
      const answers: number[] = [];
      const traffic = gateways.map(async (gateway) => {
        while (!stopTraffic.signal.aborted) {
          const answer = await viaProxy(
            gateway.proxyPort,
            project.credentials,
            `${origin.url}/ip`,
            {
              timeoutMs: 10_000,
            },
          );
          answers.push(answer.status);
        }
      });
      await cluster.until(() => answers.length >= 10 || undefined, { message: "traffic" });
      dying.setMode(FaultMode.refuse);
      const diedAt = Date.now();
      // Every connection it gets from here on is a gateway's attempt or a pool check. Once the
      // last one came, a quiet spell follows: the feed dropped it and the pool let it go.
      let seen = dying.connectionsSeen;
      let lastAt = diedAt;
      await cluster.until(() => {
        if (dying.connectionsSeen !== seen) {
          seen = dying.connectionsSeen;
          lastAt = Date.now();
        }
        return Date.now() - lastAt > 4000 ? true : undefined;
      }, { message: "the dead proxy to stop being tried", timeoutMs: 30_000, intervalMs: 20 });
      expect(lastAt - diedAt).toBeLessThanOrEqual(2 * POOL_INTERVAL_MS + PUBLISH_ALLOWANCE_MS);
      const answeredWhileDying = answers.length;
      stopTraffic.abort();
      await Promise.all(traffic);
      // The live proxy served the clients throughout (the gateways retry a refused connect).
      expect(answers.filter((status) => status !== 200)).toEqual([]);
      expect(answeredWhileDying).toBeGreaterThan(10);
      expect(await cluster.redis.hget(cluster.keys.poolEntries(connectorId), dyingEntry.id))
        .toBeNull();
      for (const gateway of gateways) {
        expect(new Set(await exitsThrough(gateway, project, 3))).toEqual(new Set(["127.0.0.35"]));
      }
    } finally {
      stopTraffic.abort();
      await dying.close();
    }
  });

  it("never fetches past max_total, nor more calls at once than max_in_flight, across two workers", async () => {
    const provider = await emulator([5, 6, 1, 2, 3, 4], { perCall: 2 });
    provider.setMode({ kind: "slow", delayMs: 200 });
    const { connectorId } = await poolConnector(provider, {
      fetch: { estimated_ips_per_call: 2, max_in_flight: 2, max_total: 6 },
      pool: { min_size: 8, target_size: 10, max_size: 10 },
    });
    await cluster.until(() => provider.served >= 6 ? true : undefined, {
      message: "the provider to hand out max_total proxies",
    });
    // However often the pool runs short from here, no call is made.
    for (let run = 0; run < 3; run++) await poolRunNow(connectorId);
    expect(provider.served).toBe(6);
    expect(provider.calls).toBe(3);
    expect(provider.maxInFlight).toBeLessThanOrEqual(2);
  });

  it("starts a new generation after a Redis wipe and refills from the provider", async () => {
    const provider = await emulator([1, 2, 3]);
    const { project, connectorId } = await poolConnector(provider, {});
    await cluster.until(async () => (await routedEntries(connectorId)).length >= 2 || undefined, {
      message: "the pool to fill",
    });
    const generation = await cluster.redis.get(cluster.keys.poolGeneration);
    expect(generation).not.toBeNull();
    const callsBefore = provider.calls;
    provider.releaseAll();
    await wipePrefix();
    await cluster.until(async () => {
      const now = await cluster.redis.get(cluster.keys.poolGeneration);
      return now !== null && now !== generation && (await routedEntries(connectorId)).length >= 2
        ? true
        : undefined;
    }, { message: "a new generation with a refilled pool", timeoutMs: 60_000 });
    expect(provider.calls).toBeGreaterThan(callsBefore);
    await cluster.until(async () => {
      const [exit] = await exitsThrough(gateways[0], project, 1);
      return typeof exit === "string" ? exit : undefined;
    }, { message: "the gateway to route the refilled pool", timeoutMs: 60_000 });
  });
});

describe("extraction from the pool", () => {
  it("hands out stock no gateway routes, with working credentials, and takes it back after a check", async () => {
    const provider = await emulator([1, 2, 3, 4, 5], { perCall: 5 });
    const { project, connectorId } = await poolConnector(provider, {
      fetch: { estimated_ips_per_call: 5 },
      pool: { min_size: 5, target_size: 5, max_size: 10, reserve_for_gateway: 1 },
    });
    await cluster.until(async () => {
      const [routed, stock] = await Promise.all([
        cluster.redis.zcard(cluster.keys.poolRouted(connectorId)),
        cluster.redis.zcard(cluster.keys.poolStock(connectorId)),
      ]);
      return routed === 1 && stock === 4 ? true : undefined;
    }, { message: "one routed proxy and four in stock" });
    const made = await cluster.request(
      "POST",
      `/api/v1/projects/${project.projectId}/distribution-keys`,
      { name: "e2e" },
    );
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const extract = (path: string, body: unknown) =>
      fetch(`${cluster.apiUrl}/api/v1/projects/${project.projectId}/extract${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${made.body.key}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const answer = await extract("", { count: 2 });
    expect(answer.status).toBe(200);
    const taken = await answer.json();
    expect(taken).toMatchObject({ requested: 2, returned: 2 });
    const routedIds = await cluster.redis.zrange(cluster.keys.poolRouted(connectorId), "0", "-1");
    for (const proxy of taken.proxies) expect(routedIds).not.toContain(proxy.id);
    // The credentials are the exit's own: the proxy works directly, outside the gateway.
    const direct = taken.proxies[0];
    const through = await viaProxy(
      direct.port,
      { username: direct.username, password: direct.password },
      `${origin.url}/ip`,
    );
    expect(through.status).toBe(200);
    // No gateway routes an extracted proxy.
    const extractedExits = new Set(
      taken.proxies.map((p: { port: number }) =>
        `127.0.0.${31 + exits.findIndex((e) => e.port === p.port)}`
      ),
    );
    for (const gateway of gateways) {
      // Once the gateway has the pool's routed proxy (the feed follows Redis by a publish)...
      await cluster.until(async () => {
        const [exit] = await exitsThrough(gateway, project, 1);
        return typeof exit === "string" ? exit : undefined;
      }, { message: "the gateway to route the pool's routed proxy" });
      for (const exit of await exitsThrough(gateway, project, 4)) {
        expect(typeof exit).toBe("string");
        expect(extractedExits.has(exit as string)).toBe(false);
      }
    }
    // Released, they retire: the first holder may still use them, so no one else gets them.
    const released = await extract(`/${taken.lease.id}/release`, {});
    expect(released.status).toBe(200);
    expect(await released.json()).toEqual({ returned: 0, retired: 2 });
    const takenIds = taken.proxies.map((p: { id: string }) => p.id);
    const records = (await cluster.redis.hmget(cluster.keys.poolEntries(connectorId), ...takenIds))
      .map((raw) => raw === null ? undefined : JSON.parse(raw));
    for (const record of records) expect(record).toMatchObject({ state: "draining", lease: null });
    const next = await (await extract("", { count: 5 })).json();
    for (const proxy of next.proxies) expect(takenIds).not.toContain(proxy.id);
    const routedNow = await cluster.redis.zrange(cluster.keys.poolRouted(connectorId), "0", "-1");
    for (const id of takenIds) expect(routedNow).not.toContain(id);
  });
});

describe("sequential routing over provider-API connectors", () => {
  it("moves to the next connector once the current one's provider runs dry", async () => {
    // A's proxies are usable 3 s (8 s lives, 5 s margin), then A finds its provider empty.
    const providerA = await emulator([1, 2], { perCall: 2, ttlSeconds: 8 });
    const providerB = await emulator([3, 4], { perCall: 2 });
    const a = await poolConnector(providerA, {
      pool: { min_size: 2, target_size: 2, max_size: 4, depleted_after_empty: 2 },
    });
    const project = a.project;
    const credential = await createCredential(cluster, project.projectId, "provider_api", {
      api_key: API_KEY,
    });
    const b = await cluster.request("POST", `/api/v1/projects/${project.projectId}/connectors`, {
      name: "second",
      kind: "provider_api",
      credential_id: credential,
      config: {
        fetch: {
          url: providerB.fetchUrl,
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
        pool: { min_size: 2, target_size: 2, max_size: 4 },
      },
    });
    expect(b.status, JSON.stringify(b.body)).toBe(201);
    const sequence = await cluster.request(
      "PUT",
      `/api/v1/projects/${project.projectId}/sequence`,
      { connector_ids: [a.connectorId, b.body.id], on_end: "stop" },
    );
    expect(sequence.status, JSON.stringify(sequence.body)).toBe(200);
    // B filled its pool before the sequence named it: until the gateway has the sequence it
    // routes both, so wait for a run of requests through A alone.
    await cluster.until(async () => {
      const seen = await exitsThrough(gateways[0], project, 6);
      return seen.every((exit) => exit === "127.0.0.31" || exit === "127.0.0.32")
        ? seen
        : undefined;
    }, { message: "the gateway to route through A's proxies alone" });
    providerA.setMode({ kind: "empty" });
    await cluster.until(async () => {
      const [exit] = await exitsThrough(gateways[0], project, 1);
      return exit === "127.0.0.33" || exit === "127.0.0.34" ? exit : undefined;
    }, { message: "the gateway to route through B's proxies", timeoutMs: 60_000 });
    const moved = await cluster.request("GET", `/api/v1/projects/${project.projectId}/sequence`);
    expect(moved.body).toMatchObject({ current_index: 1, current_connector_id: b.body.id });
    const dry = moved.body.connectors.find((c: { id: string }) => c.id === a.connectorId);
    expect(dry.depleted_at).not.toBeNull();
  });
});

/** Every key and value under the cluster's prefix, as text (feed sections are sealed). */
async function dumpPrefix(): Promise<string> {
  const parts: string[] = [];
  let cursor = "0";
  do {
    const [next, keys] = await cluster.redis.scan(
      cursor,
      "MATCH",
      `${cluster.prefix}*`,
      "COUNT",
      500,
    );
    cursor = next;
    for (const key of keys) {
      parts.push(key);
      const type = await cluster.redis.type(key);
      if (type === "string") parts.push((await cluster.redis.get(key)) ?? "");
      else if (type === "hash") parts.push(JSON.stringify(await cluster.redis.hgetall(key)));
      else if (type === "zset") {
        parts.push(JSON.stringify(await cluster.redis.zrange(key, "0", "-1")));
      } else if (type === "stream") {
        parts.push(JSON.stringify(await cluster.redis.xrange(key, "-", "+")));
      }
    }
  } while (cursor !== "0");
  return parts.join("\n");
}

/** Deletes every key of the cluster's prefix: what a Redis that lost its data looks like. */
async function wipePrefix(): Promise<void> {
  let cursor = "0";
  do {
    const [next, keys] = await cluster.redis.scan(
      cursor,
      "MATCH",
      `${cluster.prefix}*`,
      "COUNT",
      1000,
    );
    cursor = next;
    if (keys.length > 0) await cluster.redis.del(...keys);
  } while (cursor !== "0");
}
