/**
 * Sticky sessions through real gateways (gateway/main.ts under Deno) in front of a real control
 * plane (role all), three tinyproxy exits (127.0.0.2, .3, .4) and a PRIVATE Redis server this
 * file starts (the flush below must never reach the test bed's Redis). The project is `user`
 * with strategy `sticky`, made through the API; its proxies are in DE, FR and NL, so a request
 * with `-cc-<country>` can only leave through one of them.
 *
 * Hash placement makes gateways agree without Redis, so a binding read from Redis is told apart
 * from one placed afresh by steering a session away from its hash's proxy first: a request of
 * the session with `-cc-` naming another proxy's country moves the binding there (the bound
 * proxy does not serve that place), and that binding is one no hash would give.
 *
 * - without `-sessid-`, sticky behaves as random: every exit is seen;
 * - `user-sessid-abc` keeps one exit across many requests on one gateway, and a second gateway
 *   serves the session's first request there from the binding in Redis;
 * - the session moves when its proxy turns unhealthy (once the feed carries that) and stays on
 *   its new exit, also after the old one is healthy again;
 * - a binding survives a gateway restart through Redis;
 * - the api's routing preview names the proxy a real request leaves through: `-cc-de`'s, a new
 *   session's (placed by the same hash), and a steered session's (read from its Redis binding);
 * - a FLUSHALL under steady session traffic through both gateways fails no request, and a
 *   session whose first request on a gateway comes after it is placed afresh.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LocalRedis } from "../../scripts/local-stores.ts";
import { freePort } from "../../testkit/ports.ts";
import { curl } from "../../testkit/clients/curl.ts";
import { TEST_REDIS_URL } from "../../testkit/stores.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import {
  ClientConnection,
  type Credentials,
  exitOf,
  type ProxyAnswer,
  viaProxy,
} from "../../testkit/clients/proxy-client.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { untilAnswer, untilEachPlaceServed, waitForStatuses } from "../../testkit/routing.ts";

const EXITS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];
const COUNTRIES = ["DE", "FR", "NL"];
const PROJECT_USERNAME = "user";
/** Requests per "many requests" check. */
const MANY = 20;

let folder: string;
let redis: LocalRedis;
let cluster: Cluster;
let origin: Origin;
let tinyproxies: Tinyproxy[];
/** The two gateways; `gateways[0]` is replaced by the restart test. */
const gateways: Gateway[] = [];
let projectId: string;
let proxyIds: string[];
const password = `pw-${randomBytes(8).toString("hex")}`;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-gw-sticky-"));
  redis = new LocalRedis({ dir: join(folder, "redis"), port: await freePort() });
  [origin, tinyproxies] = await Promise.all([
    startOrigin(),
    Promise.all(EXITS.map((bindAddress) => startTinyproxy({ bindAddress }))),
    redis.start(),
  ]);
  cluster = await Cluster.create({ redisUrl: redis.url });
  await cluster.start("all");
  gateways.push(...await Promise.all([cluster.startGateway(), cluster.startGateway()]));

  // The project, as an admin makes it: strategy sticky, one static connector, a proxy a country.
  const project = await cluster.request("POST", "/api/v1/projects", {
    name: "sticky sessions",
    username: PROJECT_USERNAME,
    password,
    strategy: "sticky",
  });
  expect(project.status).toBe(201);
  expect(project.body.strategy).toBe("sticky");
  projectId = project.body.id;
  const connector = await cluster.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    name: "static",
    kind: "static",
  });
  expect(connector.status).toBe(201);
  proxyIds = [];
  for (const [index, tinyproxy] of tinyproxies.entries()) {
    const proxy = await cluster.request("POST", `/api/v1/projects/${projectId}/proxies`, {
      connector_id: connector.body.id,
      url: tinyproxy.url,
      country: COUNTRIES[index],
    });
    expect(proxy.status).toBe(201);
    proxyIds.push(proxy.body.id);
  }
  await waitForStatuses(cluster, proxyIds, "healthy");
  // Every gateway routes each country through its one proxy: the feed with all three healthy
  // has reached it.
  await everyCountryServed(gateways);
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([origin, ...(tinyproxies ?? [])].map((server) => server?.close()));
  await redis?.stop();
  if (folder) await rm(folder, { recursive: true, force: true });
});

const ipUrl = () => `${origin.url}/ip`;

/** `user[-cc-<country>][-sessid-<session>]` with the project's password. */
function as(options: { session?: string; country?: string } = {}): Credentials {
  let username = PROJECT_USERNAME;
  if (options.country) username += `-cc-${options.country.toLowerCase()}`;
  if (options.session !== undefined) username += `-sessid-${options.session}`;
  return { username, password };
}

