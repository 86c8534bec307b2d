/**
 * Stopping with Redis gone, on a PRIVATE Redis server this file starts and stops: every process
 * still exits within the documented bound (docs/operations.md, "Stop": 10 s with the default
 * settings), and a second signal ends it at once.
 *
 * - gateways with no feed applied yet (a prefix no controller publishes under), with a feed
 *   applied and idle, and with a slow download in flight through tinyproxy (two isolates):
 *   each exits 0 within the bound and logs what Redis did not take, as counts;
 * - a control process of each role (api, controller, worker, all) exits 0 within the bound;
 * - a second SIGTERM, sent once the first stop is under way, ends a gateway and a control
 *   process with 1. These two run on a "Redis" that accepts connections and never answers (a
 *   partition, not a refusal), so every Redis wait of their stop runs to its deadline and the
 *   first stop is surely still going when the second signal comes.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { connect, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LocalRedis } from "../../scripts/local-stores.ts";
import { freePort } from "../../testkit/ports.ts";
import { Cluster, type Gateway, type LogLine, type Member } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { viaProxy } from "../../testkit/clients/proxy-client.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { createRoutedProject, type RoutedProject, untilAnswer } from "../../testkit/routing.ts";

/** docs/operations.md: 5 s for connections, twice the request deadline (2 s), 1 s of room. */
const STOP_BOUND_MS = 10_000;
/** "At once": the process's own exit, with room for a loaded machine. */
const AT_ONCE_MS = 1_500;
const FEED_FAILURES = "octoprox_gateway_feed_failures_total";
const CONTROL_ROLES = ["api", "controller", "worker", "all"] as const;

let folder: string;
let redis: LocalRedis;
let cluster: Cluster;
let origin: Origin;
let tinyproxy: Tinyproxy;
let project: RoutedProject;
let noFeed: Gateway;
let withFeed: Gateway;
let busy: Gateway;
let twice: Gateway;
let controls: Member[];
let controlTwice: Member;
/** An api on the silent Redis, stopped once: the bound holds behind a partition too. */
let silentApi: Member;
let download: Promise<unknown>;
/** Accepts and never answers: a Redis behind a partition. */
let blackHole: Server | undefined;
const held: Socket[] = [];

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-stop-"));
  redis = new LocalRedis({ dir: join(folder, "redis"), port: await freePort() });
  [origin, tinyproxy] = await Promise.all([startOrigin(), startTinyproxy(), redis.start()]);
  cluster = await Cluster.create({ redisUrl: redis.url });
  const all = await cluster.start("all");
  controls = [
    all,
    ...await Promise.all(
      CONTROL_ROLES.filter((role) => role !== "all").map((role) => cluster.start(role)),
    ),
  ];
  blackHole = createServer((socket) => {
    held.push(socket);
    socket.on("error", () => {});
  });
  const blackHolePort = await freePort();
  await new Promise<void>((resolve) => blackHole!.listen(blackHolePort, "127.0.0.1", resolve));
  const silentRedis = { OCTOPROX_REDIS_URL: `redis://127.0.0.1:${blackHolePort}` };
  // An api serves without Redis, so it starts on one that never answers.
  [controlTwice, silentApi] = await Promise.all([
    cluster.start("api", { env: silentRedis }),
    cluster.start("api", { env: silentRedis }),
  ]);
  project = await createRoutedProject(cluster, [tinyproxy.url]);
  [noFeed, withFeed, busy, twice] = await Promise.all([
    // No controller publishes under this prefix: the gateway never gets a feed.
    cluster.startGateway({
      ready: false,
      env: { OCTOPROX_REDIS_PREFIX: `${cluster.prefix}nofeed:` },
    }),
    cluster.startGateway(),
    cluster.startGateway({ env: { OCTOPROX_GATEWAY_ISOLATES: "2" } }),
    // Beats every 0.2 s, each waiting out the request deadline: one is always under way, and
    // the stop waits for it.
    cluster.startGateway({
      ready: false,
      env: { ...silentRedis, OCTOPROX_HEARTBEAT_INTERVAL: "0.2" },
    }),
  ]);
  for (const gateway of [withFeed, busy]) {
    await untilAnswer(
      cluster,
      gateway,
      project.credentials,
      `${origin.url}/ip`,
      (answer) => answer.status === 200,
    );
  }
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  for (const socket of held) socket.destroy();
  await new Promise<void>((resolve) => blackHole ? blackHole.close(() => resolve()) : resolve());
  await cluster?.close();
  await Promise.all([origin?.close(), tinyproxy?.close()]);
  await redis?.stop();
  if (folder) await rm(folder, { recursive: true, force: true });
});

