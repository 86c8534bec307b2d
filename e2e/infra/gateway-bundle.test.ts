/**
 * The gateway's single-file bundle (`npm run build:gateway -- --bundle`, the code a compiled
 * binary embeds) built afresh into a folder of its own, then run by `deno run` with leave to
 * read that folder alone, in front of a real control plane and a tinyproxy upstream leaving from
 * 127.0.0.2, with two isolates (so the worker isolates' bundled entry is loaded too):
 *
 * - it comes up ready and answers /live;
 * - HTTP and CONNECT requests of a routed project go through it and tinyproxy to the origin,
 *   from both isolates.
 */
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { buildGatewayBundle, type GatewayBundle } from "../../scripts/gateway-bundle.ts";
import { DENO_BIN, gatewayBundleRunArgs } from "../../scripts/gateway-command.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { testMitmCaEnv } from "../../testkit/mitm-ca.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { exitOf, getThroughTunnel, viaProxy } from "../../testkit/clients/proxy-client.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { createRoutedProject, type RoutedProject, untilEveryExit } from "../../testkit/routing.ts";

const EXIT = "127.0.0.2";

let folder: string;
let built: GatewayBundle;
let cluster: Cluster;
let origin: Origin;
let tinyproxy: Tinyproxy;
let gateway: Gateway;
let project: RoutedProject;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "ox-gateway-bundle-"));
  [built, cluster, origin, tinyproxy] = await Promise.all([
    buildGatewayBundle(join(folder, "octoprox-gateway.js")),
    Cluster.create(),
    startOrigin(),
    startTinyproxy({ bindAddress: EXIT }),
  ]);
  await cluster.start("all");
  gateway = await cluster.startGateway({
    // Its folder and the test CA's files the cluster gives it, nothing else of the disk.
    command: [DENO_BIN, ...gatewayBundleRunArgs(testMitmCaEnv(), built.bundle)],
    env: { OCTOPROX_GATEWAY_ISOLATES: "2" },
  });
  project = await createRoutedProject(cluster, [tinyproxy.url]);
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([origin, tinyproxy].map((server) => server?.close()));
  if (folder) await rm(folder, { recursive: true, force: true });
});

describe("the gateway bundle", () => {
  it("is two files, the gateway and its worker isolates' entry", async () => {
    for (const file of [built.bundle, built.worker]) {
      expect((await stat(file)).size).toBeGreaterThan(100_000);
    }
  });

  it("serves from both isolates and answers /live", async () => {
    const live = await fetch(`${gateway.url}/live`);
    expect([live.status, await live.json()]).toEqual([200, { status: "alive" }]);
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
    expect(metrics).toMatch(/^octoprox_gateway_isolate_connections_open\{.*isolate="1"\} /m);
    expect(gateway.logs().filter((line) => line.level === "warn" || line.level === "error"))
      .toEqual([]);
  });

  it("routes HTTP and CONNECT requests through tinyproxy to the origin", async () => {
    // The proxy is healthy in Postgres a moment before the feed saying so reaches the gateway.
    await untilEveryExit(cluster, [gateway], project.credentials, `${origin.url}/ip`, [EXIT]);
    const ACCEPTED = 'octoprox_gateway_connections_total{result="accepted"}';
    const before = await gateway.metric(ACCEPTED);
    // Connections of their own, which the kernel spreads over both isolates' listeners.
    const answers = await Promise.all(
      Array.from(
        { length: 6 },
        () => viaProxy(gateway.proxyPort, project.credentials, `${origin.url}/ip`),
      ),
    );
    expect(answers.map(exitOf)).toEqual(Array(6).fill(EXIT));
    const tunneled = await getThroughTunnel(
      gateway.proxyPort,
      project.credentials,
      `${origin.url}/ip`,
    );
    expect(exitOf(tunneled)).toBe(EXIT);
    expect(await gateway.metric(ACCEPTED) - before).toBe(7);
  });
});
