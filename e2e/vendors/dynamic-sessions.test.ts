/**
 * A dynamic-sessions vendor connector through real processes: a control plane (role all) that
 * reads a provider descriptor from OCTOPROX_PROVIDERS_DIR (the shipped Oxylabs one, its
 * residential type pointed at the vendor emulator), two gateways (gateway/main.ts under Deno),
 * the vendor emulator speaking Oxylabs' username grammar, and an origin that answers the
 * address each request came from (the emulator's exit).
 *
 * - the sync makes the connector's one row, healthy, with no secret in it;
 * - one client session (`-sessid-abc`) through gateway A (HTTP) and gateway B (CONNECT) leaves
 *   from one exit, and the vendor saw one session for both; another session leaves elsewhere;
 *   no `-sessid-` is a fresh vendor session, and exit, per request;
 * - `-cc-` is sent in the vendor's syntax (the emulator records the country asked); a country
 *   outside the connector's declared ones is the gateway's no-upstream answer, and the vendor
 *   hears nothing of it;
 * - a wrong vendor password makes the vendor answer 407 and the client the gateway's
 *   upstream-auth failure answer, over HTTP and CONNECT; the gateways keep serving.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import {
  connectVia,
  type Credentials,
  exitOf,
  getThroughTunnel,
  type ProxyAnswer,
  viaProxy,
} from "../../testkit/clients/proxy-client.ts";
import {
  exitFor,
  oxylabs as oxylabsGrammar,
  startVendorProxy,
  type VendorProxy,
  type VendorRequest,
} from "../../testkit/upstreams/vendor-emulator.ts";
import { proxyStatusError, untilAnswer, withOptions } from "../../testkit/routing.ts";
import {
  connectorRows,
  createCredential,
  createProject,
  createVendorConnector,
  emulatedOxylabs,
  type ListedProxy,
  syncNow,
  untilRows,
  type VendorProject,
} from "../../testkit/vendors.ts";

const PROVIDER = "e2e-oxylabs";
const ACCOUNT = "acme";
const VENDOR_PASSWORD = "vendor-s3cret";

let folder: string;
let cluster: Cluster;
let origin: Origin;
let vendor: VendorProxy;
let gatewayA: Gateway;
let gatewayB: Gateway;
let project: VendorProject;
let connectorId: string;
let row: ListedProxy;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-dynamic-"));
  [origin, vendor] = await Promise.all([
    startOrigin(),
    startVendorProxy({ grammar: oxylabsGrammar, accounts: { [ACCOUNT]: VENDOR_PASSWORD } }),
  ]);
  await writeFile(
    join(folder, "e2e-oxylabs.yaml"),
    stringify(emulatedOxylabs(PROVIDER, "Oxylabs (emulated)", vendor.port)),
  );
  cluster = await Cluster.create({ env: { OCTOPROX_PROVIDERS_DIR: folder } });
  await cluster.start("all");
  [gatewayA, gatewayB] = await Promise.all([cluster.startGateway(), cluster.startGateway()]);

  project = await createProject(cluster);
  const credentialId = await createCredential(cluster, project.projectId, PROVIDER, {
    username: ACCOUNT,
    password: VENDOR_PASSWORD,
  });
  connectorId = await createVendorConnector(cluster, project.projectId, {
    provider: PROVIDER,
    credentialId,
    config: { session_mode: "dynamic" },
    countries: ["US", "DE"],
  });
  [row] = await untilRows(
    cluster,
    project.projectId,
    connectorId,
    (rows) => rows.length === 1 && rows[0].status === "healthy",
    "the sync to make the connector's one healthy row",
  );
  // The first request each gateway serves: the feed with the row has reached it.
  for (const gateway of [gatewayA, gatewayB]) {
    await untilAnswer(cluster, gateway, as({ session: "warmup" }), ipUrl(), ok, {
      message: `${gateway.instance} to serve through the vendor connector`,
    });
  }
}, 90_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([origin?.close(), vendor?.close()]);
  if (folder) await rm(folder, { recursive: true, force: true });
});

const ipUrl = () => `${origin.url}/ip`;
const ok = (answer: ProxyAnswer) => answer.status === 200;

/** The project's login with `-cc-` and `-sessid-` options. */
function as(options: { country?: string; session?: string } = {}, base?: Credentials) {
  let suffix = "";
  if (options.country) suffix += `-cc-${options.country}`;
  if (options.session !== undefined) suffix += `-sessid-${options.session}`;
  return withOptions(base ?? project.credentials, suffix);
}

