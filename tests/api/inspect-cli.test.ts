/**
 * `octoprox inspect` as a user runs it (the bin, a child process, a viewer's token) against the
 * admin API in process on a real socket, over real Postgres and a Redis of its own: captures
 * written as a gateway writes them print a line each, oldest first, with the exit by name;
 * `--count` takes the latest; `--json` is one object a line; `--follow` prints new captures as
 * they come (a burst past a read's page whole, in order), says once when Redis is away and goes
 * on when it is back, and stops on Ctrl-C (SIGINT) with exit 0; a bad count is a usage error.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalRedis } from "../../scripts/local-stores.ts";
import { type ApiHarness, listen, startHarness } from "../../testkit/api-harness.ts";
import { sampleCapture, writeCaptures } from "../../testkit/mitm-captures.ts";
import { freePort } from "../../testkit/ports.ts";
import { ROOT } from "../../testkit/processes.ts";
import { CLI_BIN, cliBaseEnv, runCli } from "../../testkit/cli.ts";
import { waitUntil } from "../../testkit/wait.ts";
import type { MitmCapture } from "../../shared/mitm-captures.ts";

let h: ApiHarness;
let api: { port: number; close(): Promise<void> };
let redis: LocalRedis;
let dir: string;
let projectId: string;
let connectorId: string;
let proxyId: string;

/** What a run as a viewer is given (the follow test spawns the bin itself). */
function env(): Record<string, string> {
  return {
    ...cliBaseEnv(),
    NO_COLOR: "1",
    XDG_CONFIG_HOME: dir,
    OCTOPROX_URL: `http://127.0.0.1:${api.port}`,
    OCTOPROX_TOKEN: h.tokens.viewer,
  };
}

/** `octoprox ...args` as a viewer, to its end. */
function octoprox(args: string[]) {
  return runCli({ port: api.port, token: h.tokens.viewer, configHome: dir }, args);
}

const write = (captures: MitmCapture[]) =>
  writeCaptures(h.deps.redis, h.deps.keys, projectId, captures);

const through = (overrides: Partial<MitmCapture>) =>
  sampleCapture({ connectorId, proxyId, ...overrides });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "ox-inspect-cli-"));
  await chmod(dir, 0o755);
  redis = new LocalRedis({ dir: join(dir, "redis"), port: await freePort() });
  await redis.start();
  h = await startHarness({ redisUrl: redis.url });
  api = await listen(h.app);
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Shop", username: "shop", tls_mitm_mode: "plain" },
  });
  projectId = project.body.id;
  const connector = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    token: h.tokens.editor,
    body: { name: "main", kind: "static" },
  });
  connectorId = connector.body.id;
  const proxy = await h.request("POST", `/api/v1/projects/${projectId}/proxies`, {
    token: h.tokens.editor,
    body: { connector_id: connectorId, url: "http://u:proxy-secret@203.0.113.7:3128" },
  });
  proxyId = proxy.body.id;
}, 120_000);