/** SIGTERM, then the exit: its code and how long it took. */
async function timedStop(member: Member): Promise<{ code: number | null; ms: number }> {
  const started = performance.now();
  const exit = await member.stop("SIGTERM", 60_000);
  return { code: exit.code, ms: performance.now() - started };
}

function finalSends(member: Member): LogLine[] {
  return member.logs().filter((line) => line.msg.startsWith("Final sends"));
}

function owedRows(member: Member): number {
  return finalSends(member).reduce((sum, line) => sum + Number(line.metering_rows_owed), 0);
}

describe("stopping with Redis gone", () => {
  it("a gateway exits within the bound, without a feed, with one, with transfers in flight", async () => {
    // Only ever this file's own server.
    expect(cluster.redisUrl).toBe(redis.url);
    // A slow download through the busy gateway: a minute of chunks, cut by the stop.
    const requestsBefore = origin.requests;
    download = viaProxy(
      busy.proxyPort,
      project.credentials,
      `${origin.url}/slow?chunks=600&delayMs=100`,
      { timeoutMs: 120_000 },
    ).catch((error) => error);
    await cluster.until(() => origin.requests > requestsBefore && origin.connectionsOpen > 0, {
      message: "the slow download to reach the origin",
    });

    await redis.stop();
    // As in an outage: each gateway's follower has failed and is retrying when the stop comes.
    await cluster.until(async () => {
      const failures = await Promise.all(
        [noFeed, withFeed, busy].map((gateway) => gateway.metric(FEED_FAILURES)),
      );
      return failures.every((count) => count >= 2);
    }, { timeoutMs: 30_000, message: "every gateway's feed reads to fail twice" });
    const [a, b, c] = await Promise.all([noFeed, withFeed, busy].map(timedStop));
    console.info(`stopped in ${[a, b, c].map((s) => Math.round(s.ms)).join(", ")} ms`);
    for (const stop of [a, b, c]) {
      expect(stop.code).toBe(0);
      expect(stop.ms).toBeLessThan(STOP_BOUND_MS);
    }
    for (const gateway of [noFeed, withFeed, busy]) {
      const lines = finalSends(gateway);
      expect(lines.length).toBeGreaterThan(0);
      for (const line of lines) {
        for (
          const field of [
            "metering_parts_owed",
            "metering_rows_owed",
            "rate_limit_requests_dropped",
            "failure_examples_dropped",
          ]
        ) expect(typeof line[field]).toBe("number");
      }
      expect(gateway.logs().at(-1)?.msg).toBe("Stopped");
    }
    // The download was counted and never reached Redis: the stop says how much is owed.
    expect(owedRows(busy)).toBeGreaterThan(0);
    expect(finalSends(busy).some((line) => line.level === "warn")).toBe(true);
    // The client saw its download end with the gateway, not hang.
    await download;
  });

  it("a control process of every role exits within the bound", async () => {
    expect(redis.pid).toBeUndefined(); // stopped by the test before
    const members = [...controls, silentApi];
    const stops = await Promise.all(members.map(timedStop));
    console.info(
      `stopped ${
        members.map((member, i) => `${member.role} in ${Math.round(stops[i].ms)} ms`).join(", ")
      }`,
    );
    for (const stop of stops) {
      expect(stop.code).toBe(0);
      expect(stop.ms).toBeLessThan(STOP_BOUND_MS);
    }
  });

  it("a second signal ends a stop under way at once", async () => {
    await cluster.until(() => held.length >= 2, { message: "both to connect to the silent Redis" });
    // A request whose head never ends: the api's stop gives it its 5 s of grace.
    const partial = connect(controlTwice.port, "127.0.0.1");
    partial.on("error", () => {});
    await new Promise<void>((resolve) => partial.once("connect", () => resolve()));
    partial.write("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    held.push(partial);
    for (const member of [twice, controlTwice]) {
      member.child.kill("SIGTERM");
      await cluster.logged(member, "Stop requested");
      const again = performance.now();
      const exit = await member.stop("SIGTERM", 30_000);
      const ms = performance.now() - again;
      expect(exit.code, member.instance).toBe(1);
      expect(member.stderr.join("\n")).toMatch(/SIGTERM again; exiting without finishing the stop/);
      expect(ms).toBeLessThan(AT_ONCE_MS);
    }
  });
});
