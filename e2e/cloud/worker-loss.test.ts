/**
 * A scale worker SIGKILLed in the middle of a create, on each of the three test clouds: the
 * instance it launched runs with no row, its creating entry stays, and runs of a new worker keep
 * listing (and keep the instance) while the entry is fresh. Once the entry is stale (600 s; the
 * test ages its timestamp rather than wait ten minutes) a run's listing terminates the
 * instance, clears the entry, and the pool's minimum is created anew with its row.
 *
 * The cluster is an `all` process that takes every job but scale, and a worker that takes
 * scale alone, so killing it stops nothing else.
 */
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { Cluster, type Member } from "../../testkit/cluster.ts";
import {
  CLOUDS,
  postCloudConnector,
  startTestClouds,
  type TestClouds,
} from "../../testkit/clouds.ts";
import { freePort } from "../../testkit/ports.ts";
import { JobKind, WORKER_JOB_KINDS } from "../../shared/roles.ts";

let clouds: TestClouds;
let cluster: Cluster;
let scaleEnv: Record<string, string>;

beforeAll(async () => {
  [clouds, cluster] = await Promise.all([startTestClouds(), Cluster.create()]);
  scaleEnv = {
    ...clouds.env,
    OCTOPROX_SCALE_INTERVAL: "1",
    OCTOPROX_SCALE_COOLDOWN: "2",
    OCTOPROX_CLOUD_PROXY_PORT: String(await freePort()),
    OCTOPROX_CLOUD_POLL_INTERVAL: "0.1",
    OCTOPROX_CLOUD_CREATE_TIMEOUT: "60",
  };
  await cluster.start("all", {
    env: {
      ...scaleEnv,
      OCTOPROX_WORKER_JOBS: WORKER_JOB_KINDS.filter((kind) => kind !== JobKind.scale).join(","),
    },
  });
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await clouds?.close();
});

const startScaleWorker = (): Promise<Member> =>
  cluster.start("worker", { env: { ...scaleEnv, OCTOPROX_WORKER_JOBS: JobKind.scale } });

it(
  "an instance whose creator was killed is kept while its entry is fresh, and terminated once it is stale",
  async () => {
    const name = `k${randomBytes(4).toString("hex")}`;
    const project = await cluster.request("POST", "/api/v1/projects", { name, username: name });
    expect(project.status).toBe(201);
    const connectors: string[] = [];
    for (const provider of CLOUDS) {
      const cloud = clouds.clouds[provider];
      // Launches hang in the cloud until the worker is gone.
      cloud.slowCreates(true);
      const { connector } = await postCloudConnector(cluster, project.body.id, provider, cloud, {
        instance_name: name,
        min_proxies: 1,
        max_proxies: 1,
      });
      expect(connector.status, JSON.stringify(connector.body)).toBe(201);
      connectors.push(connector.body.id);
    }
    const live = (index: number) =>
      clouds.clouds[CLOUDS[index]].instances().filter((i) =>
        i.tags["octoprox-connector"] === connectors[index]
      );
    const entries = (index: number) =>
      cluster.redis.hgetall(cluster.keys.scaleCreating(connectors[index]));
    const rows = async (index: number) =>
      (await cluster.request(
        "GET",
        `/api/v1/projects/${project.body.id}/proxies?connector_id=${connectors[index]}&limit=10`,
      )).body.items as { id: string; host: string }[];

    const first = await startScaleWorker();
    await cluster.until(async () => {
      for (let i = 0; i < CLOUDS.length; i++) {
        if (live(i).length !== 1 || Object.keys(await entries(i)).length !== 1) return false;
      }
      return true;
    }, { timeoutMs: 30_000, message: "a launch under way on each cloud" });
    await first.stop("SIGKILL");
    const orphans = CLOUDS.map((_, i) => live(i)[0].name);
    for (const provider of CLOUDS) clouds.clouds[provider].slowCreates(false);
    await cluster.until(() => CLOUDS.every((_, i) => live(i)[0]?.state === "running"), {
      timeoutMs: 20_000,
      message: "the orphans to boot",
    });

    // A new worker's runs list while the entry is fresh, and keep the instance.
    const lists = CLOUDS.map((provider) => clouds.clouds[provider].calls("list"));
    await startScaleWorker();
    await cluster.until(
      () => CLOUDS.every((provider, i) => clouds.clouds[provider].calls("list") >= lists[i] + 3),
      { timeoutMs: 20_000, message: "runs listing while the entry stands" },
    );
    for (let i = 0; i < CLOUDS.length; i++) {
      expect(live(i).map((instance) => instance.name)).toEqual([orphans[i]]);
      expect(await rows(i)).toEqual([]);
    }

    // Ten minutes on, for the entries alone: stale, so the next listing ends each orphan and the
    // minimum is created anew, with its row.
    for (let i = 0; i < CLOUDS.length; i++) {
      const stale = JSON.stringify({ purpose: "scale", at: Date.now() - 601_000 });
      for (const entry of Object.keys(await entries(i))) {
        await cluster.redis.hset(cluster.keys.scaleCreating(connectors[i]), entry, stale);
      }
    }
    await cluster.until(async () => {
      for (let i = 0; i < CLOUDS.length; i++) {
        const now = live(i);
        if (now.some((instance) => instance.name === orphans[i])) return false;
        if (now.length !== 1 || (await rows(i)).length !== 1) return false;
      }
      return true;
    }, { timeoutMs: 30_000, message: "each orphan terminated and its replacement recorded" });
    for (let i = 0; i < CLOUDS.length; i++) {
      expect(await entries(i)).toEqual({});
      const [row] = await rows(i);
      expect(row.host).toBe(live(i)[0].address);
    }
    const warned = cluster.members.flatMap((member) => member.logs())
      .filter((line) => line.msg === "Terminating a cloud instance with no row")
      .map((line) => line.instance);
    for (const orphan of orphans) expect(warned).toContain(orphan);
  },
  150_000,
);