/** One GET of /ip through the gateway on a connection of its own; answers the exit. */
async function exitVia(gateway: Gateway, credentials: Credentials): Promise<string> {
  return exitOf(await viaProxy(gateway.proxyPort, credentials, ipUrl(), { timeoutMs: 5_000 }));
}

/**
 * `count` GETs of /ip through the gateway: half on one keep-alive connection, half on
 * connections of their own, one through curl. Answers every exit seen.
 */
async function exitsVia(gateway: Gateway, credentials: Credentials, count: number) {
  const exits: string[] = [];
  const connection = new ClientConnection();
  try {
    for (let i = 0; i < count; i++) {
      const options = i % 2 === 0 ? { connection } : {};
      exits.push(exitOf(await viaProxy(gateway.proxyPort, credentials, ipUrl(), options)));
    }
  } finally {
    connection.close();
  }
  const viaCurl = await curl(["-x", gateway.proxyUrl(credentials.username, password), ipUrl()]);
  expect(viaCurl.stderr).toBe("");
  exits.push((JSON.parse(viaCurl.stdout) as { ip: string }).ip);
  return exits;
}

/** Waits until each gateway serves `-cc-<country>` through that country's one exit. */
async function everyCountryServed(through: readonly Gateway[]): Promise<void> {
  await untilEachPlaceServed(
    cluster,
    through,
    ipUrl(),
    COUNTRIES.map((country, index) => ({
      name: country,
      credentials: as({ country }),
      exit: EXITS[index],
    })),
  );
}

/** The proxy id the session's binding in Redis names, or null. */
function storedBinding(session: string): Promise<string | null> {
  return cluster.redis.get(cluster.keys.sticky(projectId, session));
}

/** Waits until the session's Redis copy names proxy `index` (written by a background task). */
async function untilStored(session: string, index: number): Promise<void> {
  await cluster.until(async () => (await storedBinding(session)) === proxyIds[index], {
    timeoutMs: 5_000,
    message: `the binding of ${session} in Redis to name ${EXITS[index]}'s proxy`,
  });
}

/**
 * Moves the session's binding on `gateway` to proxy `index`: a request asking for that proxy's
 * country, which the bound proxy does not serve, binds the session afresh among what does.
 */
async function steer(gateway: Gateway, session: string, index: number): Promise<void> {
  expect(await exitVia(gateway, as({ session, country: COUNTRIES[index] }))).toBe(EXITS[index]);
}

/** Every exit of `exits` is `exit`. */
function allAt(exits: readonly string[], exit: string): void {
  expect(new Set(exits)).toEqual(new Set([exit]));
}

function indexOfExit(exit: string): number {
  const index = EXITS.indexOf(exit);
  expect(index).toBeGreaterThanOrEqual(0);
  return index;
}

/** Where the session's hash places it over all three proxies (its first request, no binding). */
const hashPlace = new Map<string, number>();
/** The abc session's proxy (an index of EXITS) as the tests leave it. */
let abcAt: number;

describe("sticky without -sessid-", () => {
  it("behaves as random: requests spread over every exit", async () => {
    for (const gateway of gateways) {
      const seen = new Set<string>();
      // Random over three exits: 60 requests miss one with probability 3 * (2/3)^60 ≈ 1e-10.
      for (let i = 0; i < 60 && seen.size < EXITS.length; i++) {
        seen.add(await exitVia(gateway, as()));
      }
      expect(seen).toEqual(new Set(EXITS));
    }
    // And it binds nothing: no session key was written.
    expect(await cluster.redis.keys(`${cluster.prefix}sticky:*`)).toEqual([]);
  });
});

