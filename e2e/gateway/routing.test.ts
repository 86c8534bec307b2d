/**
 * Clients through real gateways (gateway/main.ts under Deno) in front of a real control plane
 * (role all) and three tinyproxy upstreams leaving from 127.0.0.2, .3 and .4:
 *
 * - a gateway started before the control plane is unready with its proxy port closed until the
 *   first feed;
 * - an admin's project and static connector (through the API) carry HTTP and CONNECT (HTTPS and
 *   plain) to origins on loopback; round_robin visits every exit;
 * - `-cc-de` uses only DE proxies; an unserved country is 502 naming it; a state without a
 *   country is 400 saying how to write it; a wrong password is 407 with its challenge;
 * - an edit reaches both gateways within a second of the API's answer;
 * - a gateway without an allow list refuses private destinations with 403 before dialing.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { curl } from "../../testkit/clients/curl.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import {
  connectVia,
  type Credentials,
  exitOf,
  getThroughTunnel,
  viaProxy,
} from "../../testkit/clients/proxy-client.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { freePort, portAccepts } from "../../testkit/ports.ts";
import {
  createRoutedProject,
  exitsThrough,
  proxyStatusError,
  type RoutedProject,
  untilAnswer,
  untilEveryExit,
  withOptions,
} from "../../testkit/routing.ts";

const EXITS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];

let cluster: Cluster;
let origin: Origin;
let tlsOrigin: Origin;
let tinyproxies: Tinyproxy[];
let folder: string;
let caFile: string;
/** Started before the control plane, on a proxy port chosen here. */
let early: Gateway;
let earlyPort: number;
let late: Gateway;
/** What the early gateway showed before any feed existed. */
let beforeFeed: { ready: number; reasons: string[]; health: number; portOpen: boolean };
let project: RoutedProject;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-gw-routing-"));
  [cluster, origin, tlsOrigin, ...tinyproxies] = await Promise.all([
    Cluster.create(),
    startOrigin(),
    startOrigin({ tls: true }),
    ...EXITS.map((bindAddress) => startTinyproxy({ bindAddress })),
  ]);
  caFile = join(folder, "origin-ca.pem");
  await writeFile(caFile, tlsOrigin.ca!);

  // A gateway before any control process: nothing has published a feed yet.
  earlyPort = await freePort();
  early = await cluster.startGateway({ proxyPort: earlyPort, ready: false });
  const ready = await fetch(`${early.url}/ready`);
  const health = await fetch(`${early.url}/health`);
  await health.body?.cancel();
  beforeFeed = {
    ready: ready.status,
    reasons: ((await ready.json()) as { reasons: string[] }).reasons,
    health: health.status,
    portOpen: await portAccepts("127.0.0.1", earlyPort),
  };

  await cluster.start("all");
  late = await cluster.startGateway();
  await cluster.waitForReady(early);
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([origin, tlsOrigin, ...(tinyproxies ?? [])].map((server) => server?.close()));
  if (folder) await rm(folder, { recursive: true, force: true });
});

const ipUrl = () => `${origin.url}/ip`;

describe("a gateway and its first feed", () => {
  it("is unready with its proxy port closed until the controller publishes", async () => {
    expect(beforeFeed).toEqual({
      ready: 503,
      reasons: ["no routing feed applied yet"],
      health: 200,
      portOpen: false,
    });
    // Ready now that the control plane published: the port it was given is open.
    expect(early.proxyPort).toBe(earlyPort);
    expect(await portAccepts("127.0.0.1", earlyPort)).toBe(true);
    const firstFeed = early.logs().findIndex((line) => line.msg === "First feed applied");
    const bound = early.logs().findIndex((line) => line.msg === "Proxy listener bound");
    expect(firstFeed).toBeGreaterThanOrEqual(0);
    expect(bound).toBeGreaterThan(firstFeed);
  });
});

