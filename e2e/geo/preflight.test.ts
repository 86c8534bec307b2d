/**
 * Preflight through one real cluster (role all, one gateway) and the vendor emulator, whose exits
 * are 127.<country index>.x.y: an operator's geofeed places each country's /16, so the gateway's
 * databases say where every exit is. Three projects, one per mode, each with a vendor session
 * pool promised GB; a test moves one session's exit to the US (the emulator's `moveSession`)
 * just before its requests, and the gateway echoes through the proxies to an echo that counts
 * what it is asked:
 *
 * - `report` forwards through the moved session anyway and logs the mismatch at debug; a cached
 *   verdict costs no second echo;
 * - `retry` serves every request from the other slot, but answers a request with a `-sessid-`
 *   on the moved one 502; the worker rotates the moved slot (a fresh vendor session in its place);
 * - `reject` answers 502 in the reference's words, counted as `preflight_mismatch`.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { COUNTRY_CODES } from "../../shared/countries.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { exitOf, viaProxy } from "../../testkit/clients/proxy-client.ts";
import { type Echo, startEcho } from "../../testkit/upstreams/echo.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import {
  exitFor,
  oxylabs as oxylabsGrammar,
  startVendorProxy,
  type VendorProxy,
} from "../../testkit/upstreams/vendor-emulator.ts";
import { withOptions } from "../../testkit/routing.ts";
import {
  createCredential,
  createVendorConnector,
  emulatedOxylabs,
  type ListedProxy,
  saveDescriptor,
  untilRows,
} from "../../testkit/vendors.ts";
import type { Credentials } from "../../testkit/clients/proxy-client.ts";

const PROVIDER = "e2e-oxy-preflight";
const ACCOUNT = "acme";
const VENDOR_PASSWORD = "vendor-pw";
const octet = (country: string) => COUNTRY_CODES.indexOf(country) + 1;

let cluster: Cluster;
let gateway: Gateway;
let origin: Origin;
let echo: Echo;
let vendor: VendorProxy;

interface ModeProject {
  projectId: string;
  connectorId: string;
  credentials: Credentials;
}
const projects = new Map<string, ModeProject>();

/** A project in `mode` with a vendor session pool of `slots` GB sessions. */
async function modeProject(mode: string, slots: number): Promise<ModeProject> {
  const credentials = { username: `pf${mode}`, password: `pw-${mode}-preflight` };
  const created = await cluster.request("POST", "/api/v1/projects", {
    name: `Preflight ${mode}`,
    ...credentials,
    strategy: "round_robin",
    location_preflight: mode,
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const projectId = created.body.id as string;
  const credentialId = await createCredential(cluster, projectId, PROVIDER, {
    username: ACCOUNT,
    password: VENDOR_PASSWORD,
  });
  const connectorId = await createVendorConnector(cluster, projectId, {
    provider: PROVIDER,
    credentialId,
    config: { slots },
    countries: ["GB"],
  });
  return { projectId, connectorId, credentials };
}

/** The project's slots once synced, checked and placed in GB. */
function gbSlots(p: ModeProject, count: number): Promise<ListedProxy[]> {
  return untilRows(
    cluster,
    p.projectId,
    p.connectorId,
    (rows) =>
      rows.length === count && rows.every((r) => r.status === "healthy" && r.country === "GB"),
    `the ${count} GB slots to be synced and healthy`,
  );
}

const sessionOf = (row: ListedProxy) => String(row.metadata.session_id);
const exitIn = (country: string, row: ListedProxy) =>
  exitFor({ country, session: sessionOf(row), sessionMinutes: 10 });
const asking = (p: ModeProject, options: string) => withOptions(p.credentials, options);
const get = (p: ModeProject, options = "-cc-gb") =>
  viaProxy(gateway.proxyPort, asking(p, options), `${origin.url}/ip`);

beforeAll(async () => {
  [cluster, origin, echo, vendor] = await Promise.all([
    // Health checks at their install pace: what moves a slot's row here is preflight.
    Cluster.create({ env: { OCTOPROX_HEALTH_CHECK_INTERVAL: "60" } }),
    startOrigin(),
    startEcho(),
    startVendorProxy({ grammar: oxylabsGrammar, accounts: { [ACCOUNT]: VENDOR_PASSWORD } }),
  ]);
  await cluster.start("all");
  gateway = await cluster.startGateway({
    env: { OCTOPROX_GATEWAY_ECHO_URL: echo.url, OCTOPROX_LOG_LEVEL: "debug" },
  });
  const uploaded = await fetch(
    `${cluster.api.url}/api/v1/geo/databases?name=emulator&format=geofeed`,
    {
      method: "POST",
      headers: { authorization: `Bearer ${await cluster.token()}`, "content-type": "text/csv" },
      body: `127.${octet("GB")}.0.0/16,GB,,,\n127.${octet("US")}.0.0/16,US,,,\n`,
    },
  );
  expect(uploaded.status, await uploaded.text()).toBe(201);
  await saveDescriptor(cluster, emulatedOxylabs(PROVIDER, "Oxylabs (emulated)", vendor.port));
  for (const [mode, slots] of [["report", 2], ["retry", 2], ["reject", 1]] as const) {
    projects.set(mode, await modeProject(mode, slots));
  }
  await Promise.all([
    gbSlots(projects.get("report")!, 2),
    gbSlots(projects.get("retry")!, 2),
    gbSlots(projects.get("reject")!, 1),
    // The gateway judges exits with the geofeed beside the shipped database.
    cluster.until(
      async () => (await gateway.metric("octoprox_gateway_geo_databases_loaded")) >= 2,
      {
        message: "the gateway to open the geofeed",
      },
    ),
  ]);
}, 90_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([origin?.close(), echo?.close(), vendor?.close()]);
});

describe("preflight", () => {
  it("report: forwards through a moved session, logs it, and echoes once per verdict", async () => {
    const p = projects.get("report")!;
    const [moved, kept] = await gbSlots(p, 2);
    vendor.moveSession(sessionOf(moved), "US");
    const answers = [];
    for (let i = 0; i < 6; i++) answers.push(await get(p));
    // round_robin spreads them over the two slots (a feed applied meanwhile may restart its
    // turn), the moved one answering from the US: each forwarded, each judged a mismatch.
    const exits = answers.map(exitOf);
    expect(new Set(exits)).toEqual(new Set([exitIn("US", moved), exitIn("GB", kept)]));
    const throughMoved = exits.filter((exit) => exit === exitIn("US", moved)).length;
    // One echo through each slot, every later request through it taking the cached verdict;
    // the moved slot's once more at most: a worker that judged its sighting meanwhile moved the
    // exit, and a moved exit's cached verdicts are dropped (a slow machine's timing).
    const movedEchoes = echo.requests.get(exitIn("US", moved)) ?? 0;
    expect(movedEchoes).toBeGreaterThanOrEqual(1);
    expect(movedEchoes).toBeLessThanOrEqual(2);
    expect(echo.requests.get(exitIn("GB", kept))).toBe(1);
    expect(await gateway.metric('octoprox_gateway_preflight_checks_total{result="mismatch"}'))
      .toBe(throughMoved);
    expect(await gateway.metric("octoprox_gateway_preflight_cache_hits_total"))
      .toBeGreaterThanOrEqual(answers.length - 1 - movedEchoes);
    // The gateway's log is written in the background: the line is waited for.
    const logged = await cluster.logged(gateway, "Preflight: exit location mismatch");
    expect(logged).toMatchObject({
      level: "debug",
      project: p.projectId,
      proxy: moved.id,
      requested: "GB",
      observed: "US",
      exit: exitIn("US", moved),
      mode: "report",
    });
  });

  it("retry: moves a request to another slot, never a session, and the worker rotates the slot", async () => {
    const p = projects.get("retry")!;
    const [moved, kept] = await gbSlots(p, 2);
    vendor.moveSession(sessionOf(moved), "US");
    // Two requests of one session: round_robin puts one on each slot, and the one on the moved
    // slot is not moved off it.
    const sticky = [await get(p, "-cc-gb-sessid-s1"), await get(p, "-cc-gb-sessid-s1")];
    const refused = sticky.filter((answer) => answer.status === 502);
    expect(refused).toHaveLength(1);
    expect(refused[0].body).toContain(
      `Exit location mismatch: requested GB, observed US (exit ${exitIn("US", moved)})`,
    );
    // Without a session every request goes through the slot in GB.
    for (let i = 0; i < 4; i++) expect(exitOf(await get(p))).toBe(exitIn("GB", kept));
    // The sighting reached a worker, which deleted the slot; its sync gave it a fresh session.
    const rotated = await untilRows(
      cluster,
      p.projectId,
      p.connectorId,
      (rows) =>
        rows.length === 2 && !rows.some((r) => r.id === moved.id) &&
        rows.every((r) => r.status === "healthy" && r.country === "GB"),
      "the moved slot to be rotated",
    );
    const fresh = rotated.find((row) => row.id !== kept.id)!;
    expect(sessionOf(fresh)).not.toBe(sessionOf(moved));
    expect(await gateway.metric("octoprox_gateway_preflight_retired_total")).toBe(1);
  });

  it("reject: answers 502 in the reference's words, counted as preflight_mismatch", async () => {
    const p = projects.get("reject")!;
    const [moved] = await gbSlots(p, 1);
    vendor.moveSession(sessionOf(moved), "US");
    const answer = await get(p);
    expect(answer.status).toBe(502);
    expect(answer.body).toContain(
      `Exit location mismatch: requested GB, observed US (exit ${exitIn("US", moved)})`,
    );
    expect(answer.headers["proxy-status"]).toContain("destination_unavailable");
    await cluster.until(
      async () =>
        (await gateway.metric('octoprox_gateway_failures_total{kind="preflight_mismatch"}')) >= 2,
      { message: "the refusals counted under preflight_mismatch" },
    );
  });
});
