/**
 * Cloud connectors through real processes (role all, one gateway) on the three test clouds at
 * once: the EC2, Compute Engine and Azure Resource Manager emulators, whose instances are real
 * local proxies booted from the start-up script the scale job sent (testkit/clouds.ts). Scale
 * runs every second, a step's cooldown is two seconds and demand is read over one minute, so a
 * pool's whole life fits in a test:
 *
 * - demand from real traffic through the gateway grows each pool from its minimum in steps of
 *   at most a third of its range, and once the traffic stops it shrinks back after a quiet
 *   window, each retired instance drained before it is terminated; a light load kept up all the
 *   while never fails;
 * - rotation replaces an instance at its time with no request failed;
 * - new instances are health-checked and placed by attribution: an operator's geofeed puts each
 *   cloud's addresses in a country, and `-cc-` reaches that cloud's pool though no connector
 *   declares a country;
 * - a connector deleted with instances running ends with none in its cloud and no row.
 */
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { exitOf, viaProxy } from "../../testkit/clients/proxy-client.ts";
import {
  CLOUDS,
  postCloudConnector,
  startTestClouds,
  type TestCloud,
  type TestClouds,
} from "../../testkit/clouds.ts";
import { freePort } from "../../testkit/ports.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { SteadyLoad, untilAnswer, withOptions } from "../../testkit/routing.ts";
import type { Credentials } from "../../testkit/clients/proxy-client.ts";
import type { CloudProvider } from "../../control/model/cloud.ts";

let clouds: TestClouds;
let cluster: Cluster;
let gateway: Gateway;
let origin: Origin;

const COUNTRY: Record<CloudProvider, string> = { aws: "DE", gcp: "FR", azure: "NL" };

beforeAll(async () => {
  [clouds, cluster, origin] = await Promise.all([
    startTestClouds(),
    Cluster.create(),
    startOrigin(),
  ]);
  await cluster.start("all", {
    env: {
      ...clouds.env,
      OCTOPROX_SCALE_INTERVAL: "1",
      OCTOPROX_SCALE_COOLDOWN: "2",
      OCTOPROX_SCALE_DEMAND_WINDOW: "1",
      OCTOPROX_CLOUD_PROXY_PORT: String(await freePort()),
      OCTOPROX_CLOUD_POLL_INTERVAL: "0.1",
      OCTOPROX_CLOUD_CREATE_TIMEOUT: "30",
      // Checks that tolerate a loaded machine: a single failed check takes an instance out of
      // routing, and these tests judge scaling, not how fast a slow check gives up.
      OCTOPROX_HEALTH_CHECK_TIMEOUT: "10",
    },
  });
  gateway = await cluster.startGateway();
  // The clouds' secrets reach no log, error answer, /metrics or Redis key in clear.
  const { aws, gcp, azure } = clouds.clouds;
  cluster.secretsScan.add("the AWS secret key", aws.credential.secret_key as string);
  cluster.secretsScan.add("the Azure client secret", azure.credential.client_secret as string);
  cluster.secretsScan.add(
    "the GCP service account's private key",
    JSON.parse(gcp.credential.service_account_json as string).private_key,
  );
  // Each cloud's addresses placed in a country of its own, as an operator's geofeed would.
  const geofeed = CLOUDS.map((p) => `${clouds.clouds[p].addressRange},${COUNTRY[p]},,,`)
    .join("\n");
  const response = await fetch(
    `${cluster.api.url}/api/v1/geo/databases?name=clouds&format=geofeed`,
    {
      method: "POST",
      headers: { authorization: `Bearer ${await cluster.token()}`, "content-type": "text/csv" },
      body: `# test clouds\n${geofeed}\n`,
    },
  );
  expect(response.status, await response.clone().text()).toBe(201);
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([clouds?.close(), origin?.close()]);
});

const ipUrl = () => `${origin.url}/ip`;

interface Fleet {
  provider: CloudProvider;
  cloud: TestCloud;
  projectId: string;
  credentials: Credentials;
  connectorIds: string[];
}

/** A project with a credential per cloud given and a cloud connector of each. */
async function fleet(
  providers: readonly CloudProvider[],
  config: Record<string, unknown>,
): Promise<Fleet> {
  const name = `c${randomBytes(4).toString("hex")}`;
  const credentials = { username: name, password: `pw-${randomBytes(8).toString("hex")}` };
  const project = await cluster.request("POST", "/api/v1/projects", {
    name,
    username: credentials.username,
    password: credentials.password,
    strategy: "round_robin",
  });
  expect(project.status, JSON.stringify(project.body)).toBe(201);
  const connectorIds: string[] = [];
  for (const provider of providers) {
    const cloud = clouds.clouds[provider];
    const { credential, connector } = await postCloudConnector(
      cluster,
      project.body.id,
      provider,
      cloud,
      { instance_name: name, ...config },
    );
    expect(credential.status, JSON.stringify(credential.body)).toBe(201);
    expect(connector.status, JSON.stringify(connector.body)).toBe(201);
    connectorIds.push(connector.body.id);
  }
  return {
    provider: providers[0],
    cloud: clouds.clouds[providers[0]],
    projectId: project.body.id,
    credentials,
    connectorIds,
  };
}

