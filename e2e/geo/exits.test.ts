/**
 * Where exits really are, through a real cluster (role all, one gateway) and three tinyproxies
 * leaving from their own loopback addresses, with no country declared anywhere:
 *
 * - the health checks see each exit through the echo; an operator's geofeed uploaded afterwards
 *   places 127.0.0.2 in Berlin (DE, DE-BE) and 127.0.0.3 in France, and the re-attribution it
 *   asks for writes the rows, saying the database placed them;
 * - `-cc-de`, `-cc-de-st-be`, `-cc-de-city-berlin` and `-cc-fr` reach only the matching exit
 *   through HTTP, CONNECT and SOCKS5; a state no exit was seen in is 502, never widened;
 * - the file replaced under traffic swaps whole: no request meanwhile leaves through an exit
 *   neither file places in the country asked, and the rows follow the new file;
 * - a Redis wipe loses only soft state: the rows keep their places, the controller finds the feed
 *   head gone and asks every exit to be judged again, and routing by place goes on;
 * - a process of role echo answers the caller's address placed by the databases in force.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { curl } from "../../testkit/clients/curl.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { exitOf, getThroughTunnel, viaProxy } from "../../testkit/clients/proxy-client.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { deletePrefix } from "../../testkit/stores.ts";
import {
  createRoutedProject,
  loggedPort,
  type RoutedProject,
  withOptions,
} from "../../testkit/routing.ts";

const BERLIN = "127.0.0.2";
const PARIS = "127.0.0.3";
const UNPLACED = "127.0.0.4";
const EXITS = [BERLIN, PARIS, UNPLACED];

let cluster: Cluster;
let origin: Origin;
let tinyproxies: Tinyproxy[];
let gateway: Gateway;
let project: RoutedProject;
let databaseId: string;

const ipUrl = () => `${origin.url}/ip`;

/** Uploads a file as the admin (the body as it is). */
async function upload(path: string, method: string, text: string) {
  const response = await fetch(`${cluster.api.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${await cluster.token()}`, "content-type": "text/csv" },
    body: text,
  });
  return { status: response.status, body: await response.json() as Record<string, unknown> };
}

interface Row {
  id: string;
  country: string | null;
  country_source: string | null;
  location: { ip: string | null; region: string | null; city: string | null } | null;
}

async function rows(): Promise<Map<string, Row>> {
  const answer = await cluster.request(
    "GET",
    `/api/v1/projects/${project.projectId}/proxies?limit=100`,
  );
  const items = (answer.body.items ?? answer.body) as Row[];
  return new Map(items.map((row) => [row.location?.ip ?? row.id, row]));
}

/** The exits a round of plain HTTP requests with `options` left through (502s as "502"). */
async function httpExits(options: string, count = 6): Promise<string[]> {
  const exits: string[] = [];
  for (let i = 0; i < count; i++) {
    const answer = await viaProxy(
      gateway.proxyPort,
      withOptions(project.credentials, options),
      ipUrl(),
    );
    exits.push(answer.status === 200 ? exitOf(answer) : String(answer.status));
  }
  return exits;
}

beforeAll(async () => {
  [cluster, origin, ...tinyproxies] = await Promise.all([
    Cluster.create(),
    startOrigin(),
    ...EXITS.map((bindAddress) => startTinyproxy({ bindAddress })),
  ]);
  await cluster.start("all");
  gateway = await cluster.startGateway();
  project = await createRoutedProject(cluster, tinyproxies.map((t) => t.url));
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([origin, ...(tinyproxies ?? [])].map((server) => server?.close()));
});

