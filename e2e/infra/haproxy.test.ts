/**
 * The HAProxy example (infra/haproxy/haproxy.cfg) as shipped, under Debian's HAProxy, in front
 * of two real gateways of a real control plane, with a tinyproxy upstream leaving from
 * 127.0.0.2. The file is rendered by the one rule it documents: each endpoint is replaced by
 * where that listener runs here.
 *
 * - HTTP and SOCKS5 clients through HAProxy reach the origin through tinyproxy, and both
 *   gateways serve some of them;
 * - HAProxy's HTTP checks on each gateway's status port (/ready) mark a killed gateway DOWN,
 *   and every request from its death on still succeeds, on the other gateway (HAProxy retries
 *   a refused connection on it).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { curl } from "../../testkit/clients/curl.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import {
  type HaproxyExample,
  haproxyServerStates,
  haproxyServerStats,
  startHaproxyExample,
} from "../../testkit/upstreams/haproxy.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { exitOf, viaProxy } from "../../testkit/clients/proxy-client.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { loggedPort } from "../../testkit/routing.ts";
import { createRoutedProject, type RoutedProject } from "../../testkit/routing.ts";

const EXIT = "127.0.0.2";
const ACCEPTED = 'octoprox_gateway_connections_total{result="accepted"}';

let cluster: Cluster;
let origin: Origin;
let tinyproxy: Tinyproxy;
let gateways: Gateway[];
let project: RoutedProject;
let haproxy: HaproxyExample;

/** A listener's port, from the gateway's log line announcing it. */
beforeAll(async () => {
  [cluster, origin, tinyproxy] = await Promise.all([
    Cluster.create(),
    startOrigin(),
    startTinyproxy({ bindAddress: EXIT }),
  ]);
  await cluster.start("all");
  // HAProxy reaches the gateways from 127.0.0.1: the one peer they take a PROXY header from.
  gateways = await Promise.all(
    [0, 1].map(() => cluster.startGateway({ env: { OCTOPROX_TRUSTED_PROXIES: "127.0.0.1/32" } })),
  );
  project = await createRoutedProject(cluster, [tinyproxy.url]);
  haproxy = await startHaproxyExample(gateways.map((gateway) => ({
    proxyPort: gateway.proxyPort,
    socksPort: loggedPort(gateway, "SOCKS5 listener bound"),
    statusPort: gateway.port,
  })));
});

afterEach((context) => {
  if (context.task.result?.state === "fail") {
    cluster.dump();
    console.error(`--- haproxy:\n${haproxy?.output()}`);
  }
});

afterAll(async () => {
  await haproxy?.close();
  await cluster?.close();
  await Promise.all([origin, tinyproxy].map((server) => server?.close()));
});

const serverStats = () => haproxyServerStats(haproxy.ports[2]);
const serverStates = () => haproxyServerStates(haproxy.ports[2]);

/** Until HAProxy shows every server in `expected` (`backend/server` → status). */
async function untilStates(expected: Record<string, string>, what: string): Promise<void> {
  await cluster.until(async () => {
    const states = await serverStates();
    return Object.entries(expected).every(([server, status]) => states[server] === status);
  }, { timeoutMs: 20_000, message: what });
}

/** One GET of the origin's /ip through HAProxy's HTTP frontend; answers the exit. */
async function throughHaproxy(): Promise<string> {
  return exitOf(await viaProxy(haproxy.port, project.credentials, `${origin.url}/ip`));
}

const accepted = (gateway: Gateway) => gateway.metric(ACCEPTED);

describe("the HAProxy example in front of two gateways", () => {
  it("checks both gateways' /ready and balances HTTP and SOCKS5 clients over both", async () => {
    await untilStates({
      "gateways_http/gw1": "UP",
      "gateways_http/gw2": "UP",
      "gateways_socks/gw1": "UP",
      "gateways_socks/gw2": "UP",
    }, "HAProxy to see both gateways up");
    const before = await Promise.all(gateways.map(accepted));
    const exits: string[] = [];
    for (let i = 0; i < 8; i++) exits.push(await throughHaproxy());
    expect(exits).toEqual(Array(8).fill(EXIT));
    const { username, password } = project.credentials;
    const socks = await curl([
      "-x",
      `socks5h://${username}:${password}@127.0.0.1:${haproxy.ports[1]}`,
      `${origin.url}/ip`,
    ]);
    expect(socks.code, socks.stderr).toBe(0);
    expect(JSON.parse(socks.stdout).ip).toBe(EXIT);
    const after = await Promise.all(gateways.map(accepted));
    // Each client connection reached one gateway; each gateway took some of them.
    expect(after[0] - before[0] + after[1] - before[1]).toBe(9);
    expect(after[0]).toBeGreaterThan(before[0]);
    expect(after[1]).toBeGreaterThan(before[1]);
  });

  it("marks a killed gateway down and serves every request on the other", async () => {
    const [stopped, kept] = gateways;
    const keptBefore = await accepted(kept);
    // Killed, not stopped: a SIGTERM answers /ready 503 while the gateway stops, so HAProxy
    // often takes it out before its port closes; a crash gives no such notice, and the
    // connections HAProxy still sends it until two checks failed are refused and redispatched.
    expect(await stopped.stop("SIGKILL")).toEqual({ code: null, signal: "SIGKILL" });
    let sent = 0;
    const failures: string[] = [];
    const send = async () => {
      sent++;
      // Kept, not thrown: a throw inside `until` would only count as "not yet".
      await throughHaproxy().then(
        (exit) => exit === EXIT || failures.push(`exit ${exit}`),
        (error: Error) => failures.push(error.message),
      );
    };
    // Requests from the kill until HAProxy says gw1 is down (and a few after): each succeeds.
    await cluster.until(async () => {
      await send();
      const states = await serverStates();
      return states["gateways_http/gw1"] === "DOWN" && states["gateways_socks/gw1"] === "DOWN";
    }, { timeoutMs: 20_000, intervalMs: 50, message: "HAProxy to mark the killed gateway down" });
    for (let i = 0; i < 5; i++) await send();
    expect(failures).toEqual([]);
    // HAProxy did send some of them to the dead gateway first (refused, then redispatched).
    expect(Number((await serverStats())["gateways_http/gw1"].wredis)).toBeGreaterThan(0);
    expect(await serverStates()).toMatchObject({
      "gateways_http/gw2": "UP",
      "gateways_socks/gw2": "UP",
    });
    expect(await accepted(kept) - keptBefore).toBe(sent);
  });
});