describe("an admin's project through the gateways", () => {
  it("carries HTTP and CONNECT to origins on loopback", async () => {
    project = await createRoutedProject(cluster, tinyproxies.map((t) => t.url));
    const { credentials } = project;
    // The project reaches each gateway with the feeds that follow the health checks.
    await untilEveryExit(cluster, [early, late], credentials, ipUrl(), EXITS);
    for (const gateway of [early, late]) {
      // curl, plain HTTP through the proxy.
      const http = await curl([
        "-x",
        gateway.proxyUrl(credentials.username, credentials.password),
        ipUrl(),
      ]);
      expect(http.stderr).toBe("");
      expect(EXITS).toContain(JSON.parse(http.stdout).ip);

      // curl, HTTPS: a CONNECT tunnel, the origin's certificate verified end to end.
      const https = await curl([
        "-x",
        gateway.proxyUrl(credentials.username, credentials.password),
        "--cacert",
        caFile,
        `${tlsOrigin.url}/ip`,
      ]);
      expect(https.stderr).toBe("");
      expect(EXITS).toContain(JSON.parse(https.stdout).ip);

      // Node: absolute-form GET, then GETs inside tunnels (TLS and plain HTTP).
      expect(EXITS).toContain(exitOf(await viaProxy(gateway.proxyPort, credentials, ipUrl())));
      const tunnelled = await getThroughTunnel(
        gateway.proxyPort,
        credentials,
        `${tlsOrigin.url}/ip`,
        { ca: tlsOrigin.ca },
      );
      expect(EXITS).toContain(exitOf(tunnelled));
      const plainTunnel = await getThroughTunnel(gateway.proxyPort, credentials, ipUrl());
      expect(EXITS).toContain(exitOf(plainTunnel));
    }
  });

  it("visits every exit in turn with round_robin", async () => {
    const { credentials } = project;
    for (const gateway of [early, late]) {
      const exits = await exitsThrough(gateway, credentials, ipUrl(), 6);
      // Each upstream once per round, the same order every round.
      expect(new Set(exits.slice(0, 3))).toEqual(new Set(EXITS));
      expect(exits.slice(3)).toEqual(exits.slice(0, 3));
    }
    // The api's /echo through the gateway shows the exits as well.
    const echoUrl = `${cluster.api.url}/echo`;
    expect(new Set(await exitsThrough(late, credentials, echoUrl, 3))).toEqual(new Set(EXITS));
  });

  it("serves -cc-de from DE proxies only, 502 for a place nothing serves, 400 for a bad option", async () => {
    const { credentials, projectId, proxyIds } = project;
    const countries = ["DE", "DE", "US"];
    for (const [index, id] of proxyIds.entries()) {
      const answer = await cluster.request("PATCH", `/api/v1/projects/${projectId}/proxies/${id}`, {
        country: countries[index].toLowerCase(),
      });
      expect(answer.status).toBe(200);
      expect(answer.body.country).toBe(countries[index]);
    }
    const de = withOptions(credentials, "-cc-de");
    const us = withOptions(credentials, "-cc-US");
    for (const gateway of [early, late]) {
      // The last edit has reached this gateway once the US proxy serves -cc-us.
      await untilAnswer(
        cluster,
        gateway,
        us,
        ipUrl(),
        (a) => a.status === 200 && exitOf(a) === EXITS[2],
      );
      const deExits = await exitsThrough(gateway, de, ipUrl(), 6);
      expect(new Set(deExits)).toEqual(new Set(EXITS.slice(0, 2)));
      expect(new Set(await exitsThrough(gateway, us, ipUrl(), 3))).toEqual(new Set([EXITS[2]]));

      const france = await viaProxy(gateway.proxyPort, withOptions(credentials, "-cc-fr"), ipUrl());
      expect(france.status).toBe(502);
      expect(france.body.trim()).toBe("No upstream proxy available for FR");
      expect(proxyStatusError(france.headers["proxy-status"])).toBe("destination_unavailable");
      // Never widened: a CONNECT for France is refused the same way.
      const franceTunnel = await connectVia(
        gateway.proxyPort,
        withOptions(credentials, "-cc-fr"),
        `127.0.0.1:${tlsOrigin.port}`,
      );
      expect(franceTunnel.status).toBe(502);
      expect(franceTunnel.body).toContain("FR");

      const stateOnly = await viaProxy(
        gateway.proxyPort,
        withOptions(credentials, "-st-ny"),
        ipUrl(),
      );
      expect(stateOnly.status).toBe(400);
      expect(stateOnly.body).toContain("State and city targeting need a country");
      expect(stateOnly.body).toContain("-cc-");
      expect(proxyStatusError(stateOnly.headers["proxy-status"])).toBe("http_request_error");
    }
  });

  it("answers a wrong password with 407 and its challenge", async () => {
    const { credentials } = project;
    const wrong: Credentials = { ...credentials, password: `${credentials.password}x` };
    const unknown: Credentials = { ...credentials, username: "nobody-here" };
    for (const gateway of [early, late]) {
      for (const who of [wrong, unknown, null]) {
        const answer = await viaProxy(gateway.proxyPort, who, ipUrl());
        expect(answer.status).toBe(407);
        expect(answer.headers["proxy-authenticate"]).toBe('Basic realm="octoprox"');
        expect(proxyStatusError(answer.headers["proxy-status"])).toBe("http_request_denied");
      }
      const tunnel = await connectVia(gateway.proxyPort, wrong, `127.0.0.1:${tlsOrigin.port}`);
      expect(tunnel.status).toBe(407);
      expect(tunnel.headers.get("proxy-authenticate")).toBe('Basic realm="octoprox"');
      // curl shows the same answer.
      const viaCurl = await curl([
        "-x",
        gateway.proxyUrl(wrong.username, wrong.password),
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        ipUrl(),
      ]);
      expect(viaCurl.stdout).toBe("407");
    }
  });

  it("takes an edit to both gateways within a second of the API's answer", async () => {
    const { credentials, projectId, proxyIds, connectorId } = project;
    const fr = withOptions(credentials, "-cc-fr");
    const measure = async (
      edit: () => Promise<void>,
      accept: (answer: Awaited<ReturnType<typeof viaProxy>>) => boolean,
      credentialsToUse: Credentials,
    ) => {
      await edit();
      const answeredAt = performance.now();
      const reached = await Promise.all([early, late].map(async (gateway) => {
        // Four connections at a time: every isolate of the gateway, likely, not just one.
        await untilAnswer(cluster, gateway, credentialsToUse, ipUrl(), accept, {
          timeoutMs: 10_000,
          intervalMs: 5,
          probes: 4,
        });
        return Math.round(performance.now() - answeredAt);
      }));
      return Math.max(...reached);
    };

    // The US proxy moves to France: -cc-fr is served by it alone.
    const toFrance = await measure(
      async () => {
        const answer = await cluster.request(
          "PATCH",
          `/api/v1/projects/${projectId}/proxies/${proxyIds[2]}`,
          { country: "FR" },
        );
        expect(answer.status).toBe(200);
      },
      (a) => a.status === 200 && exitOf(a) === EXITS[2],
      fr,
    );

    // The connector disabled: nothing serves the project.
    const disabled = await measure(
      async () => {
        const answer = await cluster.request(
          "PATCH",
          `/api/v1/projects/${projectId}/connectors/${connectorId}`,
          { enabled: false },
        );
        expect(answer.status).toBe(200);
      },
      (a) => a.status === 502,
      credentials,
    );

    // And enabled again.
    const enabled = await measure(
      async () => {
        const answer = await cluster.request(
          "PATCH",
          `/api/v1/projects/${projectId}/connectors/${connectorId}`,
          { enabled: true },
        );
        expect(answer.status).toBe(200);
      },
      (a) => a.status === 200,
      credentials,
    );

    console.info(
      `edit-to-both-gateways latency: country ${toFrance} ms, disable ${disabled} ms, ` +
        `enable ${enabled} ms`,
    );
    for (const latency of [toFrance, disabled, enabled]) expect(latency).toBeLessThan(1_000);
  });
});