afterAll(async () => {
  await api?.close();
  await h?.close();
  await redis?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("octoprox inspect", () => {
  it("prints nothing captured, then the captures a line each, oldest first", async () => {
    const empty = await octoprox(["inspect", "shop"]);
    expect(empty.code, empty.stderr).toBe(0);
    expect(empty.stdout).toBe("Nothing captured.\n");

    const at = Date.UTC(2025, 0, 2, 3, 4, 5);
    await write([
      through({ atMs: at, path: "/first" }),
      through({ atMs: at + 1000, method: "POST", path: "/pay?…", status: 201, totalMs: 1530 }),
      sampleCapture({
        atMs: at + 2000,
        path: "/limited",
        status: 429,
        proxyStatus: "rate_limited",
        totalMs: 1,
      }),
    ]);
    const run = await octoprox(["inspect", "Shop"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.trimEnd().split("\n")).toEqual([
      "2025-01-02T03:04:05.000Z  GET      200  shop.example:443/first  57 ms  main · 203.0.113.7:3128",
      "2025-01-02T03:04:06.000Z  POST     201  shop.example:443/pay?…  1530 ms  main · 203.0.113.7:3128",
      "2025-01-02T03:04:07.000Z  GET      429 rate_limited  shop.example:443/limited  1 ms  –",
    ]);
    expect(run.stdout).not.toContain("proxy-secret");

    const latest = await octoprox(["inspect", projectId, "--count", "1"]);
    expect(latest.stdout.trimEnd().split("\n")).toHaveLength(1);
    expect(latest.stdout).toContain("/limited");

    const json = await octoprox(["inspect", "shop", "-n", "2", "--json"]);
    expect(json.code, json.stderr).toBe(0);
    const objects = json.stdout.trimEnd().split("\n").map((text) => JSON.parse(text));
    expect(objects.map((o) => o.path)).toEqual(["/pay?…", "/limited"]);
    expect(objects[0]).toMatchObject({
      method: "POST",
      status: 201,
      total_ms: 1530,
      connector_name: "main",
      proxy_address: "203.0.113.7:3128",
      ja4: "t13d1516h2_8daaf6152771_e5627efa2ab1",
      sni: "shop.example",
      request_headers: expect.arrayContaining([["Authorization", "[scrubbed]"]]),
    });
  });

  it("refuses a bad count as a usage error, and an unknown project as a failure", async () => {
    for (const count of ["1001", "abc", "-1"]) {
      const run = await octoprox(["inspect", "shop", "--count", count]);
      expect(run.code, count).toBe(2);
      expect(run.stderr).toContain("must be a whole number from 0 to 1000");
    }
    const unknown = await octoprox(["inspect", "nowhere"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('No project "nowhere"');
  });

  it("--follow prints new captures until Ctrl-C, through a Redis outage, and exits 0", async () => {
    await h.deps.redis.del(h.deps.keys.mitmRequests(projectId));
    await write([through({ path: "/before" })]);
    const child: ChildProcess = spawn(
      process.execPath,
      [CLI_BIN, "inspect", "shop", "--count", "0", "--follow"],
      { cwd: ROOT, env: env(), stdio: ["ignore", "pipe", "pipe"] },
    );
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    const lines = () => stdout.trimEnd().split("\n").filter((text) => text !== "");
    try {
      await waitUntil(() => stderr.includes("Following Shop; Ctrl-C to stop."), {
        timeoutMs: 60_000,
        message: "the follow to start",
      });
      // --count 0: what was there before is not printed.
      expect(stdout).toBe("");
      await write([through({ path: "/one" })]);
      await waitUntil(() => lines().length === 1, { timeoutMs: 10_000, message: "/one" });
      expect(lines()[0]).toContain("shop.example:443/one");
      // A burst past a read's page (100) comes whole, oldest first.
      await write(Array.from({ length: 150 }, (_, i) => through({ path: `/burst/${i}` })));
      await waitUntil(() => lines().length === 151, { timeoutMs: 10_000, message: "the burst" });
      expect(lines().slice(1).map((text) => /shop\.example:443\S+/.exec(text)?.[0])).toEqual(
        Array.from({ length: 150 }, (_, i) => `shop.example:443/burst/${i}`),
      );

      // Redis away: said once, tried again; back: the follow goes on.
      await redis.stop();
      await waitUntil(() => stderr.includes("Redis did not answer; trying again"), {
        timeoutMs: 15_000,
        message: "the outage to be said",
      });
      await new Promise((resolve) => setTimeout(resolve, 4_500));
      expect(stderr.split("trying again").length - 1).toBe(1);
      await redis.start();
      // The harness's client reconnects on its own time: written once it answers.
      await waitUntil(async () => (await write([through({ path: "/after-outage" })])).length, {
        timeoutMs: 20_000,
        intervalMs: 200,
        message: "a write once Redis is back",
      });
      await waitUntil(() => lines().at(-1)?.includes("/after-outage") === true, {
        timeoutMs: 20_000,
        message: "a capture after the outage",
      });
      expect(stderr).toContain("Reading again");
      expect(lines()).toHaveLength(152);
    } finally {
      child.kill("SIGINT");
    }
    expect(await exited).toBe(0);
    expect(stderr).not.toContain("error");
  }, 120_000);
});
