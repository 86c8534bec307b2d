/**
 * A control process started with OCTOPROX_CONFIG_FILE (role all, a real gateway, tinyproxy as
 * the upstream): the file's project is routed from the start; a broken file, reloaded, changes
 * nothing and names every error; a good one, reloaded through the API or by SIGHUP, is routed
 * by the gateway within seconds.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, expect, test } from "vitest";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { untilAnswer } from "../../testkit/routing.ts";

let cluster: Cluster;
let origin: Origin;
let tinyproxy: Tinyproxy;
let gateway: Gateway;
let folder: string;
let file: string;

const PASSWORDS = { ALPHA_PASSWORD: "alpha-pass-1", BETA_PASSWORD: "beta-pass-1" };

/** A file of projects, each with one static connector holding the tinyproxy. */
function configFile(projects: string[], extra = ""): string {
  const entries = projects.map((name) =>
    `  - name: ${name}
    username: ${name}
    password: \${${name.toUpperCase()}_PASSWORD}
    strategy: round_robin
    connectors:
      - name: static
        proxies:
          - ${tinyproxy.url}
`
  );
  return `version: 1\nprojects:\n${entries.join("")}${extra}`;
}

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-config-"));
  file = join(folder, "octoprox.yaml");
  [cluster, origin, tinyproxy] = await Promise.all([
    Cluster.create(),
    startOrigin(),
    startTinyproxy(),
  ]);
  await writeFile(file, configFile(["alpha"]));
  await cluster.start("all", {
    env: { OCTOPROX_CONFIG_FILE: file, ...PASSWORDS, GAMMA_PASSWORD: "gamma-pass-1" },
  });
  gateway = await cluster.startGateway();
});

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([origin?.close(), tinyproxy?.close()]);
  if (folder) await rm(folder, { recursive: true, force: true });
});

const served = (username: string, password: string) =>
  untilAnswer(
    cluster,
    gateway,
    { username, password },
    `${origin.url}/ip`,
    (answer) => answer.status === 200,
    { message: `project ${username} to be served` },
  );

test("the file's project is applied at start and routed", async () => {
  await served("alpha", PASSWORDS.ALPHA_PASSWORD);
  const projects = await cluster.request("GET", "/api/v1/projects");
  expect(projects.body.map((p: { name: string }) => p.name)).toEqual(["alpha"]);
});

test("a broken file keeps the old configuration and names every error", async () => {
  const before = await cluster.request("GET", "/api/v1/config");
  await writeFile(
    file,
    configFile(["alpha", "beta"]).replace("strategy: round_robin", "strategy: fastest")
      .replace("${BETA_PASSWORD}", "in-clear-password") + "  - name: alpha\n    username: a2\n",
  );
  const answer = await cluster.request("POST", "/api/v1/config/reload");
  expect(answer.status).toBe(422);
  expect(
    answer.body.detail.map((issue: { field: string; line: number }) => [issue.field, issue.line]),
  )
    .toEqual([
      ["projects.1.password", 13],
      ["projects.0.strategy", 6],
      ["projects.2.name", 19],
    ]);
  expect(JSON.stringify(answer.body)).not.toContain("in-clear-password");
  await cluster.logged(cluster.api, "Configuration file refused; nothing changed");
  const after = await cluster.request("GET", "/api/v1/config");
  expect(after.body.fingerprint).toBe(before.body.fingerprint);
  await served("alpha", PASSWORDS.ALPHA_PASSWORD);
});

test("a good file reloaded through the API is routed within seconds", async () => {
  await writeFile(file, configFile(["alpha", "beta"]));
  const answer = await cluster.request("POST", "/api/v1/config/reload");
  expect(answer.status).toBe(200);
  expect(answer.body.changes.map((c: { action: string; path: string }) => `${c.action} ${c.path}`))
    .toEqual([
      "create beta",
      "create beta/connectors/static",
      `create beta/connectors/static/proxies/${tinyproxy.url}`,
    ]);
  await served("beta", PASSWORDS.BETA_PASSWORD);
});

test("SIGHUP reloads the file the same way", async () => {
  await writeFile(file, configFile(["alpha", "beta", "gamma"]));
  cluster.api.child.kill("SIGHUP");
  await served("gamma", "gamma-pass-1");
  await cluster.logged(cluster.api, "Configuration file applied");
  expect(cluster.api.alive()).toBe(true);
});