/** The vendor's requests from `from` on (an index into `vendor.requests`). */
const vendorRequestsSince = (from: number): VendorRequest[] => vendor.requests.slice(from);

describe("a dynamic-sessions vendor connector", () => {
  it("has one healthy row, rendered per request, with no secret stored in it", async () => {
    expect(row).toMatchObject({
      host: "127.0.0.1",
      port: vendor.port,
      username: `customer-${ACCOUNT}`,
      has_password: true,
      country: null,
      status: "healthy",
    });
    expect(row.metadata).toMatchObject({ dynamic: true, slot: "gateway" });
    // The stored row holds the placeholder, never the vendor password.
    const [stored] = await cluster.sql<{ password: string }[]>`
      select password from proxies where id = ${row.id}`;
    expect(stored.password).toBe("{password}");
    // A sync again keeps that one row as it is.
    await syncNow(cluster, connectorId);
    expect(await connectorRows(cluster, project.projectId, connectorId)).toEqual([
      expect.objectContaining({ id: row.id, username: row.username, status: "healthy" }),
    ]);
  });

  it("keeps one client session on one vendor session and exit across both gateways", async () => {
    const from = vendor.requests.length;
    const session = as({ country: "us", session: "abc" });
    const viaA = exitOf(await viaProxy(gatewayA.proxyPort, session, ipUrl()));
    const viaB = exitOf(await getThroughTunnel(gatewayB.proxyPort, session, ipUrl()));
    expect(viaB).toBe(viaA);
    const again = exitOf(await viaProxy(gatewayB.proxyPort, session, ipUrl()));
    expect(again).toBe(viaA);

    const asked = vendorRequestsSince(from);
    expect(asked).toHaveLength(3);
    const sessions = new Set(asked.map((r) => r.session));
    expect(sessions.size).toBe(1);
    const [vendorSession] = sessions;
    expect(vendorSession).toMatch(/^[a-z0-9]{10}$/);
    // The client's own session name is not what the vendor sees: it is hashed with the project.
    expect(vendorSession).not.toBe("abc");
    for (const request of asked) {
      expect(request).toEqual({
        account: ACCOUNT,
        country: "US",
        session: vendorSession,
        sessionMinutes: 10,
      });
    }
    // The exit is the emulator's for that country and vendor session.
    expect(viaA).toBe(exitFor(asked[0]));

    // Another client session: another vendor session, another exit.
    const otherFrom = vendor.requests.length;
    const other = exitOf(
      await viaProxy(gatewayA.proxyPort, as({ country: "us", session: "xyz" }), ipUrl()),
    );
    const [otherRequest] = vendorRequestsSince(otherFrom);
    expect(otherRequest.session).not.toBe(vendorSession);
    expect(other).not.toBe(viaA);
    expect(other).toBe(exitFor(otherRequest));
  });

  it("gives each request without -sessid- a fresh vendor session and exit", async () => {
    const from = vendor.requests.length;
    const exits: string[] = [];
    for (let i = 0; i < 4; i++) {
      const gateway = i % 2 === 0 ? gatewayA : gatewayB;
      exits.push(exitOf(await viaProxy(gateway.proxyPort, project.credentials, ipUrl())));
    }
    const asked = vendorRequestsSince(from);
    expect(asked).toHaveLength(4);
    expect(new Set(asked.map((r) => r.session)).size).toBe(4);
    expect(new Set(exits).size).toBe(4);
    for (const request of asked) {
      expect(request.country).toBeUndefined();
      expect(request.session).toMatch(/^[a-z0-9]{10}$/);
    }
  });

  it("sends the country asked in the vendor's syntax, and refuses one not declared", async () => {
    const from = vendor.requests.length;
    const de = exitOf(await viaProxy(gatewayB.proxyPort, as({ country: "de" }), ipUrl()));
    const [asked] = vendorRequestsSince(from);
    expect(asked).toMatchObject({ account: ACCOUNT, country: "DE" });
    // 127.<country>.x.y: the exit is the emulator's for Germany.
    expect(de).toBe(exitFor(asked));

    // France is not among the connector's countries (US, DE): nothing serves it.
    const before = vendor.requests.length;
    for (const gateway of [gatewayA, gatewayB]) {
      const refused = await viaProxy(
        gateway.proxyPort,
        as({ country: "fr", session: "abc" }),
        ipUrl(),
      );
      expect(refused.status).toBe(502);
      expect(proxyStatusError(refused.headers["proxy-status"])).toBe("destination_unavailable");
      expect(refused.body).toContain("No upstream proxy available for FR");
      const tunnel = await connectVia(gateway.proxyPort, as({ country: "fr" }), "127.0.0.1:80");
      expect(tunnel.status).toBe(502);
      expect(tunnel.body).toContain("No upstream proxy available for FR");
    }
    expect(vendor.requests.length).toBe(before);
  });
});

