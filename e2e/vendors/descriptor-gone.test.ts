/**
 * A connector whose custom descriptor is deleted, through real processes: an api, a controller
 * and a worker, a gateway, the vendor emulator (Oxylabs' grammar) and an origin that answers
 * each request's exit. The descriptor is an admin's, written like the shipped Oxylabs one (its
 * residential type as a session pool on the emulator).
 *
 * - the connector's pool is synced and checked healthy, and the gateway serves through it;
 * - the descriptor deleted: the api names the connector orphaned, the controller leaves it out
 *   of the feed (the gateway refuses what it served) and logs "Connector left out of the feed:
 *   its provider is gone" once however many compiles follow; its rows stay, left alone;
 * - the descriptor stored again: the connector is back in the feed with the same rows, and the
 *   gateway serves through it again, with nothing more logged.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { seriesValue } from "../../testkit/promtool.ts";
import { Cluster, type Gateway, type Member } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { exitOf, type ProxyAnswer, viaProxy } from "../../testkit/clients/proxy-client.ts";
import {
  exitFor,
  oxylabs as oxylabsGrammar,
  startVendorProxy,
  type VendorProxy,
} from "../../testkit/upstreams/vendor-emulator.ts";
import { proxyStatusError, untilAnswer } from "../../testkit/routing.ts";
import {
  connectorRows,
  createCredential,
  createProject,
  createVendorConnector,
  emulatedOxylabs,
  type ListedProxy,
  saveDescriptor,
  untilRows,
  type VendorProject,
} from "../../testkit/vendors.ts";

const PROVIDER = "e2e-oxy-pool";
const ACCOUNT = "acme";
const VENDOR_PASSWORD = "vendor-pw";
const GONE = "Connector left out of the feed: its provider is gone";

let cluster: Cluster;
let controller: Member;
let gateway: Gateway;
let origin: Origin;
let vendor: VendorProxy;
let project: VendorProject;
let connectorId: string;
let rows: ListedProxy[];

beforeAll(async () => {
  [cluster, origin, vendor] = await Promise.all([
    Cluster.create(),
    startOrigin(),
    startVendorProxy({ grammar: oxylabsGrammar, accounts: { [ACCOUNT]: VENDOR_PASSWORD } }),
  ]);
  await cluster.start("api");
  [controller] = await Promise.all([
    cluster.start("controller"),
    cluster.start("worker"),
  ]);
  gateway = await cluster.startGateway();

  await saveDescriptor(cluster, emulatedOxylabs(PROVIDER, "Oxylabs pool (emulated)", vendor.port));
  project = await createProject(cluster);
  const credentialId = await createCredential(cluster, project.projectId, PROVIDER, {
    username: ACCOUNT,
    password: VENDOR_PASSWORD,
  });
  connectorId = await createVendorConnector(cluster, project.projectId, {
    provider: PROVIDER,
    credentialId,
    config: { slots: 2 },
    countries: ["US"],
    name: "orphan",
  });
  // Synced into two US slots, each a vendor session of its own, then checked through the vendor.
  rows = await untilRows(
    cluster,
    project.projectId,
    connectorId,
    (listed) => listed.length === 2 && listed.every((r) => r.status === "healthy"),
    "the pool's two slots to be synced and healthy",
  );
}, 90_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([origin?.close(), vendor?.close()]);
});

const ipUrl = () => `${origin.url}/ip`;
const credentials = () => ({
  ...project.credentials,
  username: `${project.credentials.username}-cc-us`,
});
const served = (answer: ProxyAnswer) => answer.status === 200;
const refused = (answer: ProxyAnswer) =>
  answer.status === 502 && answer.body.includes("No upstream proxy available");

/** The controller's compiles so far (its /metrics). */
async function compiles(): Promise<number> {
  const response = await fetch(`${controller.url}/metrics`, { signal: AbortSignal.timeout(5_000) });
  return seriesValue(await response.text(), "octoprox_feed_compiles_total") ?? 0;
}

const goneLines = () => controller.logs().filter((line) => line.msg === GONE);

/** The exits of the pool's two vendor sessions, as the emulator gives them. */
const poolExits = () =>
  new Set(
    rows.map((r) =>
      exitFor({ country: "US", session: String(r.metadata.session_id), sessionMinutes: 10 })
    ),
  );

describe("a connector whose descriptor is deleted", () => {
  it("is served while its descriptor is there", async () => {
    const answer = await untilAnswer(cluster, gateway, credentials(), ipUrl(), served, {
      message: "the gateway to serve through the vendor pool",
    });
    // The request left from one of the pool's vendor sessions.
    expect(poolExits().has(exitOf(answer))).toBe(true);
    expect(goneLines()).toEqual([]);
  });

  it("is left out of the feed, logged once across later compiles, its rows left alone", async () => {
    const deleted = await cluster.request("DELETE", `/api/v1/providers/${PROVIDER}`);
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    expect(deleted.body).toMatchObject({ deleted: PROVIDER });
    expect(deleted.body.orphaned_connectors).toEqual(["orphan"]);

    // The gateway refuses what it served: the project has no connector left in the feed.
    const answer = await untilAnswer(cluster, gateway, credentials(), ipUrl(), refused, {
      message: "the gateway to stop serving the orphaned connector",
    });
    expect(proxyStatusError(answer.headers["proxy-status"])).toBe("destination_unavailable");
    const [line] = await cluster.until(() => {
      const lines = goneLines();
      return lines.length > 0 ? lines : undefined;
    }, { message: "the controller to log the connector left out" });
    expect(line).toMatchObject({ level: "warn", connector_id: connectorId, provider: PROVIDER });

    // More compiles: every edit makes one, and each still leaves the connector out.
    const before = await compiles();
    for (let i = 0; i < 3; i++) {
      const other = await createProject(cluster);
      await untilAnswer(cluster, gateway, other.credentials, ipUrl(), refused, {
        message: `the gateway to know project ${i + 1} made after the deletion`,
      });
    }
    await cluster.until(async () => (await compiles()) >= before + 3, {
      message: "three more compiles",
    });
    expect(refused(await viaProxy(gateway.proxyPort, credentials(), ipUrl()))).toBe(true);
    expect(goneLines()).toHaveLength(1);

    // Its rows stay as they were: the sync leaves a connector without a provider alone.
    const kept = await connectorRows(cluster, project.projectId, connectorId);
    expect(kept.map((r) => r.id).sort()).toEqual(rows.map((r) => r.id).sort());
    const connector = await cluster.request(
      "GET",
      `/api/v1/projects/${project.projectId}/connectors/${connectorId}`,
    );
    expect(connector.status).toBe(200);
  });

  it("is back once the descriptor is stored again, nothing more logged", async () => {
    await saveDescriptor(
      cluster,
      emulatedOxylabs(PROVIDER, "Oxylabs pool (emulated)", vendor.port),
    );
    const answer = await untilAnswer(cluster, gateway, credentials(), ipUrl(), served, {
      message: "the gateway to serve through the connector again",
    });
    expect(poolExits().has(exitOf(answer))).toBe(true);
    const listed = await connectorRows(cluster, project.projectId, connectorId);
    expect(listed.map((r) => r.id).sort()).toEqual(rows.map((r) => r.id).sort());
    // A compile after the return, and still the one line from before.
    const before = await compiles();
    await createProject(cluster);
    await cluster.until(async () => (await compiles()) > before, { message: "another compile" });
    expect(goneLines()).toHaveLength(1);
  });
});
