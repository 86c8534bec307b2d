/**
 * Upstreams that fail, seen through two real gateways in front of an api, a controller and a
 * worker (each its own process, so the health checks can be paused by stopping the worker):
 *
 * - a GET whose first upstream refuses (a fault proxy in `refuse` mode still marked healthy,
 *   since no worker checks it) is retried on another upstream and succeeds; a POST is not
 *   retried; once a worker checks again the refusing proxy turns unhealthy and is no longer
 *   tried;
 * - a tinyproxy killed turns unhealthy and leaves routing: requests reach only the others,
 *   without retries.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Cluster, type Gateway, type Member } from "../../testkit/cluster.ts";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import {
  ClientConnection,
  type Credentials,
  exitOf,
  getThroughTunnel,
  viaProxy,
} from "../../testkit/clients/proxy-client.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import {
  createRoutedProject,
  exitsThrough,
  proxyStatusError,
  untilEveryExit,
  waitForStatuses,
} from "../../testkit/routing.ts";

const EXITS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];
const FAULT_EXIT = "127.0.0.5";
const RETRIES = "octoprox_gateway_retries_total";

let cluster: Cluster;
let api: Member;
let worker: Member;
let gateways: Gateway[];
let origin: Origin;
let tinyproxies: Tinyproxy[];
let fault: FaultProxy;

const workerEnv = () => ({ OCTOPROX_ECHO_URL: `${api.url}/echo` });

beforeAll(async () => {
  [cluster, origin, fault, ...tinyproxies] = await Promise.all([
    // Checks every second that give up after one: a dead proxy is unhealthy within ~3 s.
    Cluster.create({ env: { OCTOPROX_HEALTH_CHECK_TIMEOUT: "1" } }),
    startOrigin(),
    startFaultProxy({ bindAddress: FAULT_EXIT }),
    ...EXITS.map((bindAddress) => startTinyproxy({ bindAddress })),
  ]);
  api = await cluster.start("api");
  [worker] = await Promise.all([
    cluster.start("worker", { env: workerEnv() }),
    cluster.start("controller"),
  ]);
  gateways = await Promise.all([cluster.startGateway(), cluster.startGateway()]);
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([origin, fault, ...(tinyproxies ?? [])].map((server) => server?.close()));
});

const ipUrl = () => `${origin.url}/ip`;

async function retries(): Promise<number[]> {
  return await Promise.all(gateways.map((gateway) => gateway.metric(RETRIES)));
}

describe("an upstream that refuses", () => {
  it("has a GET retried on another upstream, not a POST, until the checks take it out", async () => {
    fault.setMode(FaultMode.pass);
    const project = await createRoutedProject(cluster, [fault.url(), tinyproxies[0].url]);
    const { credentials } = project;
    // Both upstreams in use on both gateways: round_robin alternates between them.
    await untilEveryExit(cluster, gateways, credentials, ipUrl(), [FAULT_EXIT, EXITS[0]]);

    // No worker, no checks: the fault proxy stays healthy in the feed whatever it does.
    await worker.stop();
    // A check the worker began just before it stopped may still wait to be accepted.
    await fault.acceptedAll();
    fault.setMode(FaultMode.refuse);
    const retriesBefore = await retries();
    const triedBefore = fault.connectionsSeen;
    for (const gateway of gateways) {
      // Four GETs on one connection (one isolate, one cursor): round_robin puts at least two
      // of them on the refusing proxy first.
      const connection = new ClientConnection();
      for (let i = 0; i < 4; i++) {
        const answer = await viaProxy(gateway.proxyPort, credentials, ipUrl(), { connection });
        expect(exitOf(answer)).toBe(EXITS[0]);
      }
      expect(connection.connections).toBe(1);
      connection.close();
      // A CONNECT is retried too while the tunnel is not up.
      for (let i = 0; i < 2; i++) {
        expect(exitOf(await getThroughTunnel(gateway.proxyPort, credentials, ipUrl()))).toBe(
          EXITS[0],
        );
      }
    }
    const retried = (await retries()).map((count, index) => count - retriesBefore[index]);
    // Every refused attempt was retried on the other proxy, on each gateway.
    for (const count of retried) expect(count).toBeGreaterThanOrEqual(2);
    expect(fault.connectionsSeen - triedBefore).toBe(retried[0] + retried[1]);
    expect(await cluster.status(project.proxyIds[0])).toBe("healthy");

    // A POST gets one attempt: on the refusing proxy it fails rather than going out twice.
    const postRetries = await retries();
    const postsTried = fault.connectionsSeen;
    const posts: number[] = [];
    const connection = new ClientConnection();
    for (let i = 0; i < 4 && !posts.includes(502); i++) {
      const answer = await viaProxy(gateways[0].proxyPort, credentials, ipUrl(), {
        method: "POST",
        body: "once",
        connection,
      });
      posts.push(answer.status);
      if (answer.status === 502) {
        expect(proxyStatusError(answer.headers["proxy-status"])).toMatch(/^connection_/);
      }
    }
    connection.close();
    expect(posts).toContain(502);
    expect(fault.connectionsSeen - postsTried).toBe(posts.filter((s) => s === 502).length);
    expect(await retries()).toEqual(postRetries);

    // Checks again: the refusing proxy turns unhealthy, leaves the feed, and is tried no more.
    worker = await cluster.start("worker", { env: workerEnv() });
    await waitForStatuses(cluster, [project.proxyIds[0]], "unhealthy");
    for (const gateway of gateways) await untilRoutedWithout(gateway, credentials, FAULT_EXIT);
    // Its checks go on every second (an unhealthy proxy is checked to see it recover): paused,
    // so what reaches the fault proxy from here on can only be a gateway's attempt.
    await worker.stop();
    await fault.acceptedAll();
    const settled = await retries();
    const triedSettled = fault.connectionsSeen;
    for (const gateway of gateways) {
      expect(await exitsThrough(gateway, credentials, ipUrl(), 4)).toEqual(Array(4).fill(EXITS[0]));
    }
    expect(await retries()).toEqual(settled);
    expect(fault.connectionsSeen).toBe(triedSettled);
  });
});

/**
 * Waits until the gateway routes without `exit`: two requests in a row that neither left
 * through it nor needed a retry (a proxy still in the feed but failing would need one).
 */