interface Row {
  id: string;
  status: string;
  host: string;
  country: string | null;
}

const projects = new Map<string, string>();

async function rows(connectorId: string): Promise<Row[]> {
  const projectId = projects.get(connectorId);
  if (projectId === undefined) throw new Error(`unknown connector ${connectorId}`);
  const answer = await cluster.request(
    "GET",
    `/api/v1/projects/${projectId}/proxies?connector_id=${connectorId}&limit=100`,
  );
  return (answer.body.items ?? answer.body) as Row[];
}

function remember(f: Fleet): Fleet {
  for (const id of f.connectorIds) projects.set(id, f.projectId);
  return f;
}

const activeHealthy = (list: readonly Row[]) => list.filter((row) => row.status === "healthy");
const leaving = (row: Row) => row.status === "draining" || row.status === "terminating";

/** The instances of `connectorId` its cloud runs or boots. */
const live = (cloud: TestCloud, connectorId: string) =>
  cloud.instances().filter((i) => i.tags["octoprox-connector"] === connectorId);

/**
 * Until the gateway routes the project: a row is healthy in Postgres a moment before the feed
 * that says so reaches the gateway.
 */
async function untilRouted(credentials: Credentials): Promise<void> {
  await untilAnswer(cluster, gateway, credentials, ipUrl(), (answer) => answer.status === 200, {
    timeoutMs: 20_000,
    message: "the gateway to route the project",
  });
}

/** One request every `everyMs` through the gateway, each kept; stop() ends it. */
class LightLoad {
  readonly failures: string[] = [];
  ok = 0;
  #stopped = false;
  readonly #loop: Promise<void>;
  constructor(credentials: Credentials, everyMs: number) {
    this.#loop = (async () => {
      while (!this.#stopped) {
        try {
          const answer = await viaProxy(gateway.proxyPort, credentials, ipUrl(), {
            timeoutMs: 10_000,
          });
          if (answer.status === 200) this.ok++;
          else this.failures.push(`${answer.status} ${answer.body.trim()}`);
        } catch (error) {
          this.failures.push((error as Error).message);
        }
        await new Promise((resolve) => setTimeout(resolve, everyMs));
      }
    })();
  }
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#loop;
  }
}

