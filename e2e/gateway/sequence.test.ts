/**
 * Sequential routing through a real gateway (gateway/main.ts under Deno) in front of a real
 * control plane (role all), with two static connectors, A on a tinyproxy leaving from 127.0.0.2
 * and B on one leaving from 127.0.0.3:
 *
 * - without a sequence both serve; with the sequence [A, B] only A does;
 * - once A is marked depleted (the sequences service against the cluster's database, as the
 *   provider pool calls it), the gateway serves by B within a feed period;
 * - with on_end stop, once B is depleted too, clients get 503 with the reason (counted as the
 *   failure kind `sequence_exhausted`); removing the sequence shares by weight again.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ChangeLog } from "../../control/core/changelog.ts";
import { createLogger } from "../../control/core/logging.ts";
import { markDepleted, type SequenceDeps } from "../../control/services/sequences.ts";
import { createDatabase, type Database } from "../../db/client.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { viaProxy } from "../../testkit/clients/proxy-client.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import {
  createRoutedProject,
  exitsThrough,
  proxyStatusError,
  type RoutedProject,
  untilAnswer,
  untilEveryExit,
  waitForStatuses,
} from "../../testkit/routing.ts";

const [EXIT_A, EXIT_B] = ["127.0.0.2", "127.0.0.3"];
const EXHAUSTED = "This project's connector sequence is exhausted: its last connector ran dry";

let cluster: Cluster;
let origin: Origin;
let tinyproxies: Tinyproxy[];
let gateway: Gateway;
let project: RoutedProject;
let connectorB: string;
let database: Database;
let changes: ChangeLog;
let deps: SequenceDeps;

beforeAll(async () => {
  [cluster, origin, ...tinyproxies] = await Promise.all([
    Cluster.create(),
    startOrigin(),
    ...[EXIT_A, EXIT_B].map((bindAddress) => startTinyproxy({ bindAddress })),
  ]);
  await cluster.start("all");
  gateway = await cluster.startGateway();

  project = await createRoutedProject(cluster, [tinyproxies[0].url]);
  const b = await cluster.request("POST", `/api/v1/projects/${project.projectId}/connectors`, {
    name: "b",
    kind: "static",
  });
  expect(b.status).toBe(201);
  connectorB = b.body.id;
  const proxyB = await cluster.addProxy(
    { projectId: project.projectId, connectorId: connectorB },
    tinyproxies[1].url,
  );
  await waitForStatuses(cluster, [proxyB], "healthy");

  // What the provider pool calls, over the cluster's own stores.
  database = createDatabase(cluster.databaseUrl, { poolSize: 2 });
  changes = new ChangeLog({
    redis: cluster.redis,
    keys: cluster.keys,
    logger: createLogger({ level: "warn", instance: "e2e-sequence", role: "worker" }),
    deadlineMs: 2_000,
  });
  deps = { database, changes };
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await changes?.close();
  await database?.close();
  await cluster?.close();
  await Promise.all([origin, ...(tinyproxies ?? [])].map((server) => server?.close()));
});

const ipUrl = () => `${origin.url}/ip`;

/** Until every request of a round on one connection leaves by `exit`. */
async function untilOnly(exit: string, timeoutMs: number): Promise<void> {
  await cluster.until(async () => {
    const exits = await exitsThrough(gateway, project.credentials, ipUrl(), 6);
    return exits.every((seen) => seen === exit);
  }, { timeoutMs, intervalMs: 20, message: `every request to leave by ${exit}` });
}

describe("a project with a connector sequence", () => {
  it("is served by A, then by B once A runs dry, then refused once B does too", async () => {
    const { projectId, connectorId: connectorA, credentials } = project;
    // No sequence yet: both connectors serve.
    await untilEveryExit(cluster, [gateway], credentials, ipUrl(), [EXIT_A, EXIT_B]);

    const set = await cluster.request("PUT", `/api/v1/projects/${projectId}/sequence`, {
      connector_ids: [connectorA, connectorB],
      on_end: "stop",
    });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ current_connector_id: connectorA, version: 1 });
    await untilOnly(EXIT_A, 10_000);
    expect(new Set(await exitsThrough(gateway, credentials, ipUrl(), 10))).toEqual(
      new Set([EXIT_A]),
    );

    const first = await markDepleted(deps, connectorA);
    expect(first.moved).toEqual([
      { projectId, fromIndex: 0, toIndex: 1, exhausted: false, version: 2 },
    ]);
    // The change entry makes the controller compile (every 0.1 s here) and the gateway follow.
    const switchedAt = Date.now();
    await untilOnly(EXIT_B, 5_000);
    const switchMs = Date.now() - switchedAt;
    expect(switchMs).toBeLessThan(5_000);
    expect(new Set(await exitsThrough(gateway, credentials, ipUrl(), 10))).toEqual(
      new Set([EXIT_B]),
    );
    const moved = await cluster.request("GET", `/api/v1/projects/${projectId}/sequence`);
    expect(moved.body).toMatchObject({
      current_index: 1,
      current_connector_id: connectorB,
      exhausted: false,
      version: 2,
    });
    expect(moved.body.connectors[0].depleted_at).not.toBeNull();

    const last = await markDepleted(deps, connectorB);
    expect(last.moved[0]).toMatchObject({ exhausted: true });
    const refused = await untilAnswer(
      cluster,
      gateway,
      credentials,
      ipUrl(),
      (answer) => answer.status === 503,
      { timeoutMs: 5_000, message: "the exhausted sequence to be refused" },
    );
    expect(refused.body.trim()).toBe(EXHAUSTED);
    expect(proxyStatusError(refused.headers["proxy-status"])).toBe("destination_unavailable");
    const again = await viaProxy(gateway.proxyPort, credentials, ipUrl());
    expect(again.status).toBe(503);
    expect(again.body.trim()).toBe(EXHAUSTED);
    // Metered as the gateway's other refusals are: under its failure kind.
    await cluster.until(
      async () =>
        (await gateway.metric('octoprox_gateway_failures_total{kind="sequence_exhausted"}')) >= 2,
      { message: "the refusals counted as sequence_exhausted" },
    );

    // Without the sequence, both connectors share the project's requests again.
    const removed = await cluster.request("DELETE", `/api/v1/projects/${projectId}/sequence`);
    expect(removed.status).toBe(204);
    await untilEveryExit(cluster, [gateway], credentials, ipUrl(), [EXIT_A, EXIT_B]);
  });
});