describe("a wrong vendor password", () => {
  let wrong: VendorProject;

  beforeAll(async () => {
    wrong = await createProject(cluster);
    const credentialId = await createCredential(cluster, wrong.projectId, PROVIDER, {
      username: ACCOUNT,
      password: "not-the-vendor-password",
    });
    const id = await createVendorConnector(cluster, wrong.projectId, {
      provider: PROVIDER,
      credentialId,
      config: { session_mode: "dynamic" },
    });
    await untilRows(
      cluster,
      wrong.projectId,
      id,
      (rows) => rows.length === 1 && rows[0].status === "healthy",
      "the wrong-password connector's row",
    );
  });

  it("is the vendor's 407, answered as the gateway's upstream-auth failure", async () => {
    const refusedBefore = vendor.refused;
    // HTTP: the gateway forwards in absolute form; the vendor's 407 is not the client's to see.
    const forwarded = await untilAnswer(
      cluster,
      gatewayA,
      as({ session: "s1" }, wrong.credentials),
      ipUrl(),
      (answer) => answer.status !== 502 || !answer.body.includes("No upstream"),
      { message: "gateway A to route the wrong-password project" },
    );
    expect(forwarded.status).toBe(502);
    expect(proxyStatusError(forwarded.headers["proxy-status"])).toBe("connection_refused");
    expect(forwarded.body).toContain("Upstream proxy refused connection (credentials)");
    expect(forwarded.headers["proxy-authenticate"]).toBeUndefined();

    // CONNECT: the vendor refuses the tunnel with 407; the client hears the same from us.
    const tunnel = await cluster.until(async () => {
      const answer = await connectVia(
        gatewayB.proxyPort,
        as({ session: "s1" }, wrong.credentials),
        `127.0.0.1:${origin.port}`,
      );
      return answer.body.includes("No upstream") ? undefined : answer;
    }, { message: "gateway B to route the wrong-password project" });
    expect(tunnel.status).toBe(502);
    expect(proxyStatusError(tunnel.headers.get("proxy-status"))).toBe("connection_refused");
    expect(tunnel.body).toContain("Upstream proxy refused connection (credentials)");
    expect(tunnel.headers.has("proxy-authenticate")).toBe(false);

    // The vendor did refuse them: a 407 each, for the account named.
    expect(vendor.refused).toBeGreaterThanOrEqual(refusedBefore + 2);
    const last = vendor.requests[vendor.requests.length - 1];
    expect(last.account).toBe(ACCOUNT);

    // Never a crash: both gateways are up and serve the project whose password is right.
    for (const gateway of [gatewayA, gatewayB]) {
      expect(gateway.alive()).toBe(true);
      const health = await fetch(`${gateway.url}/ready`);
      await health.body?.cancel();
      expect(health.status).toBe(200);
      expect(exitOf(await viaProxy(gateway.proxyPort, as({ session: "abc" }), ipUrl())))
        .toMatch(/^127\./);
    }
  });
});