describe("the destination guard", () => {
  it("refuses private destinations with 403 before dialing, without an allow list", async () => {
    const guarded = await cluster.startGateway({ allowCidrs: null });
    const { credentials } = project;
    const served = origin.requests;
    const logLengths = await Promise.all(tinyproxies.map(async (t) => (await t.log()).length));
    const targets = [
      ipUrl(), // 127.0.0.1, the origin itself
      `http://localhost:${origin.port}/ip`,
      "http://10.0.0.1/",
      "http://169.254.169.254/latest/meta-data/",
      "http://192.168.1.1/",
    ];
    for (const target of targets) {
      const answer = await viaProxy(guarded.proxyPort, credentials, target);
      expect(answer.status, target).toBe(403);
      expect(answer.body).toMatch(/^Destination not allowed: /);
      expect(proxyStatusError(answer.headers["proxy-status"])).toBe("destination_ip_prohibited");
    }
    for (const target of [`127.0.0.1:${tlsOrigin.port}`, "169.254.169.254:443", "10.0.0.1:22"]) {
      const tunnel = await connectVia(guarded.proxyPort, credentials, target);
      expect(tunnel.status, target).toBe(403);
      expect(proxyStatusError(tunnel.headers.get("proxy-status"))).toBe(
        "destination_ip_prohibited",
      );
    }
    // Refused before any upstream was dialed: the origin served nothing more and no tinyproxy
    // was asked for any of those destinations (their logs name every target they are given).
    expect(origin.requests).toBe(served);
    for (const [index, tinyproxy] of tinyproxies.entries()) {
      const log = (await tinyproxy.log()).slice(logLengths[index]);
      expect(log).not.toMatch(/10\.0\.0\.1|169\.254\.169\.254|192\.168\.1\.1|localhost/);
      expect(log).not.toContain(`127.0.0.1:${tlsOrigin.port}`);
    }

    // The allow list of the other gateways covers loopback only: cloud metadata stays refused.
    const metadata = await viaProxy(
      late.proxyPort,
      credentials,
      "http://169.254.169.254/latest/meta-data/",
    );
    expect(metadata.status).toBe(403);
  });
});