describe("user-sessid-abc", () => {
  it("keeps one exit across many requests, and across two gateways through Redis", async () => {
    const [first, second] = gateways;
    const session = "abc";
    // Its first request anywhere: no binding in Redis, so the hash places it.
    expect(await storedBinding(session)).toBeNull();
    const hashed = indexOfExit(await exitVia(first, as({ session })));
    hashPlace.set(session, hashed);
    await untilStored(session, hashed);
    allAt(await exitsVia(first, as({ session }), MANY), EXITS[hashed]);

    // Steered to a proxy no hash gives it (see the file's header).
    const bound = (hashed + 1) % EXITS.length;
    await steer(first, session, bound);
    allAt(await exitsVia(first, as({ session }), MANY), EXITS[bound]);
    // The Redis copy names the new proxy and lives the session's five minutes.
    await untilStored(session, bound);
    const life = await cluster.redis.pttl(cluster.keys.sticky(projectId, session));
    expect(life).toBeGreaterThan(280_000);
    expect(life).toBeLessThanOrEqual(300_000);

    // The second gateway never saw the session: its first request reads the binding (a hash
    // placement would give EXITS[hashed]), and every request after keeps it.
    expect(await exitVia(second, as({ session }))).toBe(EXITS[bound]);
    allAt(await exitsVia(second, as({ session }), MANY), EXITS[bound]);
    allAt(await exitsVia(first, as({ session }), 4), EXITS[bound]);
    abcAt = bound;
  });

  it("moves when its proxy turns unhealthy, and stays on the new exit", async () => {
    const session = "abc";
    const dead = abcAt;
    const port = tinyproxies[dead].port;
    await tinyproxies[dead].close();
    await waitForStatuses(cluster, [proxyIds[dead]], "unhealthy");
    // The feed says so on each gateway: the dead proxy's country, which only it serves, is
    // answered "down" by the router rather than dialed (a dial would be refused: 502).
    for (const gateway of gateways) {
      await untilAnswer(
        cluster,
        gateway,
        as({ country: COUNTRIES[dead] }),
        ipUrl(),
        (answer: ProxyAnswer) =>
          answer.status === 503 &&
          answer.body.trim() === "Every upstream proxy for this request is down",
        { message: `${gateway.instance} to route without ${EXITS[dead]}` },
      );
    }

    // No request of the session went anywhere since the proxy died: it moves now because the
    // feed took the proxy out of routing, not because a request of its failed.
    const [first, second] = gateways;
    const moved = await exitVia(first, as({ session }));
    expect(moved).not.toBe(EXITS[dead]);
    allAt(await exitsVia(first, as({ session }), MANY), moved);
    // The other gateway's binding (in memory) moves too, to the same exit: both place the
    // session by its hash over the same two proxies.
    allAt(await exitsVia(second, as({ session }), MANY), moved);
    await untilStored(session, indexOfExit(moved));

    // The old proxy comes back (same address): healthy and routed again...
    tinyproxies[dead] = await startTinyproxy({ bindAddress: EXITS[dead], port });
    await waitForStatuses(cluster, [proxyIds[dead]], "healthy");
    await everyCountryServed(gateways);
    // ...and the session stays where it moved.
    for (const gateway of gateways) allAt(await exitsVia(gateway, as({ session }), MANY), moved);
    abcAt = indexOfExit(moved);
  });

  it("keeps its binding across a gateway restart, through Redis", async () => {
    const session = "abc";
    const hashed = hashPlace.get(session)!;
    // A binding no hash over the three healthy proxies gives: neither the hash's proxy nor
    // (so the step is a real move) the current one.
    const bound = [0, 1, 2].find((index) => index !== hashed && index !== abcAt)!;
    const old = gateways[0];
    await steer(old, session, bound);
    allAt(await exitsVia(old, as({ session }), 4), EXITS[bound]);
    await untilStored(session, bound);

    // The same gateway, restarted on its proxy port: a process with empty memory.
    const proxyPort = old.proxyPort;
    const exit = await old.stop("SIGTERM", 10_000);
    expect(exit.code).toBe(0);
    const restarted = await cluster.startGateway({ instance: old.instance, proxyPort });
    gateways[0] = restarted;
    expect(restarted.child.pid).not.toBe(old.child.pid);
    expect(restarted.proxyPort).toBe(proxyPort);

    // Its first request of the session reads the binding from Redis; later ones keep it.
    expect(await exitVia(restarted, as({ session }))).toBe(EXITS[bound]);
    allAt(await exitsVia(restarted, as({ session }), MANY), EXITS[bound]);
    abcAt = bound;
  });
});

/**
 * Session requests through gateways, each gateway's loop going round the sessions, until
 * stopped. Records every exit per gateway and session, and every request that failed.
 */
class SessionLoad {
  readonly exits = new Map<string, Set<string>>();
  readonly failures: string[] = [];
  done = 0;
  #stopped = false;
  readonly #loops: Promise<void>[];

