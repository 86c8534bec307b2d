/**
 * On-demand country groups through real processes: an api, a controller, a worker, two gateways,
 * the vendor emulator (Oxylabs' grammar) and an origin that answers each request's exit. The
 * connector is an "All countries" session pool (it declares no countries) of two slots, built
 * from an admin's copy of the shipped Oxylabs descriptor pointed at the emulator.
 *
 * - a client's `-cc-fr`, which no row serves, is held by the gateway while a worker adds the FR
 *   group, and served from it within the 5 s the gateway waits;
 * - both gateways asking at once make one group of two slots, each a vendor session asking FR;
 * - later FR requests are served from the group at once, with no new group.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { exitOf, viaProxy } from "../../testkit/clients/proxy-client.ts";
import {
  exitFor,
  oxylabs as oxylabsGrammar,
  startVendorProxy,
  type VendorProxy,
} from "../../testkit/upstreams/vendor-emulator.ts";
import { untilAnswer } from "../../testkit/routing.ts";
import {
  connectorRows,
  createCredential,
  createProject,
  createVendorConnector,
  emulatedOxylabs,
  saveDescriptor,
  untilRows,
  type VendorProject,
} from "../../testkit/vendors.ts";

const PROVIDER = "e2e-oxy-all";
const ACCOUNT = "acme";
const VENDOR_PASSWORD = "vendor-pw";

let cluster: Cluster;
let gateways: Gateway[];
let origin: Origin;
let vendor: VendorProxy;
let project: VendorProject;
let connectorId: string;

beforeAll(async () => {
  [cluster, origin, vendor] = await Promise.all([
    Cluster.create(),
    startOrigin(),
    startVendorProxy({ grammar: oxylabsGrammar, accounts: { [ACCOUNT]: VENDOR_PASSWORD } }),
  ]);
  await cluster.start("api");
  await Promise.all([cluster.start("controller"), cluster.start("worker")]);
  gateways = await Promise.all([cluster.startGateway(), cluster.startGateway()]);
  await saveDescriptor(
    cluster,
    emulatedOxylabs(PROVIDER, "Oxylabs, all countries (emulated)", vendor.port),
  );
  project = await createProject(cluster);
  const credentialId = await createCredential(cluster, project.projectId, PROVIDER, {
    username: ACCOUNT,
    password: VENDOR_PASSWORD,
  });
  connectorId = await createVendorConnector(cluster, project.projectId, {
    provider: PROVIDER,
    credentialId,
    config: { slots: 2 },
  });
  // The generic group: two sessions naming no country, synced and checked through the vendor.
  await untilRows(
    cluster,
    project.projectId,
    connectorId,
    (rows) => rows.length === 2 && rows.every((r) => r.status === "healthy" && r.country === null),
    "the generic group's two slots to be synced and healthy",
  );
}, 90_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([origin?.close(), vendor?.close()]);
});

const asking = (country: string) => ({
  ...project.credentials,
  username: `${project.credentials.username}-cc-${country}`,
});

describe("an all-countries session pool", () => {
  it("serves a generic request from its generic group", async () => {
    const answer = await untilAnswer(
      cluster,
      gateways[0],
      project.credentials,
      `${origin.url}/ip`,
      (a) => a.status === 200,
      { message: "the generic group to serve" },
    );
    expect(answer.status).toBe(200);
  });

  it("provisions a country on its first request, one group for two gateways asking at once", async () => {
    const before = vendor.requests.length;
    const answers = await Promise.all(
      gateways.map((gateway) => viaProxy(gateway.proxyPort, asking("fr"), `${origin.url}/ip`)),
    );
    for (const answer of answers) expect(answer.status, answer.body).toBe(200);

    const rows = await connectorRows(cluster, project.projectId, connectorId);
    const fr = rows.filter((r) => r.country === "FR");
    expect(fr).toHaveLength(2);
    expect(rows).toHaveLength(4);
    // Each client request left from one of the FR group's vendor sessions.
    const exits = new Set(
      fr.map((r) =>
        exitFor({ country: "FR", session: String(r.metadata.session_id), sessionMinutes: 10 })
      ),
    );
    for (const answer of answers) expect(exits.has(exitOf(answer))).toBe(true);
    // The vendor was asked for FR sessions only for them (health checks included).
    const asked = vendor.requests.slice(before).filter((r) => r.country !== undefined);
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.every((r) => r.country === "FR")).toBe(true);
  });

  it("serves the country from its group afterwards, with no new group", async () => {
    const answer = await viaProxy(gateways[1].proxyPort, asking("fr"), `${origin.url}/ip`);
    expect(answer.status).toBe(200);
    const rows = await connectorRows(cluster, project.projectId, connectorId);
    expect(rows.filter((r) => r.country === "FR")).toHaveLength(2);
  });
});