describe("exits placed by an operator's geofeed", () => {
  it("re-attributes the exits the checks saw once the file is uploaded", async () => {
    // Before any database places them, loopback exits have no country: -cc- finds none.
    await cluster.until(async () => (await rows()).has(BERLIN), {
      timeoutMs: 20_000,
      message: "the health checks to see the exits",
    });
    expect((await rows()).get(BERLIN)).toMatchObject({ country: null });
    expect(await httpExits("-cc-de", 1)).toEqual(["502"]);

    const added = await upload(
      "/api/v1/geo/databases?name=exits&format=geofeed",
      "POST",
      `# our exits\n${BERLIN}/32,DE,DE-BE,Berlin,10117\n${PARIS}/32,FR,,,\n`,
    );
    expect(added.status, JSON.stringify(added.body)).toBe(201);
    databaseId = added.body.id as string;

    await cluster.until(async () => {
      const placed = await rows();
      return placed.get(BERLIN)?.country === "DE" && placed.get(PARIS)?.country === "FR";
    }, { timeoutMs: 20_000, message: "the rows to be re-attributed" });
    const placed = await rows();
    expect(placed.get(BERLIN)).toMatchObject({
      country: "DE",
      country_source: "database",
      location: { ip: BERLIN, region: "DE-BE", city: "Berlin" },
    });
    expect(placed.get(PARIS)).toMatchObject({ country: "FR", country_source: "database" });
    expect(placed.get(UNPLACED)).toMatchObject({ country: null, country_source: null });
  });

  it("routes -cc-, -st- and -city- to the exits seen there, through HTTP", async () => {
    await cluster.until(async () => (await httpExits("-cc-de-st-be", 1))[0] === BERLIN, {
      timeoutMs: 10_000,
      message: "the gateway to route by the attributed places",
    });
    expect(new Set(await httpExits("-cc-de"))).toEqual(new Set([BERLIN]));
    expect(new Set(await httpExits("-cc-de-st-be"))).toEqual(new Set([BERLIN]));
    expect(new Set(await httpExits("-cc-de-city-berlin"))).toEqual(new Set([BERLIN]));
    expect(new Set(await httpExits("-cc-fr"))).toEqual(new Set([PARIS]));
    // No exit was seen in Bavaria or in Lyon: refused, never widened to the country.
    expect(await httpExits("-cc-de-st-by", 1)).toEqual(["502"]);
    expect(await httpExits("-cc-fr-city-lyon", 1)).toEqual(["502"]);
    // Without a place, every exit still serves.
    expect(new Set(await httpExits("", 9))).toEqual(new Set(EXITS));
  });

  it("routes the same through CONNECT and SOCKS5", async () => {
    for (const [options, exit] of [["-cc-de-st-be", BERLIN], ["-cc-fr", PARIS]] as const) {
      for (let i = 0; i < 3; i++) {
        const tunnelled = await getThroughTunnel(
          gateway.proxyPort,
          withOptions(project.credentials, options),
          ipUrl(),
        );
        expect(exitOf(tunnelled)).toBe(exit);
      }
      const { username, password } = withOptions(project.credentials, options);
      const port = loggedPort(gateway, "SOCKS5 listener bound");
      for (let i = 0; i < 3; i++) {
        const answer = await curl(
          ["-x", `socks5h://${username}:${password}@127.0.0.1:${port}`, ipUrl()],
          10_000,
        );
        expect(answer.code, answer.stderr).toBe(0);
        expect(JSON.parse(answer.stdout).ip).toBe(exit);
      }
    }
  });

  it("a file replaced under traffic swaps whole and re-attributes", async () => {
    // Traffic for DE while the operator's new file moves Berlin's exit to Austria and places
    // the third exit in Berlin: every answer is one of the two files' Berlin, or a refusal
    // while no row is placed there.
    const seen = new Set<string>();
    let stop = false;
    const traffic = (async () => {
      while (!stop) for (const exit of await httpExits("-cc-de-st-be", 1)) seen.add(exit);
    })();
    const replaced = await upload(
      `/api/v1/geo/databases/${databaseId}/file`,
      "PUT",
      `${BERLIN}/32,AT,AT-9,Vienna,\n${PARIS}/32,FR,,,\n${UNPLACED}/32,DE,DE-BE,Berlin,\n`,
    );
    expect(replaced.status, JSON.stringify(replaced.body)).toBe(200);
    await cluster.until(async () => (await rows()).get(BERLIN)?.country === "AT", {
      timeoutMs: 20_000,
      message: "the rows to follow the new file",
    });
    await cluster.until(async () => (await httpExits("-cc-de-st-be", 1))[0] === UNPLACED, {
      timeoutMs: 10_000,
      message: "the gateway to route Berlin through the exit the new file places there",
    });
    stop = true;
    await traffic;
    expect([...seen].every((exit) => [BERLIN, UNPLACED, "502"].includes(exit))).toBe(true);
    expect(seen.has(PARIS)).toBe(false);
    const placed = await rows();
    expect(placed.get(BERLIN)).toMatchObject({
      country: "AT",
      location: { region: "AT-9", city: "Vienna" },
    });
    expect(placed.get(UNPLACED)).toMatchObject({ country: "DE", country_source: "database" });
    expect(new Set(await httpExits("-cc-at"))).toEqual(new Set([BERLIN]));
  });

  it("refuses a file that is not a geofeed, naming its lines, and keeps the one in force", async () => {
    const refused = await upload(
      `/api/v1/geo/databases/${databaseId}/file`,
      "PUT",
      `${BERLIN}/32,Germany,,,\nnot-a-prefix,FR,,,\n`,
    );
    expect(refused.status).toBe(422);
    expect(JSON.stringify(refused.body)).toMatch(/line 1/);
    expect(JSON.stringify(refused.body)).toMatch(/line 2/);
    expect((await rows()).get(BERLIN)).toMatchObject({ country: "AT" });
  });

  it("a Redis wipe loses no place: every exit is judged again and routing by place goes on", async () => {
    const all = cluster.members.find((m) => m.role === "all")!;
    const judgedBefore =
      all.logs().filter((l) => l.msg === "Exits re-attributed" && l.scope === "all").length;
    await deletePrefix(cluster.redisUrl, cluster.prefix);
    await cluster.until(
      () =>
        all.logs().some((l) => l.msg === "Feed head found gone; published whole") &&
        all.logs().filter((l) => l.msg === "Exits re-attributed" && l.scope === "all").length >
          judgedBefore,
      {
        timeoutMs: 20_000,
        message: "the controller to find the head gone and ask a re-attribution",
      },
    );
    const placed = await rows();
    expect(placed.get(BERLIN)).toMatchObject({ country: "AT", location: { city: "Vienna" } });
    expect(placed.get(UNPLACED)).toMatchObject({ country: "DE", location: { region: "DE-BE" } });
    await cluster.until(async () => (await httpExits("-cc-de-st-be", 1))[0] === UNPLACED, {
      timeoutMs: 10_000,
      message: "routing by place after the wipe",
    });
  });

  it("an echo process answers the caller placed by the databases in force, and its nonce", async () => {
    const echo = await cluster.start("echo");
    const answer = await curl(["--interface", BERLIN, `${echo.url}/echo?nonce=e2e-1`], 10_000);
    expect(answer.code, answer.stderr).toBe(0);
    expect(JSON.parse(answer.stdout)).toEqual({
      ip: BERLIN,
      nonce: "e2e-1",
      country: "AT",
      region: "AT-9",
      city: "Vienna",
      asn: null,
    });
    // Nothing but the echo and the probes: the admin API is not there.
    const api = await fetch(`${echo.url}/api/v1/projects`);
    await api.body?.cancel();
    expect(api.status).toBe(404);
    await echo.stop();
  });
});
