/**
 * Health checks on an install whose proxies are not on the control plane's machine. The proxy
 * here emulates a remote one: its own loopback (127.0.0.1) serves nothing, and it forwards to
 * other addresses. The api listens on every address and is published as 127.0.0.2, another
 * loopback address of this machine, standing in for an address the proxies can reach.
 *
 * - Without OCTOPROX_ECHO_URL and a connector check URL, checks ask the published address's
 *   /echo through the proxy, and it stays healthy (a check of 127.0.0.1 through it would fail).
 * - The echo monitor asks exactly the URL the checks ask: an outage of that echo is seen as
 *   one, and counts no failure.
 * - The worker's start log says which echo URL checks use and why.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { probe } from "../../control/upstream/index.ts";
import { Cluster, type Member } from "../../testkit/cluster.ts";
import { type Echo, startEcho } from "../../testkit/upstreams/echo.ts";
import { type FaultProxy, startFaultProxy } from "../../testkit/upstreams/fault-proxy.ts";

/** The remote proxy's outgoing address: what the echo sees checks through it come from. */
const PROXY_EXIT = "127.0.0.5";
/** Where the test publishes what the proxies must reach. */
const PUBLISHED_HOST = "127.0.0.2";

let cluster: Cluster;
let api: Member;
let remote: FaultProxy;
let echo: Echo;

beforeAll(async () => {
  cluster = await Cluster.create();
  [api, remote, echo] = await Promise.all([
    cluster.start("api", { env: { OCTOPROX_API_HOST: "0.0.0.0" } }),
    startFaultProxy({ remote: true, bindAddress: PROXY_EXIT }),
    startEcho({ host: PUBLISHED_HOST }),
  ]);
  await cluster.start("controller");
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([remote?.close(), echo?.close()]);
});

const echoLine = (worker: Member) =>
  worker.logs().find((line) => line.msg.startsWith("Health checks ask "));

/** Every proxy the tests added: each worker checks them all. */
const ids: string[] = [];

/**
 * Waits for `done` while every proxy stays healthy with no failure counted; ends at the first
 * that does not, and fails naming it.
 */
async function staysHealthyUntil(done: () => boolean, what: string): Promise<void> {
  const seen: string[] = [];
  await cluster.until(async () => {
    for (const id of ids) {
      const status = await cluster.status(id);
      const failures = (await cluster.softHealth(id))?.failures;
      if (status !== "healthy" || failures !== "0") {
        seen.push(`${id}: ${status}, ${failures} failures`);
      }
    }
    return seen.length > 0 || done();
  }, { timeoutMs: 15_000, message: what });
  expect(seen).toEqual([]);
}

/** Checks the remote proxy passed on to `host`:`port`. */
const forwardedTo = (host: string, port: number) =>
  remote.requests.filter((r) => r.host === host && r.port === port).length;

describe("health checks of proxies on other machines", () => {
  it("asks the api's /echo at OCTOPROX_PUBLIC_URL by default, and the proxy stays healthy", async () => {
    const publicUrl = `http://${PUBLISHED_HOST}:${api.port}`;
    // What the emulation means: through this proxy the api's loopback address is out of reach,
    // and the published one answers.
    const loopback = await probe({
      proxy: remote.proxy(),
      url: `${api.url}/echo`,
      timeoutMs: 5_000,
    });
    expect(loopback.ok).toBe(false);
    const published = await probe({
      proxy: remote.proxy(),
      url: `${publicUrl}/echo`,
      timeoutMs: 5_000,
    });
    expect(published.exitIp).toBe(PROXY_EXIT);
    const ownLoopbackAsks = () => remote.requests.filter((r) => r.host === "127.0.0.1").length;
    const askedByTheTest = ownLoopbackAsks();

    const worker = await cluster.start("worker", { env: { OCTOPROX_PUBLIC_URL: publicUrl } });
    try {
      const connector = await cluster.createConnector(); // no check URL of its own
      const id = await cluster.addProxy(connector, remote.url());
      ids.push(id);
      await cluster.until(async () => (await cluster.status(id)) === "healthy", {
        timeoutMs: 15_000,
        message: "the remote proxy to turn healthy",
      });
      // Four more checks, more than the three that would make a failing proxy unhealthy.
      const checksBefore = forwardedTo(PUBLISHED_HOST, api.port);
      await staysHealthyUntil(
        () => forwardedTo(PUBLISHED_HOST, api.port) >= checksBefore + 4,
        "four more checks through the remote proxy",
      );
      // No check went to the proxy's own loopback.
      expect(ownLoopbackAsks()).toBe(askedByTheTest);
      // The start log said where checks go, and why there.
      expect(echoLine(worker)).toMatchObject({
        msg: expect.stringMatching(
          new RegExp(
            `^Health checks ask ${publicUrl}/echo through each proxy \\(OCTOPROX_PUBLIC_URL\\)`,
          ),
        ),
        echo_url: `${publicUrl}/echo`,
        echo_source: "OCTOPROX_PUBLIC_URL",
      });
    } finally {
      await worker.stop("SIGTERM");
    }
  });

  it("judges an echo outage by asking exactly the URL the checks ask", async () => {
    const worker = await cluster.start("worker", {
      env: { OCTOPROX_PUBLIC_URL: new URL(echo.url).origin },
    });
    try {
      const connector = await cluster.createConnector();
      const id = await cluster.addProxy(connector, remote.url());
      ids.push(id);
      await cluster.until(async () => (await cluster.status(id)) === "healthy", {
        timeoutMs: 15_000,
        message: "the remote proxy to turn healthy",
      });
      const throughProxy = () => echo.requests.get(PROXY_EXIT) ?? 0;
      // The worker asks from 127.0.0.1; checks through the proxy come from its exit.
      const direct = () => echo.requests.get("127.0.0.1") ?? 0;
      expect(throughProxy()).toBeGreaterThan(0);

      echo.setUp(false);
      try {
        const checksBefore = throughProxy();
        const outage = await cluster.logged(
          worker,
          "Echo endpoint does not answer; failed checks of it are not counted",
          { timeoutMs: 15_000 },
        );
        expect(outage.url).toBe(echo.url);
        expect(direct()).toBeGreaterThan(0);
        // Four failed checks of each proxy, more than the three that would make it unhealthy.
        await staysHealthyUntil(
          () => throughProxy() >= checksBefore + 4 * ids.length,
          "four checks of each proxy during the outage",
        );
      } finally {
        echo.setUp(true);
      }
      await cluster.logged(worker, "Echo endpoint answers again; its checks count again", {
        timeoutMs: 15_000,
      });
      expect(await cluster.status(id)).toBe("healthy");
      expect(echoLine(worker)).toMatchObject({ echo_url: echo.url });
    } finally {
      await worker.stop("SIGTERM");
    }
  });

  it("falls back to the public echo, and says so, with neither setting", async () => {
    // The cluster gives its processes OCTOPROX_PUBLIC_URL; empty is unset.
    const worker = await cluster.start("worker", { env: { OCTOPROX_PUBLIC_URL: "" } });
    try {
      expect(echoLine(worker)).toMatchObject({
        msg: "Health checks ask https://httpbin.org/ip through each proxy " +
          "(no OCTOPROX_PUBLIC_URL or OCTOPROX_ECHO_URL set: the public echo)",
        echo_source: "public echo",
      });
    } finally {
      await worker.stop("SIGTERM");
    }
  });
});
