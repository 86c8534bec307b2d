/**
 * A backup moves an install: system A (a real control plane, role all, and a gateway) serves a
 * routed project through tinyproxy; its encrypted export is imported into system B, a second
 * cluster on an empty database and Redis prefix of its own; B's gateway, started after, serves
 * the same project username and password, B lists the same projects to A's admin (B's own
 * admin is gone with the rows it replaced), and the import appended one `all` change entry.
 */
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { curl } from "../../testkit/clients/curl.ts";
import { type ApiAnswer, Cluster } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { createRoutedProject, type RoutedProject, untilAnswer } from "../../testkit/routing.ts";

const PASSPHRASE = "a passphrase for the move";

let a: Cluster;
let b: Cluster;
let origin: Origin;
let tinyproxy: Tinyproxy;
let project: RoutedProject;

beforeAll(async () => {
  [a, b, origin, tinyproxy] = await Promise.all([
    Cluster.create(),
    Cluster.create(),
    startOrigin(),
    startTinyproxy({ bindAddress: "127.0.0.2" }),
  ]);
  await a.start("all");
  const gateway = await a.startGateway();
  project = await createRoutedProject(a, [tinyproxy.url]);
  await untilAnswer(
    a,
    gateway,
    project.credentials,
    `${origin.url}/ip`,
    (answer) => answer.status === 200,
  );
});

afterEach((context) => {
  if (context.task.result?.state === "fail") {
    a.dump();
    b?.dump();
  }
});

afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
  await Promise.all([origin?.close(), tinyproxy?.close()]);
});

/** A request to a cluster's api as the holder of `token`. */
async function asUser(
  cluster: Cluster,
  token: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<ApiAnswer> {
  const response = await fetch(`${cluster.api.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: response.status, body: await response.json() };
}

async function login(cluster: Cluster, username: string, password: string): Promise<string> {
  const response = await fetch(`${cluster.api.url}/api/v1/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ username, password }),
  });
  const body = await response.json();
  if (response.status !== 200) throw new Error(`Login failed: ${JSON.stringify(body)}`);
  return body.access_token;
}

it("an export of A imported into an empty B serves A's project through B's gateway", async () => {
  const exported = await a.request("POST", "/api/v1/backup/export", {
    passphrase: PASSPHRASE,
    include_history: true,
  });
  expect(exported.status).toBe(200);
  expect(exported.body.format).toBe("octoprox-backup");

  await b.start("all");
  // B's first admin signs in and imports; B knows nothing of A's project yet.
  expect((await b.request("GET", "/api/v1/projects")).body).toEqual([]);
  const lastChange = await b.lastChangeId();
  const imported = await b.request("POST", "/api/v1/backup/import", {
    passphrase: PASSPHRASE,
    backup: exported.body,
  });
  expect(imported.status, JSON.stringify(imported.body)).toBe(200);
  expect(imported.body.restored).toMatchObject({ projects: 1, connectors: 1, proxies: 1 });
  expect((await b.changes(lastChange)).map(({ kind, ref }) => ({ kind, ref }))).toEqual([
    { kind: "all", ref: "*" },
  ]);

  // The users are A's now: B's admin login is gone, A's works.
  expect((await b.request("GET", "/api/v1/projects")).status).toBe(401);
  const tokenOfA = await login(b, a.adminLogin.username, a.adminLogin.password);
  const projectsOfA = await a.request("GET", "/api/v1/projects");
  const projectsOfB = await asUser(b, tokenOfA, "GET", "/api/v1/projects");
  expect(projectsOfB.status).toBe(200);
  expect(projectsOfB.body).toEqual(projectsOfA.body);
  expect(projectsOfB.body.map((p: { id: string }) => p.id)).toEqual([project.projectId]);

  // A gateway of B, started after the import, serves the same username and password.
  const gateway = await b.startGateway();
  const { username, password } = project.credentials;
  await untilAnswer(
    b,
    gateway,
    project.credentials,
    `${origin.url}/ip`,
    (answer) => answer.status === 200,
  );
  const answer = await curl(["-x", gateway.proxyUrl(username, password), `${origin.url}/ip`]);
  expect(answer.stderr).toBe("");
  expect(JSON.parse(answer.stdout).ip).toBe("127.0.0.2");
  const refused = await curl([
    "-s",
    "-o",
    "/dev/null",
    "-w",
    "%{http_code}",
    "-x",
    gateway.proxyUrl(username, "not-the-password"),
    `${origin.url}/ip`,
  ]);
  expect(refused.stdout).toBe("407");
});