async function untilRoutedWithout(
  gateway: Gateway,
  credentials: Credentials,
  exit: string,
): Promise<void> {
  await cluster.until(async () => {
    const before = await gateway.metric(RETRIES);
    const exits = await exitsThrough(gateway, credentials, ipUrl(), 2);
    return exits.every((seen) => seen !== exit) && (await gateway.metric(RETRIES)) === before;
  }, { timeoutMs: 20_000, message: `${gateway.instance} to route without ${exit}` });
}

describe("a proxy killed", () => {
  it("turns unhealthy and leaves routing", async () => {
    // The checks must run (a test before may have failed while the worker was stopped).
    if (!worker.alive()) worker = await cluster.start("worker", { env: workerEnv() });
    const project = await createRoutedProject(cluster, tinyproxies.map((t) => t.url));
    const { credentials } = project;
    await untilEveryExit(cluster, gateways, credentials, ipUrl(), EXITS);

    await tinyproxies[2].close();
    await waitForStatuses(cluster, [project.proxyIds[2]], "unhealthy");
    for (const gateway of gateways) await untilRoutedWithout(gateway, credentials, EXITS[2]);
    const settled = await retries();
    for (const gateway of gateways) {
      const exits = await exitsThrough(gateway, credentials, ipUrl(), 6);
      expect(new Set(exits)).toEqual(new Set(EXITS.slice(0, 2)));
    }
    // Never tried, so never retried.
    expect(await retries()).toEqual(settled);
    expect(await cluster.status(project.proxyIds[2])).toBe("unhealthy");
  });
});