  constructor(through: readonly Gateway[], sessions: readonly string[]) {
    this.#loops = through.map(async (gateway, g) => {
      for (let i = 0; !this.#stopped; i++) {
        const session = sessions[(i + g) % sessions.length];
        try {
          const answer = await viaProxy(gateway.proxyPort, as({ session }), ipUrl(), {
            timeoutMs: 5_000,
          });
          if (answer.status !== 200) {
            this.failures.push(`${gateway.instance} ${session}: ${answer.status} ${answer.body}`);
          } else {
            const key = `${gateway.instance}:${session}`;
            if (!this.exits.has(key)) this.exits.set(key, new Set());
            this.exits.get(key)!.add(exitOf(answer));
            this.done++;
          }
        } catch (error) {
          this.failures.push(`${gateway.instance} ${session}: ${(error as Error).message}`);
        }
        // A steady trickle, not a flood: pacing the load, not waiting for anything.
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#loops);
  }
}

describe("the api's routing preview", () => {
  /** The preview's `chosen` proxy id for a username. */
  async function previewed(username: string): Promise<string> {
    const answer = await cluster.request(
      "POST",
      `/api/v1/projects/${projectId}/routing-preview`,
      { username },
    );
    expect(answer.status).toBe(200);
    expect(answer.body.refusal).toBeNull();
    return answer.body.chosen.id;
  }

  it("names the proxy a real request leaves through: by place, by hash, by binding", async () => {
    // -cc-de: the DE proxy, which the exit seen by the origin confirms.
    expect(await previewed("user-cc-de")).toBe(proxyIds[0]);
    expect(await exitVia(gateways[0], as({ country: "DE" }))).toBe(EXITS[0]);

    // A new session: the preview places it by the gateways' hash and binds nothing, so the
    // session's first real request is placed the same way, on either gateway.
    const session = `preview-${randomBytes(4).toString("hex")}`;
    const hashed = proxyIds.indexOf(await previewed(`user-sessid-${session}`));
    expect(hashed).toBeGreaterThanOrEqual(0);
    expect(await storedBinding(session)).toBeNull();
    expect(await exitVia(gateways[1], as({ session }))).toBe(EXITS[hashed]);
    await untilStored(session, hashed);

    // Steered away from its hash by a real request, the session's Redis binding is what the
    // preview follows.
    const bound = (hashed + 1) % EXITS.length;
    await steer(gateways[1], session, bound);
    await untilStored(session, bound);
    expect(await previewed(`user-sessid-${session}`)).toBe(proxyIds[bound]);
    expect(await exitVia(gateways[0], as({ session }))).toBe(EXITS[bound]);
  });
});

describe("a Redis flush", () => {
  it("fails no request, and places sessions afresh", async () => {
    // Only ever this file's own server.
    expect(cluster.redisUrl).toBe(redis.url);
    expect(cluster.redisUrl).not.toBe(TEST_REDIS_URL);
    const [first, second] = gateways;

    // A session bound on the first gateway only, steered off its hash's proxy.
    const session = "flushed";
    const hashed = indexOfExit(await exitVia(first, as({ session })));
    const bound = (hashed + 1) % EXITS.length;
    await steer(first, session, bound);
    await untilStored(session, bound);

    const steady = ["s1", "s2", "s3", "s4", "s5"];
    const load = new SessionLoad(gateways, steady);
    let answeredAfter = 0;
    try {
      await cluster.until(() => load.done >= 40, { message: "session requests before the flush" });
      await cluster.redis.flushall();
      const atFlush = load.done;
      expect(await storedBinding(session)).toBeNull();
      expect(await cluster.redis.get(cluster.keys.feedHead)).toBeNull();

      // The session's first request on the second gateway finds no binding to read: placed
      // afresh, by its hash (before the flush it would have read EXITS[bound], as abc did).
      expect(await exitVia(second, as({ session }))).toBe(EXITS[hashed]);
      await untilStored(session, hashed);
      // The first gateway still holds its own binding in memory and keeps it.
      allAt(await exitsVia(first, as({ session }), 4), EXITS[bound]);
      // A session new to both gateways lands on one exit through either.
      const fresh = await exitVia(first, as({ session: "after-flush" }));
      expect(await exitVia(second, as({ session: "after-flush" }))).toBe(fresh);

      // The controller publishes the feed whole again and the gateways follow it.
      await cluster.until(async () => (await cluster.redis.get(cluster.keys.feedHead)) !== null, {
        timeoutMs: 20_000,
        message: "the feed head to be published again",
      });
      await cluster.until(() => load.done >= atFlush + 40, {
        message: "session requests after the flush",
      });
      answeredAfter = load.done - atFlush;
    } finally {
      await load.stop();
    }
    console.info(`flush under load: ${load.done} session requests, ${answeredAfter} after it`);
    expect(load.failures).toEqual([]);
    // Each steady session kept its one exit on each gateway throughout: bound in memory before
    // the flush, never moved by it.
    for (const gateway of gateways) {
      for (const name of steady) {
        expect(load.exits.get(`${gateway.instance}:${name}`)?.size, name).toBe(1);
      }
    }
  });
});