describe("cloud pools on AWS, GCP and Azure", () => {
  it.concurrent.each(CLOUDS)(
    "%s: real demand grows the pool from its minimum in bounded steps, and a quiet window shrinks it, draining with no request failed",
    async (provider) => {
      const f = remember(await fleet([provider], { min_proxies: 2, max_proxies: 6 }));
      const [connectorId] = f.connectorIds;
      await cluster.until(async () => activeHealthy(await rows(connectorId)).length === 2, {
        timeoutMs: 30_000,
        message: `${provider}: the minimum's instances healthy`,
      });
      await untilRouted(f.credentials);
      // A light load runs through the whole life of the pool: not one request may fail.
      const light = new LightLoad(f.credentials, 6_000);
      const heavy = new SteadyLoad([gateway], f.credentials, ipUrl());
      const sizes: number[] = [];
      try {
        await cluster.until(async () => {
          const active = (await rows(connectorId)).filter((row) => !leaving(row)).length;
          if (sizes.at(-1) !== active) sizes.push(active);
          return activeHealthy(await rows(connectorId)).length === 6;
        }, { timeoutMs: 90_000, intervalMs: 100, message: `${provider}: the pool at its maximum` });
      } finally {
        await heavy.stop();
      }
      // From 2, a third of the range (4) at most at a time: 2.
      for (let i = 1; i < sizes.length; i++) {
        expect(sizes[i] - sizes[i - 1], `${provider} sizes ${sizes}`).toBeLessThanOrEqual(2);
      }
      expect(sizes.at(-1)).toBe(6);
      expect(heavy.failures).toEqual([]);
      expect(live(f.cloud, connectorId)).toHaveLength(6);
      // Requests spread over the instances the cloud booted: their own addresses.
      const exits = new Set<string>();
      for (let i = 0; i < 10; i++) {
        exits.add(exitOf(await viaProxy(gateway.proxyPort, f.credentials, ipUrl())));
      }
      const addresses = new Set((await rows(connectorId)).map((row) => row.host));
      for (const exit of exits) expect(addresses).toContain(exit);

      // Quiet but for the light load: back to the minimum once a window passed, one at a time.
      try {
        await cluster.until(async () => {
          const list = await rows(connectorId);
          return list.length === 2 && live(f.cloud, connectorId).length === 2;
        }, { timeoutMs: 180_000, intervalMs: 250, message: `${provider}: back to the minimum` });
      } finally {
        await light.stop();
      }
      expect(light.failures).toEqual([]);
      expect(light.ok).toBeGreaterThan(10);
      const view = await cluster.request(
        "GET",
        `/api/v1/projects/${f.projectId}/connectors/${connectorId}/instances`,
      );
      expect(view.body).toMatchObject({ target: 2, demand_level: "low" });
    },
    300_000,
  );

  it.concurrent(
    "rotation replaces each cloud's instance at its time, with no request failed",
    async () => {
      const f = remember(
        await fleet(CLOUDS, {
          min_proxies: 1,
          max_proxies: 1,
          min_rotation_period_minutes: 1,
          max_rotation_period_minutes: 1,
        }),
      );
      const first = new Map<string, string>();
      await cluster.until(async () => {
        for (const id of f.connectorIds) {
          const healthy = activeHealthy(await rows(id));
          if (healthy.length !== 1) return false;
          first.set(id, healthy[0].host);
        }
        return true;
      }, { timeoutMs: 30_000, message: "each cloud's instance healthy" });
      await untilRouted(f.credentials);
      const load = new LightLoad(f.credentials, 200);
      try {
        await cluster.until(async () => {
          for (const id of f.connectorIds) {
            const list = await rows(id);
            if (
              list.length !== 1 || list[0].host === first.get(id) || list[0].status !== "healthy"
            ) {
              return false;
            }
          }
          return true;
        }, { timeoutMs: 150_000, intervalMs: 250, message: "each instance replaced and gone" });
      } finally {
        await load.stop();
      }
      expect(load.failures).toEqual([]);
      for (const [index, provider] of CLOUDS.entries()) {
        const id = f.connectorIds[index];
        expect(live(clouds.clouds[provider], id).map((i) => i.address)).not.toContain(
          first.get(id),
        );
      }
    },
    200_000,
  );

  it.concurrent(
    "new instances are checked and placed: -cc- reaches each cloud's pool, declared nowhere",
    async () => {
      const f = remember(await fleet(CLOUDS, { min_proxies: 1, max_proxies: 1 }));
      await cluster.until(async () => {
        for (const id of f.connectorIds) {
          const [row] = await rows(id);
          if (row?.status !== "healthy" || row.country === null) return false;
        }
        return true;
      }, { timeoutMs: 40_000, message: "each cloud's instance healthy and placed" });
      for (const [index, provider] of CLOUDS.entries()) {
        const [row] = await rows(f.connectorIds[index]);
        expect(row.country).toBe(COUNTRY[provider]);
        await cluster.until(async () => {
          const answer = await viaProxy(
            gateway.proxyPort,
            withOptions(f.credentials, `-cc-${COUNTRY[provider].toLowerCase()}`),
            ipUrl(),
          );
          return answer.status === 200 && exitOf(answer) === row.host;
        }, { timeoutMs: 10_000, message: `-cc-${COUNTRY[provider]} to reach ${provider}` });
      }
    },
    120_000,
  );

  it.concurrent(
    "a connector deleted with instances running ends with none in its cloud and no row",
    async () => {
      const f = remember(await fleet(CLOUDS, { min_proxies: 2, max_proxies: 4 }));
      await cluster.until(async () => {
        for (const id of f.connectorIds) if ((await rows(id)).length !== 2) return false;
        return true;
      }, { timeoutMs: 40_000, message: "two instances on each cloud" });
      for (const id of f.connectorIds) {
        const deleted = await cluster.request(
          "DELETE",
          `/api/v1/projects/${f.projectId}/connectors/${id}`,
        );
        expect(deleted.status).toBe(202);
      }
      await cluster.until(async () => {
        for (const id of f.connectorIds) {
          const answer = await cluster.request(
            "GET",
            `/api/v1/projects/${f.projectId}/connectors/${id}`,
          );
          if (answer.status !== 404) return false;
        }
        return true;
      }, { timeoutMs: 60_000, message: "the connectors gone" });
      for (const [index, provider] of CLOUDS.entries()) {
        expect(live(clouds.clouds[provider], f.connectorIds[index])).toEqual([]);
      }
      const left = await cluster.request("GET", `/api/v1/projects/${f.projectId}/proxies?limit=10`);
      expect(left.body.items ?? left.body).toEqual([]);
    },
    120_000,
  );
});
