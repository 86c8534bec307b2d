/**
 * Postgres stopped under two real gateways and a control plane (role all) whose database lives
 * on a PRIVATE Postgres server this file starts (stopping it disturbs no other test): clients
 * notice nothing while it is away, and once it is back an edit reaches the gateways with no
 * step of anyone's (no restart, no re-publish asked for).
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LocalPostgres } from "../../scripts/local-stores.ts";
import { freePort } from "../../testkit/ports.ts";
import { TEST_ADMIN_DATABASE_URL } from "../../testkit/stores.ts";
import { Cluster, type Gateway, type Member } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { exitOf } from "../../testkit/clients/proxy-client.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import {
  createRoutedProject,
  exitsThrough,
  type RoutedProject,
  SteadyLoad,
  untilAnswer,
  untilEveryExit,
  withOptions,
} from "../../testkit/routing.ts";

const EXITS = ["127.0.0.2", "127.0.0.3"];

let folder: string;
let pg: LocalPostgres;
let cluster: Cluster;
let control: Member;
let gateways: Gateway[];
let origin: Origin;
let tinyproxies: Tinyproxy[];
let project: RoutedProject;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-gw-pg-"));
  // Postgres runs as its own user when we are root: it must be able to reach its folder.
  await chmod(folder, 0o755);
  pg = new LocalPostgres({ dir: join(folder, "postgres"), port: await freePort() });
  [origin, tinyproxies] = await Promise.all([
    startOrigin(),
    Promise.all(EXITS.map((bindAddress) => startTinyproxy({ bindAddress }))),
    pg.start(),
  ]);
  cluster = await Cluster.create({ databaseAdminUrl: pg.url() });
  control = await cluster.start("all");
  gateways = await Promise.all([cluster.startGateway(), cluster.startGateway()]);
  project = await createRoutedProject(cluster, tinyproxies.map((t) => t.url));
  await untilEveryExit(cluster, gateways, project.credentials, ipUrl(), EXITS);
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  // Back up, whatever a failed test left, so the cluster can drop its database.
  await pg?.start().catch(() => {});
  await cluster?.close();
  await Promise.all([origin, ...(tinyproxies ?? [])].map((server) => server?.close()));
  await pg?.stop();
  if (folder) await rm(folder, { recursive: true, force: true });
});

const ipUrl = () => `${origin.url}/ip`;

async function apiStatus(): Promise<number> {
  return (await cluster.request("GET", `/api/v1/projects/${project.projectId}`)).status;
}

describe("Postgres stopped", () => {
  it("leaves the gateways routing, and edits flow again once it is back", async () => {
    // Only ever this file's own server.
    expect(pg.url()).not.toBe(TEST_ADMIN_DATABASE_URL);
    const load = new SteadyLoad(gateways, project.credentials, ipUrl());
    try {
      await cluster.until(() => load.leastOk >= 5, { message: "requests before the outage" });
      await pg.stop();
      // The control plane sees the outage: its api answers 503 for what needs the database.
      await cluster.until(async () => (await apiStatus()) === 503, {
        message: "the api to answer 503 without Postgres",
      });
      const atOutage = new Map(load.ok);
      // The window: while Postgres is away, each gateway serves 100 more requests (a few
      // seconds' worth, over several of the worker's health-check periods, which fail).
      await cluster.until(
        () => gateways.every((g) => load.ok.get(g.instance)! >= atOutage.get(g.instance)! + 100),
        { timeoutMs: 30_000, message: "requests while Postgres is away" },
      );
      expect(load.failures).toEqual([]);
      for (const gateway of gateways) {
        expect(new Set(await exitsThrough(gateway, project.credentials, ipUrl(), 4))).toEqual(
          new Set(EXITS),
        );
      }

      // Seconds into the outage, the api still answers (503) rather than hanging on its pool.
      const asked = performance.now();
      expect(await apiStatus()).toBe(503);
      expect(performance.now() - asked).toBeLessThan(3_000);

      await pg.start();
      // The pool's reconnect delay is capped at half a second, so the api heals at once.
      await cluster.until(async () => (await apiStatus()) === 200, {
        timeoutMs: 10_000,
        intervalMs: 200,
        message: "the api to answer again",
      });
    } finally {
      await load.stop();
    }
    expect(load.failures).toEqual([]);
    expect(control.alive()).toBe(true);
    // The outage moved no proxy's status.
    for (const id of project.proxyIds) expect(await cluster.status(id)).toBe("healthy");

    // An edit after the outage reaches both gateways, with nothing restarted.
    const answer = await cluster.request(
      "PATCH",
      `/api/v1/projects/${project.projectId}/proxies/${project.proxyIds[0]}`,
      { country: "DE" },
    );
    expect(answer.status).toBe(200);
    for (const gateway of gateways) {
      const reached = await untilAnswer(
        cluster,
        gateway,
        withOptions(project.credentials, "-cc-de"),
        ipUrl(),
        (a) => a.status === 200,
        { timeoutMs: 5_000 },
      );
      expect(exitOf(reached)).toBe(EXITS[0]);
      expect(gateway.alive()).toBe(true);
    }
  }, 120_000);
});
